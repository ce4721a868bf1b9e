"""The launch plan for an XTuner V1 RL run: the env to export or unset (with why), the RL CLI argv, the ``ray start``
lines for the head and the other nodes, and the notes that go with them. It writes text; it never runs it.

The plan follows XTuner main@b934f46: the RL CLI connects to an already running Ray cluster, backend selection comes
only from ``XTUNER_USE_*`` env vars that Ray workers must inherit, and the CLI's exit handler force-stops Ray on the
node it ran on.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field

from ..cluster.env import BACKEND_FLAGS, SRC_BACKEND_FLAGS, Backend
from ..cluster.ray import SRC_RAY_INIT
from ..cluster.ray_findings import SRC_CLEANUP
from ..config_analysis.view import ConfigView
from ..core import ToolInputError
from .entry_point import RL_ENTRY_POINT
from .shell import check_env_name, check_program, check_value, safe_path_arg

Entry = Literal["module", "script"]
GIB = 1024**3

SRC_CLI_MAIN = "xtuner/v1/train/cli/rl.py:69-71"
SRC_RUN_RL = "examples/v1/scripts/run_rl.sh"

#: Backend -> its flag, in XTuner's precedence order.
FLAG_NAMES: dict[Backend, str] = dict(BACKEND_FLAGS)

#: Per-backend variables the upstream launch script sets (``run_rl.sh:62-73``): (name, value or None=unset, line).
BACKEND_ENV: dict[str, list[tuple[str, str | None, int]]] = {
    "sglang": [
        ("PYTORCH_CUDA_ALLOC_CONF", None, 64),
        ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1", 65),
        ("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "False", 66),
    ],
    "lmdeploy": [("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 69)],
    "vllm": [("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 73)],
}

#: Env names the plan owns; ``extra_env`` may not set them (pass the matching parameter instead).
OWNED_ENV: dict[str, str] = {
    "XTUNER_USE_SGLANG": "backend",
    "XTUNER_USE_VLLM": "backend",
    "XTUNER_USE_LMDEPLOY": "backend",
    "WORK_DIR": "work_dir",
    "MODEL_PATH": "model_path",
    "DATA_PATH": "data_path",
    "EVAL_DATA_PATH": "eval_data_path",
    "WORLD_SIZE": "nodes",
    "RAY_ADDRESS": "(none: the plan unsets it so the CLI attaches to the cluster it starts)",
}

PATH_ENV = {
    "work_dir": "WORK_DIR",
    "model_path": "MODEL_PATH",
    "data_path": "DATA_PATH",
    "eval_data_path": "EVAL_DATA_PATH",
}

_HOST_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


class LaunchRequest(Protocol):
    """What the plan is built from: build_rl_command's parameters."""

    config: str
    backend: Backend
    model_path: str | None
    data_path: str | None
    eval_data_path: str | None
    work_dir: str | None
    num_workers: int | None
    nodes: int
    gpus_per_node: int
    head_address: str | None
    ray_port: int
    extra_env: dict[str, str]
    python: str
    entry: Entry
    check_paths: bool
    allow_unsupported: bool
    wait_timeout_s: int
    ray_num_cpus: int | None
    ray_memory_gib: float | None


class RayStart(BaseModel):
    head: str = Field(description="Command that starts the Ray head (run on the head node)")
    head_argv: list[str]
    worker: str | None = Field(default=None, description="Command each other node runs to join (multi-node only)")
    worker_argv: list[str] | None = None
    worker_script: str | None = Field(
        default=None, description="Bash script for each other node: the exports, then join the head"
    )
    expected_gpus: int = Field(description="GPUs the head's wait loop requires: nodes × gpus_per_node")
    expected_cpus: int | None = Field(
        default=None, description="Ray CPUs the script waits for (XTuner's need), when known"
    )
    expected_memory_gib: float | None = Field(
        default=None, description="Ray memory (GiB) the script waits for, when known"
    )


def validate(params: LaunchRequest) -> None:
    """Refuse what cannot be rendered safely: bad values, names the plan owns, a bad or missing head address."""
    check_value(params.config, "config", max_chars=4096)
    for name in PATH_ENV:
        value = getattr(params, name)
        if value is not None:
            check_value(value, name, max_chars=4096)
    check_program(params.python, "python")
    for key, value in params.extra_env.items():
        check_env_name(key)
        if key in OWNED_ENV:
            raise ToolInputError(
                "env_conflict",
                f"extra_env sets {key}, which the plan sets itself",
                f"Use the `{OWNED_ENV[key]}` parameter instead of extra_env[{key!r}].",
            )
        check_value(value, f"extra_env[{key}]", allow_empty=True)
    if params.head_address is not None:
        host = check_value(params.head_address, "head_address", max_chars=253)
        if host.startswith("-") or not set(host) <= _HOST_OK:
            raise ToolInputError(
                "invalid_head_address",
                f"head_address {host!r} is not a host name or IPv4 address",
                "Pass the head node's host name or IPv4 address (IPv6 is not supported here).",
            )
    if params.nodes > 1 and not params.head_address:
        raise ToolInputError(
            "head_address_required",
            f"nodes={params.nodes} needs head_address: the other nodes join the head at head_address:ray_port",
            "Pass head_address (the head node's host name or IP) or set nodes=1.",
        )


def workers_passed(params: LaunchRequest, view: ConfigView, total: int) -> int | None:
    """The --num-workers value: none for a disaggregated config (the CLI ignores it), else the given or all GPUs."""
    if view.facts.trainer == "disaggregated":
        return None
    return params.num_workers if params.num_workers is not None else total


def plan_env(params: LaunchRequest) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Ordered exports, names to unset, and where each comes from."""
    env: dict[str, str] = {}
    unset: list[str] = []
    origin: dict[str, str] = {}
    flag = FLAG_NAMES[params.backend]
    for other in FLAG_NAMES.values():
        if other != flag:
            unset.append(other)
            origin[other] = (
                f"unset: a stale {other}=1 would win by precedence SGLang > vLLM > LMDeploy ({SRC_BACKEND_FLAGS})"
            )
    env[flag] = "1"
    origin[flag] = f"backend flag; only the exact value '1' counts ({SRC_BACKEND_FLAGS})"
    unset.append("RAY_ADDRESS")
    origin["RAY_ADDRESS"] = (
        f"unset: ray.init(address='auto') ({SRC_RAY_INIT}) would follow a stale RAY_ADDRESS to another cluster"
    )
    for name, value, line in BACKEND_ENV[params.backend]:
        if name in params.extra_env:
            continue
        if value is None:
            unset.append(name)
            origin[name] = f"unset for {params.backend}, as XTuner's launch script does ({SRC_RUN_RL}:{line})"
        else:
            env[name] = value
            origin[name] = f"set for {params.backend}, as XTuner's launch script does ({SRC_RUN_RL}:{line})"
    env["WORLD_SIZE"] = str(params.nodes)
    origin["WORLD_SIZE"] = (
        f"number of nodes, read by the example configs as NNODE (examples/v1/config/rl_grpo_gsm8k_judge.py:35; "
        f"{SRC_RUN_RL}:46)"
    )
    for pname, ename in PATH_ENV.items():
        value = getattr(params, pname)
        if value is not None:
            env[ename] = value
            origin[ename] = (
                f"`{pname}`; the example configs read os.environ[{ename!r}] while loading "
                "(examples/v1/config/rl_grpo_gsm8k_judge.py:29-32), even when --work-dir is passed"
            )
    for name, value in params.extra_env.items():
        env[name] = value
        origin[name] = "extra_env (caller)"
    return env, unset, origin


def rl_argv(params: LaunchRequest, passed_workers: int | None) -> list[str]:
    """The RL CLI command, one element per argument."""
    if params.entry == "module":
        argv = [params.python, "-m", RL_ENTRY_POINT]
    else:
        argv = [params.python, "xtuner/v1/train/cli/rl.py"]
    argv += ["--config", safe_path_arg(params.config)]
    if params.work_dir is not None:
        argv += ["--work-dir", safe_path_arg(params.work_dir)]
    if passed_workers is not None:
        argv += ["--num-workers", str(passed_workers)]
    return argv


def resource_flags(params: LaunchRequest) -> list[str]:
    """``--num-cpus`` / ``--memory`` (bytes) for every node, when the caller pins them."""
    flags = []
    if params.ray_num_cpus is not None:
        flags.append(f"--num-cpus={params.ray_num_cpus}")
    if params.ray_memory_gib is not None:
        flags.append(f"--memory={round(params.ray_memory_gib * GIB)}")
    return flags


def ray_start_argv(params: LaunchRequest) -> tuple[list[str], list[str] | None]:
    """``ray start`` for the head, and for the other nodes when there are any."""
    pinned = resource_flags(params)
    head_argv = ["ray", "start", "--head", f"--port={params.ray_port}", f"--num-gpus={params.gpus_per_node}", *pinned]
    worker_argv = None
    if params.nodes > 1:
        worker_argv = [
            "ray",
            "start",
            f"--address={params.head_address}:{params.ray_port}",
            f"--num-gpus={params.gpus_per_node}",
            *pinned,
        ]
    return head_argv, worker_argv


def launch_notes(params: LaunchRequest, view: ConfigView, total: int, passed: int | None) -> list[str]:
    """What the caller must know to run the plan."""
    notes = [
        "Nothing was executed: run `script` yourself on the head node.",
        "The env is exported before `ray start` because Ray workers inherit the raylet's environment, not the "
        "driver's; setting a backend flag only in the driver's shell fails inside the rollout actors.",
        f"When the RL CLI exits (normally, on error or on Ctrl-C/SIGTERM) its exit handler runs "
        f"`ray stop --force` on that node, stopping the head started by the script ({SRC_CLEANUP}; "
        f"registered in {SRC_CLI_MAIN}).",
        "The script does not stop an existing Ray instance; if `ray start --head` fails because one is running, "
        "stop it yourself first.",
        "Relative paths resolve against the directory the script is run from.",
    ]
    if params.nodes > 1:
        notes.append(
            f"Multi-node: run `ray_start.worker_script` on each of the other {params.nodes - 1} node(s) after the "
            f"head is up; the head's wait loop needs all {total} GPUs. Worker nodes keep their Ray running after "
            "the run; stop them yourself."
        )
    if params.entry == "script":
        notes.append(
            "entry=script: run from the XTuner repository root (the script path is relative) with XTuner "
            "installed (`pip install -e .`) or the repo root on PYTHONPATH."
        )
    if not view.read:
        notes.append(f"The config was not analysed statically: {view.unread_reason}.")
    if passed is None and view.facts.trainer == "disaggregated":
        notes.append(
            "Disaggregated config: --num-workers is not passed (the CLI ignores it); GPU counts come from "
            "train_resources and rollout_resources in the config."
        )
    elif passed is not None and view.facts.trainer == "unknown":
        notes.append(
            "The trainer type could not be determined statically; --num-workers only applies to "
            "RLColocateTrainerConfig and is ignored for RLDisaggregatedTrainerConfig."
        )
    return notes
