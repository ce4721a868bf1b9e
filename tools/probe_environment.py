"""probe_environment: live, read-only checks of packages, binaries, env vars, accelerators and the Ray cluster.

Half of the failures of an XTuner V1 RL run are environmental: no Ray cluster, too few free CPUs or too little Ray
memory for XTuner's own checks, no or several backend flags, a missing backend package, no ``otelcol`` while
tracing is on. This tool looks instead of guessing, and only looks: packages are found through their metadata (no
heavy import), the Ray cluster is read by ``ray_cluster.probe_cluster`` (no driver, no job, no files), and
``nvidia-smi`` is run with a timeout. Everything it says about XTuner cites ``InternLM/xtuner@b934f46``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from ..cluster.ray import SRC_PG_REUSE, SRC_RAY_INIT, RaySnapshot, classify_address, probe_cluster
from ..core import (
    DEFAULT_LIST_CAP,
    Detail,
    Finding,
    RunContext,
    ToolInputError,
    ToolResult,
    ToolSpec,
    cap,
    count_severities,
    dedupe_findings,
    params_model_config,
    sort_findings,
)
from ..xtuner_rules import resources as rr

REF = "xtuner-rl://references/cluster-and-backends"
GIB = 1024**3

Check = Literal["packages", "binaries", "env", "accelerators", "ray", "paths", "model", "backend", "gpu"]
ALL_CHECKS: tuple[str, ...] = ("packages", "binaries", "env", "accelerators", "ray", "paths", "model")
#: Names the failure-mode catalog uses in its confirm_with hints.
CHECK_ALIASES: dict[str, tuple[str, ...]] = {"backend": ("packages", "env"), "gpu": ("accelerators",)}

# XTuner sources (InternLM/xtuner@b934f46).
SRC_BACKEND_FLAGS = "xtuner/v1/rl/rollout/worker.py:457-470"
SRC_ROLLOUT_IMPORTS = "xtuner/v1/rl/rollout/__init__.py:7-12"
SRC_ENV_CHECK_IMPORTS = "xtuner/v1/utils/env_check.py:48-117"
SRC_WORKER_CLS = "xtuner/v1/rl/rollout/worker.py:68-85"
SRC_VLLM_TOPOLOGY = "xtuner/v1/rl/rollout/vllm.py:135-142"
SRC_VLLM_IMPORTS = "xtuner/v1/rl/rollout/vllm.py:11-14"
SRC_CLI_IMPORTS = "xtuner/v1/train/cli/rl.py:6-13"
SRC_CLI = "xtuner/v1/train/cli/rl.py:38-71"
SRC_FA3 = "xtuner/v1/ops/flash_attn/__init__.py:20-31"
SRC_OTELCOL = "xtuner/v1/rl/trace/runtime.py:165-169"
SRC_OTEL_PKGS = "xtuner/v1/rl/trace/otel_utils.py:19-26"
SRC_MATHRULER = "xtuner/v1/rl/judger/geo3k.py:20-22"
SRC_EXAMPLE_ENV = "examples/v1/config/rl_grpo_gsm8k_judge.py:29-32"
SRC_DETERMINISTIC = "xtuner/v1/utils/misc.py:27"
SRC_PG_CHECKS = "xtuner/v1/rl/utils/ray_accelerator_worker.py:94-122"
SRC_CLEANUP = "xtuner/v1/rl/utils/ray_utils.py:117-156"

BACKEND_FLAGS: tuple[tuple[str, str], ...] = (
    ("sglang", "XTUNER_USE_SGLANG"),
    ("vllm", "XTUNER_USE_VLLM"),
    ("lmdeploy", "XTUNER_USE_LMDEPLOY"),
)
NO_BACKEND_MESSAGE = (
    "Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY to 1."
)
PATH_VARS: tuple[str, ...] = ("WORK_DIR", "MODEL_PATH", "DATA_PATH", "EVAL_DATA_PATH")

#: (report name, distribution names to try, top-level module to locate, what XTuner uses it for)
PACKAGES: tuple[tuple[str, tuple[str, ...], str | None, str], ...] = (
    ("xtuner", ("xtuner",), "xtuner", "XTuner itself; V1 RL needs a source install (PyPI 0.2.0 has no xtuner/v1)"),
    ("ray", ("ray",), "ray", "cluster runtime; the RL CLI imports it at start"),
    ("lmdeploy", ("lmdeploy",), "lmdeploy", "rollout backend (XTUNER_USE_LMDEPLOY=1)"),
    ("sglang", ("sglang",), "sglang", "rollout backend (XTUNER_USE_SGLANG=1)"),
    ("vllm", ("vllm",), "vllm", "rollout backend (XTUNER_USE_VLLM=1; cannot start at this XTuner version)"),
    ("torch", ("torch",), "torch", "training; the RL CLI imports torch.distributed"),
    ("transformers", ("transformers",), "transformers", "tokenizers and model configs"),
    (
        "flash_attn_3",
        ("flash_attn_3", "flashattn-hopper"),
        "flash_attn_interface",
        "FlashAttention 3 (XTUNER_USE_FA3=1)",
    ),
    ("flash_attn", ("flash_attn",), "flash_attn", "FlashAttention 2 (default attention on CUDA)"),
    ("opentelemetry-sdk", ("opentelemetry-sdk",), None, "tracing (TraceConfig.enabled)"),
    (
        "opentelemetry-exporter-otlp-proto-grpc",
        ("opentelemetry-exporter-otlp-proto-grpc",),
        None,
        "tracing exporter (TraceConfig.enabled)",
    ),
    ("mathruler", ("mathruler",), "mathruler", "GEO3K judger"),
    ("pylatexenc", ("pylatexenc",), "pylatexenc", "GEO3K judger (with mathruler)"),
    ("cyclopts", ("cyclopts",), "cyclopts", "the RL CLI's argument parser"),
)
BACKEND_PACKAGE = {"lmdeploy": "lmdeploy", "sglang": "sglang", "vllm": "vllm"}
BINARIES: tuple[tuple[str, str], ...] = (
    ("ray", "starts the cluster (`ray start --head`) before XTuner connects"),
    ("otelcol-contrib", "OpenTelemetry collector XTuner starts when tracing is on (preferred)"),
    ("otelcol", "OpenTelemetry collector (fallback name)"),
    ("nvidia-smi", "lists NVIDIA GPUs"),
    ("npu-smi", "lists Ascend NPUs"),
)


# --------------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------------


class ExternalPoolSpec(BaseModel):
    model_config = params_model_config()

    name: str = Field(description="Pool name as XTuner registers it, e.g. 'judger:openai/gsm8k'")
    num_workers: int = Field(default=1, ge=1, le=100_000, description="Actors in the pool")
    num_cpus_per_worker: float = Field(default=1.0, gt=0, le=100_000, description="Ray CPUs per actor")
    cpu_memory_per_worker: int = Field(default=GIB, gt=0, description="Ray memory per actor, bytes (default 1 GiB)")


class Expected(BaseModel):
    """What the run will ask of Ray: XTuner's AcceleratorResourcesConfig fields (colocated: one group 'train')."""

    model_config = params_model_config()

    num_workers: int = Field(ge=1, le=100_000, description="AcceleratorResourcesConfig.num_workers (accelerators)")
    num_cpus_per_worker: float = Field(
        default=12.0, gt=0, le=100_000, description="Ray CPUs per worker; XTuner default 12"
    )
    cpu_memory_per_worker: int = Field(
        default=16 * GIB, gt=0, description="Ray memory per worker in bytes; XTuner default 16 GiB (17179869184)"
    )
    accelerator: Literal["GPU", "NPU"] = Field(default="GPU", description="Ray accelerator resource")
    num_accelerators_per_worker: float = Field(default=1.0, gt=0, le=64, description="Accelerators per bundle")
    rollout_num_workers: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Disaggregated runs only: workers of the second (rollout) group, checked after the train group",
    )
    external_pools: list[ExternalPoolSpec] = Field(
        default_factory=list,
        max_length=100,
        description="Judger / agent-loop cpu_resources pools; the 1-CPU rollout_controller pool is always added",
    )
    tracing: bool = Field(
        default=False, description="TraceConfig.enabled will be true: otelcol and OpenTelemetry packages are required"
    )


class Params(BaseModel):
    model_config = params_model_config()

    checks: list[Check] | None = Field(
        default=None,
        description="Subset of packages, binaries, env, accelerators, ray, paths, model (default: all). "
        "Aliases: backend = packages+env, gpu = accelerators.",
    )
    ray_address: str | None = Field(
        default=None,
        max_length=500,
        description="Ray GCS 'host:port' or dashboard 'http://host:8265'. Default: RAY_ADDRESS, then the local "
        "cluster's address file (<RAY_TMPDIR|TMPDIR|/tmp>/ray/ray_current_cluster).",
    )
    timeout_s: float = Field(
        default=5.0, ge=0.5, le=60, description="Upper bound for the Ray probe (dead or unroutable addresses too)"
    )
    expected: Expected | None = Field(
        default=None, description="Run shape to test against the cluster's available resources (the 'fit' section)"
    )
    env: dict[str, str] | None = Field(
        default=None,
        description="A planned environment to evaluate INSTEAD of the server's own (backend flags, paths, "
        "RAY_ADDRESS, CUDA_VISIBLE_DEVICES). Packages and binaries are always those of this server.",
    )
    paths: list[str] = Field(
        default_factory=list, max_length=50, description="Extra paths to check (exists, file or directory)"
    )
    model_path: str | None = Field(
        default=None, max_length=4096, description="Model directory to check for config.json (default: MODEL_PATH)"
    )
    detail: Detail = Field(default="normal", description="summary: findings only; normal: + sections; full: + all")

    @model_validator(mode="after")
    def _env_size(self) -> Params:
        if self.env is not None and len(self.env) > 2000:
            raise ValueError("env has more than 2000 variables")
        return self


# --------------------------------------------------------------------------------------------------------
# Result sections
# --------------------------------------------------------------------------------------------------------


class PackageInfo(BaseModel):
    name: str
    installed: bool
    version: str | None = None
    distribution: str | None = Field(default=None, description="Distribution the version came from")
    module_found: bool | None = Field(default=None, description="Top-level module importable (found, not imported)")
    purpose: str = ""


class PackagesReport(BaseModel):
    items: list[PackageInfo]
    xtuner_location: str | None = Field(default=None, description="Directory of the xtuner package, if found")
    xtuner_v1_rl_cli: bool | None = Field(
        default=None, description="xtuner/v1/train/cli/rl.py exists in the installed xtuner (None: xtuner absent)"
    )


class BinaryInfo(BaseModel):
    name: str
    path: str | None
    purpose: str


class FlagInfo(BaseModel):
    name: str
    value: str | None
    counts: bool = Field(description="True only when the value is exactly '1'")


class PathInfo(BaseModel):
    name: str = Field(description="Env var name or 'path[i]' / 'model_path'")
    value: str | None
    set: bool
    checkable: bool = Field(description="False when the path is outside the server's allowed roots")
    exists: bool | None = None
    kind: Literal["file", "dir"] | None = None
    error: str = ""


class EnvReport(BaseModel):
    evaluated: Literal["server", "override"] = Field(description="Whose environment: the server's or the 'env' arg")
    backend_flags: list[FlagInfo]
    effective_backend: str | None = Field(description="What XTuner picks: SGLang > vLLM > LMDeploy among flags == '1'")
    ignored_backends: list[str] = Field(default_factory=list, description="Flagged but losing to the effective one")
    ray_address: str | None = None
    ray_address_kind: str | None = Field(default=None, description="gcs, dashboard (http), ray_client, invalid")
    cuda_visible_devices: str | None = None
    fa3_flag: str | None = Field(default=None, description="XTUNER_USE_FA3 value")
    xtuner_vars: dict[str, str] = Field(
        default_factory=dict, description="Every XTUNER_* variable that is set (values cut at 200 characters)"
    )
    xtuner_vars_omitted: int = 0
    paths: list[PathInfo] = Field(default_factory=list, description="WORK_DIR, MODEL_PATH, DATA_PATH, EVAL_DATA_PATH")


class GpuInfo(BaseModel):
    index: int
    name: str
    memory_total_mib: int | None = None


class AcceleratorsReport(BaseModel):
    nvidia_smi: str | None
    npu_smi: str | None
    gpus: list[GpuInfo] = Field(default_factory=list)
    cuda_visible_devices: str | None = None
    visible_count: int | None = Field(default=None, description="GPUs visible after CUDA_VISIBLE_DEVICES, if known")
    error: str = ""


class FitReport(BaseModel):
    ok: bool | None = Field(description="All XTuner checks pass against available resources (None: not evaluated)")
    rows: list[rr.FitRow] = Field(default_factory=list)
    min_cluster_cpus: float | None = None
    min_cluster_memory_gib: float | None = None
    note: str = ""


class ModelReport(BaseModel):
    path: str | None
    checkable: bool = Field(description="False when outside the server's allowed roots (not read)")
    exists: bool | None = None
    config_json: bool | None = None
    model_type: str | None = None
    architectures: list[str] = Field(default_factory=list)
    error: str = ""


class Result(ToolResult):
    checks_run: list[str]
    counts: dict[str, int] = Field(description="Findings per severity")
    findings: list[Finding]
    findings_omitted: int = 0
    packages: PackagesReport | None = None
    binaries: list[BinaryInfo] | None = None
    env: EnvReport | None = None
    accelerators: AcceleratorsReport | None = None
    ray: RaySnapshot | None = None
    fit: FitReport | None = None
    model: ModelReport | None = None
    paths: list[PathInfo] | None = None
    elapsed_s: float = 0.0


# --------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------


def _finding(
    id: str, severity: str, category: str, title: str, anchor: str, *, source: str | None = None, **kw: str
) -> Finding:
    return Finding(
        id=f"probe.{id}",
        severity=severity,  # type: ignore[arg-type]
        category=category,  # type: ignore[arg-type]
        title=title,
        reference=f"{REF}#{anchor}" if anchor else "",
        source=source,
        **kw,  # type: ignore[arg-type]
    )


def _dist_version(names: tuple[str, ...]) -> tuple[str | None, str | None]:
    for name in names:
        try:
            return importlib.metadata.version(name), name
        except importlib.metadata.PackageNotFoundError:
            continue
        except Exception:  # broken metadata must not break the probe
            continue
    return None, None


def _module_location(module: str) -> tuple[bool, str | None]:
    """Find a top-level module without importing it; return (found, package directory)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False, None
    if spec is None:
        return False, None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return True, locations[0]
    return True, os.path.dirname(spec.origin) if spec.origin else None


def check_packages() -> PackagesReport:
    items: list[PackageInfo] = []
    xtuner_dir: str | None = None
    for name, dists, module, purpose in PACKAGES:
        version, dist = _dist_version(dists)
        found: bool | None = None
        if module:
            found, where = _module_location(module)
            if name == "xtuner" and found:
                xtuner_dir = where
        items.append(
            PackageInfo(
                name=name,
                installed=bool(version) or bool(found),
                version=version,
                distribution=dist,
                module_found=found,
                purpose=purpose,
            )
        )
    cli: bool | None = None
    if xtuner_dir:
        cli = os.path.isfile(os.path.join(xtuner_dir, "v1", "train", "cli", "rl.py"))
    return PackagesReport(items=items, xtuner_location=xtuner_dir, xtuner_v1_rl_cli=cli)


def check_binaries() -> list[BinaryInfo]:
    return [BinaryInfo(name=n, path=shutil.which(n), purpose=p) for n, p in BINARIES]


def _path_info(ctx: RunContext, name: str, value: str | None) -> PathInfo:
    if value is None or not value.strip():
        return PathInfo(name=name, value=value, set=False, checkable=False)
    try:
        real = ctx.paths.check(value, kind="any", what=name)
    except ToolInputError as exc:
        if exc.code == "path_not_found":
            return PathInfo(name=name, value=value, set=True, checkable=True, exists=False, error=exc.message)
        if exc.code == "path_outside_roots":
            return PathInfo(
                name=name,
                value=value,
                set=True,
                checkable=False,
                error="outside the server's allowed roots: not checked (start the server with --allow-root)",
            )
        return PathInfo(name=name, value=value, set=True, checkable=True, exists=None, error=exc.message)
    return PathInfo(
        name=name, value=value, set=True, checkable=True, exists=True, kind="dir" if real.is_dir() else "file"
    )


def check_env(environ: Mapping[str, str], evaluated: Literal["server", "override"], ctx: RunContext) -> EnvReport:
    flags = [FlagInfo(name=var, value=environ.get(var), counts=environ.get(var) == "1") for _, var in BACKEND_FLAGS]
    on = [backend for (backend, _), flag in zip(BACKEND_FLAGS, flags, strict=True) if flag.counts]
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
        paths=[_path_info(ctx, var, environ.get(var)) for var in PATH_VARS],
    )


def _visible_count(cvd: str | None, physical: int | None) -> int | None:
    if cvd is None:
        return physical
    ids = [x for x in cvd.split(",") if x.strip()]
    # CUDA stops at the first invalid entry; '-1' or empty hides every device.
    count = 0
    for x in ids:
        if x.strip().startswith("-"):
            break
        count += 1
    return count if physical is None else min(count, physical)


def check_accelerators(environ: Mapping[str, str], timeout: float) -> AcceleratorsReport:
    smi = shutil.which("nvidia-smi")
    report = AcceleratorsReport(
        nvidia_smi=smi, npu_smi=shutil.which("npu-smi"), cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES")
    )
    physical: int | None = None
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=max(0.5, timeout),
                stdin=subprocess.DEVNULL,
            )
            if out.returncode == 0:
                for line in out.stdout.splitlines()[:256]:
                    parts = [p.strip() for p in line.split(",")]
                    if len(parts) >= 3 and parts[0].isdigit():
                        mem = int(parts[2]) if parts[2].isdigit() else None
                        report.gpus.append(GpuInfo(index=int(parts[0]), name=parts[1], memory_total_mib=mem))
                physical = len(report.gpus)
            else:
                report.error = f"nvidia-smi exit {out.returncode}: {(out.stderr or out.stdout).strip()[:300]}"
        except subprocess.TimeoutExpired:
            report.error = f"nvidia-smi did not answer within {timeout:.1f}s"
        except OSError as exc:
            report.error = f"nvidia-smi could not run: {exc}"
    report.visible_count = _visible_count(report.cuda_visible_devices, physical)
    return report


def check_model(ctx: RunContext, raw: str | None) -> ModelReport:
    if raw is None or not raw.strip():
        return ModelReport(path=raw, checkable=False, error="no model path (pass model_path or set MODEL_PATH)")
    try:
        real = ctx.paths.check(raw, kind="dir", what="model path")
    except ToolInputError as exc:
        if exc.code == "path_outside_roots":
            return ModelReport(path=raw, checkable=False, error="outside the server's allowed roots: not checked")
        exists = False if exc.code == "path_not_found" else None
        return ModelReport(path=raw, checkable=True, exists=exists, error=exc.message)
    try:
        cfg = ctx.paths.check(str(real / "config.json"), kind="file", what="config.json")
    except ToolInputError as exc:
        return ModelReport(path=raw, checkable=True, exists=True, config_json=False, error=exc.message)
    import json

    if cfg.stat().st_size > 4 * 1024 * 1024:
        return ModelReport(
            path=raw, checkable=True, exists=True, config_json=True, error="config.json is larger than 4 MiB"
        )
    try:
        data = json.loads(cfg.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        return ModelReport(
            path=raw, checkable=True, exists=True, config_json=True, error=f"config.json is not valid JSON: {exc}"
        )
    if not isinstance(data, dict):
        return ModelReport(
            path=raw, checkable=True, exists=True, config_json=True, error="config.json is not a JSON object"
        )
    archs = data.get("architectures")
    return ModelReport(
        path=raw,
        checkable=True,
        exists=True,
        config_json=True,
        model_type=str(data["model_type"]) if data.get("model_type") is not None else None,
        architectures=[str(a) for a in archs[:8]] if isinstance(archs, list) else [],
    )


def evaluate_fit(expected: Expected, snap: RaySnapshot | None) -> FitReport:
    """XTuner's resource checks (resource_rules) against what the cluster has available now."""
    groups = [
        rr.accelerator_pg_requirements(
            expected.num_workers,
            expected.num_cpus_per_worker,
            expected.cpu_memory_per_worker,
            expected.accelerator,
            expected.num_accelerators_per_worker,
            name="train",
        )
    ]
    if expected.rollout_num_workers:
        groups.append(
            rr.accelerator_pg_requirements(
                expected.rollout_num_workers,
                expected.num_cpus_per_worker,
                expected.cpu_memory_per_worker,
                expected.accelerator,
                expected.num_accelerators_per_worker,
                name="rollout",
            )
        )
    pools = [rr.rollout_controller_pool()] + [
        rr.external_pool(p.name, p.num_workers, p.num_cpus_per_worker, p.cpu_memory_per_worker)
        for p in expected.external_pools
    ]
    req = rr.ray_requirements(groups, pools)
    report = FitReport(
        ok=None, min_cluster_cpus=req.min_cluster_cpus, min_cluster_memory_gib=req.min_cluster_memory_gib
    )
    if snap is None or not snap.reachable or snap.auth_required or not snap.total:
        report.note = "no readable Ray cluster: only the minimum idle-cluster figures are given"
        return report
    if not snap.available:
        report.note = "the cluster's available resources could not be read"
        return report
    acc = expected.accelerator
    cluster = rr.ClusterCapacity(
        accelerator=acc,
        accelerators_total=snap.total.get(acc, 0.0),
        cpus_total=snap.total.get("CPU", 0.0),
        memory_total_bytes=snap.total.get("memory", 0.0),
        # Ray omits resources that are fully used: absent means 0 available.
        accelerators_available=snap.available.get(acc, 0.0),
        cpus_available=snap.available.get("CPU", 0.0),
        memory_available_bytes=snap.available.get("memory", 0.0),
        # Per-node totals, as XTuner's external-pool check takes them (ray_cpu_worker.py:574-593).
        nodes=[
            rr.NodeCapacity(
                accelerators=n.total.get(acc, 0.0),
                cpus=n.total.get("CPU", 0.0),
                memory_bytes=n.total.get("memory", 0.0),
            )
            for n in snap.nodes
        ],
    )
    report.rows = rr.check_fit(req, cluster)
    report.ok = rr.fits(report.rows)
    report.note = (
        "accelerator-group rows use the cluster's available resources now, as XTuner's check does; "
        "external-pool and per-node rows use totals minus what the new groups reserve"
    )
    return report


# --------------------------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------------------------


def _package(report: PackagesReport, name: str) -> PackageInfo | None:
    return next((p for p in report.items if p.name == name), None)


def package_findings(report: PackagesReport, env: EnvReport | None, expected: Expected | None) -> list[Finding]:
    out: list[Finding] = []
    xt = _package(report, "xtuner")
    if xt is not None and not xt.installed:
        out.append(
            _finding(
                "xtuner_not_installed",
                "info",
                "missing_env_var_or_path",
                "xtuner is not importable in this server's Python",
                "ray-preparation",
                source=SRC_CLI_IMPORTS,
                evidence="no 'xtuner' distribution or module found",
                fix="Install XTuner V1 from source in the training environment: git clone https://github.com/InternLM/"
                "xtuner && pip install -e '.[rl]'. Ignore this if the run uses another Python than this server.",
                owner="backend_install",
            )
        )
    elif report.xtuner_v1_rl_cli is False:
        out.append(
            _finding(
                "xtuner_without_v1",
                "blocker",
                "missing_env_var_or_path",
                "The installed xtuner has no V1 RL CLI (xtuner/v1/train/cli/rl.py) - PyPI's xtuner 0.2.0 has no V1",
                "ray-preparation",
                source=SRC_CLI,
                evidence=f"xtuner {xt.version if xt else '?'} at {report.xtuner_location}: v1/train/cli/rl.py missing",
                fix="pip uninstall xtuner, then install from source: git clone https://github.com/InternLM/xtuner && "
                "pip install -e '.[rl]'.",
                owner="backend_install",
            )
        )
    training_env = bool(xt and xt.installed)
    for name, sev in (("ray", "warning"), ("cyclopts", "info"), ("torch", "info")):
        p = _package(report, name)
        if p is not None and not p.installed:
            out.append(
                _finding(
                    f"{name}_not_installed",
                    sev,
                    "missing_env_var_or_path",
                    f"{name} is not installed in this server's Python (the RL CLI imports it at start)",
                    "ray-preparation",
                    source=SRC_CLI_IMPORTS,
                    evidence=f"no '{name}' distribution or module found",
                    fix=f"pip install {name if name != 'ray' else 'ray[default]'} in the training environment "
                    "(ignore if the run uses another Python than this server).",
                    owner="backend_install",
                )
            )
    if env is not None:
        for backend, var in BACKEND_FLAGS:
            flag = next(f for f in env.backend_flags if f.name == var)
            pkg = _package(report, BACKEND_PACKAGE[backend])
            if flag.counts and pkg is not None and not pkg.installed:
                where = {
                    "lmdeploy": "env_check imports it on the driver at trainer start, the rollout worker imports it",
                    "sglang": "the rollout worker and env_check import it",
                    "vllm": "importing xtuner.v1.rl.rollout already imports vllm",
                }[backend]
                out.append(
                    _finding(
                        f"backend_not_installed.{backend}",
                        "blocker" if training_env else "warning",
                        "backend_not_installed",
                        f"{var}=1 but the '{backend}' package is not installed",
                        "backend-support",
                        source=SRC_VLLM_IMPORTS if backend == "vllm" else SRC_ENV_CHECK_IMPORTS,
                        evidence=f"{var}=1; {where}; no '{backend}' distribution found in this server's Python"
                        + ("" if training_env else " (which has no xtuner either, so it may not be the training one)"),
                        fix=f"Install {backend} in the environment Ray workers run in (e.g. pip install -r "
                        f"requirements/{backend}.txt), or set {var} to 0 and flag an installed backend.",
                        owner="backend_install",
                    )
                )
        fa3 = _package(report, "flash_attn_3")
        if env.fa3_flag == "1" and fa3 is not None and not fa3.installed:
            out.append(
                _finding(
                    "fa3_missing",
                    "blocker" if training_env else "warning",
                    "backend_not_installed",
                    "XTUNER_USE_FA3=1 but FlashAttention 3 (module flash_attn_interface) is not installed",
                    "env-vars-reach-ray-workers",
                    source=SRC_FA3,
                    evidence="on CUDA XTuner raises: Import FlashAttention 3 failed ..., Please install it manually.",
                    fix="Install FlashAttention 3 (hopper build providing flash_attn_interface) or set XTUNER_USE_FA3=0 "
                    "(run_rl.sh defaults it to 1).",
                    owner="backend_install",
                )
            )
    tracing = expected.tracing if expected else False
    missing_otel = [
        n
        for n in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc")
        if (p := _package(report, n)) is not None and not p.installed
    ]
    if missing_otel:
        out.append(
            _finding(
                "otel_packages_missing",
                "blocker" if tracing else "info",
                "debug_trace_output",
                "OpenTelemetry packages for XTuner tracing are missing: " + ", ".join(missing_otel),
                "tracing-requirements",
                source=SRC_OTEL_PKGS,
                evidence="tracing planned" if tracing else "only needed when TraceConfig(enabled=True)",
                fix="pip install " + " ".join(missing_otel),
                owner="backend_install",
            )
        )
    return out


def binary_findings(binaries: list[BinaryInfo], expected: Expected | None) -> list[Finding]:
    found = {b.name: b.path for b in binaries}
    out: list[Finding] = []
    if not found.get("otelcol-contrib") and not found.get("otelcol"):
        tracing = expected.tracing if expected else False
        out.append(
            _finding(
                "otelcol_missing",
                "blocker" if tracing else "info",
                "debug_trace_output",
                "No otelcol-contrib or otelcol binary on PATH (XTuner tracing starts one)",
                "tracing-requirements",
                source=SRC_OTELCOL,
                evidence="tracing planned" if tracing else "only needed when TraceConfig(enabled=True)",
                fix="Install an official OpenTelemetry Collector binary (otelcol-contrib) on PATH, e.g. with "
                "recipe/trace/scripts/install_otel_tools.sh, or leave tracing off.",
                owner="environment",
            )
        )
    if not found.get("ray"):
        out.append(
            _finding(
                "ray_cli_missing",
                "warning",
                "ray_not_running",
                "The `ray` command is not on PATH: this environment cannot start a cluster",
                "ray-preparation",
                source=SRC_RAY_INIT,
                fix="pip install 'ray[default]' and start the head with `ray start --head` before launching XTuner.",
                owner="cluster_setup",
            )
        )
    return out


def env_findings(env: EnvReport) -> list[Finding]:
    out: list[Finding] = []
    not_one = [f for f in env.backend_flags if f.value is not None and f.value.strip() != "" and not f.counts]
    for f in not_one:
        if f.value in ("0",):
            continue
        out.append(
            _finding(
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
            _finding(
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
            _finding(
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
            _finding(
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
    if env.ray_address_kind == "dashboard":
        out.append(
            _finding(
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
            _finding(
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
    det = env.xtuner_vars.get("XTUNER_DETERMINISTIC")
    if det is not None and det != "true" and det.strip().lower() in ("1", "true", "yes", "on"):
        out.append(
            _finding(
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
    if cvd is not None and _visible_count(cvd, None) == 0:
        out.append(
            _finding(
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


def _env_path_findings(p: PathInfo) -> list[Finding]:
    if not p.set:
        return [
            _finding(
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
            _finding(
                f"env_path_missing.{p.name}",
                "blocker",
                "missing_env_var_or_path",
                f"{p.name} points to a path that does not exist",
                "env-vars-reach-ray-workers",
                source=SRC_EXAMPLE_ENV,
                evidence=f"{p.name}={p.value}",
                fix=f"Point {p.name} at an existing {'directory' if p.name == 'MODEL_PATH' else 'file'}.",
                owner="model_files" if p.name == "MODEL_PATH" else "data_preparation",
            )
        ]
    return []


def ray_findings(snap: RaySnapshot, expected: Expected | None) -> list[Finding]:
    out: list[Finding] = []
    res = snap.resolution
    if snap.auth_required:
        out.append(
            _finding(
                "ray_auth_required",
                "blocker",
                "ray_not_running",
                f"Ray at {snap.gcs_address or snap.dashboard_url} is running but requires token authentication",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="; ".join(snap.errors)[:600],
                fix=snap.auth_hint,
                owner="cluster_setup",
            )
        )
        return out
    if not snap.reachable:
        no_address = res.kind == "none"
        out.append(
            _finding(
                "ray_not_running" if no_address else "ray_unreachable",
                "blocker",
                "ray_not_running",
                "No running Ray cluster found"
                if no_address
                else f"Ray at {res.address} ({res.source}) cannot be reached",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="; ".join(snap.errors + snap.notes)[:600],
                fix="Start the cluster first (`ray start --head --num-gpus=<n>` on the head, `ray start --address="
                "<head>:6379` on the others), from the environment with XTUNER_USE_* exported; XTuner connects "
                "with ray.init(address='auto') and never starts one.",
                owner="cluster_setup",
            )
        )
        return out
    if snap.method == "none":
        return out
    if snap.version_mismatch:
        out.append(
            _finding(
                "ray_version_mismatch",
                "warning",
                "ray_not_running",
                "Ray/Python versions differ between this environment and the cluster: "
                + "; ".join(snap.version_mismatch),
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence="ray.init refuses a cluster started with another Ray version (and, by default, another "
                "Python patch version)",
                fix="Launch XTuner from an environment with the cluster's Ray and Python versions (or restart the "
                "cluster from the training environment).",
                owner="cluster_setup",
            )
        )
    if res.kind == "dashboard":
        out.append(
            _finding(
                "ray_read_via_dashboard",
                "info",
                "other",
                "Cluster read through the dashboard HTTP API (an http address is not a GCS address)",
                "ray-preparation",
                source=SRC_RAY_INIT,
                evidence=res.note,
                fix="Give XTuner's driver the GCS address (<head>:6379) or run it on a cluster node.",
                owner="launch_command",
            )
        )
    for pg in snap.placement_groups:
        out.extend(_pg_findings(pg, expected))
    return out


def cluster_context_findings(snap: RaySnapshot, env: EnvReport | None) -> list[Finding]:
    """Notes that only matter once a cluster is up: env propagation and XTuner's exit handler."""
    if not snap.reachable or snap.auth_required or snap.method == "none":
        return []
    out: list[Finding] = []
    if env is not None and env.effective_backend:
        out.append(
            _finding(
                "env_must_precede_ray_start",
                "info",
                "missing_env_var_or_path",
                "The cluster is already up: XTuner reads the backend flag inside Ray actors, which see the "
                "environment of `ray start`, not of the launching shell",
                "env-vars-reach-ray-workers",
                source=SRC_BACKEND_FLAGS,
                evidence=f"effective backend here: {env.effective_backend} ({env.evaluated} environment)",
                fix="Make sure the same XTUNER_USE_* (and WORK_DIR, MODEL_PATH, ...) were exported before `ray start` "
                "on every node, or pass them in the job's runtime_env; restart Ray after changing them.",
                owner="cluster_setup",
            )
        )
    local = snap.resolution.source == "address_file" or (snap.gcs_address or "").startswith(("127.", "localhost"))
    if local:
        out.append(
            _finding(
                "exit_handler_stops_ray",
                "info",
                "ray_not_running",
                "Launching XTuner on this node stops its Ray processes when the run exits (ray stop --force)",
                "exit-handler-stops-ray",
                source=SRC_CLEANUP,
                evidence=f"local cluster at {snap.gcs_address}",
                fix="Expect to `ray start` again after each run on this node (the head included).",
                owner="cluster_setup",
            )
        )
    return out


def _pg_findings(pg, expected: Expected | None) -> list[Finding]:
    out: list[Finding] = []
    shape = f"{len(pg.bundles)} bundles {pg.bundles[:1]}, strategy {pg.strategy}, state {pg.state}"
    if pg.state != "CREATED":
        infeasible = pg.scheduling_state == "INFEASIBLE"
        out.append(
            _finding(
                f"pg_{'infeasible' if infeasible else 'pending'}.{pg.name or pg.pg_id[:12]}",
                "warning",
                "ray_resources_insufficient",
                f"Placement group '{pg.name or pg.pg_id}' is {pg.state}"
                + (" and INFEASIBLE: no node shape can ever hold it" if infeasible else f" ({pg.scheduling_state})"),
                "resource-checks",
                source="xtuner/v1/rl/utils/ray_accelerator_worker.py:306-307",
                evidence=shape,
                fix="Remove the stuck group (end its driver or ray.util.remove_placement_group) or add resources; "
                "XTuner waits 30 s for its own group to be ready and then fails with GetTimeoutError.",
                location=pg.pg_id,
                owner="cluster_setup",
            )
        )
    if pg.xtuner_name:
        mismatch = ""
        if expected and pg.name == "train":
            want = {"CPU": expected.num_cpus_per_worker, "memory": float(expected.cpu_memory_per_worker)}
            want[expected.accelerator] = expected.num_accelerators_per_worker
            if len(pg.bundles) != expected.num_workers or any(b != want for b in pg.bundles):
                mismatch = f"; expected {expected.num_workers} bundles of {want}"
        out.append(
            _finding(
                f"pg_reused.{pg.name}",
                "blocker" if mismatch else "warning",
                "resource_mismatch_num_workers",
                f"A placement group named '{pg.name}' already exists: XTuner will reuse it without checking its shape",
                "placement-group-reuse",
                source=SRC_PG_REUSE,
                evidence=shape + mismatch,
                fix="Remove the leftover group (stop the job that holds it, or ray.util.remove_placement_group) or "
                "restart the cluster before launching; its bundles, not your config, decide the worker layout.",
                location=pg.pg_id,
                owner="cluster_setup",
            )
        )
    return out


def fit_findings(fit: FitReport) -> list[Finding]:
    out: list[Finding] = []
    for row in fit.rows:
        if row.ok:
            continue
        is_pool = row.check.startswith("external")
        out.append(
            _finding(
                "fit_external_pools" if is_pool else f"fit_{row.resource.lower()}",
                "blocker",
                "ray_resources_insufficient",
                f"{row.check}: needs {row.needed:g}, cluster has {row.available:g} available",
                "external-cpu-pools" if is_pool else "resource-checks",
                source=row.source,
                evidence=row.xtuner_message.splitlines()[0] if row.xtuner_message else "",
                fix="Lower num_workers / num_cpus_per_worker / cpu_memory_per_worker, free resources held by other "
                "jobs or placement groups, or start Ray with more --num-cpus / --memory (both are logical).",
                location=row.check,
                owner="cluster_setup",
            )
        )
    return out


def model_findings(model: ModelReport, from_env: bool) -> list[Finding]:
    if not model.checkable or model.path is None:
        return []
    if model.exists is False:
        if from_env:
            return []  # already reported as probe.env_path_missing.MODEL_PATH
        return [
            _finding(
                "model_path_missing",
                "blocker",
                "missing_env_var_or_path",
                "The model path does not exist",
                "",
                evidence=model.error,
                location=model.path,
                fix="Pass an existing Hugging Face model directory.",
                owner="model_files",
            ).model_copy(update={"reference": "xtuner-rl://failure-modes/path_not_found"})
        ]
    if model.config_json is not True or model.error:
        return [
            _finding(
                "model_config_missing",
                "blocker",
                "model_loading",
                "The model path is not a Hugging Face model directory (config.json missing or unreadable)",
                "",
                source="xtuner/v1/train/rl_trainer.py:622-625",
                evidence=f"{model.path}: {model.error}",
                fix="Point MODEL_PATH / hf_checkpoint at a directory with config.json and the weights.",
                owner="model_files",
            ).model_copy(update={"reference": "xtuner-rl://failure-modes/load_from_not_hf"})
        ]
    return []


def accelerator_findings(acc: AcceleratorsReport) -> list[Finding]:
    if acc.gpus or acc.npu_smi:
        return []
    return [
        _finding(
            "no_local_accelerators",
            "info",
            "missing_env_var_or_path",
            "No GPU or NPU visible on this machine (the cluster's nodes may still have them)",
            "resource-checks",
            source=SRC_PG_CHECKS,
            evidence=acc.error or ("0 GPUs listed by nvidia-smi" if acc.nvidia_smi else "nvidia-smi/npu-smi not found"),
            fix="Check the Ray nodes' GPU counts in the 'ray' section; each node registers what it sees (or "
            "--num-gpus).",
            owner="cluster_setup",
        )
    ]


# --------------------------------------------------------------------------------------------------------
# Tool
# --------------------------------------------------------------------------------------------------------


def _selected(checks: list[str] | None) -> list[str]:
    if not checks:
        return list(ALL_CHECKS)
    wanted: set[str] = set()
    for c in checks:
        wanted.update(CHECK_ALIASES.get(c, (c,)))
    return [c for c in ALL_CHECKS if c in wanted]


def _summary(result: Result) -> str:
    c = result.counts
    parts = [f"{c['blocker']} blocker(s), {c['warning']} warning(s)"]
    if result.env is not None:
        parts.append(f"backend {result.env.effective_backend or 'none'}")
    if result.ray is not None:
        r = result.ray
        if r.auth_required:
            parts.append("Ray: auth required")
        elif r.reachable and r.method != "none":
            parts.append(
                f"Ray {r.cluster_ray_version or '?'}: {len(r.nodes) + r.nodes_omitted} node(s), "
                f"GPU {r.available.get('GPU', 0):g}/{r.total.get('GPU', 0):g} free, "
                f"CPU {r.available.get('CPU', 0):g}/{r.total.get('CPU', 0):g} free"
            )
        else:
            parts.append("Ray: not reachable")
    if result.fit is not None and result.fit.ok is not None:
        parts.append("fit: ok" if result.fit.ok else "fit: FAILS")
    first = next((f for f in result.findings if f.severity == "blocker"), None)
    if first:
        parts.append(f"first blocker: {first.title}")
    return "; ".join(parts)


def run(params: Params, ctx: RunContext) -> Result:
    start = time.monotonic()
    checks = _selected(params.checks)
    environ: Mapping[str, str] = params.env if params.env is not None else ctx.environ
    evaluated: Literal["server", "override"] = "override" if params.env is not None else "server"
    total = len(checks)
    findings: list[Finding] = []
    res = Result(summary="", checks_run=checks, counts={}, findings=[])
    step = 0

    def progress(msg: str) -> None:
        nonlocal step
        step += 1
        ctx.progress(step, total, msg)

    if "env" in checks or "packages" in checks:
        res.env = check_env(environ, evaluated, ctx)
    if "packages" in checks:
        res.packages = check_packages()
        findings += package_findings(res.packages, res.env, params.expected)
        progress("packages")
    if "binaries" in checks:
        res.binaries = check_binaries()
        findings += binary_findings(res.binaries, params.expected)
        progress("binaries")
    if "env" in checks and res.env is not None:
        findings += env_findings(res.env)
        progress("env")
    if "accelerators" in checks:
        res.accelerators = check_accelerators(environ, min(3.0, params.timeout_s))
        findings += accelerator_findings(res.accelerators)
        progress("accelerators")
    if "ray" in checks:
        res.ray = probe_cluster(params.ray_address, environ=environ, timeout_s=params.timeout_s)
        findings += ray_findings(res.ray, params.expected)
        findings += cluster_context_findings(res.ray, res.env if "env" in checks else None)
        if params.expected is not None:
            res.fit = evaluate_fit(params.expected, res.ray)
            findings += fit_findings(res.fit)
        progress("ray")
    if "paths" in checks:
        res.paths = [_path_info(ctx, f"path[{i}]", p) for i, p in enumerate(params.paths)]
        for p in res.paths:
            if p.exists is False:
                findings.append(
                    _finding(
                        "path_missing",
                        "warning",
                        "missing_env_var_or_path",
                        f"{p.value} does not exist",
                        "",
                        evidence=p.error,
                        location=p.value,
                        fix="Check the path.",
                        owner="environment",
                    ).model_copy(update={"reference": "xtuner-rl://failure-modes/path_not_found"})
                )
        progress("paths")
    if "model" in checks:
        from_env = params.model_path is None
        res.model = check_model(ctx, environ.get("MODEL_PATH") if from_env else params.model_path)
        findings += model_findings(res.model, from_env and "env" in checks)
        progress("model")
    if "env" not in checks:
        res.env = None
    ordered = sort_findings(dedupe_findings(findings))
    res.counts = count_severities(ordered)
    res.findings, res.findings_omitted = cap(ordered, DEFAULT_LIST_CAP)
    res.elapsed_s = round(time.monotonic() - start, 3)
    _apply_detail(res, params.detail)
    res.summary = _summary(res)
    return res


def _apply_detail(res: Result, detail: Detail) -> None:
    if detail == "summary":
        res.packages = None
        res.binaries = None
        res.accelerators = None
        res.paths = None
        if res.ray is not None:
            r = res.ray
            res.ray = r.model_copy(
                update={
                    "nodes": [],
                    "nodes_omitted": r.nodes_omitted + len(r.nodes),
                    "placement_groups": [],
                    "placement_groups_omitted": r.placement_groups_omitted + len(r.placement_groups),
                }
            )
    elif detail == "normal" and res.packages is not None:
        # Keep what matters: installed packages and the ones XTuner needs for this environment.
        res.packages.items = [p for p in res.packages.items if p.installed or p.name in _needed(res)]


def _needed(res: Result) -> set[str]:
    need = {"xtuner", "ray", "torch", "transformers", "cyclopts"}
    if res.env is not None:
        need.update(BACKEND_PACKAGE[b] for b in [res.env.effective_backend, *res.env.ignored_backends] if b)
        if res.env.fa3_flag == "1":
            need.add("flash_attn_3")
    return need


DESCRIPTION = """\
Live, read-only look at the environment an XTuner V1 RL run will meet: installed packages (xtuner with or without \
the V1 RL CLI, ray, lmdeploy/sglang/vllm, torch, transformers, FlashAttention 3, OpenTelemetry, mathruler, \
cyclopts; found without importing them), binaries (ray, otelcol, nvidia-smi), XTUNER_USE_* flags and the backend \
XTuner would pick, WORK_DIR/MODEL_PATH/DATA_PATH/EVAL_DATA_PATH, RAY_ADDRESS, accelerators, and the Ray cluster \
(nodes, total and free CPU/GPU/memory/custom resources, versions, pending or infeasible placement groups, a \
leftover 'train' group), plus XTuner's own resource checks for an expected run shape, with the numbers. Never \
starts, stops or joins Ray (no driver job), leaves no process or file, answers within timeout_s.
Use when: before launching or while troubleshooting a run: is Ray up and big enough, is the backend flag right, \
is the backend installed, does auth or a version mismatch block the connection.
Not for: planning a topology from scratch (use choose_topology), checking a config file (use inspect_config), \
reward data (use check_reward_data), composing the launch command (use build_rl_command), a full go/no-go \
before launch (use preflight).\
"""

SPEC = ToolSpec(
    "probe_environment", "Probe environment and Ray cluster", DESCRIPTION, Params, Result, run, open_world=True
)
