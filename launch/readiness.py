"""Go/no-go before a launch: the environment the run will see, preflight's own findings, and the merge of every
check's findings into one list: one finding per root cause (the most specific, with the others' evidence), each
routed to the owner who has to act."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..core import Finding, ToolInputError, dedupe_findings
from ..core.findings import SEVERITY_ORDER
from .plan import FLAG_NAMES

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
    paths: Mapping[str, str | None], backend: str | None, env: Mapping[str, str] | None
) -> tuple[dict[str, str], dict[str, str], str | None]:
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
    severity: str,
    category: str,
    title: str,
    *,
    evidence: str = "",
    fix: str = "",
    owner: str | None = None,
    source: str | None = None,
    reference: str = "",
    location: str | None = None,
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,  # type: ignore[arg-type]
        category=category,  # type: ignore[arg-type]
        title=title,
        evidence=evidence,
        fix=fix,
        owner=owner,  # type: ignore[arg-type]
        source=source,
        reference=reference,
        location=location,
    )


def input_error_finding(name: str, exc: ToolInputError, owner: str, subject: str | None) -> Finding:
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


def check_failed_finding(name: str, exc: Exception, owner: str) -> Finding:
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


def no_backend_finding(xtuner_installed: bool) -> Finding:
    return preflight_finding(
        "preflight.no_backend",
        "blocker" if xtuner_installed else "warning",
        "backend_not_installed",
        "No rollout backend is chosen and neither lmdeploy nor sglang is installed",
        evidence="no XTUNER_USE_* flag in the planned env; this server's Python has neither lmdeploy nor "
        "sglang (a warning when xtuner is not installed here either: the run may use another Python)",
        fix="Install one backend in the training environment (pip install -r requirements/lmdeploy.txt from "
        "the XTuner repo, or sglang) and pass backend='lmdeploy' (exports XTUNER_USE_LMDEPLOY=1).",
        source="xtuner/v1/rl/rollout/worker.py:457-470",
        owner="backend_install",
        reference="xtuner-rl://references/api-reference#rolloutconfig",
    )


# --------------------------------------------------------------------------------------------------------
# Merging the checks' findings
# --------------------------------------------------------------------------------------------------------


def merge(findings: list[tuple[str, Finding]], ran: set[str]) -> list[Finding]:
    """Drop what another check says more precisely, keep one finding per root cause, route each to an owner."""
    ids = {f.id for _, f in findings}
    kept = [f for _, f in findings if not _superseded(f, ids, ran)]
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
