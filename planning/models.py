"""The vocabulary of a topology plan: what the planner reads from a request and the pieces it answers with."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from ..xtuner_rules import resources as rr

Topology = Literal["colocated_sync", "colocated_async", "disaggregated"]
Priority = Literal["simplicity", "throughput", "on_policy"]
Backend = Literal["lmdeploy", "sglang", "vllm"]
ClusterSource = Literal["given", "ray_probe", "not_given"]


class PlanRequest(Protocol):
    """The run's wishes as the planning engines read them (choose_topology's Params has these fields)."""

    nodes: int | None
    gpus_per_node: int | None
    accelerator: Literal["GPU", "NPU"]
    cpus_per_node: float | None
    memory_gib_per_node: float | None
    use_cluster: bool
    ray_address: str | None
    ray_timeout_s: float
    model_path: str | None
    params_b: float | None
    max_prompt_len: int
    max_response_len: int
    pack_max_length: int | None
    prompt_repeat_k: int
    train_batch_size: int
    priority: Priority
    long_tail_responses: bool
    backend: Backend
    topology: Topology | None
    rollout_gpus: int | None
    tensor_parallel_size: int | None
    expert_parallel_size: int | None
    sp_size: int
    gpu_memory_gib: float | None
    gpu_memory_utilization: float | None
    sync_weights_interval: int
    total_train_steps: int
    enable_evaluate: bool
    evaluate_step: int | None
    checkpoint_interval: int | None
    hf_interval: int | None
    judger_cpu_workers: int


class Alternative(BaseModel):
    topology: Topology
    why_not: str


class ProduceStrategyPlan(BaseModel):
    class_name: str = Field(description="Produce strategy config class for the train task")
    module: str
    params: dict[str, Any] = Field(description="Keyword arguments to pass")
    effective_stale_threshold_steps: int = Field(
        description="(max_staleness + 1) * sync_weights_interval: train steps a sample may lag"
    )
    eval_class_name: str = Field(description="Eval task strategy (always SyncProduceStrategyConfig)")
    why: list[str] = Field(default_factory=list, description="Why these knob values")
    source: str


class WorkerGroupPlan(BaseModel):
    role: str = Field(description="'shared' (colocated train+rollout), 'train' or 'rollout'")
    num_workers: int
    accelerator: Literal["GPU", "NPU"] = "GPU"
    num_accelerators_per_worker: float = 1.0
    num_cpus_per_worker: float
    cpu_memory_per_worker_bytes: int
    cpu_memory_per_worker_gib: float


class ResourcesPlan(BaseModel):
    accelerator: Literal["GPU", "NPU"]
    accelerators_in_cluster: int
    groups: list[WorkerGroupPlan] = Field(description="One group (colocated) or train + rollout (disaggregated)")
    idle_accelerators: int = Field(description="Accelerators left unused so engine sizes divide evenly")


class ClusterFit(BaseModel):
    source: ClusterSource
    fits: bool | None = Field(description="None when no cluster figures were given")
    rows: list[rr.FitRow]
    rows_omitted: int = 0


class RolloutPlan(BaseModel):
    backend: Backend
    device: Literal["GPU", "NPU"]
    gpus_per_node: int
    tensor_parallel_size: int
    expert_parallel_size: int
    num_gpus_per_engine: int
    num_engines: int
    gpu_memory_utilization: float
    context_length: int = Field(description="max_prompt_len + max_response_len")
    rollout_max_batch_size_per_instance: int = Field(description="XTuner's automatic value for this context_length")
    weight_transport_type: str
    rules: list[rr.RuleResult] = Field(description="Engine layout rules XTuner enforces (failing only, unless full)")
    rules_omitted: int = Field(default=0, description="Passing rules left out (detail != full)")


class TrainingPlan(BaseModel):
    num_workers: int
    sp_size: int
    pack_max_length: int
    train_batch_size: int
    prompt_repeat_k: int
    samples_per_step: int
    sync_weights_interval: int
    total_train_steps: int
    enable_evaluate: bool
    evaluate_step: int
    checkpoint_interval: int | None = Field(description="None: no native checkpoints (XTuner's -1/None)")
    hf_interval: int | None = Field(description="None: no HF exports (XTuner's -1/None)")


class ModelInfo(BaseModel):
    source: Literal["config.json", "params_b", "unknown"] = Field(
        description="unknown: neither model_path nor params_b was given; sizes and memory are not estimated"
    )
    architecture: str | None = None
    params_total_b: float | None = None
    params_active_b: float | None = None
    is_moe: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    expert_params_b: float = 0.0
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int | None = None
    kv_cache_bytes_per_token: int | None = Field(default=None, description="bf16 K+V for all layers, one token")
    notes: list[str] = Field(default_factory=list)


class MemoryEstimate(BaseModel):
    """Per-accelerator memory; every figure is None when the model size is unknown (``what_to_pass`` says why)."""

    basis: Literal["config.json", "params_b", "unknown"] = Field(
        description="config.json: from the model's shape; params_b: rough (see uncertainty); unknown: not estimated"
    )
    what_to_pass: str | None = Field(default=None, description="With basis=unknown: the argument that enables it")
    uncertainty: str | None = Field(default=None, description="With basis=params_b: how rough, and why")
    gpu_memory_gib: float
    train_weights_gib: float | None = None
    train_grads_gib: float | None = None
    train_optimizer_gib: float | None = Field(default=None, description="fp32 master weights + Adam m and v, sharded")
    train_activations_gib: float | None = None
    train_total_gib: float | None = None
    train_total_range_gib: tuple[float, float] | None = Field(
        default=None, description="basis=params_b: the total over the layer/width shapes public models have"
    )
    train_fits: bool | None = None
    rollout_weights_gib: float | None = Field(default=None, description="Per rollout GPU")
    rollout_kv_budget_gib: float | None = Field(default=None, description="Per rollout GPU, at gpu_memory_utilization")
    rollout_kv_tokens_per_engine: int | None = None
    rollout_full_sequences_per_engine: int | None = Field(
        default=None, description="context_length sequences the KV cache holds"
    )
    rollout_fits: bool | None = None
    colocated_peak_gib: float | None = Field(
        default=None, description="Colocated: max(train, rollout), as they alternate"
    )
    assumptions: list[str] = Field(default_factory=list)
