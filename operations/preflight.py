"""preflight: one go/no-go call before an XTuner RL launch.

Reads the config once (:func:`..config_analysis.view.read_view`, with the planned env and the training
environment's XTuner classes) and passes that view to every check: ``inspect_config`` on it, ``check_reward_data``
on the train and eval data, ``probe_environment`` (packages, binaries, planned env, accelerators, model, and —
unless disabled — the live Ray cluster with the fit for the view's Ray requirements) and ``build_rl_command``, by
calling those operations directly. Their findings are merged by :mod:`..launch.readiness`: one finding per root cause (a
missing MODEL_PATH seen by two checks is one blocker), each routed to an owner; the verdict is ``go`` only when no
blocker remains, and then the launch plan is included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from ..cluster.env import Backend
from ..cluster.packages import PackagesReport, training_packages
from ..cluster.ray_address import RayAccess
from ..cluster.xtuner_install import BUILTIN
from ..config_analysis.env_fixes import EnvFileUse
from ..config_analysis.view import ConfigView, read_view, unread_view
from ..core import Detail, RunContext, ToolInputError, ToolResult, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Finding, Owner, cap, count_severities
from ..launch import readiness
from ..launch.plan import OWNED_ENV
from ..launch.shell import check_env_name, check_value
from ..xtuner_rules.ray_need import RayNeed
from . import build_rl_command, check_reward_data, inspect_config, probe_environment

JUDGER_RULES: dict[str, check_reward_data.Judger] = {
    "GSM8KJudgerConfig": "gsm8k",
    "DapoMathJudgerConfig": "dapo_math",
    "GEO3KJudgerConfig": "geo3k",
}
ClusterMode = Literal["plan_starts_ray", "running"]
#: The result type of one check.
CheckResult = TypeVar("CheckResult", bound=ToolResult)


class Params(BaseModel):
    model_config = params_model_config()

    config: str = Field(description="RL config file (.py)")
    data_path: str | None = Field(
        default=None,
        description="Train JSONL (file, dir, glob) → DATA_PATH; default config's, else env",
    )
    eval_data_path: str | None = Field(
        default=None, description="Eval JSONL → EVAL_DATA_PATH; default config's, else env"
    )
    backend: Backend | None = Field(default=None, description="Sets XTUNER_USE_<BACKEND>=1; default from env")
    model_path: str | None = Field(default=None, description="→ MODEL_PATH")
    work_dir: str | None = Field(default=None, description="→ WORK_DIR and --work-dir")
    num_workers: int | None = Field(
        default=None, ge=1, le=100_000, description="--num-workers (colocated); default config's"
    )
    ray_address: str | None = Field(default=None, max_length=500, description="host:port; default local")
    env: dict[str, str] | None = Field(default=None, description="Planned env; parameters above added unless set")
    env_file: str | None = Field(default=None, description="Launch script/.env (never run): env under `env`")
    probe_cluster: bool = Field(default=True, description="Probe Ray and the fit")
    cluster: Literal["auto", "plan_starts_ray", "running"] = Field(
        default="auto",
        description="plan_starts_ray | running (must be up) | auto: running if an address is set",
    )
    training_env: str | None = Field(
        default=None, max_length=4096, description=probe_environment.TRAINING_ENV_HELP + "; default this server's"
    )
    run_interpreter: bool = Field(default=False, description=probe_environment.RUN_INTERPRETER_HELP)
    detail: Detail = Field(
        default="normal",
        description="normal: + checks, command; full: + results, script",
    )


class CheckSummary(BaseModel):
    name: str = Field(
        description="inspect_config | check_reward_data:train|eval | probe_environment | build_rl_command"
    )
    status: Literal["ok", "findings", "skipped", "input_error", "failed"]
    summary: str = Field(description="The check's own summary line, or why it did not run")
    blockers: int = 0
    warnings: int = 0


class LaunchPlan(BaseModel):
    exports: str = Field(description="Shell lines to run before `ray start` (on every node)")
    ray_start_head: str = Field(description="Command that starts the Ray head")
    command: str = Field(description="The RL launch command")
    script: str | None = Field(default=None, description="Complete bash launch script (detail=full)")


class Result(ToolResult):
    verdict: Literal["go", "no_go"]
    cluster_mode: ClusterMode = Field(description="Whether the plan starts Ray or expects a running one")
    ray_need: RayNeed | None = Field(default=None, description="What Ray must offer for this config")
    xtuner_classes: str = Field(default="", description="Which XTuner's config classes the config was checked with")
    counts: dict[str, int] = Field(description="Merged findings by severity")
    owners: dict[str, int] = Field(description="Blockers per owner: who has to act")
    blockers: list[Finding]
    blockers_omitted: int = 0
    warnings: list[Finding]
    warnings_omitted: int = 0
    checks: list[CheckSummary] = Field(default_factory=list)
    planned_env_added: dict[str, str] = Field(
        default_factory=dict, description="Variables added to the planned env from the parameters"
    )
    launch_plan: LaunchPlan | None = Field(default=None, description="Present only when the verdict is go")
    # each check's result as JSON (the checks' own result models, dumped)
    details: dict[str, Any] = Field(default_factory=dict, description="Each check's full result (detail=full)")


class Runner:
    """Runs the checks one after another, collecting results, summaries and findings."""

    def __init__(self, ctx: RunContext, total: int) -> None:
        self.ctx = ctx
        self.quiet = replace(ctx, progress=lambda *a, **k: None)
        self.total = total
        self.step = 0
        self.findings: list[tuple[str, Finding]] = []
        self.checks: list[CheckSummary] = []
        self.results: dict[str, ToolResult] = {}

    def run(
        self, name: str, fn: Callable[[RunContext], CheckResult], owner: Owner, subject: str | None = None
    ) -> CheckResult | None:
        """Run one check; ``subject`` is the path it looks at, named in its finding if it refuses the input. None
        when it refused its input or failed."""
        self.ctx.progress(float(self.step), float(self.total), f"running {name}")
        self.step += 1
        try:
            result = fn(self.quiet)
        except ToolInputError as exc:
            self.checks.append(CheckSummary(name=name, status="input_error", summary=exc.message, blockers=1))
            self.findings.append((name, readiness.input_error_finding(name, exc, owner, subject)))
            return None
        except Exception as exc:  # a crashing check must not crash preflight; it blocks "go"
            self.checks.append(CheckSummary(name=name, status="failed", summary=f"{type(exc).__name__}", blockers=1))
            self.findings.append((name, readiness.check_failed_finding(name, exc, owner)))
            return None
        found = list(getattr(result, "findings", []))
        c = count_severities(found)
        self.checks.append(
            CheckSummary(
                name=name,
                status="findings" if c["blocker"] or c["warning"] else "ok",
                summary=result.summary,
                blockers=c["blocker"],
                warnings=c["warning"],
            )
        )
        self.findings.extend((name, f) for f in found)
        self.results[name] = result
        return result

    def skip(self, name: str, why: str) -> None:
        self.ctx.progress(float(self.step), float(self.total), f"skipping {name}")
        self.step += 1
        self.checks.append(CheckSummary(name=name, status="skipped", summary=why))


def task_data(inspect_result: inspect_config.Result | None, role: str) -> tuple[str | None, check_reward_data.Judger]:
    """The first literal data path of the first task of a manager, and the judger rule set to use."""
    for t in inspect_result.tasks if inspect_result is not None else []:
        if t.manager != role:
            continue
        judger = JUDGER_RULES.get(t.judger or "", "auto")
        paths = [x for x in t.data_paths if isinstance(x, str) and not x.startswith("<unresolved")]
        return (paths[0] if paths else None), judger
    return None, "auto"


def run(params: Params, ctx: RunContext) -> Result:
    """inspect_config, check_reward_data (train, eval), probe_environment and build_rl_command, then one verdict."""
    if params.probe_cluster:
        RayAccess.from_context(ctx).refuse_early(params.ray_address)
    paths = {
        "MODEL_PATH": params.model_path,
        "DATA_PATH": params.data_path,
        "EVAL_DATA_PATH": params.eval_data_path,
        "WORK_DIR": params.work_dir,
    }
    from_file = inspect_config.planned_env(params.env, params.env_file, params.backend, ctx)
    env, added, backend = readiness.planned_env(paths, params.backend, from_file.env)
    planned = replace(from_file, env=env, unknown=from_file.unknown - set(env))
    mode = cluster_mode(params, env)
    pkgs = (
        training_packages(params.training_env, ctx, run_interpreter=params.run_interpreter, timeout=20.0)
        if params.training_env is not None
        else None
    )
    xt = pkgs.xtuner.location if pkgs is not None and pkgs.xtuner is not None and pkgs.xtuner.v1_rl else None
    classes = inspect_config.classes_for(xt, ctx) if xt else (None, BUILTIN)
    r = Runner(ctx, total=5)
    view, insp = _inspect(r, params, planned, classes)
    workers = params.num_workers
    need = view.ray_need(workers, nodes=1, accelerators_per_node=8) if view.read else None
    _check_data(r, params, insp, env)
    probe = _probe(r, params, view, insp, env, mode, pkgs, need)
    if backend is None and probe is not None:
        installed = {i.name for i in probe.packages.items if i.installed} if probe.packages else set()
        if not installed & {"lmdeploy", "sglang"}:
            where = "the training environment" if pkgs is not None else "this server's Python"
            r.findings.append(("probe_environment", readiness.no_backend_finding("xtuner" in installed, where)))
    python_word = pkgs.python.executable if pkgs is not None and pkgs.python is not None else None
    build = _build(r, params, view, env, backend, python_word, from_file.use)
    ctx.progress(float(r.total), float(r.total), "done")

    merged = readiness.staged(readiness.model_read_at_load(readiness.merge(r.findings, set(r.results)), view))
    res = build_result(params, r, merged, added, build, mode)
    res.ray_need = need if need is not None and need.known else None
    res.xtuner_classes = insp.xtuner_classes.label if insp is not None else ""
    if res.ray_need is not None:
        res.summary += f"; Ray must offer {res.ray_need.text()}" + (
            " (the plan's ray start)" if mode == "plan_starts_ray" else ""
        )
    return res


def _inspect(
    r: Runner, params: Params, planned: inspect_config.PlannedEnv, classes: inspect_config.InstalledClasses
) -> tuple[ConfigView, inspect_config.Result | None]:
    """Read the config once, as the launch will evaluate it, and run inspect_config on that view; an unreadable
    config is inspect_config's input error and a view saying why for the other checks."""
    holder: list[ConfigView] = []

    def inspect(c: RunContext) -> inspect_config.Result:
        iparams = inspect_config.Params(path=params.config, env=planned.env, detail="full")
        if not params.config.endswith(".py"):  # inspect_config explains what XTuner does with other suffixes
            return inspect_config.run(iparams, c, classes=classes, planned=planned)
        holder.append(read_view(params.config, c.paths, planned.env, classes[0], planned.unknown))
        return inspect_config.run(iparams, c, view=holder[0], classes=classes, planned=planned)

    insp = r.run("inspect_config", inspect, "config_edit")
    view = holder[0] if holder else unread_view(params.config, "the config could not be read (see inspect_config)")
    return view, insp


def shell_safe(name: str, value: str) -> bool:
    """Whether build_rl_command's script can export ``name=value`` (not reserved, one shell line)."""
    try:
        check_env_name(name)
        check_value(value, name, allow_empty=True)
    except ToolInputError:
        return False
    return True


def cluster_mode(params: Params, env: dict[str, str]) -> ClusterMode:
    """Whether the launch plan starts Ray (build_rl_command's script does) or a running cluster is expected."""
    if params.cluster != "auto":
        return params.cluster
    return "running" if params.ray_address or env.get("RAY_ADDRESS") else "plan_starts_ray"


def _check_data(r: Runner, params: Params, insp: inspect_config.Result | None, env: dict[str, str]) -> None:
    """check_reward_data on the train and eval data: given, else the config's literal anno_path, else the env."""
    roles: tuple[tuple[Literal["train", "eval"], str | None, str], ...] = (
        ("train", params.data_path, "DATA_PATH"),
        ("eval", params.eval_data_path, "EVAL_DATA_PATH"),
    )
    for role, given, var in roles:
        from_config, judger = task_data(insp, role)
        path = given or from_config or env.get(var)
        name = f"check_reward_data:{role}"
        if path is None:
            r.skip(name, f"no {role} data: not given, not a literal in the config, not in env")
            if role == "train":
                r.findings.append((name, readiness.train_data_unchecked_finding()))
            continue
        r.run(name, partial(_reward_data_check, path, role, judger), "data_preparation", subject=path)


def _reward_data_check(
    path: str, role: Literal["train", "eval"], judger: check_reward_data.Judger, ctx: RunContext
) -> check_reward_data.Result:
    return check_reward_data.run(check_reward_data.Params(path=path, role=role, judger=judger), ctx)


def _probe(
    r: Runner,
    params: Params,
    view: ConfigView,
    insp: inspect_config.Result | None,
    env: dict[str, str],
    mode: ClusterMode,
    pkgs: PackagesReport | None,
    need: RayNeed | None,
) -> probe_environment.Result | None:
    """probe_environment on the planned env (the training environment's packages when given), with the fit for the
    config's Ray requirements against a running cluster; with a plan that starts Ray, a missing cluster is a step,
    not a blocker."""
    req, why_not = view.ray_requirements(params.num_workers)
    tracing = bool(insp is not None and insp.trace_enabled)
    needs = probe_environment.RunNeeds(req if params.probe_cluster and mode == "running" else None, tracing)
    checks: list[probe_environment.Check] = ["packages", "binaries", "env", "accelerators", "model"]
    if params.probe_cluster:
        checks.append("ray")
    probe = r.run(
        "probe_environment",
        lambda c: probe_environment.run(
            probe_environment.Params(
                checks=checks,
                ray_address=params.ray_address,
                env=env,
                model_path=params.model_path,
                training_env=params.training_env,
            ),
            c,
            packages_report=pkgs,
            needs=needs,
        ),
        "cluster_setup",
    )
    if params.probe_cluster and req is None and why_not:
        r.findings.append(("probe_environment", readiness.fit_not_checked_finding(why_not)))
    if mode == "plan_starts_ray" and probe is not None and probe.ray is not None:
        r.findings = [(n, f) for n, f in r.findings if f.id not in readiness.PLAN_STARTS_RAY_DROPS]
        text = f"The config needs Ray to offer {need.text()}." if need is not None and need.known else ""
        r.findings.append(("probe_environment", readiness.plan_cluster_finding(probe.ray, text)))
    return probe


def _build(
    r: Runner,
    params: Params,
    view: ConfigView,
    env: dict[str, str],
    backend: Backend | None,
    python_word: str | None,
    env_file: EnvFileUse | None,
) -> build_rl_command.Result | None:
    """build_rl_command for the planned env on the same config view, once a backend is chosen; its command runs the
    training env's ``<prefix>/bin/python`` when one was given (the word is written into the script, never run)."""
    if backend is None:
        r.skip("build_rl_command", "no backend chosen")
        return None
    # the plan sets these itself (from the parameters above); build_rl_command refuses them in extra_env
    extra = {k: v for k, v in (params.env or {}).items() if k not in OWNED_ENV}
    for k, v in (env_file.file.values if env_file is not None else {}).items():  # the file's, where one line holds it
        if k not in OWNED_ENV and k not in extra and shell_safe(k, v):
            extra[k] = v
    shared = next((g for g in view.groups if g.role == "shared"), None)
    workers = params.num_workers
    if workers is None and shared is not None and shared.num_workers is not None:
        workers = shared.num_workers.value if isinstance(shared.num_workers.value, int) else None

    def build(c: RunContext) -> build_rl_command.Result:
        bparams = build_rl_command.Params(
            config=view.path or params.config,
            backend=backend,
            model_path=env.get("MODEL_PATH"),
            data_path=env.get("DATA_PATH"),
            eval_data_path=env.get("EVAL_DATA_PATH"),
            work_dir=env.get("WORK_DIR"),
            num_workers=workers,
            extra_env=extra,
        )
        if python_word:
            bparams.python = python_word
        return build_rl_command.run(bparams, c, view=view if view.read else None)

    return r.run("build_rl_command", build, "launch_command")


def build_result(
    params: Params,
    r: Runner,
    merged: list[Finding],
    added: dict[str, str],
    build: build_rl_command.Result | None,
    mode: ClusterMode,
) -> Result:
    counts = count_severities(merged)
    verdict: Literal["go", "no_go"] = "no_go" if counts["blocker"] else "go"
    blockers = [f for f in merged if f.severity == "blocker"]
    warnings = [f for f in merged if f.severity == "warning"]
    owners: dict[str, int] = {}
    for f in blockers:
        owners[f.owner or "unassigned"] = owners.get(f.owner or "unassigned", 0) + 1
    limit = 500 if params.detail == "full" else DEFAULT_LIST_CAP
    b, b_om = cap(blockers, limit)
    w, w_om = cap(warnings, limit)
    if verdict == "go":
        summary = f"go: {len(r.checks)} checks, 0 blockers, {counts['warning']} warning(s)"
    else:
        who = ", ".join(f"{k} {v}" for k, v in sorted(owners.items(), key=lambda kv: -kv[1]))
        first = blockers[0]
        at = f" (at {first.stage})" if first.stage else ""
        summary = f"no_go: {counts['blocker']} blocker(s) ({who}); first to fire{at}: {first.title}"
    res = Result(
        summary=summary,
        verdict=verdict,
        cluster_mode=mode,
        counts=counts,
        owners=owners,
        blockers=b,
        blockers_omitted=b_om,
        warnings=w,
        warnings_omitted=w_om,
        planned_env_added=added,
    )
    if params.detail != "summary":
        res.checks = r.checks
    if verdict == "go" and build is not None:
        res.launch_plan = LaunchPlan(
            exports=build.exports,
            ray_start_head=build.ray_start.head,
            command=build.command,
            script=build.script if params.detail == "full" else None,
        )
    if params.detail == "full":
        res.details = {k: v.model_dump(mode="json") for k, v in r.results.items()}
    return res
