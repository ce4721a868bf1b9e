"""Signatures of the in-process API (written by `python -m xtuner_rl_mcp.api`; do not edit)."""

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import xtuner_rl_mcp.cluster.fit as _m5
import xtuner_rl_mcp.operations.build_rl_command as _m0
import xtuner_rl_mcp.operations.check_reward_data as _m6
import xtuner_rl_mcp.operations.choose_topology as _m1
import xtuner_rl_mcp.operations.diagnose_symptom as _m8
import xtuner_rl_mcp.operations.inspect_config as _m3
import xtuner_rl_mcp.operations.inspect_run as _m9
import xtuner_rl_mcp.operations.lookup_reference as _m2
import xtuner_rl_mcp.operations.preflight as _m7
import xtuner_rl_mcp.operations.probe_environment as _m4

__version__: str
XTUNER_COMMIT: str
XTUNER_COMMIT_SHORT: str
TOOLS: tuple[str, ...]
__all__ = [
    "XTUNER_COMMIT",
    "XTUNER_COMMIT_SHORT",
    "__version__",
    "build_rl_command",
    "check_reward_data",
    "choose_topology",
    "diagnose_symptom",
    "inspect_config",
    "inspect_run",
    "lookup_reference",
    "preflight",
    "probe_environment",
]

def build_rl_command(
    *,
    config: str,
    backend: Literal["lmdeploy", "sglang", "vllm"],
    model_path: str | None = ...,
    data_path: str | None = ...,
    eval_data_path: str | None = ...,
    work_dir: str | None = ...,
    num_workers: int | None = ...,
    nodes: int = ...,
    gpus_per_node: int = ...,
    head_address: str | None = ...,
    ray_port: int = ...,
    extra_env: dict[str, str] = ...,
    python: str = ...,
    entry: Literal["module", "script"] = ...,
    check_paths: bool = ...,
    allow_unsupported: bool = ...,
    wait_timeout_s: int = ...,
    ray_num_cpus: int | None = ...,
    ray_memory_gib: float | None = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m0.Result: ...
def choose_topology(
    *,
    config: str | None = ...,
    nodes: int | None = ...,
    gpus_per_node: int | None = ...,
    accelerator: Literal["GPU", "NPU"] = ...,
    cpus_per_node: float | None = ...,
    memory_gib_per_node: float | None = ...,
    use_cluster: bool = ...,
    ray_address: str | None = ...,
    ray_timeout_s: float = ...,
    model_path: str | None = ...,
    params_b: float | None = ...,
    max_prompt_len: int = ...,
    max_response_len: int = ...,
    pack_max_length: int | None = ...,
    prompt_repeat_k: int = ...,
    train_batch_size: int = ...,
    priority: Literal["simplicity", "throughput", "on_policy"] = ...,
    long_tail_responses: bool = ...,
    backend: Literal["lmdeploy", "sglang", "vllm"] = ...,
    topology: Literal["colocated_sync", "colocated_async", "disaggregated"] | None = ...,
    rollout_gpus: int | None = ...,
    tensor_parallel_size: int | None = ...,
    expert_parallel_size: int | None = ...,
    sp_size: int = ...,
    gpu_memory_gib: float | None = ...,
    gpu_memory_utilization: float | None = ...,
    sync_weights_interval: int = ...,
    total_train_steps: int = ...,
    enable_evaluate: bool = ...,
    evaluate_step: int | None = ...,
    checkpoint_interval: int | None = ...,
    hf_interval: int | None = ...,
    judger_cpu_workers: int = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m1.Result: ...
def lookup_reference(
    *,
    query: str,
    limit: int = ...,
    doc: str | None = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m2.Result: ...
def inspect_config(
    *,
    path: str,
    env: dict[str, str] | None = ...,
    env_file: str | None = ...,
    backend: Literal["lmdeploy", "sglang"] | None = ...,
    training_env: str | None = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m3.Result: ...
def probe_environment(
    *,
    checks: list[Literal["packages", "binaries", "env", "accelerators", "ray", "paths", "model", "backend", "gpu"]]
    | None = ...,
    ray_address: str | None = ...,
    timeout_s: float = ...,
    expected: _m5.Expected | Mapping[str, Any] | None = ...,
    env: dict[str, str] | None = ...,
    training_env: str | None = ...,
    run_interpreter: bool = ...,
    paths: list[str] = ...,
    model_path: str | None = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m4.Result: ...
def check_reward_data(
    *,
    path: str,
    role: Literal["train", "eval"] = ...,
    judger: Literal["gsm8k", "dapo_math", "geo3k", "generic", "auto"] = ...,
    max_examples_per_code: int = ...,
    max_line_bytes: int = ...,
    engine: Literal["local", "ray"] = ...,
    ray_address: str | None = ...,
    ray_timeout_s: float = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m6.Result: ...
def preflight(
    *,
    config: str,
    data_path: str | None = ...,
    eval_data_path: str | None = ...,
    backend: Literal["lmdeploy", "sglang", "vllm"] | None = ...,
    model_path: str | None = ...,
    work_dir: str | None = ...,
    num_workers: int | None = ...,
    ray_address: str | None = ...,
    env: dict[str, str] | None = ...,
    env_file: str | None = ...,
    probe_cluster: bool = ...,
    cluster: Literal["auto", "plan_starts_ray", "running"] = ...,
    training_env: str | None = ...,
    run_interpreter: bool = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m7.Result: ...
def diagnose_symptom(
    *,
    text: str | None = ...,
    log_path: str | None = ...,
    config_path: str | None = ...,
    data_path: str | None = ...,
    run_probes: bool = ...,
    max_findings: int = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m8.Result: ...
def inspect_run(
    *,
    path: str,
    experiment: str | None = ...,
    config: str | None = ...,
    first_step_grace_s: float = ...,
    ray_address: str | None = ...,
    ray_timeout_s: float = ...,
    picture: bool = ...,
    max_trajectory_files: int = ...,
    max_trajectory_mb: int = ...,
    detail: Literal["summary", "normal", "full"] = ...,
    roots: Sequence[str | os.PathLike[str]] | None = ...,
    deadline_s: float | None = ...,
) -> _m9.Result: ...
