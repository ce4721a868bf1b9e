"""Go/no-go before a launch: the environment the run will see, preflight's own findings, and the merge of every
check's findings into one list: one finding per root cause (the most specific, with the others' evidence), each
routed to the owner who has to act."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..cluster.env import Backend
from ..cluster.ray import RaySnapshot
from ..config_analysis.view import ConfigView
from ..core import Finding, ToolInputError, dedupe_findings
from ..core.findings import DEFAULT_OWNER, FORCED_OWNER, SEVERITY_ORDER, Category, Owner, Severity, sort_findings
from .plan import FLAG_NAMES

#: Routing lives with Finding itself (core.findings), so one id has one owner in every tool; kept here by name.
FORCED_ROUTE = FORCED_OWNER
DEFAULT_ROUTE = DEFAULT_OWNER

#: When a problem fires, by category (the launch order is core.findings.Stage's; every row cites its XTuner line).
STAGE_BY_CATEGORY: dict[str, str] = {
    "ray_not_running": "ray_connect",  # ray.init(address="auto"), xtuner/v1/train/cli/rl.py:45-46
    "config_load_error": "config_load",  # Config.fromfile, rl.py:57
    "backend_flag_missing_or_multiple": "config_load",  # RolloutConfig.model_post_init, rollout/worker.py:476,503
    "backend_unsupported": "config_load",
    "staleness_or_partial_rollout": "config_load",
    "eval_or_interval_config": "config_load",
    "missing_env_var_or_path": "config_load",  # os.environ[...] in the config file
    "backend_not_installed": "trainer_init",  # get_rollout_engine_version, rl_trainer.py:658
    "debug_trace_output": "trainer_init",
    "ray_resources_insufficient": "placement_group",  # rl_trainer.py:1605, :1921-1922
    "resource_mismatch_num_workers": "rollout_start",  # rollout controller build, rl_trainer.py:1645
    "backend_runtime_error": "rollout_start",
    "model_loading": "rollout_start",  # train workers load the model, rl_trainer.py:1625
    "data_format_other": "dataset_build",  # agent-loop managers build their datasets, rl_trainer.py:710-731
    "reward_data_missing_ground_truth": "first_judged_batch",
}
#: Overrides by id (an id ending in "." is a prefix); the first match wins.
STAGE_BY_ID: tuple[tuple[str, str], ...] = (
    # the launch script and the CLI's own imports (xtuner/v1/train/cli/rl.py:6-13), before XTuner runs
    ("probe.xtuner_", "launch"),
    ("probe.torch_not_installed", "launch"),
    ("probe.ray_not_installed", "launch"),
    ("probe.cyclopts_not_installed", "launch"),
    ("probe.ray_cli_missing", "launch"),
    ("probe.env_must_precede_ray_start", "launch"),
    ("probe.exit_handler_stops_ray", "launch"),
    ("probe.python_", "launch"),
    ("preflight.ray_", "launch"),
    ("preflight.check_failed", "launch"),
    ("cmd.", "launch"),
    ("preflight.no_backend", "config_load"),  # no flag: rollout_backend asserts, rollout/worker.py:467-469
    ("probe.env_path_missing.WORK_DIR", "trainer_init"),
    ("probe.env_path_missing.MODEL_PATH", "rollout_start"),
    ("probe.model_path_missing", "rollout_start"),
    ("probe.env_path_missing.", "dataset_build"),  # DATA_PATH / EVAL_DATA_PATH are read by the datasets
    ("probe.path_missing", "dataset_build"),
    ("probe.fit_", "placement_group"),
    ("probe.pg_", "placement_group"),
    ("probe.otel", "trainer_init"),
    ("preflight.check_reward_data_input", "dataset_build"),
    ("preflight.train_data_unchecked", "dataset_build"),
    ("preflight.fit_not_checked", "placement_group"),
    ("config.eval_manager_missing", "dataset_build"),  # assert, rl_trainer.py:720
    ("config.evaluator_missing", "dataset_build"),  # assert, rl_trainer.py:734
    ("config.steps_missing", "dataset_build"),  # assert in _resolve_total_train_steps, rl_trainer.py:736,743
    ("config.debug_dir_missing", "rollout_start"),  # assert, rl_trainer.py:1632
    ("config.batch_judge_unsupported", "first_judged_batch"),
    ("config.task_missing_judger", "first_judged_batch"),
    ("config.eval_task_missing_judger", "first_eval"),
)


def stage_of(f: Finding) -> str | None:
    """The stage at which XTuner would hit ``f``: the finding's own, else by id, else by category."""
    if f.stage:
        return f.stage
    for prefix, stage in STAGE_BY_ID:
        if f.id == prefix or (prefix.endswith((".", "_")) and f.id.startswith(prefix)):
            return stage
    return STAGE_BY_CATEGORY.get(f.category)


def staged(findings: list[Finding]) -> list[Finding]:
    """Each finding with its stage filled in, ordered by severity and then by the stage that fires first."""
    out = [f if f.stage or stage_of(f) is None else f.model_copy(update={"stage": stage_of(f)}) for f in findings]
    return sort_findings(out)


#: The same problem reported by two checks: later ids map to the id of the check that runs first.
SAME_AS = {
    "cmd.config_missing_trainer": "config.missing_trainer",
    "cmd.config_not_python": "config.not_python",
    "cmd.config_syntax_error": "config.syntax_error",
    "config.vllm_backend_unsupported": "backend.vllm",
    "probe.backend_vllm_unsupported": "backend.vllm",
    "cmd.backend_vllm_unsupported": "backend.vllm",
}
#: "This path does not exist", as each check says it (``location`` holds the path), most specific first. An id
#: ending in "." is a prefix; a check's input error counts only when its code was path_not_found.
MISSING_PATH_IDS = (
    "probe.model_path_missing",
    "probe.env_path_missing.",
    "probe.path_missing",
    "preflight.check_reward_data_input",
)
PATH_NOT_FOUND_EVIDENCE = "code=path_not_found"


def planned_env(
    paths: Mapping[str, str | None], backend: Backend | None, env: Mapping[str, str] | None
) -> tuple[dict[str, str], dict[str, str], Backend | None]:
    """The env the run will see: ``paths`` (var -> value) and the backend flag first, then the caller's env on top.

    Returns (env, what was added from the parameters, the backend XTuner would pick from it).
    """
    added: dict[str, str] = {}
    for var, val in paths.items():
        if val is not None and (env is None or var not in env):
            added[var] = val
    if backend is not None and (env is None or FLAG_NAMES[backend] not in env):
        added[FLAG_NAMES[backend]] = "1"
    planned = {**added, **(env or {})}
    effective = next((b for b, flag in FLAG_NAMES.items() if planned.get(flag, "0") == "1"), None)
    return planned, added, effective


# --------------------------------------------------------------------------------------------------------
# Preflight's own findings
# --------------------------------------------------------------------------------------------------------


def preflight_finding(
    fid: str,
    severity: Severity,
    category: Category,
    title: str,
    *,
    evidence: str = "",
    fix: str = "",
    owner: Owner | None = None,
    source: str | None = None,
    reference: str = "",
    location: str | None = None,
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,
        fix=fix,
        owner=owner,
        source=source,
        reference=reference,
        location=location,
    )


def input_error_finding(name: str, exc: ToolInputError, owner: Owner, subject: str | None) -> Finding:
    """A check refused its input. ``subject`` is the path it was given: named as the location when that path does
    not exist, so that the other checks' findings about the same missing path merge with this one."""
    return preflight_finding(
        f"preflight.{name.split(':')[0]}_input",
        "blocker",
        "missing_env_var_or_path" if "path" in exc.code else "other",
        f"{name} could not run: {exc.message}",
        evidence=f"code={exc.code}",
        fix=exc.fix or "Fix the input and run preflight again.",
        owner=owner,
        location=subject if exc.code == "path_not_found" else None,
    )


def check_failed_finding(name: str, exc: Exception, owner: Owner) -> Finding:
    return preflight_finding(
        "preflight.check_failed",
        "blocker",
        "other",
        f"{name} failed internally, so it could not vouch for the launch",
        evidence=type(exc).__name__,
        fix=f"Run {name.split(':')[0]} on its own to see more.",
        owner=owner,
    )


def train_data_unchecked_finding() -> Finding:
    return preflight_finding(
        "preflight.train_data_unchecked",
        "warning",
        "data_format_other",
        "The training data was not checked",
        evidence="data_path was not given and the config's anno_path could not be resolved",
        fix="Pass data_path=<path to the training .jsonl>.",
        owner="data_preparation",
    )


def fit_not_checked_finding(why_not: str) -> Finding:
    return preflight_finding(
        "preflight.fit_not_checked",
        "warning",
        "ray_resources_insufficient",
        "Whether the run fits the Ray cluster was not checked",
        evidence=why_not,
        fix="Pass num_workers, or make the config's resources literal.",
        owner="cluster_setup",
    )


def no_backend_finding(xtuner_installed: bool, where: str = "this server's Python") -> Finding:
    return preflight_finding(
        "preflight.no_backend",
        "blocker" if xtuner_installed else "warning",
        "backend_not_installed",
        "No rollout backend is chosen and neither lmdeploy nor sglang is installed",
        evidence=f"no XTUNER_USE_* flag in the planned env; {where} has neither lmdeploy nor "
        "sglang (a warning when xtuner is not installed there either: the run may use another Python)",
        fix="Install one backend in the training environment (pip install -r requirements/lmdeploy.txt from "
        "the XTuner repo, or sglang) and pass backend='lmdeploy' (exports XTUNER_USE_LMDEPLOY=1).",
        source="xtuner/v1/rl/rollout/worker.py:457-470",
        owner="backend_install",
        reference="xtuner-rl://references/api-reference#rolloutconfig",
    )


# --------------------------------------------------------------------------------------------------------
# Merging the checks' findings
# --------------------------------------------------------------------------------------------------------


#: Facts that decide the run only together: (what the config asks, what the environment lacks). When both are
#: found they become one finding — the environment's, at the severity the config makes it, naming the config line.
JOINS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("config.trace_needs_otel", ("probe.otelcol_missing", "probe.otel_packages_missing")),
)


def joined(findings: list[Finding]) -> list[Finding]:
    """Each environment finding a config finding makes decisive, with the config's location and evidence."""
    by_id = {f.id: f for f in findings}
    out = list(findings)
    for config_id, env_ids in JOINS:
        cause = by_id.get(config_id)
        if cause is None:
            continue
        for i, f in enumerate(out):
            if f.id in env_ids:
                out[i] = f.model_copy(
                    update={
                        "severity": "blocker",
                        "location": cause.location or f.location,
                        "evidence": f"{f.evidence}; the config asks for it ({cause.location}: {cause.title})",
                    }
                )
    return out


#: The model directory as each check reports it missing or without config.json.
MODEL_DIR_IDS = ("probe.env_path_missing.MODEL_PATH", "probe.model_path_missing", "probe.model_config_missing")
SRC_MODEL_CONFIG_READ = "xtuner/v1/model/__init__.py:52-54"


def model_read_at_load(findings: list[Finding], view: ConfigView) -> list[Finding]:
    """A config that calls ``get_model_config_from_hf`` at module level reads the model's config.json while XTuner
    loads the file, so a missing model directory fails at config load, not when the workers start."""
    line = view.facts.model_config_at_load
    if line is None:
        return findings
    note = (
        f"; the config reads the model's config.json when XTuner loads it ({view.name}:{line}: "
        f"get_model_config_from_hf -> AutoConfig.from_pretrained, {SRC_MODEL_CONFIG_READ})"
    )
    return [
        f.model_copy(update={"stage": "config_load", "evidence": f.evidence + note}) if f.id in MODEL_DIR_IDS else f
        for f in findings
    ]


def merge(findings: list[tuple[str, Finding]], ran: set[str]) -> list[Finding]:
    """Join facts that decide the run together, drop what another check says more precisely, keep one finding per
    root cause, route each to an owner."""
    ids = {f.id for _, f in findings}
    kept = [f for f in joined([f for _, f in findings]) if not _superseded(f, ids, ran)]
    out: list[Finding] = []
    for f in one_per_root_cause(kept):
        owner = FORCED_ROUTE.get(f.category) or f.owner or DEFAULT_ROUTE.get(f.category)
        out.append(f if owner == f.owner else f.model_copy(update={"owner": owner}))
    return dedupe_findings(out)


def _superseded(f: Finding, ids: set[str], ran: set[str]) -> bool:
    if f.id == "cmd.config_env_var_unset" and "inspect_config" in ran:
        return True  # inspect_config evaluated the same planned env
    if f.id == "config.backend_flag_needed" and "probe_environment" in ran:
        return True  # probe_environment owns backend flags
    # the probe says precisely what is missing
    return f.id == "config.trace_needs_otel" and bool(ids & {"probe.otel_packages_missing", "probe.otelcol_missing"})


def one_per_root_cause(findings: list[Finding]) -> list[Finding]:
    """Findings with the same root cause become one, where the first of them stood: the most specific id (the first
    when equal), the highest severity among them, and the others' evidence appended."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        key = root_cause(f)
        if key is not None:
            groups.setdefault(key, []).append(f)
    out: list[Finding] = []
    for f in findings:
        key = root_cause(f)
        if key is None:
            out.append(f)
        elif groups[key][0] is f:
            out.append(_merged(groups[key]))
    return out


def root_cause(f: Finding) -> str | None:
    """What two checks' findings share when they report the same problem; None when the finding stands alone."""
    if f.id in SAME_AS or f.id in SAME_AS.values():
        return SAME_AS.get(f.id, f.id)
    if f.location and _missing_path_rank(f) is not None:
        return "missing path " + os.path.normpath(os.path.expanduser(f.location))
    return None


def _missing_path_rank(f: Finding) -> int | None:
    for rank, fid in enumerate(MISSING_PATH_IDS):
        if f.id == fid or (fid.endswith(".") and f.id.startswith(fid)):
            if fid.endswith("_input") and f.evidence != PATH_NOT_FOUND_EVIDENCE:
                return None
            return rank
    return None


def _merged(group: list[Finding]) -> Finding:
    if len(group) == 1:
        return group[0]
    best = min(group, key=lambda f: _missing_path_rank(f) or 0)
    severity = min((f.severity for f in group), key=lambda s: SEVERITY_ORDER[s])
    others = "; ".join(f"also {f.id}" + (f": {f.evidence}" if f.evidence else "") for f in group if f is not best)
    evidence = f"{best.evidence} ({others})" if best.evidence else f"({others})"
    return best.model_copy(update={"severity": severity, "evidence": evidence})


# --------------------------------------------------------------------------------------------------------
# A plan that starts Ray itself
# --------------------------------------------------------------------------------------------------------

#: With a plan that starts Ray, "no cluster" is a step of the plan, not a problem: these probe findings are dropped.
PLAN_STARTS_RAY_DROPS = frozenset(
    {"probe.ray_not_running", "probe.ray_unreachable", "probe.ray_probe_timed_out", "probe.exit_handler_stops_ray"}
)
SRC_RAY_START_CONFLICT = "xtuner/v1/train/cli/rl.py:45-46"


def plan_cluster_finding(snap: RaySnapshot, need: str) -> Finding:
    """The plan starts Ray: say so (info) when no cluster runs here, flag the one already running as the conflict."""
    running = snap.reachable and not snap.auth_required and snap.method != "none"
    local = snap.resolution.source == "address_file" or (snap.gcs_address or "").startswith(("127.", "localhost"))
    if running and local:
        return preflight_finding(
            "preflight.ray_already_running",
            "blocker",
            "ray_not_running",
            f"A Ray cluster is already running on this node ({snap.gcs_address}), but the launch plan starts its own",
            evidence="the plan's `ray start --head` fails while a head runs here; XTuner would then join whichever "
            f"cluster ray.init(address='auto') finds. {need}",
            fix="Stop it first (`ray stop`, after checking nothing else uses it), or keep it and run preflight with "
            "cluster='running' so the run joins it (its resources are then checked against the config).",
            source=SRC_RAY_START_CONFLICT,
            reference="xtuner-rl://references/cluster-and-backends#ray-preparation",
            owner="cluster_setup",
        )
    return preflight_finding(
        "preflight.ray_started_by_plan",
        "info",
        "ray_not_running",
        "No Ray cluster is running here, as expected: the launch plan starts it"
        + (f" ({snap.gcs_address} answers, but it is not on this node)" if running else ""),
        evidence=need or "the config's resources could not be read, so the Ray need is unknown",
        fix="Run the plan's `ray start` lines with at least these resources; a leftover address file after a crash "
        "is XTuner's own cleanup (its exit handler runs `ray stop --force`), not a fault.",
        source=SRC_RAY_START_CONFLICT,
        reference="xtuner-rl://references/cluster-and-backends#ray-preparation",
        owner="cluster_setup",
    )
