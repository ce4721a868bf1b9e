"""inspect_config: read an XTuner RL config file statically and predict the errors XTuner would raise.

The file is parsed with ``ast`` and evaluated by :mod:`..config_analysis.evaluator` — never imported or executed —
and the rules of :mod:`..config_analysis.rules` are applied. The tool reports the ``trainer`` variable and class,
every environment variable the file reads, key settings, each task (agent loop, judger, produce strategy, sampler),
resources and trace, then applies XTuner's own validation rules (pydantic fields and ``extra="forbid"``, the
trainer's interval validator, build-time assertions) and says, for each problem, the exact XTuner message it
prevents and where XTuner raises it (``path:line`` at ``InternLM/xtuner@b934f46``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from ..cluster.xtuner_install import BUILTIN, XtunerClasses, annotate, load_installed
from ..config_analysis.env_fixes import EnvFileUse
from ..config_analysis.env_reads import EnvRead
from ..config_analysis.launch_env import read_env_file
from ..config_analysis.patches import patch_label
from ..config_analysis.report import CPUPool, ResourcePool, Setting, TaskInfo
from ..config_analysis.rules import Analysis, analyse, not_python_finding
from ..config_analysis.view import ConfigView, read_view
from ..core import RunContext, ToolResult, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Detail, Finding, cap, count_severities
from ..launch.readiness import staged
from ..planning.config_plan import Staleness, effective_staleness
from ..xtuner_rules import classes as xc


class Params(BaseModel):
    model_config = params_model_config()

    path: str = Field(description="RL config file (.py)")
    env: dict[str, str] | None = Field(
        default=None,
        description="Planned env for os.environ reads (missing required: blocker)",
    )
    env_file: str | None = Field(default=None, description="Launch script/.env (never run): env under `env`")
    backend: Literal["lmdeploy", "sglang"] | None = Field(
        default=None, description="Installed: fixes its flag in env_file"
    )
    training_env: str | None = Field(
        default=None,
        max_length=4096,
        description="This XTuner, not b934f46: env dir or checkout (read, never run)",
    )
    detail: Detail = Field(default="normal", description="normal: + settings, tasks, env vars; full: larger caps")


class EnvVarRead(BaseModel):
    name: str | None = Field(description="Variable name; null when the key is computed")
    required: bool = Field(description="True for os.environ['X'] (KeyError at config load if unset)")
    default: str | None = Field(default=None, description="Source text of the default for get/getenv reads")
    line: int = Field(description="Line in the config file")
    supplied: bool | None = Field(default=None, description="Whether `env` supplied it (null when no env was given)")


class EnvFileRead(BaseModel):
    path: str = Field(description="Resolved env file path")
    kind: Literal["shell", "dotenv"]
    variables: int = Field(description="Exported variables with a value known statically")
    unresolved: dict[str, str] = Field(default_factory=dict, description="Exported, value unknown: name -> why")
    not_exported: list[str] = Field(default_factory=list, description="Set by the script but never exported")
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class PlannedEnv:
    """The planned env of one check: the env file's exports with the explicit env on top."""

    env: dict[str, str] | None = None
    unknown: frozenset[str] = frozenset()  # the file sets them to values not known statically
    use: EnvFileUse | None = None
    read: EnvFileRead | None = None


class Result(ToolResult):
    path: str = Field(description="Resolved config path")
    trainer_found: bool = Field(description="A module-level `trainer` variable exists")
    trainer_class: str | None = None
    mode: str = Field(description="colocated | disaggregated | unknown")
    backend: str | None = Field(default=None, description="Backend from the supplied env's XTUNER_USE_* flags")
    trace_enabled: bool | None = Field(default=None, description="TraceConfig(enabled=...) on the trainer")
    verdict: str = Field(description="ok (no blockers) | blocked")
    counts: dict[str, int] = Field(description="Findings by severity")
    findings: list[Finding]
    findings_omitted: int = 0
    env_vars: list[EnvVarRead] = Field(default_factory=list)
    env_vars_omitted: int = 0
    required_env_vars: list[str] = Field(default_factory=list, description="Names read with os.environ[...]")
    settings: list[Setting] = Field(default_factory=list)
    settings_omitted: int = 0
    tasks: list[TaskInfo] = Field(default_factory=list)
    tasks_omitted: int = 0
    resources: list[ResourcePool] = Field(default_factory=list)
    cpu_pools: list[CPUPool] = Field(
        default_factory=list, description="Judger/agent-loop actors outside the GPU groups"
    )
    unchecked: list[str] = Field(
        default_factory=list, description="Rules skipped for an unresolved value (rule: reason)"
    )
    unchecked_omitted: int = 0
    env_file: EnvFileRead | None = Field(default=None, description="What the launch env file sets, statically")
    xtuner_classes: XtunerClasses = Field(default=BUILTIN, description="Which XTuner's config classes were used")
    effective_staleness: Staleness | None = Field(default=None, description="Steps a sample may lag the weights")


# --------------------------------------------------------------------------------------------------------


def env_var_rows(reads: list[EnvRead], env: dict[str, str] | None) -> list[EnvVarRead]:
    rows: list[EnvVarRead] = []
    seen: set[tuple[str | None, bool]] = set()
    for r in reads:
        key = (r.name, r.required)
        if r.name is not None and key in seen:
            continue
        seen.add(key)
        rows.append(
            EnvVarRead(
                name=r.name,
                required=r.required,
                default=r.default,
                line=r.line,
                supplied=None if env is None or r.name is None else r.name in env,
            )
        )
    return rows


InstalledClasses = tuple[dict[str, xc.C] | None, XtunerClasses]


def run(
    params: Params,
    ctx: RunContext,
    view: ConfigView | None = None,
    classes: InstalledClasses | None = None,
    planned: PlannedEnv | None = None,
) -> Result:
    """Apply XTuner's rules to the config; ``view`` / ``classes`` / ``planned``: the config, class table and planned
    env a caller has already read (preflight reads them once for all its checks)."""
    name = params.path.rsplit("/", 1)[-1]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix != "py":  # XTuner compares Path.suffix with ".py" exactly (xtuner/v1/utils/config.py:17)
        real = str(ctx.paths.check(params.path, kind="file", what="config path"))
        f = not_python_finding(real, suffix)
        return Result(
            summary="blocked: only .py RL configs can be loaded",
            path=real,
            trainer_found=False,
            mode="unknown",
            verdict="blocked",
            counts=count_severities([f]),
            findings=[f],
        )
    rows, used = classes if classes is not None else classes_for(params.training_env, ctx)
    if planned is None:
        planned = planned_env(params.env, params.env_file, params.backend, ctx)
    if view is None:
        view = read_view(params.path, ctx.paths, planned.env, rows, planned.unknown)
    with xc.use_table(rows):
        data = analyse(view, patch_label(view.path, ctx.paths.roots, view.name), planned.use)
    data["findings"] = staged(annotate(data["findings"], used, rows or xc.CLASSES))
    res = build_result(view.path or params.path, data, params, planned.env)
    res.env_file = planned.read
    res.xtuner_classes = used
    res.effective_staleness = effective_staleness(view)
    if res.effective_staleness is not None:
        res.summary += f"; effective staleness {res.effective_staleness.steps} step(s)"
    if used.used == "installed":
        changed = f", {len(used.differences) + used.differences_omitted} class(es) differ from b934f46"
        res.summary += f"; checked against the {used.label}{changed if used.differences else ''}"
    return res


def planned_env(env: dict[str, str] | None, env_file: str | None, backend: str | None, ctx: RunContext) -> PlannedEnv:
    """The env file's exports (read statically through the guarded reader) with ``env`` on top; names the file
    sets to values not known statically stay unresolved unless ``env`` gives them."""
    if env_file is None:
        return PlannedEnv(env=env)
    f = read_env_file(env_file, ctx.paths)
    explicit = env or {}
    planned = {**f.values, **explicit}
    unknown = frozenset(n for n in f.unresolved if n not in explicit)
    label = patch_label(f.path, ctx.paths.roots, f.name)
    use = EnvFileUse(f, label, frozenset(explicit), backend)
    read = EnvFileRead(
        path=f.path or f.name,
        kind=f.kind,
        variables=len(f.values),
        unresolved=dict(list(f.unresolved.items())[:DEFAULT_LIST_CAP]),
        not_exported=sorted(f.shell_only)[:DEFAULT_LIST_CAP],
        notes=list(f.notes[:DEFAULT_LIST_CAP]),
    )
    return PlannedEnv(env=planned, unknown=unknown, use=use, read=read)


def classes_for(training_env: str | None, ctx: RunContext) -> InstalledClasses:
    """The class rows to check against: the XTuner of ``training_env`` (read from its files), else b934f46's."""
    if training_env is None:
        return None, BUILTIN
    from ..cluster.training_env import xtuner_source  # a training env's reader loads only when one is named

    package, commit = xtuner_source(training_env, ctx.paths, ctx.limits)
    rows, used = load_installed(package, commit, ctx.paths)
    return (rows if used.used == "installed" else None), used


def build_result(real: str, data: Analysis, params: Params, env: dict[str, str] | None) -> Result:
    findings: list[Finding] = data["findings"]
    limit = {"summary": DEFAULT_LIST_CAP, "normal": DEFAULT_LIST_CAP, "full": 500}[params.detail]
    counts = count_severities(findings)
    shown = (
        findings if params.detail == "full" else [f for f in findings if f.severity != "info" or len(findings) < limit]
    )
    shown_f, f_omitted = cap(shown, limit)
    f_omitted += len(findings) - len(shown)
    rows = env_var_rows(data.get("env_reads", []), env)
    required = sorted({r.name for r in rows if r.required and r.name})
    verdict = "blocked" if counts["blocker"] else "ok"
    mode = data.get("mode", "unknown")
    tcls = data.get("trainer_class")
    first = next((f.title for f in findings if f.severity == "blocker"), None)
    summary = (
        f"{verdict}: {tcls or 'no trainer'} ({mode}); {counts['blocker']} blocker(s), {counts['warning']} warning(s)"
        + (f"; first: {first}" if first else "")
    )
    res = Result(
        summary=summary,
        path=real,
        trainer_found=data.get("trainer_found", False),
        trainer_class=tcls,
        mode=mode,
        backend=data.get("backend"),
        trace_enabled=data.get("trace_enabled"),
        verdict=verdict,
        counts=counts,
        findings=shown_f,
        findings_omitted=f_omitted,
        required_env_vars=required,
    )
    unchecked = data.get("unchecked", [])
    res.unchecked, res.unchecked_omitted = cap(unchecked, limit)
    if params.detail != "summary":
        res.env_vars, res.env_vars_omitted = cap(rows, limit)
        res.settings, res.settings_omitted = cap(data.get("settings", []), limit)
        res.tasks, res.tasks_omitted = cap(data.get("tasks", []), limit)
        res.resources = data.get("resources", [])
        res.cpu_pools = cap(data.get("cpu_pools", []), limit)[0]
    return res
