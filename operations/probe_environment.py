"""probe_environment: live, read-only checks of packages, binaries, env vars, accelerators and the Ray cluster.

Half of the failures of an XTuner V1 RL run are environmental: no Ray cluster, too few free CPUs or too little Ray
memory for XTuner's own checks, no or several backend flags, a missing backend package, no ``otelcol`` while
tracing is on. This tool looks instead of guessing, and only looks: packages are found through their metadata (no
heavy import) — in this server's Python or, given ``training_env``, in the training environment, whose files
``cluster.training_env`` reads (its interpreter runs only if the operator allowed it and ``run_interpreter`` asks) —
the Ray cluster is read by ``cluster.ray.probe_cluster`` (no driver, no job, no files), and
``nvidia-smi`` is run with a timeout. Everything it says about XTuner cites ``InternLM/xtuner@b934f46``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from ..cluster import packages
from ..cluster.accelerators import AcceleratorsReport, accelerator_findings, check_accelerators
from ..cluster.env import EnvReport, check_env, env_findings
from ..cluster.fit import Expected, FitReport, evaluate_fit, fit_findings, fit_headline, requirements
from ..cluster.interpreter import PythonEnv, XtunerInstall
from ..cluster.packages import BinaryInfo, PackagesReport
from ..cluster.paths import ModelReport, PathInfo, check_model, model_findings, path_findings, path_info
from ..cluster.ray import RaySnapshot, probe_cluster
from ..cluster.ray_address import RayAccess
from ..cluster.ray_findings import cluster_context_findings, ray_findings
from ..core import Detail, RunContext, ToolResult, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Finding, cap, count_severities, dedupe_findings
from ..launch.readiness import staged
from ..xtuner_rules import resources as rr

Check = Literal["packages", "binaries", "env", "accelerators", "ray", "paths", "model", "backend", "gpu"]
ALL_CHECKS: tuple[str, ...] = ("packages", "binaries", "env", "accelerators", "ray", "paths", "model")
#: Names the failure-mode catalog uses in its confirm_with hints.
CHECK_ALIASES: dict[str, tuple[str, ...]] = {"backend": ("packages", "env"), "gpu": ("accelerators",)}
TRAINING_ENV_HELP = "Training env directory ($VIRTUAL_ENV/$CONDA_PREFIX) or its bin/python; read, never run"
RUN_INTERPRETER_HELP = "Also run its Python to confirm (only if the operator allowed it: --allow-python)"


class Params(BaseModel):
    model_config = params_model_config()

    checks: list[Check] | None = Field(
        default=None, description="Default all. backend = packages+env, gpu = accelerators"
    )
    ray_address: str | None = Field(
        default=None,
        max_length=500,
        description="host:port or http://host:8265; default RAY_ADDRESS, then the local address file",
    )
    timeout_s: float = Field(default=5.0, ge=0.5, le=60, description="Bound for the Ray probe")
    expected: Expected | None = Field(default=None)
    env: dict[str, str] | None = Field(default=None, description="Planned env, read INSTEAD of the server's")
    training_env: str | None = Field(default=None, max_length=4096, description=TRAINING_ENV_HELP)
    run_interpreter: bool = Field(default=False, description=RUN_INTERPRETER_HELP)
    paths: list[str] = Field(default_factory=list, max_length=50)
    model_path: str | None = Field(
        default=None, max_length=4096, description="Checked for config.json; default MODEL_PATH"
    )
    detail: Detail = Field(default="normal")

    @model_validator(mode="after")
    def _env_size(self) -> Params:
        if self.env is not None and len(self.env) > 2000:
            raise ValueError("env has more than 2000 variables")
        return self


class Result(ToolResult):
    checks_run: list[str]
    counts: dict[str, int] = Field(description="Findings per severity")
    findings: list[Finding]
    findings_omitted: int = 0
    python: PythonEnv | None = Field(default=None, description="The Python environment whose packages were reported")
    xtuner: XtunerInstall | None = Field(
        default=None, description="Its XTuner: location, V1 RL files, install kind, commit"
    )
    packages: PackagesReport | None = None
    binaries: list[BinaryInfo] | None = None
    env: EnvReport | None = None
    accelerators: AcceleratorsReport | None = None
    ray: RaySnapshot | None = None
    fit: FitReport | None = None
    model: ModelReport | None = None
    paths: list[PathInfo] | None = None
    elapsed_s: float = 0.0


def _selected(checks: Sequence[Check] | None) -> list[str]:
    if not checks:
        return list(ALL_CHECKS)
    wanted: set[str] = set()
    for c in checks:
        wanted.update(CHECK_ALIASES.get(c, (c,)))
    return [c for c in ALL_CHECKS if c in wanted]


def _summary(result: Result) -> str:
    """The answer first: the fit when a run shape was given, then the first blocker that would fire, then the rest."""
    c = result.counts
    parts: list[str] = []
    if result.fit is not None:
        parts.append(fit_headline(result.fit))
    first = next((f for f in result.findings if f.severity == "blocker"), None)
    parts.append(f"{c['blocker']} blocker(s), {c['warning']} warning(s)")
    if first:
        parts.append(f"first blocker{f' (at {first.stage})' if first.stage else ''}: {first.title}")
    if result.python is not None and result.python.target == "training":
        parts.append(_training_line(result.python, result.xtuner))
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
    if result.env is not None:
        parts.append(f"backend {result.env.effective_backend or 'none'}")
    return "; ".join(parts)


def _training_line(python: PythonEnv, xt: XtunerInstall | None) -> str:
    """The training environment in one phrase: Python, how it was learned, and its XTuner."""
    if xt is None:
        xtuner = "no xtuner"
    elif xt.v1_rl is None:
        xtuner = f"xtuner at {xt.location} (outside the allowed roots, not read)"
    else:
        xtuner = f"xtuner {'with' if xt.v1_rl else 'WITHOUT'} V1 RL at {xt.location}"
    commit = f" @ {xt.git_commit[:12]}" if xt and xt.git_commit else ""
    how = "read from its files" if python.learned_from == "read" else "confirmed by running it"
    return f"training Python {python.python_version or '?'} ({how}): {xtuner}{commit}"


@dataclass(frozen=True)
class RunNeeds:
    """What the run will ask of this environment, when a caller (preflight) knows it from the config itself."""

    requirements: rr.RayRequirements | None  # the config's groups and pools (ConfigView.ray_requirements)
    tracing: bool  # TraceConfig enabled: XTuner starts an OpenTelemetry collector


def run(
    params: Params, ctx: RunContext, packages_report: PackagesReport | None = None, needs: RunNeeds | None = None
) -> Result:
    """Run the selected checks in a fixed order, then rank (severity, then the stage that fires first), count and cap
    the findings. ``packages_report``: packages a caller (preflight) already read for the same environment;
    ``needs``: the run's requirements from its config (otherwise from ``params.expected``)."""
    start = time.monotonic()
    if needs is None:
        expected = params.expected
        needs = RunNeeds(requirements(expected) if expected else None, bool(expected and expected.tracing))
    checks = _selected(params.checks)
    environ: Mapping[str, str] = params.env if params.env is not None else ctx.environ
    evaluated: Literal["server", "override"] = "override" if params.env is not None else "server"
    res = Result(summary="", checks_run=checks, counts={}, findings=[])
    steps = iter(range(1, len(checks) + 1))

    def progress(msg: str) -> None:
        ctx.progress(next(steps), len(checks), msg)

    if "env" in checks or "packages" in checks:
        res.env = check_env(environ, evaluated, ctx.paths)
    findings = _machine(params, ctx, checks, environ, res, progress, needs.tracing, packages_report)
    if "ray" in checks:
        findings += _cluster(params, ctx, checks, res, needs.requirements)
        progress("ray")
    findings += _paths(params, ctx, checks, environ, res, progress)
    if "env" not in checks:
        res.env = None
    ordered = staged(dedupe_findings(findings))
    res.counts = count_severities(ordered)
    res.findings, res.findings_omitted = cap(ordered, DEFAULT_LIST_CAP)
    res.elapsed_s = round(time.monotonic() - start, 3)
    _apply_detail(res, params.detail)
    res.summary = _summary(res)
    return res


def _machine(
    params: Params,
    ctx: RunContext,
    checks: list[str],
    environ: Mapping[str, str],
    res: Result,
    progress: Callable[[str], None],
    tracing: bool,
    given: PackagesReport | None = None,
) -> list[Finding]:
    """Packages, binaries, env and accelerators of this machine (or of the planned env)."""
    findings: list[Finding] = []
    report = given or (_packages(params, ctx) if "packages" in checks or params.training_env else None)
    if report is not None:  # the training env (for its bin/) is read even when its packages are not asked for
        res.python, res.xtuner = report.python, report.xtuner
    if "packages" in checks and report is not None:
        res.packages = report
        findings += packages.package_findings(report, res.env, tracing)
        progress("packages")
    if "binaries" in checks:
        scripts = res.python.scripts_dir if res.python and res.python.target == "training" else None
        res.binaries = packages.check_binaries(scripts)
        findings += packages.binary_findings(res.binaries, tracing)
        progress("binaries")
    if "env" in checks and res.env is not None:
        findings += env_findings(res.env)
        progress("env")
    if "accelerators" in checks:
        res.accelerators = check_accelerators(environ, min(3.0, params.timeout_s))
        findings += accelerator_findings(res.accelerators)
        progress("accelerators")
    return findings


def _packages(params: Params, ctx: RunContext) -> PackagesReport:
    """The training environment's packages (read; run only as the operator allows), else this server's own."""
    if params.training_env is None:
        return packages.check_packages()
    timeout = max(2.0, params.timeout_s * 2)
    return packages.training_packages(params.training_env, ctx, run_interpreter=params.run_interpreter, timeout=timeout)


def _cluster(
    params: Params, ctx: RunContext, checks: list[str], res: Result, req: rr.RayRequirements | None
) -> list[Finding]:
    """The live Ray cluster, and whether the run's requirements fit what it has available."""
    access = RayAccess.from_context(ctx)
    res.ray = probe_cluster(params.ray_address, access=access, client_environ=params.env, timeout_s=params.timeout_s)
    findings = ray_findings(res.ray, req)
    findings += cluster_context_findings(res.ray, res.env if "env" in checks else None)
    if req is not None:
        res.fit = evaluate_fit(req, res.ray)
        findings += fit_findings(res.fit)
    return findings


def _paths(
    params: Params,
    ctx: RunContext,
    checks: list[str],
    environ: Mapping[str, str],
    res: Result,
    progress: Callable[[str], None],
) -> list[Finding]:
    """Extra paths, and the model directory (model_path, else MODEL_PATH)."""
    findings: list[Finding] = []
    if "paths" in checks:
        res.paths = [path_info(ctx.paths, f"path[{i}]", p) for i, p in enumerate(params.paths)]
        findings += path_findings(res.paths)
        progress("paths")
    if "model" in checks:
        from_env = params.model_path is None
        res.model = check_model(ctx.paths, environ.get("MODEL_PATH") if from_env else params.model_path)
        findings += model_findings(res.model, from_env and "env" in checks)
        progress("model")
    return findings


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
        need.update(packages.BACKEND_PACKAGE[b] for b in [res.env.effective_backend, *res.env.ignored_backends] if b)
        if res.env.fa3_flag == "1":
            need.add("flash_attn_3")
    return need
