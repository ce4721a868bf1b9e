"""preflight: one go/no-go call before an XTuner RL launch.

Runs, in order, ``inspect_config`` on the config, ``check_reward_data`` on the train and eval data,
``probe_environment`` (packages, binaries, planned env, accelerators, model, and — unless disabled — the live Ray
cluster with the fit for the resources the config asks for) and ``build_rl_command``, by calling those tools'
``run`` functions directly. Their findings are merged, de-duplicated across checks and routed to an owner; the
verdict is ``go`` only when no blocker remains, and then the launch plan is included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
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
    count_severities,
    dedupe_findings,
    params_model_config,
)

Backend = Literal["lmdeploy", "sglang", "vllm"]
BACKEND_FLAG = {"lmdeploy": "XTUNER_USE_LMDEPLOY", "sglang": "XTUNER_USE_SGLANG", "vllm": "XTUNER_USE_VLLM"}
FLAG_PRECEDENCE = ("sglang", "vllm", "lmdeploy")  # xtuner/v1/rl/rollout/worker.py:457-470
JUDGER_RULES = {"GSM8KJudgerConfig": "gsm8k", "DapoMathJudgerConfig": "dapo_math", "GEO3KJudgerConfig": "geo3k"}

#: Findings in these categories always go to this owner, whatever the emitting check said.
FORCED_ROUTE = {
    "backend_not_installed": "backend_install",
    "backend_flag_missing_or_multiple": "backend_install",
    "backend_unsupported": "backend_install",
    "backend_runtime_error": "backend_install",
    "ray_not_running": "cluster_setup",
    "ray_resources_insufficient": "cluster_setup",
    "resource_mismatch_num_workers": "cluster_setup",
}
#: Owner for findings that carry none.
DEFAULT_ROUTE = {
    "reward_data_missing_ground_truth": "data_preparation",
    "data_format_other": "data_preparation",
    "config_load_error": "config_edit",
    "eval_or_interval_config": "config_edit",
    "staleness_or_partial_rollout": "config_edit",
    "debug_trace_output": "config_edit",
    "missing_env_var_or_path": "environment",
    "model_loading": "model_files",
}
#: The same problem reported by two checks: later ids map to the id of the check that runs first.
SAME_AS = {
    "cmd.config_missing_trainer": "config.missing_trainer",
    "cmd.config_not_python": "config.not_python",
    "cmd.config_syntax_error": "config.syntax_error",
    "config.vllm_backend_unsupported": "backend.vllm",
    "probe.backend_vllm_unsupported": "backend.vllm",
    "cmd.backend_vllm_unsupported": "backend.vllm",
}

DESCRIPTION = (
    "One go/no-go call before launching an XTuner V1 RL run: runs inspect_config on the config, check_reward_data on "
    "the train and eval data, probe_environment (packages, binaries, planned env, GPUs, model, live Ray cluster and "
    "whether the config's resources fit it) and build_rl_command. Returns verdict go|no_go, blockers and warnings "
    "de-duplicated across checks and routed to an owner (data_preparation, backend_install, cluster_setup, "
    "config_edit, environment, ...), a summary per check, and the launch plan when the verdict is go. Reports "
    "progress as each check runs.\n"
    "Use when: everything is prepared and you want one answer to 'can I launch now?' and who must fix what.\n"
    "Not for: a single aspect (use inspect_config, check_reward_data, probe_environment or build_rl_command), or "
    "diagnosing a run that already failed."
)


class Params(BaseModel):
    model_config = params_model_config()

    config: str = Field(description="Path of the XTuner RL config (.py), inside the server's allowed roots")
    data_path: str | None = Field(
        default=None,
        description="Training JSONL (file, dir or glob), exported as DATA_PATH. Default: the train task's anno_path "
        "when the config resolves it to a literal, else env DATA_PATH",
    )
    eval_data_path: str | None = Field(
        default=None,
        description="Eval JSONL, exported as EVAL_DATA_PATH. Default: the eval task's anno_path when it resolves, "
        "else env EVAL_DATA_PATH",
    )
    backend: Backend | None = Field(
        default=None,
        description="Rollout backend; sets XTUNER_USE_<BACKEND>=1 in the planned env. Default: taken from the "
        "XTUNER_USE_* flags in `env` (none set = blocker)",
    )
    model_path: str | None = Field(default=None, description="Model directory (HF format), exported as MODEL_PATH")
    work_dir: str | None = Field(default=None, description="Output directory, exported as WORK_DIR and --work-dir")
    num_workers: int | None = Field(
        default=None, ge=1, le=100_000, description="--num-workers (colocated only); default: the config's value"
    )
    ray_address: str | None = Field(
        default=None, max_length=500, description="Ray address to probe ('host:port'); default: the local cluster"
    )
    env: dict[str, str] | None = Field(
        default=None,
        description="Planned launch environment (exported before `ray start`). MODEL_PATH/DATA_PATH/EVAL_DATA_PATH/"
        "WORK_DIR and the backend flag are added from the other parameters unless set here",
    )
    probe_cluster: bool = Field(
        default=True,
        description="Probe the live Ray cluster and test whether the config's resources fit (false: files, "
        "packages and env only)",
    )
    detail: Detail = Field(
        default="normal",
        description="summary: verdict and findings; normal: + per-check summaries and launch command; full: + each "
        "check's full result and the launch script",
    )


class CheckSummary(BaseModel):
    name: str = Field(
        description="inspect_config | check_reward_data:train | check_reward_data:eval | "
        "probe_environment | build_rl_command"
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
    counts: dict[str, int] = Field(description="Merged findings by severity")
    owners: dict[str, int] = Field(description="Blockers per owner: who has to act")
    blockers: list[Finding]
    blockers_omitted: int = 0
    warnings: list[Finding]
    warnings_omitted: int = 0
    checks: list[CheckSummary] = Field(default_factory=list)
    planned_env_added: dict[str, str] = Field(
        default_factory=dict, description="Variables preflight added to the planned env from its parameters"
    )
    launch_plan: LaunchPlan | None = Field(default=None, description="Present only when the verdict is go")
    details: dict[str, Any] = Field(default_factory=dict, description="Each check's full result (detail=full)")


# --------------------------------------------------------------------------------------------------------


def _finding(
    fid: str,
    severity: str,
    category: str,
    title: str,
    *,
    evidence: str = "",
    fix: str = "",
    owner: str | None = None,
    source: str | None = None,
    reference: str = "",
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,  # type: ignore[arg-type]
        fix=fix,
        owner=owner,
        source=source,
        reference=reference,
    )  # type: ignore[arg-type]


class Runner:
    """Runs the checks one after another, collecting results, summaries and findings."""

    def __init__(self, ctx: RunContext, total: int) -> None:
        self.ctx = ctx
        self.quiet = replace(ctx, progress=lambda *a, **k: None)
        self.total = total
        self.step = 0
        self.findings: list[tuple[str, Finding]] = []
        self.checks: list[CheckSummary] = []
        self.results: dict[str, Any] = {}

    def run(self, name: str, fn: Callable[[RunContext], Any], owner: str) -> Any:
        self.ctx.progress(float(self.step), float(self.total), f"running {name}")
        self.step += 1
        try:
            result = fn(self.quiet)
        except ToolInputError as exc:
            self.checks.append(CheckSummary(name=name, status="input_error", summary=exc.message, blockers=1))
            self.findings.append(
                (
                    name,
                    _finding(
                        f"preflight.{name.split(':')[0]}_input",
                        "blocker",
                        "missing_env_var_or_path" if "path" in exc.code else "other",
                        f"{name} could not run: {exc.message}",
                        evidence=f"code={exc.code}",
                        fix=exc.fix or "Fix the input and run preflight again.",
                        owner=owner,
                    ),
                )
            )
            return None
        except Exception as exc:  # a crashing check must not crash preflight; it blocks "go"
            self.checks.append(CheckSummary(name=name, status="failed", summary=f"{type(exc).__name__}", blockers=1))
            self.findings.append(
                (
                    name,
                    _finding(
                        "preflight.check_failed",
                        "blocker",
                        "other",
                        f"{name} failed internally, so it could not vouch for the launch",
                        evidence=type(exc).__name__,
                        fix=f"Run {name.split(':')[0]} on its own to see more.",
                        owner=owner,
                    ),
                )
            )
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


def planned_env(p: Params) -> tuple[dict[str, str], dict[str, str], str | None]:
    """The env the run will see: parameters first, then the caller's env on top. Returns (env, added, backend)."""
    added: dict[str, str] = {}
    for var, val in (
        ("MODEL_PATH", p.model_path),
        ("DATA_PATH", p.data_path),
        ("EVAL_DATA_PATH", p.eval_data_path),
        ("WORK_DIR", p.work_dir),
    ):
        if val is not None and (p.env is None or var not in p.env):
            added[var] = val
    if p.backend is not None and (p.env is None or BACKEND_FLAG[p.backend] not in p.env):
        added[BACKEND_FLAG[p.backend]] = "1"
    env = {**added, **(p.env or {})}
    backend = next((b for b in FLAG_PRECEDENCE if env.get(BACKEND_FLAG[b], "0") == "1"), None)
    return env, added, backend


def task_data(inspect_result: Any, role: str) -> tuple[str | None, str]:
    """The first literal data path of the first task of a manager, and the judger rule set to use."""
    for t in getattr(inspect_result, "tasks", []) or []:
        if t.manager != role:
            continue
        judger = JUDGER_RULES.get(t.judger or "", "auto")
        paths = [x for x in t.data_paths if isinstance(x, str) and not x.startswith("<unresolved")]
        return (paths[0] if paths else None), judger
    return None, "auto"


def expected_from(inspect_result: Any, num_workers: int | None) -> tuple[Any, str | None]:
    """Build probe_environment's Expected from the config's resources; (None, reason) when unresolved."""
    from .probe_environment import Expected, ExternalPoolSpec

    pools = getattr(inspect_result, "resources", None) or []
    if not pools:
        return None, "the config's resources could not be read"
    first = pools[0]
    workers = num_workers if (num_workers is not None and first.role == "shared") else first.num_workers
    if not isinstance(workers, int):
        return None, f"num_workers is unresolved ({'; '.join(first.unresolved) or 'computed'}); pass num_workers"
    kw: dict[str, Any] = {"num_workers": workers}
    for src, dst in (
        ("num_cpus_per_worker", "num_cpus_per_worker"),
        ("cpu_memory_per_worker_bytes", "cpu_memory_per_worker"),
        ("accelerator", "accelerator"),
        ("num_accelerators_per_worker", "num_accelerators_per_worker"),
    ):
        v = getattr(first, src)
        if v is not None:
            kw[dst] = v
    if len(pools) > 1 and isinstance(pools[1].num_workers, int):
        kw["rollout_num_workers"] = pools[1].num_workers
    ext = []
    for cp in getattr(inspect_result, "cpu_pools", []) or []:
        spec: dict[str, Any] = {"name": cp.owner.split(" (", 1)[0][:200]}
        for f in ("num_workers", "num_cpus_per_worker"):
            if isinstance(getattr(cp, f), int | float):
                spec[f] = getattr(cp, f)
        if isinstance(cp.cpu_memory_per_worker_bytes, int):
            spec["cpu_memory_per_worker"] = cp.cpu_memory_per_worker_bytes
        ext.append(ExternalPoolSpec(**spec))
    kw["external_pools"] = ext
    kw["tracing"] = bool(getattr(inspect_result, "trace_enabled", False))
    try:
        return Expected(**kw), None
    except ValueError as exc:
        return None, f"resources out of range: {str(exc).splitlines()[0]}"


def merge(findings: list[tuple[str, Finding]], ran: set[str]) -> list[Finding]:
    """Drop cross-check duplicates, then route every finding to an owner."""
    ids = {f.id for _, f in findings}
    probe_ran = "probe_environment" in ran
    out: list[Finding] = []
    seen_same: set[str] = set()
    for _, f in findings:
        if f.id == "cmd.config_env_var_unset" and "inspect_config" in ran:
            continue  # inspect_config evaluated the same planned env
        if f.id == "config.backend_flag_needed" and probe_ran:
            continue  # probe_environment owns backend flags
        if f.id == "config.trace_needs_otel" and ids & {"probe.otel_packages_missing", "probe.otelcol_missing"}:
            continue  # the probe says precisely what is missing
        key = SAME_AS.get(f.id, f.id if f.id in SAME_AS.values() else None)
        if key is not None:
            if key in seen_same:
                continue
            seen_same.add(key)
        owner = FORCED_ROUTE.get(f.category) or f.owner or DEFAULT_ROUTE.get(f.category)
        out.append(f if owner == f.owner else f.model_copy(update={"owner": owner}))
    return dedupe_findings(out)


def run(params: Params, ctx: RunContext) -> Result:
    from . import build_rl_command, check_reward_data, inspect_config, probe_environment

    env, added, backend = planned_env(params)
    r = Runner(ctx, total=5)

    insp = r.run(
        "inspect_config",
        lambda c: inspect_config.run(inspect_config.Params(path=params.config, env=env, detail="full"), c),
        "config_edit",
    )
    data: dict[str, tuple[str | None, str]] = {}
    for role, given, var in (
        ("train", params.data_path, "DATA_PATH"),
        ("eval", params.eval_data_path, "EVAL_DATA_PATH"),
    ):
        from_config, judger = task_data(insp, role)
        data[role] = (given or from_config or env.get(var), judger)
    (train_path, train_judger), (eval_path, eval_judger) = data["train"], data["eval"]
    for role, path, judger in (("train", train_path, train_judger), ("eval", eval_path, eval_judger)):
        name = f"check_reward_data:{role}"
        if path is None:
            r.skip(name, f"no {role} data: not given, not a literal in the config, not in env")
            if role == "train":
                r.findings.append(
                    (
                        name,
                        _finding(
                            "preflight.train_data_unchecked",
                            "warning",
                            "data_format_other",
                            "The training data was not checked",
                            evidence="data_path was not given and the config's anno_path could not be resolved",
                            fix="Pass data_path=<path to the training .jsonl>.",
                            owner="data_preparation",
                        ),
                    )
                )
            continue
        r.run(
            name,
            lambda c, p=path, ro=role, j=judger: check_reward_data.run(
                check_reward_data.Params(path=p, role=ro, judger=j), c
            ),
            "data_preparation",
        )

    expected, why_not = expected_from(insp, params.num_workers) if insp is not None else (None, "config not read")
    checks = ["packages", "binaries", "env", "accelerators", "model"] + (["ray"] if params.probe_cluster else [])
    probe = r.run(
        "probe_environment",
        lambda c: probe_environment.run(
            probe_environment.Params(
                checks=checks,
                ray_address=params.ray_address,
                env=env,
                model_path=params.model_path,
                expected=expected if params.probe_cluster else None,
            ),
            c,
        ),
        "cluster_setup",
    )
    if params.probe_cluster and expected is None and why_not:
        r.findings.append(
            (
                "probe_environment",
                _finding(
                    "preflight.fit_not_checked",
                    "warning",
                    "ray_resources_insufficient",
                    "Whether the run fits the Ray cluster was not checked",
                    evidence=why_not,
                    fix="Pass num_workers, or make the config's resources literal.",
                    owner="cluster_setup",
                ),
            )
        )
    if backend is None and probe is not None:
        installed = {i.name for i in probe.packages.items if i.installed} if probe.packages else set()
        if not installed & {"lmdeploy", "sglang"}:
            r.findings.append(
                (
                    "probe_environment",
                    _finding(
                        "preflight.no_backend",
                        "blocker" if "xtuner" in installed else "warning",
                        "backend_not_installed",
                        "No rollout backend is chosen and neither lmdeploy nor sglang is installed",
                        evidence="no XTUNER_USE_* flag in the planned env; this server's Python has neither lmdeploy nor "
                        "sglang (a warning when xtuner is not installed here either: the run may use another Python)",
                        fix="Install one backend in the training environment (pip install -r requirements/lmdeploy.txt from "
                        "the XTuner repo, or sglang) and pass backend='lmdeploy' (exports XTUNER_USE_LMDEPLOY=1).",
                        source="xtuner/v1/rl/rollout/worker.py:457-470",
                        owner="backend_install",
                        reference="xtuner-rl://references/api-reference#rolloutconfig",
                    ),
                )
            )

    build = None
    if backend is None:
        r.skip("build_rl_command", "no backend chosen")
    else:
        workers = params.num_workers
        if workers is None and insp is not None and insp.resources and insp.resources[0].role == "shared":
            nw = insp.resources[0].num_workers
            workers = nw if isinstance(nw, int) else None
        # the plan sets these itself (from the parameters above); build_rl_command refuses them in extra_env
        extra = {k: v for k, v in (params.env or {}).items() if k not in build_rl_command.OWNED_ENV}
        build = r.run(
            "build_rl_command",
            lambda c: build_rl_command.run(
                build_rl_command.Params(
                    config=insp.path if insp is not None else params.config,
                    backend=backend,
                    model_path=env.get("MODEL_PATH"),
                    data_path=env.get("DATA_PATH"),
                    eval_data_path=env.get("EVAL_DATA_PATH"),
                    work_dir=env.get("WORK_DIR"),
                    num_workers=workers,
                    extra_env=extra,
                ),
                c,
            ),
            "launch_command",
        )
    ctx.progress(float(r.total), float(r.total), "done")

    merged = merge(r.findings, set(r.results))
    return build_result(params, r, merged, added, build)


def build_result(params: Params, r: Runner, merged: list[Finding], added: dict[str, str], build: Any) -> Result:
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
        summary = f"no_go: {counts['blocker']} blocker(s) ({who}); first: {blockers[0].title}"
    res = Result(
        summary=summary,
        verdict=verdict,
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


SPEC = ToolSpec("preflight", "Go/no-go before an XTuner RL launch", DESCRIPTION, Params, Result, run, open_world=True)
