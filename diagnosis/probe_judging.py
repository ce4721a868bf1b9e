"""Live checks judged together with the report: the blockers that run_probes finds become ranked findings (or
evidence for a finding the report already suggests), and a Ray cluster found stopped after a failed run is read as
XTuner's own exit cleanup, not as the cause."""

from __future__ import annotations

import re
from typing import Any

from ..core import Finding
from ..core.findings import STAGE_ORDER
from .models import Diagnosis, Evidence
from .ranking import fill_call

#: XTuner's RL entry point registers an exit handler (SIGINT/SIGTERM and atexit) that runs ray.shutdown() and then
#: `ray stop --force` on the node that launched the run.
SRC_CLEANUP = ["xtuner/v1/train/cli/rl.py:69-71", "xtuner/v1/rl/utils/ray_utils.py:117-156"]
CLEANUP_NOTE = (
    "Expected after the run ended: XTuner's RL entry point registers an exit handler that calls ray.shutdown() "
    "and `ray stop --force` on the launching node when the run exits (crash, Ctrl-C or SIGTERM included), so a "
    "stopped cluster is XTuner's own cleanup, not the cause."
)
CLEANUP_FIX = [
    "Start Ray again (ray start --head ... on the head, ray start --address=<head>:6379 on the others, as the launch "
    "script does) before relaunching; then re-run probe_environment if the diagnosis needs the cluster's resources."
]
#: Probe finding ids whose meaning is "no Ray cluster answers right now".
RAY_DOWN_IDS = frozenset({"probe.ray_not_running", "probe.ray_unreachable"})
#: When a failure of a category fires, for findings that carry no stage (core.Stage order).
CATEGORY_STAGE: dict[str, str] = {
    "ray_not_running": "ray_connect",
    "backend_flag_missing_or_multiple": "config_load",
    "backend_unsupported": "config_load",
    "config_load_error": "config_load",
    "missing_env_var_or_path": "config_load",
    "eval_or_interval_config": "trainer_init",
    "debug_trace_output": "trainer_init",
    "ray_resources_insufficient": "placement_group",
    "resource_mismatch_num_workers": "placement_group",
    "backend_not_installed": "rollout_start",
    "backend_runtime_error": "rollout_start",
    "model_loading": "rollout_start",
    "data_format_other": "dataset_build",
    "reward_data_missing_ground_truth": "first_judged_batch",
    "staleness_or_partial_rollout": "later",
}
#: Words of a report about a run that already ended.
_ENDED = re.compile(r"(?i)\b(?:died|crash\w*|killed|exited|failed|aborted|oom)\b|挂了|崩溃|退出|报错|失败|被杀")
PROBE_BLOCKER_CONFIDENCE = 0.6
PROBE_WARNING_CONFIDENCE = 0.3
PASSED_CONFIDENCE = 0.1  # ranked below what the report suggests

#: Finding ids of the other tools -> the catalog entry that describes the same failure.
_CATALOG_IDS: dict[str, str] = {
    "probe.ray_unreachable": "ray_gcs_unreachable",
    "probe.model_path_missing": "model_path_not_found",
    "probe.path_missing": "path_not_found",
    "probe.env_path_missing": "path_not_found",
    "probe.env_unset": "missing_env_var_in_config",
    "probe.backend_flags_multiple": "backend_flag_multiple",
    "probe.backend_vllm_unsupported": "vllm_rollout_not_implemented",
    "probe.fit_gpu": "ray_not_enough_gpus",
    "probe.fit_npu": "ray_not_enough_gpus",
    "probe.fit_cpu": "ray_not_enough_cpus_or_memory",
    "probe.fit_memory": "ray_not_enough_cpus_or_memory",
    "probe.pg_pending": "placement_group_pending",
    "probe.pg_infeasible": "placement_group_pending",
    "config.backend_flag_needed": "backend_flag_missing",
    "config.backend_flags_multiple": "backend_flag_multiple",
    "config.env_var_missing": "missing_env_var_in_config",
    "config.interval_not_multiple": "interval_not_multiple_of_sync",
    "config.steps_missing": "total_steps_missing",
    "config.missing_trainer": "config_missing_trainer",
    "config.pg_strategy_invalid": "pg_pack_strategy_invalid",
    "config.vllm_backend_unsupported": "vllm_rollout_not_implemented",
    "config.unknown_field": "config_extra_field",
    "config.missing_required_field": "config_field_required",
    "data.missing_ground_truth": "reward_missing_ground_truth",
    "data.missing_reward_model": "reward_missing_ground_truth",
    "data.empty_ground_truth": "reward_missing_ground_truth",
    "data.missing_prompt": "data_missing_prompt",
    "data.messages_instead_of_prompt": "data_missing_prompt",
    "data.raw_hf_gsm8k_line": "data_missing_prompt",
    "data.missing_data_source": "data_missing_data_source",
    "data.empty_data_source": "data_missing_data_source",
    "data.data_source_not_string": "data_missing_data_source",
    "data.invalid_json": "data_json_decode_error",
    "data.invalid_utf8": "data_json_decode_error",
    "data.truncated_last_line": "data_json_decode_error",
    "data.parquet_file": "data_file_not_jsonl",
    "data.prompt_not_list": "prompt_not_message_list",
    "data.gsm8k_ground_truth_not_string": "reward_always_zero",
    "data.gsm8k_ground_truth_format": "reward_always_zero",
}


def catalog_id(catalog: Any, finding: Finding) -> str | None:
    """The catalog entry a probe finding is an instance of (None: no entry describes it)."""
    key = finding.id.split(".")
    for candidate in (finding.id, ".".join(key[:2])):  # "probe.env_unset.WORK_DIR" -> "probe.env_unset"
        if candidate in _CATALOG_IDS:
            return _CATALOG_IDS[candidate]
    suffix = key[1] if len(key) > 1 else key[0]
    return suffix if suffix in catalog.by_id else None


def _ended_run(diagnosed: list[Diagnosis], text: str) -> bool:
    """The report is about a run that started and ended (not about reaching Ray in the first place)."""
    if any(d.category == "ray_not_running" for d in diagnosed[:3]):
        return False
    return bool(diagnosed) or bool(_ENDED.search(text))


def _stage(category: str, stage: str | None = None) -> int | None:
    name = stage or CATEGORY_STAGE.get(category)
    return STAGE_ORDER.get(name) if name else None


def reached_stage(diagnosed: list[Diagnosis]) -> int | None:
    """How far the reported run got: where its first exact blocker fires, else where the top suspicion does."""
    exact = [d for d in diagnosed if d.match.startswith("signature") and d.severity == "blocker"]
    lead = exact[0] if exact else next((d for d in diagnosed if d.match == "description"), None)
    return _stage(lead.category) if lead else None


def _passed(d: Diagnosis, stage_name: str) -> None:
    """A probe blocker the reported run already got past: this machine's state now, not the run's cause."""
    d.severity = "warning"
    d.confidence = min(d.confidence, PASSED_CONFIDENCE)
    d.cause = (
        f"The reported run got past {stage_name}, where this would have stopped it, so this is how this machine is "
        f"set up now (e.g. the server's own environment), not what went wrong in the run; fix it before relaunching "
        f"from here. {d.cause}"
    )


def _place(out: list[Diagnosis], d: Diagnosis) -> None:
    """Insert ``d`` ahead of the first finding with a lower confidence (the rest keeps its order)."""
    if d in out:
        out.remove(d)
    pos = next((i for i, o in enumerate(out) if o.confidence < d.confidence), len(out))
    out.insert(pos, d)


def _from_probe(catalog: Any, tool: str, f: Finding, fm_id: str | None, ev: Evidence, values: dict) -> Diagnosis:
    fm = catalog.by_id.get(fm_id) if fm_id else None
    conf = PROBE_BLOCKER_CONFIDENCE if f.severity == "blocker" else PROBE_WARNING_CONFIDENCE
    cause = fm.cause if fm else f.title
    return Diagnosis(
        failure_mode_id=fm_id or f.id,
        category=f.category,
        match="probe",
        severity=f.severity,
        confidence=conf,
        title=f.title,
        evidence=[ev],
        evidence_omitted=0,
        occurrences=1,
        cause=f"{cause} Found by a live check ({tool}), not in the report.",
        fix=[f.fix] if f.fix else list(fm.fix) if fm else [],
        confirm_with=[fill_call(c, values) for c in fm.confirm_with] if fm else [],
        reference=fm.uri if fm else f.reference,
        doc_reference=fm.doc_uri if fm else f.reference,
        source=[f.source] if f.source else list(fm.source) if fm else [],
        route=fm.route if fm else None,
    )


def _as_cleanup(d: Diagnosis) -> None:
    d.severity = "info"
    d.confidence = min(d.confidence, 0.1)
    d.cause = CLEANUP_NOTE
    d.fix = list(CLEANUP_FIX)
    d.source = list(SRC_CLEANUP)


def judge_probes(
    catalog: Any,
    diagnosed: list[Diagnosis],
    probe_findings: list[tuple[str, Finding]],
    values: dict[str, Any],
    text: str = "",
) -> list[Diagnosis]:
    """The report's findings with the probes' blockers (and warnings on a suspected cause) ranked among them."""
    out = list(diagnosed)
    ended = _ended_run(diagnosed, text)
    reached = reached_stage(diagnosed)
    by_id = {d.failure_mode_id: d for d in out}
    for tool, f in probe_findings:
        if f.severity == "info":
            continue
        fm_id = catalog_id(catalog, f)
        text = f"{f.title}: {f.evidence}" if f.evidence else f.title
        ev = Evidence(source=f"probe:{tool}", line=0, text=text[:300], kind="probe", context=f.id)
        cleanup = f.id in RAY_DOWN_IDS and ended
        known = by_id.get(fm_id or f.id)
        if known is not None:
            known.evidence.append(ev)
            if not cleanup and f.severity == "blocker":
                known.confidence = round(min(0.95, max(known.confidence, PROBE_BLOCKER_CONFIDENCE) + 0.1), 2)
                if known.match == "description":
                    known.match = "description_and_probe"
                _place(out, known)
            continue
        if f.severity != "blocker":
            continue
        d = _from_probe(catalog, tool, f, fm_id, ev, values)
        fires = _stage(f.category, getattr(f, "stage", None))
        if cleanup:
            _as_cleanup(d)
        elif reached is not None and fires is not None and fires < reached:
            _passed(d, getattr(f, "stage", None) or CATEGORY_STAGE[f.category])
        by_id[d.failure_mode_id] = d
        _place(out, d)
    return out


def note_cleanup_after_failure(diagnosed: list[Diagnosis]) -> None:
    """A log that shows "no running Ray instance" next to another failure: the other failure came first and XTuner's
    exit handler stopped Ray; rank ray_not_running after it and say so."""
    others = [
        d
        for d in diagnosed
        if d.match.startswith("signature") and d.severity == "blocker" and d.category != "ray_not_running"
    ]
    if not others:
        return
    top = max(d.confidence for d in others)
    for d in [d for d in diagnosed if d.failure_mode_id == "ray_not_running" and d.match.startswith("signature")]:
        d.cause = f"{CLEANUP_NOTE} {d.cause}"
        d.source = list(dict.fromkeys([*d.source, *SRC_CLEANUP]))
        d.confidence = max(0.05, min(d.confidence, round(top - 0.05, 2)))
        last = max(diagnosed.index(o) for o in others)
        if diagnosed.index(d) < last:  # only ever moves down, behind the failure that came first
            diagnosed.remove(d)
            diagnosed.insert(last, d)
