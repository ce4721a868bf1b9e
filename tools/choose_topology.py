"""choose_topology: pick colocated sync / colocated async / disaggregated for an XTuner GRPO run and size it.

One call turns cluster shape, model size and run goals into a topology decision with reasons, the config classes
to use, worker/CPU/memory sizing that passes XTuner's own Ray checks (``resource_rules``), rollout TP/EP that
satisfies the engine divisibility rules, a per-GPU memory estimate, a paste-ready config and a Mermaid diagram.

Sources (InternLM/xtuner@b934f46) are cited next to each rule; the decision guidance follows
``docs/zh_cn/rl/advanced_tutorial/rl_trainer.md`` (sections on the two trainers and "how to choose").
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import (
    DEFAULT_LIST_CAP,
    Detail,
    Finding,
    RunContext,
    ToolInputError,
    ToolResult,
    ToolSpec,
    cap,
    dedupe_findings,
    params_model_config,
    sort_findings,
)
from ..xtuner_rules import resources as rr

Topology = Literal["colocated_sync", "colocated_async", "disaggregated"]
Priority = Literal["simplicity", "throughput", "on_policy"]
Backend = Literal["lmdeploy", "sglang", "vllm"]

WF = "xtuner-rl://references/workflows"
CB = "xtuner-rl://references/cluster-and-backends"

#: A run needs at least this many accelerators before we split them into train and rollout groups. Not an XTuner
#: rule: the upstream guide recommends disaggregation only when rollout is the bottleneck *and* there are spare
#: accelerators for it; below two full 8-GPU nodes each half is too small to be worth the extra transport.
MIN_ACCELERATORS_FOR_DISAGG = 16
MAX_CONFIG_JSON_BYTES = 2 * 1024 * 1024
BYTES_BF16 = 2
#: bf16 weights + bf16 grads + fp32 master weights + fp32 Adam m and v = 2 + 2 + 4 + 8 bytes per parameter.
TRAIN_BYTES_PER_PARAM = 16
#: Share of GPU memory the rollout weights may take per GPU before we grow the engine (the rest is KV cache).
ROLLOUT_WEIGHT_SHARE = 0.5
TRAIN_MEMORY_HEADROOM = 0.9
#: Smallest per-worker Ray memory (GiB) we will shrink to before calling the cluster too small.
MIN_WORKER_MEMORY_GIB = 4
RUNTIME_RESERVE_GIB = 2.0
DEFAULT_GPU_MEMORY_GIB = {"GPU": 80.0, "NPU": 64.0}

SRC_COLOCATE = "xtuner/v1/train/rl_trainer.py:397"
SRC_DISAGG = "xtuner/v1/train/rl_trainer.py:485"
SRC_SYNC = "xtuner/v1/rl/agent_loop_manager/producer.py:151"
SRC_ASYNC = "xtuner/v1/rl/agent_loop_manager/producer.py:185"
SRC_DISAGG_ASYNC = "xtuner/v1/rl/agent_loop_manager/disagg_producer.py:245"
SRC_STALE = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:97-99"
SRC_INTERVALS = "xtuner/v1/train/rl_trainer.py:295-326"
SRC_NCCL = "xtuner/v1/train/rl_trainer.py:1882-1886"
SRC_OFFLOAD = "xtuner/v1/train/rl_trainer.py:1643-1645"
SRC_MAX_BATCH = "xtuner/v1/rl/rollout/worker.py:510-520"
SRC_NPU_NODE = "xtuner/v1/rl/rollout/worker.py:500-501"
SRC_GRPO_STD = "xtuner/v1/rl/advantage/grpo.py:26-29"


# --------------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------------


class Params(BaseModel):
    model_config = params_model_config()

    nodes: int | None = Field(
        default=None, ge=1, le=4096, description="Number of machines with accelerators (not needed with use_cluster)"
    )
    gpus_per_node: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Accelerators per node; default 8 for GPU, 16 for NPU (XTuner forces 16 per NPU node)",
    )
    accelerator: Literal["GPU", "NPU"] = Field(default="GPU", description="GPU (CUDA) or NPU (Ascend)")
    cpus_per_node: float | None = Field(
        default=None, gt=0, le=100000, description="Ray CPUs per node (as `ray status` shows); enables the fit check"
    )
    memory_gib_per_node: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        description="Ray `memory` resource per node in GiB as `ray status` shows it (not physical RAM); "
        "enables the fit check",
    )
    use_cluster: bool = Field(
        default=False, description="Read nodes, CPUs and memory from a live read-only Ray probe instead"
    )
    ray_address: str | None = Field(
        default=None, max_length=512, description="Ray address for use_cluster (default: RAY_ADDRESS or local head)"
    )
    model_path: str | None = Field(
        default=None,
        max_length=4096,
        description="HF model directory; its config.json gives size, layers, heads and MoE experts",
    )
    params_b: float | None = Field(
        default=None, gt=0, le=10000, description="Total parameters in billions, when no model_path is given"
    )
    max_prompt_len: int = Field(default=1024, ge=1, le=2_000_000, description="Max prompt tokens")
    max_response_len: int = Field(default=4096, ge=1, le=2_000_000, description="Max response tokens")
    prompt_repeat_k: int = Field(default=8, ge=1, le=1024, description="Rollouts per prompt (GRPO group size)")
    train_batch_size: int = Field(default=64, ge=1, le=1_000_000, description="Prompt groups per train step")
    priority: Priority = Field(
        default="simplicity",
        description="simplicity: easiest config that runs; throughput: keep rollout busy; on_policy: no stale samples",
    )
    long_tail_responses: bool = Field(
        default=False, description="Some responses are much longer than most (stragglers stall sync rollout)"
    )
    backend: Backend = Field(default="lmdeploy", description="Rollout engine (selected by XTUNER_USE_<BACKEND>=1)")
    topology: Topology | None = Field(default=None, description="Force a topology instead of choosing one")
    rollout_gpus: int | None = Field(
        default=None, ge=1, description="Disaggregated only: accelerators for rollout (rest train)"
    )
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=256, description="Force rollout TP size")
    expert_parallel_size: int | None = Field(default=None, ge=1, le=1024, description="Force rollout EP size")
    sp_size: int = Field(default=1, ge=1, le=1024, description="Training sequence-parallel size")
    gpu_memory_gib: float | None = Field(
        default=None, gt=0, le=4096, description="Memory per accelerator in GiB; default 80 (GPU) / 64 (NPU)"
    )
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, lt=1, description="Rollout engine memory fraction; default 0.8"
    )
    sync_weights_interval: int = Field(default=1, ge=1, le=100000, description="Train steps per weight sync")
    total_train_steps: int = Field(default=100, ge=1, le=10_000_000, description="Total train steps")
    enable_evaluate: bool = Field(default=True, description="Evaluate on a held-out set during training")
    evaluate_step: int | None = Field(
        default=None, ge=1, description="Evaluate every N steps (rounded up to a multiple of sync_weights_interval)"
    )
    checkpoint_interval: int | None = Field(
        default=None, ge=1, description="Checkpoint every N steps (rounded up to a multiple of the sync interval)"
    )
    hf_interval: int | None = Field(
        default=None, ge=1, description="Save HF weights every N steps (rounded up to a multiple of the sync interval)"
    )
    judger_cpu_workers: int = Field(
        default=1, ge=0, le=1024, description="Judger actors (1 CPU each) outside the GPU groups; 0 = in the driver"
    )
    detail: Detail = Field(
        default="normal",
        description="normal: everything, but only failing fit rows and rules; summary: also no config_snippet or "
        "diagram; full: every fit row and rule, passing or not",
    )


# --------------------------------------------------------------------------------------------------------
# Result models
# --------------------------------------------------------------------------------------------------------


class Alternative(BaseModel):
    topology: Topology
    why_not: str


class ProduceStrategyPlan(BaseModel):
    class_name: str = Field(description="Produce strategy config class for the train task")
    module: str
    params: dict[str, Any] = Field(description="Keyword arguments to pass")
    effective_stale_threshold_steps: int = Field(
        description="(max_staleness + 1) * sync_weights_interval: how many train steps a sample may lag"
    )
    eval_class_name: str = Field(description="Strategy for the eval task (always SyncProduceStrategyConfig)")
    why: list[str] = Field(default_factory=list, description="Why these knob values")
    source: str


class WorkerGroupPlan(BaseModel):
    role: str = Field(description="'shared' (colocated train+rollout), 'train' or 'rollout'")
    num_workers: int
    num_cpus_per_worker: float
    cpu_memory_per_worker_bytes: int
    cpu_memory_per_worker_gib: float


class ResourcesPlan(BaseModel):
    accelerator: Literal["GPU", "NPU"]
    accelerators_in_cluster: int
    groups: list[WorkerGroupPlan] = Field(description="One group (colocated) or train + rollout (disaggregated)")
    idle_accelerators: int = Field(description="Accelerators left unused so engine sizes divide evenly")


class ClusterFit(BaseModel):
    source: Literal["given", "ray_probe", "not_given"]
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
    rules: list[rr.RuleResult] = Field(description="Engine layout rules XTuner enforces (failing only unless full)")
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
    checkpoint_interval: int
    hf_interval: int


class ModelInfo(BaseModel):
    source: Literal["config.json", "params_b"]
    architecture: str | None = None
    params_total_b: float
    params_active_b: float
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
    gpu_memory_gib: float
    train_weights_gib: float
    train_grads_gib: float
    train_optimizer_gib: float = Field(description="fp32 master weights + Adam m and v, sharded")
    train_activations_gib: float
    train_total_gib: float
    train_fits: bool
    rollout_weights_gib: float = Field(description="Per rollout GPU")
    rollout_kv_budget_gib: float = Field(description="Per rollout GPU, at gpu_memory_utilization")
    rollout_kv_tokens_per_engine: int | None
    rollout_full_sequences_per_engine: int | None = Field(description="context_length sequences the KV cache holds")
    rollout_fits: bool
    colocated_peak_gib: float | None = Field(description="Colocated: max(train, rollout), as they alternate")
    assumptions: list[str]


class Result(ToolResult):
    topology: Topology
    rationale: list[str]
    alternatives: list[Alternative]
    trainer_config_class: str
    agent_loop_manager_class: str
    task_spec_class: str
    produce_strategy: ProduceStrategyPlan
    replay_buffer_class: str
    resources: ResourcesPlan
    ray_requirements: rr.RayRequirements
    cluster_fit: ClusterFit
    rollout: RolloutPlan
    training: TrainingPlan
    model: ModelInfo
    memory: MemoryEstimate
    config_snippet: str
    diagram: str
    findings: list[Finding]
    findings_omitted: int = 0


# --------------------------------------------------------------------------------------------------------
# Model size
# --------------------------------------------------------------------------------------------------------


def _int(cfg: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and v > 0:
            return v
        if isinstance(v, float) and v > 0 and v.is_integer():
            return int(v)
    return None


def estimate_from_config(cfg: dict[str, Any]) -> ModelInfo | None:
    """Estimate parameter counts from an HF config dict; None when the core sizes are missing."""
    notes: list[str] = []
    arch = None
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        arch = archs[0][:200]
    if not _int(cfg, "hidden_size", "d_model", "n_embd") and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
        notes.append("sizes read from text_config (vision tower not counted)")
    hidden = _int(cfg, "hidden_size", "d_model", "n_embd")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    vocab = _int(cfg, "vocab_size")
    if not (hidden and layers and vocab):
        return None
    heads = _int(cfg, "num_attention_heads", "n_head") or max(1, hidden // 128)
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _int(cfg, "head_dim") or max(1, hidden // heads)
    inter = _int(cfg, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    n_experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    top_k = _int(cfg, "num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")
    moe_inter = _int(cfg, "moe_intermediate_size") or inter
    shared_inter = _int(cfg, "shared_expert_intermediate_size")
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts")
    tied = bool(cfg.get("tie_word_embeddings", False))

    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    dense_mlp = 3 * hidden * inter
    moe_layers = 0
    if n_experts and n_experts > 1:
        dense_first = _int(cfg, "first_k_dense_replace") or 0
        mlp_only = cfg.get("mlp_only_layers")
        n_mlp_only = len(mlp_only) if isinstance(mlp_only, list) else 0
        moe_layers = max(0, layers - dense_first - n_mlp_only)
    expert_mlp = 3 * hidden * moe_inter
    shared = 0
    if shared_inter:
        shared = 3 * hidden * shared_inter
    elif n_shared:
        shared = n_shared * expert_mlp
    per_moe_layer_total = attn + n_experts * expert_mlp + shared + hidden * n_experts if moe_layers else 0
    per_moe_layer_active = attn + (top_k or 1) * expert_mlp + shared + hidden * n_experts if moe_layers else 0
    dense_layers = layers - moe_layers
    embed = vocab * hidden * (1 if tied else 2)
    total = embed + dense_layers * (attn + dense_mlp) + moe_layers * per_moe_layer_total
    active = embed + dense_layers * (attn + dense_mlp) + moe_layers * per_moe_layer_active
    expert_params = moe_layers * (n_experts or 0) * expert_mlp
    if n_experts and not top_k:
        notes.append("experts per token not found; active size assumes 1")
    max_pos = _int(cfg, "max_position_embeddings", "n_positions")
    return ModelInfo(
        source="config.json",
        architecture=arch,
        params_total_b=round(total / 1e9, 3),
        params_active_b=round(active / 1e9, 3),
        is_moe=bool(moe_layers),
        num_experts=n_experts if moe_layers else None,
        experts_per_token=top_k if moe_layers else None,
        expert_params_b=round(expert_params / 1e9, 3),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        kv_cache_bytes_per_token=2 * layers * kv_heads * head_dim * BYTES_BF16,
        notes=notes,
    )


def load_model_info(params: Params, ctx: RunContext) -> ModelInfo:
    """Model size from config.json (through the path policy) or params_b."""
    if params.model_path:
        model_dir = ctx.paths.check(params.model_path, kind="dir", what="model_path")
        cfg_path = ctx.paths.check(str(model_dir / "config.json"), kind="file", what="model_path/config.json")
        if cfg_path.stat().st_size > MAX_CONFIG_JSON_BYTES:
            raise ToolInputError(
                "config_too_large", f"{cfg_path} is larger than {MAX_CONFIG_JSON_BYTES} bytes; not a model config"
            )
        try:
            with open(cfg_path, "rb") as fh:
                cfg = json.loads(fh.read(MAX_CONFIG_JSON_BYTES + 1).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ToolInputError(
                "config_json_invalid",
                f"{cfg_path} is not valid JSON: {str(exc)[:200]}",
                "Point model_path at an HF model directory, or pass params_b.",
            ) from None
        if not isinstance(cfg, dict):
            raise ToolInputError("config_json_invalid", f"{cfg_path} is not a JSON object")
        info = estimate_from_config(cfg)
        if info is not None:
            if params.params_b:
                info.notes.append(f"params_b={params.params_b} given; config.json estimate used for the layout")
            return info
        if params.params_b:
            out = _from_params_b(params.params_b)
            out.notes.append("config.json lacks hidden_size/num_hidden_layers/vocab_size; used params_b")
            return out
        raise ToolInputError(
            "model_size_unknown",
            f"cannot estimate the model size from {cfg_path}: hidden_size, num_hidden_layers or vocab_size missing",
            "Pass params_b (total parameters in billions).",
        )
    if params.params_b:
        return _from_params_b(params.params_b)
    raise ToolInputError("model_missing", "give model_path (HF directory) or params_b", "Pass model_path or params_b.")


def _from_params_b(params_b: float) -> ModelInfo:
    return ModelInfo(
        source="params_b",
        params_total_b=params_b,
        params_active_b=params_b,
        notes=["no config.json: dense model assumed; KV cache size unknown"],
    )


# --------------------------------------------------------------------------------------------------------
# Memory estimate
# --------------------------------------------------------------------------------------------------------


def _gib(n: float) -> float:
    return round(n / rr.GIB, 2)


def train_memory(model: ModelInfo, train_workers: int, pack_max_length: int, sp_size: int) -> dict[str, float]:
    p = model.params_total_b * 1e9
    weights = BYTES_BF16 * p / train_workers
    grads = BYTES_BF16 * p / train_workers
    optim = (TRAIN_BYTES_PER_PARAM - 2 * BYTES_BF16) * p / train_workers
    # Recomputed layers keep one bf16 hidden state per layer for the packed sequence; plus a fixed workspace.
    if model.hidden_size and model.num_layers:
        acts = model.num_layers * pack_max_length * model.hidden_size * BYTES_BF16 / sp_size
    else:
        acts = 0.05 * p * BYTES_BF16
    acts += RUNTIME_RESERVE_GIB * rr.GIB
    return {"weights": weights, "grads": grads, "optim": optim, "acts": acts}


def rollout_weights_per_gpu(model: ModelInfo, tp: int, ep: int) -> float:
    p = model.params_total_b * 1e9
    if ep > 1 and model.is_moe:
        expert = model.expert_params_b * 1e9
        return BYTES_BF16 * ((p - expert) + expert / ep)
    return BYTES_BF16 * p / tp


def kv_budget_per_gpu(weights: float, gpu_bytes: float, util: float, backend: str) -> float:
    # LMDeploy's cache_max_entry_count is a share of the memory left after weights; SGLang's mem_fraction_static
    # covers weights and cache together (lmdeploy.py:426,440 and sglang.py:399 pass gpu_memory_utilization through).
    # The split of the memory left after weights is the engines' own behaviour, stated here as an assumption.
    if backend == "lmdeploy":
        return util * (gpu_bytes - weights - RUNTIME_RESERVE_GIB * rr.GIB)
    return util * gpu_bytes - weights


def kv_bytes_per_token_per_gpu(model: ModelInfo, tp: int, ep: int) -> int | None:
    if not model.kv_cache_bytes_per_token:
        return None
    if ep > 1:
        return model.kv_cache_bytes_per_token  # attention is not split across EP ranks
    shards = min(tp, model.num_kv_heads or tp)
    return max(1, model.kv_cache_bytes_per_token // shards)


def auto_max_batch(context_length: int) -> int:
    """XTuner's default rollout_max_batch_size_per_instance (rollout/worker.py:510-520)."""
    if context_length <= 4096:
        return 1024
    if context_length <= 8192:
        return 512
    return 128


# --------------------------------------------------------------------------------------------------------
# Engine size
# --------------------------------------------------------------------------------------------------------


def _engine_sizes(gpus_per_node: int, limit: int) -> list[int]:
    """Candidate engine sizes: powers of two and divisors within a node, then whole-node multiples."""
    sizes = {d for d in range(1, gpus_per_node + 1) if gpus_per_node % d == 0}
    sizes |= {2**i for i in range(0, 12) if 2**i <= gpus_per_node}
    k = 2
    while gpus_per_node * k <= limit:
        sizes.add(gpus_per_node * k)
        k *= 2
    return sorted(sizes)


def _engine_ok_for_model(model: ModelInfo, size: int, use_ep: bool) -> bool:
    if size == 1:
        return True
    if use_ep:
        return not model.num_experts or model.num_experts % size == 0
    heads = model.num_attention_heads
    return heads is None or heads % size == 0


def choose_engine(
    model: ModelInfo, gpus_per_node: int, limit: int, gpu_bytes: float, util: float, backend: str
) -> tuple[int, int, bool]:
    """Smallest engine whose per-GPU weights leave at least half of the engine memory for KV cache.

    Returns (tp, ep, fits). MoE models grow EP (TP stays 1); dense models grow TP. XTuner forbids TP>1 and EP>1
    together (weight_update/data.py:114).
    """
    use_ep = model.is_moe
    last = (1, 1)
    for size in _engine_sizes(gpus_per_node, max(limit, 1)):
        if size > max(limit, 1) or not _engine_ok_for_model(model, size, use_ep):
            continue
        tp, ep = (1, size) if use_ep else (size, 1)
        last = (tp, ep)
        if rollout_weights_per_gpu(model, tp, ep) <= ROLLOUT_WEIGHT_SHARE * util * gpu_bytes:
            return tp, ep, True
    return last[0], last[1], False


# --------------------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------------------


def decide_topology(
    p: Params, total: int, train_fits_half: bool
) -> tuple[Topology, list[str], list[Alternative], list[Finding]]:
    """Colocated sync by default; async for long tails or throughput; disaggregated for throughput at scale."""
    why: list[str] = []
    alts: dict[str, str] = {}
    findings: list[Finding] = []
    enough = total >= MIN_ACCELERATORS_FOR_DISAGG and train_fits_half
    disagg_no = (
        f"only {total} accelerators: splitting them into train and rollout groups leaves each side small; the "
        "upstream guide recommends disaggregation when rollout is the bottleneck and there are spare accelerators"
        if total < MIN_ACCELERATORS_FOR_DISAGG
        else "the training state would not fit on half of the accelerators, so they cannot be split"
        if not train_fits_half
        else "not needed for this priority: it adds a second placement group and NCCL weight transport"
    )
    if p.priority == "on_policy":
        why.append(
            "on_policy priority: every sample must come from the current weights, which a synchronous colocated "
            "run with sync_weights_interval=1 guarantees"
        )
        alts["colocated_async"] = "over-sampling and max_staleness trade on-policyness for rollout throughput"
        alts["disaggregated"] = (
            "its on-policy mode (no over-sampling, max_staleness=0, sync every step) is marked not yet supported "
            "in the upstream trainer guide; the background producer always runs ahead"
        )
        chosen: Topology = "colocated_sync"
        if p.long_tail_responses:
            findings.append(
                Finding(
                    id="topo.on_policy_long_tail",
                    severity="info",
                    category="staleness_or_partial_rollout",
                    title="Long-tail responses with strict on-policy: each step waits for its slowest response",
                    evidence="priority=on_policy, long_tail_responses=true",
                    fix="Accept the stall, cap max_response_len, or relax to priority=throughput "
                    "(colocated async with partial rollout).",
                    reference=f"{WF}#choosing-a-topology",
                    source=SRC_SYNC,
                    owner="config_edit",
                )
            )
    elif p.priority == "throughput" and enough:
        chosen = "disaggregated"
        why.append(
            f"throughput priority on {total} accelerators: rollout runs continuously on its own group while training "
            "uses the other, with weights pushed over NCCL at sync points"
        )
        alts["colocated_sync"] = "training and rollout take turns on the same GPUs, so each waits for the other"
        alts["colocated_async"] = (
            "keeps rollout busier than sync but still pauses generation for every training step; with this many "
            "accelerators a dedicated rollout group gives more throughput"
        )
    elif p.priority == "throughput" or p.long_tail_responses:
        chosen = "colocated_async"
        if p.long_tail_responses:
            why.append(
                "long-tail responses: a synchronous batch waits for its slowest response; asynchronous production "
                "over-samples and continues interrupted responses after the weight sync (partial rollout)"
            )
        if p.priority == "throughput":
            why.append("throughput priority: over-sampling keeps the rollout engines full between syncs")
        alts["colocated_sync"] = "the slowest responses would stall every step"
        alts["disaggregated"] = disagg_no
    else:
        chosen = "colocated_sync"
        why.append(
            "simplicity priority without long-tail responses: colocated training with the synchronous produce "
            "strategy is the upstream recommendation for a first RL run and for limited GPUs"
        )
        alts["colocated_async"] = "adds staleness knobs that only pay off with long-tail responses or throughput needs"
        alts["disaggregated"] = disagg_no
    if p.topology and p.topology != chosen:
        alts[chosen] = f"would have been chosen ({why[0]}), but topology={p.topology} was forced"
        why = [f"topology forced to {p.topology} by the caller"]
        chosen = p.topology
        if chosen == "disaggregated" and p.priority == "on_policy":
            findings.append(
                Finding(
                    id="topo.on_policy_disaggregated_unsupported",
                    severity="warning",
                    category="staleness_or_partial_rollout",
                    title="Disaggregated training has no strict on-policy mode upstream",
                    evidence="topology=disaggregated with priority=on_policy",
                    fix="Use colocated_sync for strict on-policy training.",
                    reference=f"{WF}#disaggregated",
                    source=SRC_DISAGG_ASYNC,
                    owner="config_edit",
                )
            )
    alternatives = [Alternative(topology=t, why_not=alts[t]) for t in alts if t != chosen]  # type: ignore[arg-type]
    return chosen, why, alternatives, findings


def produce_plan(topology: Topology, p: Params) -> ProduceStrategyPlan:
    """Strategy class and knobs; staleness = (max_staleness + 1) * sync_weights_interval (produce_utils.py:97-99)."""
    if topology == "colocated_sync":
        return ProduceStrategyPlan(
            class_name="SyncProduceStrategyConfig",
            module="xtuner.v1.rl.agent_loop_manager",
            params={},
            effective_stale_threshold_steps=p.sync_weights_interval,
            eval_class_name="SyncProduceStrategyConfig",
            why=["synchronous: each step rolls out with the latest synced weights, then trains"],
            source=SRC_SYNC,
        )
    cls = "DisaggAsyncProduceStrategyConfig" if topology == "disaggregated" else "AsyncProduceStrategyConfig"
    src = SRC_DISAGG_ASYNC if topology == "disaggregated" else SRC_ASYNC
    if p.priority == "on_policy":
        # Forced async topology with strict on-policy wishes: no over-sampling, no staleness, no carry-over.
        return ProduceStrategyPlan(
            class_name=cls,
            module="xtuner.v1.rl.agent_loop_manager",
            params={
                "over_sample_threshold": 0.0,
                "enable_partial_rollout": False,
                "max_staleness": 0,
                "tail_batch_trigger_size": 0,
            },
            effective_stale_threshold_steps=p.sync_weights_interval,
            eval_class_name="SyncProduceStrategyConfig",
            why=[
                "on_policy: over_sample_threshold=0 and max_staleness=0 keep samples within the current sync period",
                "enable_partial_rollout=False: a response continued after a sync would mix two policies",
                "tail_batch_trigger_size=0: re-roll an expired group at once instead of discarding it",
            ],
            source=src,
        )
    # Partial rollout carries a response across a sync, which only survives when max_staleness > 0; upstream
    # advises against max_staleness > 0 without partial rollout (producer.py:357 warns about it).
    over = 0.5 if p.long_tail_responses else 0.2
    knobs = {
        "over_sample_threshold": over,
        "enable_partial_rollout": True,
        "max_staleness": 1,
        "tail_batch_trigger_size": max(1, p.train_batch_size // 4),
    }
    return ProduceStrategyPlan(
        class_name=cls,
        module="xtuner.v1.rl.agent_loop_manager",
        params=knobs,
        effective_stale_threshold_steps=(knobs["max_staleness"] + 1) * p.sync_weights_interval,
        eval_class_name="SyncProduceStrategyConfig",
        why=[
            f"over_sample_threshold={over}: launch {over:g} x the batch in extra groups so engines stay busy"
            + (" (higher for long-tail responses)" if p.long_tail_responses else ""),
            "enable_partial_rollout=True: responses paused by a weight sync continue afterwards instead of restarting",
            "max_staleness=1: over-sampled groups and continued responses that cross one sync stay trainable "
            "(with 0 they expire at the next sync)",
            f"tail_batch_trigger_size={knobs['tail_batch_trigger_size']}: re-roll expired groups once a quarter of a "
            "batch has expired (-1 would discard them)",
        ],
        source=src,
    )


def _round_up(v: int, m: int) -> int:
    return ((v + m - 1) // m) * m


def plan_intervals(p: Params, findings: list[Finding]) -> tuple[int, int, int]:
    """evaluate_step / checkpoint_interval / hf_interval as multiples of sync_weights_interval (rl_trainer.py:295-326)."""
    s = p.sync_weights_interval
    default = _round_up(max(1, math.ceil(p.total_train_steps / 5)), s)
    out = []
    for name, given in (
        ("evaluate_step", p.evaluate_step if p.enable_evaluate else None),
        ("checkpoint_interval", p.checkpoint_interval),
        ("hf_interval", p.hf_interval),
    ):
        v = given or default
        if v % s:
            fixed = _round_up(v, s)
            why = (
                "evaluation only runs on weight-sync steps."
                if name == "evaluate_step"
                else "checkpoint/HF saves only run on weight-sync steps."
            )
            findings.append(
                Finding(
                    id="topo.interval_rounded",
                    severity="warning",
                    category="eval_or_interval_config",
                    title=f"{name}={v} is not a multiple of sync_weights_interval={s}; using {fixed}",
                    evidence=f"XTuner rejects it: {name}={v} must be a multiple of sync_weights_interval={s}, "
                    f"because {why}",
                    location=name,
                    fix=f"Use {name}={fixed} (evaluation and saves only run on weight-sync steps).",
                    reference=f"{WF}#effective-staleness",
                    source=SRC_INTERVALS,
                    owner="config_edit",
                )
            )
            v = fixed
        out.append(v)
    return out[0], out[1], out[2]


def fit_per_worker(
    groups: list[tuple[str, int]],
    accelerator: rr.Accelerator,
    pools: list[rr.ExternalCPUPool],
    cluster: rr.ClusterCapacity | None,
) -> tuple[float, int, rr.RayRequirements, list[rr.FitRow]]:
    """Largest per-worker CPUs (<=12) and memory (<=16 GiB) that pass every check; defaults when no cluster."""

    def build(cpw: float, mem: int) -> rr.RayRequirements:
        pgs = [rr.accelerator_pg_requirements(n, cpw, mem, accelerator=accelerator, name=name) for name, n in groups]
        return rr.ray_requirements(pgs, pools)

    cpw, mem = rr.DEFAULT_NUM_CPUS_PER_WORKER, rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES
    req = build(cpw, mem)
    if cluster is None:
        return cpw, mem, req, []
    rows = rr.check_fit(req, cluster)
    if rr.fits(rows):
        return cpw, mem, req, rows

    # Every check is monotone in the per-worker request, so binary-search the largest CPUs (at the smallest
    # memory), then the largest memory at those CPUs: a handful of evaluations even for thousands of nodes.
    def ok(c: int, m_gib: int) -> bool:
        return rr.fits(rr.check_fit(build(float(c), m_gib * rr.GIB), cluster))

    def largest(lo: int, hi: int, pred: Any) -> int | None:
        if not pred(lo):
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if pred(mid) else (lo, mid - 1)
        return lo

    c_best = largest(1, int(rr.DEFAULT_NUM_CPUS_PER_WORKER), lambda c: ok(c, MIN_WORKER_MEMORY_GIB))
    if c_best is not None:
        m_best = largest(MIN_WORKER_MEMORY_GIB, 16, lambda m: ok(c_best, m))
        if m_best is not None:
            r = build(float(c_best), m_best * rr.GIB)
            return float(c_best), m_best * rr.GIB, r, rr.check_fit(r, cluster)
    return cpw, mem, req, rows


def probe_cluster(p: Params, ctx: RunContext) -> rr.ClusterCapacity:
    """Live read-only Ray probe through tools/ray_cluster.py (imported lazily: it is heavier than this module)."""
    from ..cluster import ray as ray_cluster

    snap = ray_cluster.probe_cluster(p.ray_address, environ=ctx.environ, child_environ=ctx.environ)
    if not snap.nodes:
        raise ToolInputError(
            "cluster_unreachable",
            "use_cluster=true but the Ray cluster could not be read: " + ("; ".join(snap.errors) or "no nodes"),
            "Start Ray (or pass ray_address / set RAY_ADDRESS), or give cpus_per_node and memory_gib_per_node.",
        )
    npu = sum(n.total.get("NPU", 0.0) for n in snap.nodes)
    accelerator: rr.Accelerator = "NPU" if npu > 0 else "GPU"
    nodes = [
        rr.NodeCapacity(
            accelerators=n.total.get(accelerator, 0.0),
            cpus=n.total.get("CPU", 0.0),
            memory_bytes=n.total.get("memory", 0.0),
        )
        for n in snap.nodes
    ]
    # XTuner checks groups against what is available now; Ray omits fully used resources (absent = 0). Without
    # usage figures the cluster is taken as idle.
    avail = snap.available
    return rr.ClusterCapacity(
        accelerator=accelerator,
        accelerators_total=sum(n.accelerators for n in nodes),
        cpus_total=sum(n.cpus for n in nodes),
        memory_total_bytes=sum(n.memory_bytes for n in nodes),
        accelerators_available=avail.get(accelerator, 0.0) if avail else None,
        cpus_available=avail.get("CPU", 0.0) if avail else None,
        memory_available_bytes=avail.get("memory", 0.0) if avail else None,
        nodes=nodes,
    )


# --------------------------------------------------------------------------------------------------------
# Snippet and diagram
# --------------------------------------------------------------------------------------------------------


def _mem_expr(n_bytes: int) -> str:
    if n_bytes % rr.GIB == 0:
        return f"{n_bytes // rr.GIB} * 1024**3"
    return str(n_bytes)


def build_snippet(
    topology: Topology,
    p: Params,
    groups: list[WorkerGroupPlan],
    rollout: RolloutPlan,
    training: TrainingPlan,
    strategy: ProduceStrategyPlan,
    accelerator: str,
    is_moe: bool,
    nodes: int,
) -> str:
    disagg = topology == "disaggregated"
    trainer_cls = "RLDisaggregatedTrainerConfig" if disagg else "RLColocateTrainerConfig"
    manager_cls = "DisaggAgentLoopManagerConfig" if disagg else "AgentLoopManagerConfig"
    task_cls = "DisaggTaskSpecConfig" if disagg else "TaskSpecConfig"
    buffer_cls = "SyncReplayBufferConfig" if topology == "colocated_sync" else "AsyncReplayBufferConfig"
    manager_imports = sorted(
        {manager_cls, task_cls, "SamplerConfig", strategy.class_name}
        | ({"AgentLoopManagerConfig", "TaskSpecConfig", "SyncProduceStrategyConfig"} if p.enable_evaluate else set())
    )
    util_imports = ["AcceleratorResourcesConfig"] + (["CPUResourcesConfig"] if p.judger_cpu_workers else [])
    env_flag = f"XTUNER_USE_{rollout.backend.upper()}=1"
    L: list[str] = [
        f'"""XTuner GRPO config: {topology.replace("_", " ")} on {nodes} node(s), written by xtuner-rl-mcp.',
        "",
        "Before `ray start` on every node: export WORK_DIR, MODEL_PATH, DATA_PATH"
        + (", EVAL_DATA_PATH" if p.enable_evaluate else "")
        + f" and {env_flag}.",
        "Run: python xtuner/v1/train/cli/rl.py --config <this file>",
        "The judger is GSM8K's; replace judger_config for other data.",
        '"""',
        "",
        "import os",
        "from pathlib import Path",
        "",
        "from xtuner.v1.config import AdamWConfig, FSDPConfig, LRConfig",
        "from xtuner.v1.data_proto.rl_data import SampleParams",
        "from xtuner.v1.datasets.config import DataloaderConfig, DatasetConfig",
        "from xtuner.v1.datasets.rl_tokenize_fn import RLTextTokenizeFnConfig",
        "from xtuner.v1.model import get_model_config_from_hf",
        "from xtuner.v1.rl.advantage import GRPOAdvantageConfig",
        "from xtuner.v1.rl.agent_loop import SingleTurnAgentLoopConfig",
        "from xtuner.v1.rl.agent_loop_manager import " + ", ".join(manager_imports),
    ]
    if p.enable_evaluate:
        L.append("from xtuner.v1.rl.evaluator import EvaluatorConfig")
    L += [
        "from xtuner.v1.rl.judger import GSM8KJudgerConfig",
        "from xtuner.v1.rl.loss import GRPOLossConfig",
        f"from xtuner.v1.rl.replay_buffer import {buffer_cls}",
        "from xtuner.v1.rl.rollout.worker import RolloutConfig",
        "from xtuner.v1.rl.trainer import WorkerConfig",
        "from xtuner.v1.rl.utils import " + ", ".join(util_imports),
        f"from xtuner.v1.train.rl_trainer import {trainer_cls}",
        "",
        "# Paths come from the environment so the same file runs anywhere.",
        'work_dir = os.environ["WORK_DIR"]',
        'model_path = os.environ["MODEL_PATH"]',
        'data_path = os.environ["DATA_PATH"]',
    ]
    if p.enable_evaluate:
        L.append('eval_data_path = os.environ["EVAL_DATA_PATH"]')
    L += [
        "",
        f"max_prompt_length = {p.max_prompt_len}",
        f"max_response_length = {p.max_response_len}",
        f"pack_max_length = {training.pack_max_length}  # >= prompt + response",
        f"prompt_repeat_k = {p.prompt_repeat_k}",
        f"train_batch_size = {p.train_batch_size}  # prompt groups per step",
        f"total_train_steps = {p.total_train_steps}",
        f"sync_weights_interval = {p.sync_weights_interval}",
        "# evaluation and saves run only on weight-sync steps: keep these multiples of sync_weights_interval",
        f"evaluate_step = {training.evaluate_step}",
        f"checkpoint_interval = {training.checkpoint_interval}",
        f"hf_interval = {training.hf_interval}",
        "",
    ]
    for g in groups:
        var = "resources" if g.role == "shared" else f"{g.role}_resources"
        L += [
            f"{var} = AcceleratorResourcesConfig(",
            f'    accelerator="{accelerator}",',
            f"    num_workers={g.num_workers},",
            f"    num_cpus_per_worker={g.num_cpus_per_worker:g},",
            f"    cpu_memory_per_worker={_mem_expr(g.cpu_memory_per_worker_bytes)},",
            ")",
        ]
    L += [
        "",
        "rollout_config = RolloutConfig(",
        '    env="grpo",',
        f'    device="{accelerator}",',
        "    model_path=model_path,",
        '    dtype="bfloat16",',
        f"    tensor_parallel_size={rollout.tensor_parallel_size},",
        f"    expert_parallel_size={rollout.expert_parallel_size},",
        f"    gpu_memory_utilization={rollout.gpu_memory_utilization},",
        "    context_length=max_prompt_length + max_response_length,",
        f'    weight_transport_type="{rollout.weight_transport_type}",',
        ")",
        "",
    ]
    if p.judger_cpu_workers:
        L += [
            "judger_config = GSM8KJudgerConfig(",
            '    judger_name="openai/gsm8k",',
            f"    cpu_resources=CPUResourcesConfig(num_workers={p.judger_cpu_workers}, num_cpus_per_worker=1),",
            ")",
        ]
    else:
        L.append('judger_config = GSM8KJudgerConfig(judger_name="openai/gsm8k")')
    L += [
        "",
        "model_cfg = get_model_config_from_hf(Path(model_path))",
    ]
    if is_moe:
        L += [
            "# RL fine-tuning of a MoE: drop the pre-training auxiliary losses",
            'if hasattr(model_cfg, "balancing_loss_cfg"):',
            "    model_cfg.balancing_loss_cfg = None",
            'if hasattr(model_cfg, "z_loss_cfg"):',
            "    model_cfg.z_loss_cfg = None",
        ]
    L += [
        "train_worker_cfg = WorkerConfig(",
        "    model_cfg=model_cfg,",
        "    load_from=model_path,",
        "    optim_cfg=AdamWConfig(lr=1e-6, foreach=False, weight_decay=0.1),",
        '    lr_cfg=LRConfig(lr_type="constant", warmup_ratio=0, lr_min=1e-6),',
        "    fsdp_cfg=FSDPConfig(torch_compile=False, cpu_offload=False, ep_size=1),",
        "    loss_cfg=GRPOLossConfig(",
        '        policy_loss_cfg=dict(loss_type="vanilla", cliprange_low=0.2, cliprange_high=0.28),',
        "        use_kl_loss=False,",
        '        mode="chunk",',
        "        chunk_size=512,",
        "    ),",
        f"    sp_size={p.sp_size},",
        "    optimizer_steps=1,",
        "    pack_max_length=pack_max_length,",
        ")",
        "",
        "",
        "def make_sampler(anno_path, repeat_k):",
        '    dataset = DatasetConfig(name="grpo", anno_path=anno_path)',
        "    tokenize_fn = RLTextTokenizeFnConfig(max_length=max_prompt_length)",
        "    loader = DataloaderConfig(",
        '        dataset_config_list=[{"dataset": dataset, "tokenize_fn": tokenize_fn}],',
        "        pack_max_length=pack_max_length,",
        '        collator="fake_collator",',
        '        pack_level="none",',
        "    )",
        "    return SamplerConfig(dataloader_cfg=loader, prompt_repeat_k=repeat_k)",
        "",
        "",
        "train_task = " + task_cls + "(",
        '    task_name="train_task",',
        "    agent_loop_config=SingleTurnAgentLoopConfig(",
        "        hf_checkpoint=model_path,",
        "        sample_params=SampleParams(max_tokens=max_response_length, temperature=1.0, top_p=1.0, top_k=0),",
        "    ),",
        "    judger_config=judger_config,",
    ]
    knobs = ", ".join(f"{k}={v!r}" for k, v in strategy.params.items())
    L += [
        f"    produce_strategy_config={strategy.class_name}({knobs}),",
        "    sampler_config=make_sampler(data_path, prompt_repeat_k),",
        ")",
        f"agent_loop_manager_cfg = {manager_cls}(tasks=train_task)",
        "",
    ]
    if p.enable_evaluate:
        L += [
            "# Evaluation always uses the colocated-style manager with the synchronous strategy.",
            "eval_agent_loop_manager_cfg = AgentLoopManagerConfig(",
            "    tasks=TaskSpecConfig(",
            '        task_name="eval_task",',
            "        agent_loop_config=SingleTurnAgentLoopConfig(",
            "            hf_checkpoint=model_path,",
            "            sample_params=SampleParams(max_tokens=max_response_length, temperature=0.0, top_k=1),",
            "        ),",
            "        judger_config=judger_config,",
            "        produce_strategy_config=SyncProduceStrategyConfig(),",
            "        sampler_config=make_sampler(eval_data_path, 1),",
            "    ),",
            ")",
            "evaluator_config = EvaluatorConfig(compute_metric_func=None)",
            "",
        ]
    L.append(f"trainer = {trainer_cls}(")
    if disagg:
        L += ["    train_resources=train_resources,", "    rollout_resources=rollout_resources,"]
    else:
        L.append("    resources=resources,")
    L += [
        "    train_worker_cfg=train_worker_cfg,",
        "    rollout_config=rollout_config,",
        "    tokenizer_path=model_path,",
        "    load_from=model_path,",
        f"    replay_buffer_config={buffer_cls}(),",
        "    agent_loop_manager_cfg=agent_loop_manager_cfg,",
    ]
    if p.enable_evaluate:
        L += [
            "    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,",
            "    evaluator_config=evaluator_config,",
            "    enable_evaluate=True,",
            "    evaluate_step=evaluate_step,",
        ]
    else:
        L.append("    enable_evaluate=False,")
    L += [
        "    advantage_estimator_config=GRPOAdvantageConfig(eps=1e-8),",
        "    train_batch_size=train_batch_size,",
        "    total_train_steps=total_train_steps,",
        "    sync_weights_interval=sync_weights_interval,",
        "    checkpoint_interval=checkpoint_interval,",
        "    hf_interval=hf_interval,",
        "    work_dir=work_dir,",
        ")",
        "",
    ]
    return "\n".join(L)


def _bundle_nodes(count: int, start: int, per_node: int) -> list[tuple[int, int, int]]:
    """PACK-style estimate: (node, first bundle, last bundle) for bundles start..start+count-1 filling nodes."""
    out: list[tuple[int, int, int]] = []
    b = 0
    while b < count:
        slot = start + b
        node, offset = divmod(slot, per_node)
        take = min(per_node - offset, count - b)
        out.append((node, b, b + take - 1))
        b += take
    return out


MAX_DIAGRAM_NODES = 6


def build_diagram(
    topology: Topology,
    nodes: int,
    per_node: int,
    groups: list[WorkerGroupPlan],
    pools: list[rr.ExternalCPUPool],
    rollout: RolloutPlan,
    accelerator: str,
    cpus_per_node: float | None,
) -> str:
    lines = ["flowchart TB", '  driver["driver: xtuner/v1/train/cli/rl.py<br/>trainer + agent-loop manager"]']
    placed: dict[int, list[str]] = {}
    start = 0
    for g in groups:
        role = {
            "shared": f"training workers + rollout engines ({rollout.num_engines} x {rollout.num_gpus_per_engine})",
            "train": "training workers (FSDP)",
            "rollout": f"rollout engines ({rollout.num_engines} x {rollout.num_gpus_per_engine} {accelerator})",
        }[g.role]
        pg = "train" if g.role in ("shared", "train") else "rollout"
        for node, first, last in _bundle_nodes(g.num_workers, start, per_node):
            placed.setdefault(node, []).append(
                f"pg {pg} bundles {first}-{last}: {last - first + 1} {accelerator}, "
                f"{g.num_cpus_per_worker:g} CPU + {g.cpu_memory_per_worker_gib:g} GiB each<br/>{role}"
            )
        start += g.num_workers
    shown = sorted(placed)[:MAX_DIAGRAM_NODES]
    cpu_txt = f", {cpus_per_node:g} CPU" if cpus_per_node else ""
    for node in shown:
        lines.append(f'  subgraph N{node}["node {node}: {per_node} {accelerator}{cpu_txt}"]')
        for i, text in enumerate(placed[node]):
            lines.append(f'    N{node}_{i}["{text}"]')
        lines.append("  end")
    hidden = len(placed) - len(shown)
    if hidden > 0:
        lines.append(f'  more["... {hidden} more node(s) with the same layout"]')
    idle = nodes - len(placed)
    if idle > 0:
        lines.append(f'  idle["{idle} node(s) without XTuner bundles"]')
    lines.append('  subgraph EXT["CPU pools outside the placement groups"]')
    for i, pool in enumerate(pools):
        lines.append(f'    P{i}["{pool.name}: {pool.num_workers} x {pool.num_cpus_per_worker:g} CPU"]')
    lines.append("  end")
    for node in shown:
        for i, _ in enumerate(placed[node]):
            lines.append(f"  driver --> N{node}_{i}")
    lines.append("  driver --> EXT")
    if topology == "disaggregated":
        lines.append("  %% weights flow from the train group to the rollout group over NCCL at sync points")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------------


def _finding(**kw: Any) -> Finding:
    return Finding(**kw)


def run(params: Params, ctx: RunContext) -> Result:
    p = params
    findings: list[Finding] = []
    ctx.progress(0, 4, "reading model")
    model = load_model_info(p, ctx)
    acc: rr.Accelerator = p.accelerator
    per_node = p.gpus_per_node or (rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else 8)
    if acc == "NPU" and per_node != rr.NPU_ACCELERATORS_PER_NODE:
        findings.append(
            _finding(
                id="topo.npu_gpus_per_node_forced",
                severity="warning",
                category="resource_mismatch_num_workers",
                title=f"XTuner assumes 16 NPUs per node (RolloutConfig.gpus_per_node is forced to 16); "
                f"gpus_per_node={per_node} was given",
                evidence="RolloutConfig(device='NPU') sets gpus_per_node=16; AcceleratorResourcesConfig sets "
                "num_accelerators_per_node=16",
                fix="Keep whole 16-NPU nodes; engine sizes above one node assume 16 per node.",
                reference=f"{CB}#divisibility-rules",
                source=SRC_NPU_NODE,
                owner="cluster_setup",
            )
        )
    cluster: rr.ClusterCapacity | None = None
    cluster_source: Literal["given", "ray_probe", "not_given"] = "not_given"
    if p.nodes is None and not p.use_cluster:
        raise ToolInputError(
            "nodes_missing", "give nodes (machines with accelerators), or use_cluster=true", "Pass nodes."
        )
    nodes = p.nodes or 1
    cpus_per_node = p.cpus_per_node
    if p.use_cluster:
        ctx.progress(1, 4, "probing Ray")
        cluster = probe_cluster(p, ctx)
        cluster_source = "ray_probe"
        acc = cluster.accelerator
        accel_nodes = [n for n in cluster.nodes if n.accelerators > 0]
        if not accel_nodes:
            raise ToolInputError(
                "cluster_has_no_accelerators",
                "the Ray cluster registers no GPU or NPU resources",
                "Start the Ray nodes with --num-gpus (or --resources NPU) on the accelerator machines.",
            )
        nodes = len(accel_nodes)
        per_node = int(max(n.accelerators for n in accel_nodes))
        cpus_per_node = max(n.cpus for n in accel_nodes)
    elif p.cpus_per_node is not None and p.memory_gib_per_node is not None:
        cluster = rr.ClusterCapacity.uniform(nodes, per_node, p.cpus_per_node, p.memory_gib_per_node, acc)
        cluster_source = "given"
    elif p.cpus_per_node is not None or p.memory_gib_per_node is not None:
        raise ToolInputError(
            "cluster_incomplete",
            "give both cpus_per_node and memory_gib_per_node (or neither)",
            "Add the missing one, as `ray status` reports it for one node.",
        )
    total = int(cluster.accelerators_total) if cluster_source == "ray_probe" and cluster else nodes * per_node
    gpu_gib = p.gpu_memory_gib or DEFAULT_GPU_MEMORY_GIB[acc]
    gpu_bytes = gpu_gib * rr.GIB
    util = p.gpu_memory_utilization or 0.8
    context_length = p.max_prompt_len + p.max_response_len
    pack_max_length = max(_round_up(context_length, 1024), 16384)

    # Can the training state live on half of the accelerators (a precondition to split them)?
    half = max(1, total // 2)
    tm = train_memory(model, half, pack_max_length, p.sp_size)
    train_fits_half = sum(tm.values()) <= TRAIN_MEMORY_HEADROOM * gpu_bytes
    topology, rationale, alternatives, more = decide_topology(p, total, train_fits_half)
    findings += more
    ctx.progress(2, 4, "sizing")

    # Engine size: forced values win, else the smallest engine that fits.
    tp_forced, ep_forced = p.tensor_parallel_size, p.expert_parallel_size
    if tp_forced or ep_forced:
        tp, ep = tp_forced or 1, ep_forced or 1
        engine_fits = rollout_weights_per_gpu(model, tp, ep) <= ROLLOUT_WEIGHT_SHARE * util * gpu_bytes
    else:
        limit = total if topology != "disaggregated" else max(1, total - per_node)
        tp, ep, engine_fits = choose_engine(model, per_node, limit, gpu_bytes, util, p.backend)
    engine = rr.num_gpus_per_engine(tp, ep)
    w_gib = rollout_weights_per_gpu(model, tp, ep) / rr.GIB
    if tp_forced or ep_forced:
        rationale.append(f"rollout engine tp={tp}, ep={ep} as given ({w_gib:.1f} GiB of bf16 weights per accelerator)")
    else:
        rationale.append(
            f"rollout engine tp={tp}, ep={ep}: the smallest engine whose bf16 weights per accelerator "
            f"({w_gib:.1f} GiB) stay under half of gpu_memory_utilization x {gpu_gib:g} GiB, leaving the rest for "
            "KV cache" + ("; a MoE grows expert parallelism, not TP" if model.is_moe else "")
        )

    idle = 0
    if topology == "disaggregated":
        if total < 2:
            raise ToolInputError(
                "disaggregated_needs_two_accelerators",
                f"topology=disaggregated needs at least 2 accelerators (one per group); the cluster has {total}",
                "Use topology colocated_sync, or add accelerators.",
            )
        rollout_n, train_n = split_disaggregated(p, model, total, per_node, engine, gpu_bytes, pack_max_length)
        idle = total - rollout_n - train_n
        rationale.append(
            f"split: {train_n} accelerators train, {rollout_n} roll out"
            + (" (rollout gets more for long-tail responses)" if p.long_tail_responses else "")
        )
        group_shape = [("train", train_n), ("rollout", rollout_n)]
    else:
        train_n = rollout_n = total
        if total % engine:
            rollout_n = train_n = total - total % engine
            idle = total - train_n
        if train_n < 1:
            train_n = rollout_n = total
            idle = 0
        group_shape = [("shared", train_n)]
    if idle:
        findings.append(
            _finding(
                id="topo.accelerators_left_idle",
                severity="warning",
                category="resource_mismatch_num_workers",
                title=f"{idle} accelerator(s) left idle so the rollout engines divide the workers evenly",
                evidence=f"{total} accelerators, engine size {engine} (tp={tp}, ep={ep})",
                fix=f"Use a multiple of {engine} accelerators to use them all, or accept the idle ones.",
                reference=f"{CB}#divisibility-rules",
                source=rr.SRC_LMDEPLOY_TP,
                owner="config_edit",
            )
        )

    # Ray requirements: XTuner's own arithmetic (resource_rules), sized to the cluster if known.
    pools = [rr.rollout_controller_pool()]
    if p.judger_cpu_workers:
        pools.append(rr.judger_pool("openai/gsm8k", num_workers=p.judger_cpu_workers))
    pools = rr.unique_pool_names(pools)
    pg_names = [("train" if r == "shared" else r, n) for r, n in group_shape]
    cpw, mem, req, rows = fit_per_worker(pg_names, acc, pools, cluster)
    fit_ok = rr.fits(rows) if cluster is not None else None
    if (
        cluster is not None
        and fit_ok
        and (cpw, mem) != (rr.DEFAULT_NUM_CPUS_PER_WORKER, rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES)
    ):
        findings.append(
            _finding(
                id="topo.resources_reduced",
                severity="warning",
                category="ray_resources_insufficient",
                title=f"Per-worker resources lowered to {cpw:g} CPU and {mem // rr.GIB} GiB to fit the cluster",
                evidence=f"XTuner's defaults (12 CPU, 16 GiB per worker) need {req.placement_groups[0].num_workers}"
                " workers x default + 10 CPUs / 10 GiB, more than the cluster offers",
                fix="Keep these values, or add CPUs/memory to the Ray nodes (ray start --num-cpus/--memory).",
                reference=f"{CB}#resource-checks",
                source=rr.SRC_PG_CPU,
                owner="config_edit",
            )
        )
    for row in rows:
        if not row.ok:
            findings.append(
                _finding(
                    id="topo.cluster_too_small",
                    severity="blocker",
                    category="ray_resources_insufficient",
                    title=f"Cluster too small for '{row.check}': needs {_fmt(row)}, has {_fmt(row, True)}",
                    evidence=row.xtuner_message.splitlines()[0] if row.xtuner_message else row.check,
                    location=row.check,
                    fix=(
                        "Free the accelerators (another job or a stale placement group holds them) or plan fewer "
                        "workers."
                        if row.unit == "count"
                        else "Add CPUs/memory to the Ray nodes (ray start --num-cpus/--memory) or add nodes; even 1 CPU "
                        "and 4 GiB per worker do not fit."
                    ),
                    reference=f"{CB}#external-cpu-pools"
                    if row.check.startswith("external")
                    else f"{CB}#resource-checks",
                    source=row.source,
                    owner="cluster_setup",
                )
            )
    if cluster is None:
        per_node_cpus = math.ceil(req.min_cluster_cpus / max(1, nodes))
        per_node_mem = math.ceil(req.min_cluster_memory_bytes / rr.GIB / max(1, nodes))
        findings.append(
            _finding(
                id="topo.cluster_not_checked",
                severity="info",
                category="ray_resources_insufficient",
                title="Cluster CPUs/memory not given; fit not checked",
                evidence=f"the run needs at least {req.min_cluster_cpus:g} Ray CPUs and "
                f"{req.min_cluster_memory_gib:g} GiB Ray memory in total (about {per_node_cpus} CPUs and "
                f"{per_node_mem} GiB per node, and {cpw * per_node:g} CPUs on each fully used node)",
                fix="Pass cpus_per_node and memory_gib_per_node (from `ray status`), or use_cluster=true.",
                reference=f"{CB}#resource-checks",
                source=rr.SRC_PG_CPU,
            )
        )

    # Rollout plan and rules.
    rules = rr.rollout_shape_rules(
        rollout_n, tp, ep, p.backend, rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else per_node
    )
    train_world = train_n
    rules.append(rr.sp_size_rule(p.sp_size, train_world))
    for rule in rules:
        if not rule.ok and rule.rule != "rollout.vllm_topology_not_implemented":
            findings.append(
                _finding(
                    id=f"topo.rule.{rule.rule.split('.', 1)[1]}",
                    severity="blocker",
                    category="resource_mismatch_num_workers",
                    title=f"XTuner will reject this layout: {rule.detail}",
                    evidence=rule.xtuner_message,
                    fix="Pick tensor/expert parallel sizes and worker counts that divide evenly (leave them unset "
                    "to let this tool choose).",
                    reference=f"{CB}#divisibility-rules",
                    source=rule.source,
                    owner="config_edit",
                )
            )
    if p.backend == "vllm":
        findings.append(
            _finding(
                id="topo.vllm_cannot_start",
                severity="blocker",
                category="backend_unsupported",
                title="vLLM rollout cannot start at this XTuner commit",
                evidence="vLLMWorker.build_rollout_topology raises NotImplementedError('vLLM rollout topology has not "
                "been verified after topology refactor.')",
                fix="Use backend lmdeploy (XTUNER_USE_LMDEPLOY=1; also runs on Ascend NPU) or sglang.",
                reference=f"{CB}#backend-support",
                source=rr.SRC_VLLM,
                owner="backend_install",
            )
        )
    if acc == "NPU" and p.backend == "lmdeploy":
        findings.append(
            _finding(
                id="topo.npu_lmdeploy",
                severity="info",
                category="backend_unsupported",
                title="On Ascend NPU use LMDeploy's pytorch engine (device type ascend, eager mode)",
                evidence="the upstream NPU example and launcher use vLLM, which cannot start at this commit",
                fix="Set XTUNER_USE_LMDEPLOY=1 on every node before `ray start`; keep lmdeploy_backend='pytorch'.",
                reference=f"{CB}#backend-support",
                source="xtuner/v1/rl/rollout/lmdeploy.py:356-359",
            )
        )
    if p.rollout_gpus and topology != "disaggregated":
        findings.append(
            _finding(
                id="topo.rollout_gpus_ignored",
                severity="warning",
                category="resource_mismatch_num_workers",
                title="rollout_gpus only applies to the disaggregated topology; ignored",
                evidence=f"topology={topology}: training and rollout share all {train_n} workers",
                fix="Pass topology='disaggregated' to split accelerators between training and rollout.",
                reference=f"{WF}#topologies",
                source=rr.SRC_PG_BUNDLES,
            )
        )
    transport = "nccl" if topology == "disaggregated" else "ipc"
    if topology == "disaggregated":
        findings.append(
            _finding(
                id="topo.disaggregated_nccl_transport",
                severity="info",
                category="backend_runtime_error",
                title="Disaggregated weights move over NCCL (forced by the trainer)",
                evidence="RLDisaggregatedTrainer sets weight_transport_type='nccl'; LMDeploy turbomind and vLLM "
                "do not support NCCL weight transport",
                fix="Keep the LMDeploy pytorch engine (default) or SGLang; make weight_update_port (30000) "
                "reachable between the groups.",
                reference=f"{WF}#disaggregated",
                source=SRC_NCCL,
            )
        )
    n_engines = max(1, rollout_n // engine) if engine else 1
    rollout_plan = RolloutPlan(
        backend=p.backend,
        device=acc,
        gpus_per_node=rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else per_node,
        tensor_parallel_size=tp,
        expert_parallel_size=ep,
        num_gpus_per_engine=engine,
        num_engines=n_engines,
        gpu_memory_utilization=util,
        context_length=context_length,
        rollout_max_batch_size_per_instance=auto_max_batch(context_length),
        weight_transport_type=transport,
        rules=rules,
    )

    # Memory estimate.
    memory = estimate_memory(model, p, train_n, rollout_plan, pack_max_length, gpu_gib, topology)
    findings += memory_findings(memory, model, rollout_plan, engine_fits, context_length)

    # Training plan and intervals.
    ev, ck, hf = plan_intervals(p, findings)
    training = TrainingPlan(
        num_workers=train_n,
        sp_size=p.sp_size,
        pack_max_length=pack_max_length,
        train_batch_size=p.train_batch_size,
        prompt_repeat_k=p.prompt_repeat_k,
        samples_per_step=p.train_batch_size * p.prompt_repeat_k,
        sync_weights_interval=p.sync_weights_interval,
        total_train_steps=p.total_train_steps,
        enable_evaluate=p.enable_evaluate,
        evaluate_step=ev,
        checkpoint_interval=ck,
        hf_interval=hf,
    )
    findings += batch_findings(p, train_n)
    strategy = produce_plan(topology, p)
    if topology != "colocated_sync":
        findings.append(
            _finding(
                id="topo.effective_staleness",
                severity="info",
                category="staleness_or_partial_rollout",
                title=f"Samples may lag the trained weights by up to {strategy.effective_stale_threshold_steps} steps",
                evidence=f"(max_staleness {strategy.params['max_staleness']} + 1) x sync_weights_interval "
                f"{p.sync_weights_interval}",
                fix="For fresher samples lower max_staleness to 0 (then also consider enable_partial_rollout=False).",
                reference=f"{WF}#effective-staleness",
                source=SRC_STALE,
            )
        )
    groups = [
        WorkerGroupPlan(
            role=r,
            num_workers=n,
            num_cpus_per_worker=cpw,
            cpu_memory_per_worker_bytes=mem,
            cpu_memory_per_worker_gib=round(mem / rr.GIB, 3),
        )
        for r, n in group_shape
    ]
    resources = ResourcesPlan(accelerator=acc, accelerators_in_cluster=total, groups=groups, idle_accelerators=idle)
    ctx.progress(3, 4, "writing config")
    snippet = build_snippet(topology, p, groups, rollout_plan, training, strategy, acc, model.is_moe, nodes)
    diagram = build_diagram(topology, nodes, per_node, groups, req.external_pools, rollout_plan, acc, cpus_per_node)

    findings = sort_findings(dedupe_findings(findings))
    blockers = sum(1 for f in findings if f.severity == "blocker")
    findings, omitted = cap(findings, DEFAULT_LIST_CAP)
    shown_rows = rows
    rows_omitted = 0
    if p.detail != "full":
        # Passing checks are implied by fits=True / no blocker; 'full' lists them too.
        shown_rows = [r for r in rows if not r.ok]
        rows_omitted = len(rows) - len(shown_rows)
        kept = [r for r in rollout_plan.rules if not r.ok]
        rollout_plan.rules_omitted = len(rollout_plan.rules) - len(kept)
        rollout_plan.rules = kept
    if p.detail == "summary":
        snippet = diagram = ""
    trainer_cls = "RLDisaggregatedTrainerConfig" if topology == "disaggregated" else "RLColocateTrainerConfig"
    layout = f"{train_n} train + {rollout_n} rollout" if topology == "disaggregated" else f"{train_n} shared workers"
    fit_txt = {None: "cluster fit not checked", True: "fits the cluster", False: "does NOT fit the cluster"}[fit_ok]
    summary = (
        f"{topology} with {trainer_cls}, {layout} {acc}, rollout tp={tp} ep={ep}, "
        f"{strategy.class_name}; {fit_txt}; {blockers} blocker(s)"
    )
    ctx.progress(4, 4, "done")
    return Result(
        summary=summary,
        topology=topology,
        rationale=rationale,
        alternatives=alternatives,
        trainer_config_class=trainer_cls,
        agent_loop_manager_class="DisaggAgentLoopManagerConfig"
        if topology == "disaggregated"
        else "AgentLoopManagerConfig",
        task_spec_class="DisaggTaskSpecConfig" if topology == "disaggregated" else "TaskSpecConfig",
        produce_strategy=strategy,
        replay_buffer_class="SyncReplayBufferConfig" if topology == "colocated_sync" else "AsyncReplayBufferConfig",
        resources=resources,
        ray_requirements=req,
        cluster_fit=ClusterFit(source=cluster_source, fits=fit_ok, rows=shown_rows, rows_omitted=rows_omitted),
        rollout=rollout_plan,
        training=training,
        model=model,
        memory=memory,
        config_snippet=snippet,
        diagram=diagram,
        findings=findings,
        findings_omitted=omitted,
    )


def _fmt(row: rr.FitRow, available: bool = False) -> str:
    v = row.available if available else row.needed
    if row.unit == "bytes":
        return f"{v / rr.GIB:.1f} GiB"
    return f"{v:g} {row.resource}" if row.unit == "count" else f"{v:g} CPUs"


def split_disaggregated(
    p: Params, model: ModelInfo, total: int, per_node: int, engine: int, gpu_bytes: float, pack_max_length: int
) -> tuple[int, int]:
    """(rollout, train) accelerators: whole nodes when possible, rollout a multiple of the engine size."""
    if p.rollout_gpus:
        rollout = min(p.rollout_gpus, total - 1)
        return rollout, total - rollout
    share = 0.625 if p.long_tail_responses else 0.5
    unit = per_node if total >= 2 * per_node else max(engine, 1)
    units = total * share / unit
    # Long tails: round the rollout share up; otherwise to the nearest whole unit.
    rollout = max(unit, (math.ceil(units) if p.long_tail_responses else math.floor(units + 0.5)) * unit)
    rollout = min(rollout, total - unit) if total - unit >= 1 else rollout
    rollout -= rollout % engine if engine else 0
    rollout = max(rollout, engine)
    # Give training more when its state does not fit.
    while rollout - unit >= engine:
        tm = train_memory(model, total - rollout, pack_max_length, p.sp_size)
        if sum(tm.values()) <= TRAIN_MEMORY_HEADROOM * gpu_bytes:
            break
        rollout -= unit
    if rollout < 1 or total - rollout < 1:
        raise ToolInputError(
            "disaggregated_split_impossible",
            f"cannot split {total} accelerators into a training group and a rollout group of whole "
            f"{engine}-accelerator engines",
            "Use a colocated topology, a smaller tensor/expert parallel size, or more accelerators.",
        )
    return rollout, total - rollout


def estimate_memory(
    model: ModelInfo,
    p: Params,
    train_n: int,
    rollout: RolloutPlan,
    pack_max_length: int,
    gpu_gib: float,
    topology: Topology,
) -> MemoryEstimate:
    gpu_bytes = gpu_gib * rr.GIB
    tm = train_memory(model, max(1, train_n), pack_max_length, p.sp_size)
    train_total = sum(tm.values())
    tp, ep = rollout.tensor_parallel_size, rollout.expert_parallel_size
    w = rollout_weights_per_gpu(model, tp, ep)
    budget = kv_budget_per_gpu(w, gpu_bytes, rollout.gpu_memory_utilization, p.backend)
    per_tok = kv_bytes_per_token_per_gpu(model, tp, ep)
    tokens = seqs = None
    if per_tok:
        tokens = (
            max(0, int(budget // per_tok)) * rollout.num_gpus_per_engine if ep > 1 else max(0, int(budget // per_tok))
        )
        seqs = tokens // rollout.context_length
    rollout_fits = budget > 0 and (seqs is None or seqs >= 1)
    assumptions = [
        "training: bf16 weights and grads, fp32 master weights and Adam m/v (16 bytes/parameter) sharded by FSDP "
        f"over {train_n} training workers",
        f"training activations: one bf16 hidden state per layer for a {pack_max_length}-token packed batch "
        f"(recomputation), divided by sp_size, plus {RUNTIME_RESERVE_GIB:g} GiB workspace",
        "rollout: bf16 weights split by TP (dense) or experts split by EP (MoE); KV cache bf16 K+V per layer",
        f"rollout KV budget: gpu_memory_utilization x {'memory left after weights' if p.backend == 'lmdeploy' else 'total memory, minus weights'}",
    ]
    peak = None
    if topology != "disaggregated":
        peak = round(max(train_total, w + max(budget, 0)) / rr.GIB, 2)
        assumptions.append(
            "colocated: training state is offloaded before rollout starts and rollout memory is released for "
            f"training ({SRC_OFFLOAD}), so the peak is the larger of the two"
        )
    if model.source == "params_b":
        assumptions.append("no config.json: activations approximated, KV cache unknown")
    return MemoryEstimate(
        gpu_memory_gib=gpu_gib,
        train_weights_gib=_gib(tm["weights"]),
        train_grads_gib=_gib(tm["grads"]),
        train_optimizer_gib=_gib(tm["optim"]),
        train_activations_gib=_gib(tm["acts"]),
        train_total_gib=_gib(train_total),
        train_fits=train_total <= TRAIN_MEMORY_HEADROOM * gpu_bytes,
        rollout_weights_gib=_gib(w),
        rollout_kv_budget_gib=_gib(max(budget, 0)),
        rollout_kv_tokens_per_engine=tokens,
        rollout_full_sequences_per_engine=seqs,
        rollout_fits=rollout_fits,
        colocated_peak_gib=peak,
        assumptions=assumptions,
    )


def memory_findings(
    m: MemoryEstimate, model: ModelInfo, rollout: RolloutPlan, engine_fits: bool, context_length: int
) -> list[Finding]:
    out: list[Finding] = []
    if not m.train_fits:
        out.append(
            _finding(
                id="topo.train_memory_exceeds",
                severity="warning",
                category="resource_mismatch_num_workers",
                title=f"Training needs about {m.train_total_gib:g} GiB per accelerator; it has {m.gpu_memory_gib:g}",
                evidence=f"weights {m.train_weights_gib:g} + grads {m.train_grads_gib:g} + optimizer "
                f"{m.train_optimizer_gib:g} + activations {m.train_activations_gib:g} GiB",
                fix="Add training accelerators, lower max_response_len/pack_max_length, raise sp_size, or enable "
                "FSDPConfig(cpu_offload=True).",
                reference=f"{WF}#topologies",
                owner="config_edit",
            )
        )
    if not m.rollout_fits or not engine_fits:
        out.append(
            _finding(
                id="topo.rollout_memory_exceeds",
                severity="warning",
                category="resource_mismatch_num_workers",
                title=f"Rollout engine (tp={rollout.tensor_parallel_size}, ep={rollout.expert_parallel_size}) leaves "
                f"little or no KV cache: weights {m.rollout_weights_gib:g} GiB per accelerator",
                evidence=f"KV budget {m.rollout_kv_budget_gib:g} GiB per accelerator, "
                f"{m.rollout_full_sequences_per_engine} full {context_length}-token sequences per engine",
                fix="Use a larger engine (tensor_parallel_size, or expert_parallel_size for MoE) or accelerators "
                "with more memory.",
                reference=f"{CB}#divisibility-rules",
                owner="config_edit",
            )
        )
    elif (
        m.rollout_full_sequences_per_engine is not None
        and m.rollout_full_sequences_per_engine < rollout.rollout_max_batch_size_per_instance // 8
    ):
        out.append(
            _finding(
                id="topo.kv_cache_small",
                severity="info",
                category="resource_mismatch_num_workers",
                title=f"KV cache holds about {m.rollout_full_sequences_per_engine} full-length sequences per engine",
                evidence=f"XTuner sends up to {rollout.rollout_max_batch_size_per_instance} requests per engine for "
                f"context_length {context_length}; the engine will queue the rest",
                fix="Fine for correctness; for throughput use bigger engines or shorter max_response_len.",
                reference=f"{CB}#divisibility-rules",
                source=SRC_MAX_BATCH,
            )
        )
    if model.max_position_embeddings and context_length > model.max_position_embeddings:
        out.append(
            _finding(
                id="topo.context_exceeds_model",
                severity="warning",
                category="model_loading",
                title=f"context_length {context_length} exceeds the model's max_position_embeddings "
                f"{model.max_position_embeddings}",
                evidence="max_prompt_len + max_response_len",
                fix="Lower max_response_len or use a long-context variant of the model.",
                reference=f"{WF}#train-batch-size",
                owner="config_edit",
            )
        )
    return out


def batch_findings(p: Params, train_n: int) -> list[Finding]:
    out: list[Finding] = []
    if p.prompt_repeat_k < 2:
        out.append(
            _finding(
                id="topo.prompt_repeat_k_too_small",
                severity="warning",
                category="other",
                title="prompt_repeat_k < 2: a GRPO group of one has no spread to compute an advantage from",
                evidence=f"prompt_repeat_k={p.prompt_repeat_k}; GRPO normalises rewards by the group's std",
                fix="Use prompt_repeat_k >= 2 (examples use 5).",
                reference=f"{WF}#train-batch-size",
                source=SRC_GRPO_STD,
                owner="config_edit",
            )
        )
    samples = p.train_batch_size * p.prompt_repeat_k
    if samples < train_n:
        out.append(
            _finding(
                id="topo.batch_smaller_than_workers",
                severity="info",
                category="other",
                title=f"{samples} samples per step for {train_n} training workers: some train on padding only",
                evidence="train_batch_size counts prompt groups; samples = train_batch_size x prompt_repeat_k",
                fix="Raise train_batch_size so that each worker gets at least one sample.",
                reference=f"{WF}#train-batch-size",
                owner="config_edit",
            )
        )
    return out


DESCRIPTION = (
    "Choose colocated sync, colocated async or disaggregated for an XTuner V1 GRPO run and size it: config classes, "
    "produce strategy and effective staleness, workers/CPUs/memory that pass XTuner's own Ray checks, rollout TP/EP, "
    "a per-GPU memory estimate, a paste-ready Python config and a Mermaid diagram.\n"
    "Use when: planning a new RL run or re-sizing one for a different cluster or model.\n"
    "Not for: checking an existing config file (use inspect_config), probing a live cluster's state "
    "(use probe_environment), or a go/no-go before launch (use preflight)."
)

SPEC = ToolSpec("choose_topology", "Choose XTuner RL topology and resources", DESCRIPTION, Params, Result, run)
