"""What a Python environment and PATH have installed for XTuner RL, and what is missing for the backend and
tracing a run asks for.

Packages are found through their metadata and module files, never imported: in this server's own Python (in
process, :mod:`.probe_child`), or in the training environment named by ``training_env``, whose files
:mod:`.training_env` reads — and, only when the operator allowed its interpreter at start and the caller asks,
:mod:`.interpreter` runs it to confirm the reading. Binaries are looked up beside the training environment's
interpreter (a venv's bin/ holds its ``ray``), then on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel, Field

from ..core import Finding, RunContext, Severity, ToolInputError
from . import probe_child, training_env
from .env import BACKEND_FLAGS, EnvReport
from .findings import probe_finding
from .interpreter import (
    ChildAnswer,
    PythonEnv,
    XtunerInstall,
    check_native_binary,
    environment_interpreter,
    run_locator,
)
from .ray import SRC_RAY_INIT

# XTuner sources (InternLM/xtuner@b934f46).
SRC_ENV_CHECK_IMPORTS = "xtuner/v1/utils/env_check.py:48-117"
SRC_VLLM_IMPORTS = "xtuner/v1/rl/rollout/vllm.py:11-14"
SRC_CLI_IMPORTS = "xtuner/v1/train/cli/rl.py:6-13"
SRC_CLI = "xtuner/v1/train/cli/rl.py:38-71"
SRC_FA3 = "xtuner/v1/ops/flash_attn/__init__.py:20-31"
SRC_OTELCOL = "xtuner/v1/rl/trace/runtime.py:165-169"
SRC_OTEL_PKGS = "xtuner/v1/rl/trace/otel_utils.py:19-26"

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


class PackageInfo(BaseModel):
    name: str
    installed: bool
    version: str | None = None
    distribution: str | None = Field(default=None, description="Distribution the version came from")
    module_found: bool | None = Field(default=None, description="Top-level module importable (found, not imported)")
    purpose: str = ""


class PackagesReport(BaseModel):
    items: list[PackageInfo]
    python: PythonEnv | None = Field(default=None, description="The environment whose packages these are")
    xtuner: XtunerInstall | None = Field(default=None, description="The xtuner installation, if any")
    xtuner_location: str | None = Field(default=None, description="Directory of the xtuner package, if found")
    xtuner_v1_rl_cli: bool | None = Field(
        default=None, description="xtuner/v1/train/cli/rl.py exists (null: no xtuner)"
    )

    @property
    def is_training_env(self) -> bool:
        """True when these are the training environment's packages (the one given, or one that has xtuner)."""
        xt = next((p for p in self.items if p.name == "xtuner"), None)
        return (self.python is not None and self.python.target == "training") or bool(xt and xt.installed)


class BinaryInfo(BaseModel):
    name: str
    path: str | None
    purpose: str


def _spec() -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(name, dists, module) for name, dists, module, _ in PACKAGES]


def _report(python: PythonEnv, rows: dict[str, dict], xt: XtunerInstall | None) -> PackagesReport:
    """A PackagesReport from per-package rows (version, distribution, module_found) and the xtuner found."""
    items = []
    for name, _, _, purpose in PACKAGES:
        row = rows.get(name, {})
        version, module_found = row.get("version"), row.get("module_found")
        items.append(
            PackageInfo(
                name=name,
                installed=bool(version) or bool(module_found),
                version=version,
                distribution=row.get("distribution"),
                module_found=module_found,
                purpose=purpose,
            )
        )
    return PackagesReport(
        items=items,
        python=python,
        xtuner=xt,
        xtuner_location=xt.location if xt else None,
        xtuner_v1_rl_cli=xt.v1_rl_files.get("v1/train/cli/rl.py") if xt and xt.v1_rl is not None else None,
    )


def check_packages() -> PackagesReport:
    """Packages of this server's own Python, located in process (nothing imported)."""
    data = probe_child.probe({"packages": [[n, list(d), m] for n, d, m in _spec()]})
    python = PythonEnv(
        target="server",
        executable=data["executable"],
        python_version=data["python_version"],
        prefix=data["prefix"],
        is_venv=data["is_venv"],
        is_conda=data["is_conda"],
        scripts_dir=data["scripts_dir"],
    )
    xt = XtunerInstall(**data["xtuner"]) if data.get("xtuner") else None
    return _report(python, {row["name"]: row for row in data["packages"]}, xt)


def training_packages(
    raw: str, ctx: RunContext, *, run_interpreter: bool = False, timeout: float = 10.0
) -> PackagesReport:
    """Packages of the training environment ``raw`` names, read from its files; with ``run_interpreter``, and only
    if the operator allowed its interpreter at start, confirmed by running it (see :mod:`.interpreter`)."""
    prefix = training_env.locate(raw, ctx.paths)
    reading = training_env.read_environment(prefix, ctx.paths, _spec(), ctx.limits)
    rows = {
        p.name: {"version": p.version, "distribution": p.distribution, "module_found": p.module_found}
        for p in reading.packages
    }
    python, xt = reading.python, reading.xtuner
    if run_interpreter:
        answer, note = _run(prefix, reading.search_paths, ctx, timeout)
        python.notes.append(note)
        if answer is not None:
            python.learned_from = "run"
            python.python_version = answer.python_version
            python.notes += _merge(rows, answer)
            if xt is None and answer.xtuner_location:
                where = Path(answer.xtuner_location)
                xt = training_env.describe_xtuner(where, "its interpreter", False, {}, ctx.paths, python.notes)
    return _report(python, rows, xt)


def _run(prefix: Path, search_paths: list[str], ctx: RunContext, timeout: float) -> tuple[ChildAnswer | None, str]:
    """The interpreter's validated answer when the operator allowed it and it gave one, and a note saying how."""
    interpreter, why = environment_interpreter(prefix, ctx.policy)
    if interpreter is None:
        return None, why
    try:
        check_native_binary(interpreter, ctx.policy)
    except ToolInputError as exc:
        return None, f"not run: {exc.message}"
    outcome = run_locator(interpreter, _spec(), search_paths, timeout, ctx.limits)
    ctx.limits.check()
    if outcome.answer is None:
        return None, f"not confirmed by running it: {outcome.error}"
    return outcome.answer, f"confirmed by running {interpreter} -I -S (no site, no .pth)"


def _merge(rows: dict[str, dict], answer: ChildAnswer) -> list[str]:
    """Fold the interpreter's answer into the rows read from the files; notes where the two disagree."""
    dists = {name: d for name, d, _ in _spec()}
    notes = []
    for child in answer.packages:
        row = rows.get(child.name)
        if row is None:
            continue
        if child.version and row["version"] and child.version != row["version"]:
            notes.append(f"{child.name}: its files say {row['version']}, its interpreter {child.version}")
        if child.version:
            row["version"] = child.version
            if child.distribution in dists[child.name]:
                row["distribution"] = child.distribution
        if child.module_found:
            row["module_found"] = True
    return notes


def check_binaries(scripts_dir: str | None = None) -> list[BinaryInfo]:
    """Binaries beside the training interpreter (a venv's bin/ holds its `ray`) first, then on PATH."""
    out = []
    for n, p in BINARIES:
        local = os.path.join(scripts_dir, n) if scripts_dir else None
        found = local if local and os.path.isfile(local) and os.access(local, os.X_OK) else shutil.which(n)
        out.append(BinaryInfo(name=n, path=found, purpose=p))
    return out


def _package(report: PackagesReport, name: str) -> PackageInfo | None:
    return next((p for p in report.items if p.name == name), None)


def _where(report: PackagesReport) -> str:
    """How findings name the environment they looked at."""
    py = report.python
    if py is not None and py.target == "training":
        return f"the training environment ({py.prefix})"
    return "this server's Python"


def package_findings(report: PackagesReport, env: EnvReport | None, tracing: bool = False) -> list[Finding]:
    """xtuner with its V1 RL CLI, the CLI's imports, the flagged backend, FlashAttention 3 and OpenTelemetry."""
    out = _xtuner_findings(report)
    if env is not None:
        out += _backend_package_findings(report, env, report.is_training_env)
    out += _otel_package_findings(report, tracing)
    return out


def _xtuner_findings(report: PackagesReport) -> list[Finding]:
    out: list[Finding] = []
    xt = _package(report, "xtuner")
    training = report.python is not None and report.python.target == "training"
    where = _where(report)
    hedge = "" if training else " Ignore this if the run uses another Python (pass training_env=<its prefix>)."
    if xt is not None and not xt.installed:
        out.append(
            probe_finding(
                "xtuner_not_installed",
                "blocker" if training else "info",
                "missing_env_var_or_path",
                f"xtuner is not importable in {where}",
                "ray-preparation",
                source=SRC_CLI_IMPORTS,
                evidence="no 'xtuner' distribution or module found",
                fix="Install XTuner V1 from source in the training environment: git clone https://github.com/InternLM/"
                "xtuner && pip install -e '.[rl]'." + hedge,
                owner="backend_install",
            )
        )
    elif report.xtuner_v1_rl_cli is False:
        out.append(
            probe_finding(
                "xtuner_without_v1",
                "blocker",
                "missing_env_var_or_path",
                "The installed xtuner has no V1 RL CLI (xtuner/v1/train/cli/rl.py) - PyPI's xtuner 0.2.0 has no V1",
                "ray-preparation",
                source=SRC_CLI,
                evidence=f"xtuner {xt.version if xt else '?'} at {report.xtuner_location} in {where}: "
                "v1/train/cli/rl.py missing (its __version__ says 0.2.0 either way; only the files tell)",
                fix="pip uninstall xtuner, then install from source: git clone https://github.com/InternLM/xtuner && "
                "pip install -e '.[rl]'.",
                owner="backend_install",
            )
        )
    elif report.xtuner is not None and report.xtuner.outside_roots:
        outside = report.xtuner
        out.append(
            probe_finding(
                "xtuner_not_read",
                "warning",
                "missing_env_var_or_path",
                "The training environment's xtuner is outside the allowed roots: its V1 RL files were not checked",
                "ray-preparation",
                source=SRC_CLI,
                evidence=f"xtuner found at {outside.location} ({outside.found_by}); this server reads files only "
                "inside its allowed roots",
                fix=f"Start the server with --allow-root {os.path.dirname(outside.location)} to check it, or confirm "
                "yourself that xtuner/v1/train/cli/rl.py exists there.",
                owner="environment",
            )
        )
    runtime_imports: tuple[tuple[str, Severity], ...] = (("ray", "warning"), ("cyclopts", "info"), ("torch", "info"))
    for name, sev in runtime_imports:
        p = _package(report, name)
        if p is not None and not p.installed:
            out.append(
                probe_finding(
                    f"{name}_not_installed",
                    "blocker" if training else sev,
                    "missing_env_var_or_path",
                    f"{name} is not installed in {where} (the RL CLI imports it at start)",
                    "ray-preparation",
                    source=SRC_CLI_IMPORTS,
                    evidence=f"no '{name}' distribution or module found",
                    fix=f"pip install {name if name != 'ray' else 'ray[default]'} in the training environment." + hedge,
                    owner="backend_install",
                )
            )
    return out


def _backend_package_findings(report: PackagesReport, env: EnvReport, is_training: bool) -> list[Finding]:
    out: list[Finding] = []
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
                probe_finding(
                    f"backend_not_installed.{backend}",
                    "blocker" if is_training else "warning",
                    "backend_not_installed",
                    f"{var}=1 but the '{backend}' package is not installed",
                    "backend-support",
                    source=SRC_VLLM_IMPORTS if backend == "vllm" else SRC_ENV_CHECK_IMPORTS,
                    evidence=f"{var}=1; {where}; no '{backend}' distribution found in {_where(report)}"
                    + ("" if is_training else " (which has no xtuner either, so it may not be the training one)"),
                    fix=f"Install {backend} in the environment Ray workers run in (e.g. pip install -r "
                    f"requirements/{backend}.txt), or set {var} to 0 and flag an installed backend.",
                    owner="backend_install",
                )
            )
    fa3 = _package(report, "flash_attn_3")
    if env.fa3_flag == "1" and fa3 is not None and not fa3.installed:
        out.append(
            probe_finding(
                "fa3_missing",
                "blocker" if is_training else "warning",
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
    return out


def _otel_package_findings(report: PackagesReport, tracing: bool) -> list[Finding]:
    out: list[Finding] = []
    missing_otel = [
        n
        for n in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc")
        if (p := _package(report, n)) is not None and not p.installed
    ]
    if missing_otel:
        out.append(
            probe_finding(
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


def binary_findings(binaries: list[BinaryInfo], tracing: bool = False) -> list[Finding]:
    found = {b.name: b.path for b in binaries}
    out: list[Finding] = []
    if not found.get("otelcol-contrib") and not found.get("otelcol"):
        out.append(
            probe_finding(
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
            probe_finding(
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
