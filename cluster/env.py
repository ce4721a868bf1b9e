"""The environment a run will meet: XTUNER_USE_* backend flags and the backend XTuner picks from them, other
XTUNER_* variables, RAY_ADDRESS, CUDA_VISIBLE_DEVICES and the WORK_DIR/MODEL_PATH/DATA_PATH/EVAL_DATA_PATH paths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from ..core import Finding, PathPolicy, cap
from .accelerators import visible_count
from .findings import probe_finding
from .paths import PathInfo, path_info
from .ray import SRC_RAY_INIT, classify_address

# XTuner sources (InternLM/xtuner@b934f46).
SRC_BACKEND_FLAGS = "xtuner/v1/rl/rollout/worker.py:457-470"
SRC_ROLLOUT_IMPORTS = "xtuner/v1/rl/rollout/__init__.py:7-12"
SRC_VLLM_TOPOLOGY = "xtuner/v1/rl/rollout/vllm.py:135-142"
SRC_EXAMPLE_ENV = "examples/v1/config/rl_grpo_gsm8k_judge.py:29-32"
SRC_DETERMINISTIC = "xtuner/v1/utils/misc.py:27"

Backend = Literal["lmdeploy", "sglang", "vllm"]
#: (backend, flag) in XTuner's precedence order: SGLang > vLLM > LMDeploy among the flags set to exactly '1'.
BACKEND_FLAGS: tuple[tuple[Backend, str], ...] = (
    ("sglang", "XTUNER_USE_SGLANG"),
    ("vllm", "XTUNER_USE_VLLM"),
    ("lmdeploy", "XTUNER_USE_LMDEPLOY"),
)
NO_BACKEND_MESSAGE = (
    "Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY to 1."
)
PATH_VARS: tuple[str, ...] = ("WORK_DIR", "MODEL_PATH", "DATA_PATH", "EVAL_DATA_PATH")


class FlagInfo(BaseModel):
    name: str
    value: str | None
    counts: bool = Field(description="True only when the value is exactly '1'")


class EnvReport(BaseModel):
    evaluated: Literal["server", "override"] = Field(description="Whose environment: the server's or the 'env' arg")
    backend_flags: list[FlagInfo]
    effective_backend: str | None = Field(description="XTuner's pick among flags == '1': SGLang > vLLM > LMDeploy")
    ignored_backends: list[str] = Field(default_factory=list, description="Flagged but losing to the effective one")
    ray_address: str | None = None
    ray_address_kind: str | None = Field(default=None, description="gcs, dashboard (http), ray_client, invalid")
    cuda_visible_devices: str | None = None
    fa3_flag: str | None = Field(default=None, description="XTUNER_USE_FA3 value")
    xtuner_vars: dict[str, str] = Field(
        default_factory=dict, description="Every XTUNER_* set (values cut at 200 chars)"
    )
    xtuner_vars_omitted: int = 0
    paths: list[PathInfo] = Field(default_factory=list, description="WORK_DIR, MODEL_PATH, DATA_PATH, EVAL_DATA_PATH")


def check_env(environ: Mapping[str, str], evaluated: Literal["server", "override"], policy: PathPolicy) -> EnvReport:
    flags = [FlagInfo(name=var, value=environ.get(var), counts=environ.get(var) == "1") for _, var in BACKEND_FLAGS]
    on: list[str] = [backend for (backend, _), flag in zip(BACKEND_FLAGS, flags, strict=True) if flag.counts]
    xt_vars, xt_omitted = cap(sorted((k, str(v)) for k, v in environ.items() if k.startswith("XTUNER_")), 100)
    address = environ.get("RAY_ADDRESS")
    kind = classify_address(address)[0] if address and address.strip().lower() not in ("auto", "local") else None
    return EnvReport(
        evaluated=evaluated,
        backend_flags=flags,
        effective_backend=on[0] if on else None,
        ignored_backends=on[1:],
        ray_address=address,
        ray_address_kind=kind,
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
        fa3_flag=environ.get("XTUNER_USE_FA3"),
        xtuner_vars={k: v[:200] for k, v in xt_vars},
        xtuner_vars_omitted=xt_omitted,
        paths=[path_info(policy, var, environ.get(var)) for var in PATH_VARS],
    )


def env_findings(env: EnvReport) -> list[Finding]:
    """Backend flags, RAY_ADDRESS, XTUNER_DETERMINISTIC, CUDA_VISIBLE_DEVICES and the path variables."""
    out = _backend_flag_findings(env)
    out += _ray_address_findings(env)
    det = env.xtuner_vars.get("XTUNER_DETERMINISTIC")
    if det is not None and det != "true" and det.strip().lower() in ("1", "true", "yes", "on"):
        out.append(
            probe_finding(
                "deterministic_flag_not_true",
                "warning",
                "other",
                f"XTUNER_DETERMINISTIC={det!r} does not enable deterministic mode: only the exact string 'true' does",
                "env-vars-reach-ray-workers",
                source=SRC_DETERMINISTIC,
                evidence=f"XTUNER_DETERMINISTIC={det!r}",
                fix="export XTUNER_DETERMINISTIC=true",
                owner="environment",
            )
        )
    cvd = env.cuda_visible_devices
    if cvd is not None and visible_count(cvd, None) == 0:
        out.append(
            probe_finding(
                "cuda_visible_devices_empty",
                "warning",
                "missing_env_var_or_path",
                f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU",
                "resource-checks",
                source="xtuner/v1/rl/utils/ray_accelerator_worker.py:104-112",
                evidence="a node started with it registers no GPUs unless --num-gpus is given",
                fix="Unset CUDA_VISIBLE_DEVICES or list the GPU ids, then restart Ray.",
                owner="environment",
            )
        )
    for p in env.paths:
        out.extend(_env_path_findings(p))
    return out


def _backend_flag_findings(env: EnvReport) -> list[Finding]:
    out: list[Finding] = []
    not_one = [f for f in env.backend_flags if f.value is not None and f.value.strip() != "" and not f.counts]
    for f in not_one:
        if f.value in ("0",):
            continue
        out.append(
            probe_finding(
                f"backend_flag_not_one.{f.name}",
                "warning",
                "backend_flag_missing_or_multiple",
                f"{f.name}={f.value!r} does not count: XTuner compares the value with the exact string '1'",
                "backend-flags",
                source=SRC_BACKEND_FLAGS,
                evidence=f"{f.name}={f.value!r}",
                fix=f"export {f.name}=1",
                owner="environment",
            )
        )
    if env.effective_backend is None:
        out.append(
            probe_finding(
                "backend_flag_missing",
                "blocker",
                "backend_flag_missing_or_multiple",
                "No rollout backend flag is set to 1: loading the config will fail",
                "backend-flags",
                source=SRC_BACKEND_FLAGS,
                evidence=f"XTuner will raise: AssertionError: {NO_BACKEND_MESSAGE}",
                fix="export exactly one of XTUNER_USE_LMDEPLOY=1 / XTUNER_USE_SGLANG=1 before `ray start` (workers "
                "inherit the environment of the raylet, not of the driver).",
                owner="environment",
            )
        )
    elif env.ignored_backends:
        out.append(
            probe_finding(
                "backend_flags_multiple",
                "warning",
                "backend_flag_missing_or_multiple",
                f"Several backend flags are 1: XTuner uses {env.effective_backend} and ignores "
                + ", ".join(env.ignored_backends),
                "backend-flags",
                source=SRC_BACKEND_FLAGS,
                evidence="precedence SGLang > vLLM > LMDeploy; every flagged backend module is still imported "
                f"({SRC_ROLLOUT_IMPORTS})",
                fix="Set only the flag of the backend you want to 1 and unset the others.",
                owner="environment",
            )
        )
    if env.effective_backend == "vllm":
        out.append(
            probe_finding(
                "backend_vllm_unsupported",
                "blocker",
                "backend_unsupported",
                "XTUNER_USE_VLLM=1: vLLM rollout cannot start at this XTuner version",
                "backend-support",
                source=SRC_VLLM_TOPOLOGY,
                evidence="XTuner raises NotImplementedError: vLLM rollout topology has not been verified after "
                "topology refactor.",
                fix="Use XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1.",
                owner="environment",
            )
        )
    return out


def _ray_address_findings(env: EnvReport) -> list[Finding]:
    out: list[Finding] = []
    if env.ray_address_kind == "dashboard":
        out.append(
            probe_finding(
                "ray_address_is_dashboard",
                "blocker",
                "ray_not_running",
                "RAY_ADDRESS is an http:// dashboard address: XTuner's ray.init(address='auto') rejects it",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence=f"RAY_ADDRESS={env.ray_address}; Ray: 'Invalid Ray address ... It looks like you set "
                "RAY_ADDRESS to an HTTP address'",
                fix="Unset RAY_ADDRESS on a Ray node, or set it to the GCS address <head>:6379. Keep the http URL "
                "only for `ray job submit --address`.",
                owner="launch_command",
            )
        )
    elif env.ray_address_kind in ("ray_client", "invalid"):
        out.append(
            probe_finding(
                "ray_address_unusual",
                "warning",
                "ray_not_running",
                f"RAY_ADDRESS={env.ray_address!r} is not a GCS host:port",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="ray:// goes through Ray Client; XTuner expects to run on a cluster node",
                fix="Run XTuner on a node of the cluster with RAY_ADDRESS unset or set to <head>:6379.",
                owner="launch_command",
            )
        )
    return out


def _env_path_findings(p: PathInfo) -> list[Finding]:
    if not p.set:
        return [
            probe_finding(
                f"env_unset.{p.name}",
                "warning" if p.name == "WORK_DIR" else "info",
                "missing_env_var_or_path",
                f"{p.name} is not set: the example RL configs read os.environ['{p.name}'] (KeyError when unset)",
                "env-vars-reach-ray-workers",
                source=SRC_EXAMPLE_ENV,
                fix=f"export {p.name}=<path> before loading a config that reads it (and before `ray start`).",
                owner="environment",
            )
        ]
    if p.exists is False and p.name != "WORK_DIR":
        return [
            probe_finding(
                f"env_path_missing.{p.name}",
                "blocker",
                "missing_env_var_or_path",
                f"{p.name} points to a path that does not exist",
                "env-vars-reach-ray-workers",
                source=SRC_EXAMPLE_ENV,
                evidence=f"{p.name}={p.value}",
                location=p.value,
                fix=f"Point {p.name} at an existing {'directory' if p.name == 'MODEL_PATH' else 'file'}.",
                owner="model_files" if p.name == "MODEL_PATH" else "data_preparation",
            )
        ]
    return []
