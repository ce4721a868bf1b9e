"""diagnose_symptom: ranked, evidence-backed diagnosis of a failed or stuck XTuner RL run.

Input is pasted text and/or a log file or log directory. Logs are streamed in chunks with bounded memory: a few
C-speed ``bytes.find`` passes over each chunk pick the candidate lines (lines holding an error/warning marker, or
for small inputs any catalog literal), only those lines are decoded, cleaned (ANSI codes, CR, timestamps, log
levels, Ray worker prefixes) and matched against the failure-mode catalog (``references/failure_modes.toml``).
A small per-worker state machine follows Python tracebacks (chained exceptions, Ray-wrapped errors, pydantic
validation blocks) so the root-cause exception weighs most. Findings are ranked by a confidence built from the
entry's specificity and where it matched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import RunContext, ToolInputError, ToolResult, params_model_config
from ..core.findings import Detail, Finding
from ..diagnosis import log_scanner
from ..diagnosis.descriptions import described_lines, is_log
from ..diagnosis.log_scanner import Scanner
from ..diagnosis.models import Diagnosis
from ..diagnosis.probe_judging import judge_probes, note_cleanup_after_failure
from ..diagnosis.ranking import (
    Verdict,
    choose_verdict,
    demote_recovered,
    rank,
    rank_findings,
    separating_questions,
)
from ..diagnosis.report_values import report_values
from ..diagnosis.sources import (
    MAX_DIR_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILES,
    LogFile,
    LogFiles,
    collect_log_files,
    scan_log_files,
    text_chunks,
)
from ..diagnosis.summary import summarize
from ..knowledge.catalog import load_catalog
from . import check_reward_data, inspect_config, probe_environment

# --------------------------------------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------------------------------------

MAX_TEXT_CHARS = 4_000_000
EVIDENCE_CAP: dict[str, int] = {"summary": 1, "normal": 3, "full": 10}
UNRECOGNIZED_CAP: dict[str, int] = {"summary": 3, "normal": 10, "full": 50}


class Params(BaseModel):
    model_config = params_model_config()

    text: str | None = Field(
        default=None,
        max_length=MAX_TEXT_CHARS,
        description="Pasted error, traceback or log; this and/or log_path",
    )
    log_path: str | None = Field(
        default=None,
        description=f"Log file or dir (*.log/txt/out/err, depth {MAX_DIR_DEPTH}, newest {MAX_FILES})",
    )
    config_path: str | None = Field(
        default=None, description="Run's config (.py): fills confirm_with; inspected with run_probes"
    )
    data_path: str | None = Field(
        default=None, description="Run's training JSONL: fills confirm_with; checked with run_probes"
    )
    run_probes: bool = Field(
        default=False,
        description="Confirm with read-only probe_environment, check_reward_data, inspect_config",
    )
    max_findings: int = Field(default=5, ge=1, le=50)
    detail: Detail = Field(
        default="normal", description="Evidence/unrecognized lines: summary 1/3, normal 3/10, full 10/50"
    )


class UnrecognizedError(BaseModel):
    source: str
    line: int = Field(description="First occurrence")
    text: str
    count: int = Field(description="Occurrences of this message (numbers ignored)")


class Probe(BaseModel):
    tool: str
    status: Literal["ok", "failed"] = Field(description="ok: ran; failed: refused its input or crashed")
    summary: str
    confirms: list[str] = Field(default_factory=list, description="Diagnosed failure_mode_ids this probe supports")
    findings: list[Finding] = Field(default_factory=list, description="The probe's blockers and warnings (capped)")


class Route(BaseModel):
    area: Literal["data_preparation", "sft_training", "model_backends", "legacy_cli"]
    reason: str
    failure_mode_ids: list[str] = Field(default_factory=list)


class Scanned(BaseModel):
    sources: list[str]
    sources_omitted: int
    bytes: int
    lines: int
    candidate_lines: int = Field(description="Lines decoded and matched (the rest skipped by the prefilter)")
    scan_mode: Literal["exact", "markers"] = Field(
        description="exact: every catalog literal searched; markers: large input, only lines with an error/warning "
        "marker matched"
    )
    notes: list[str] = Field(default_factory=list)


class Result(ToolResult):
    verdict: Verdict = Field(
        description="failure_found: a blocker's exact message matched; blocker_found_by_probe: only a live check "
        "found one; hang_suspected: only stall signals; suspected_from_description: ranked from wording (confirm "
        "with look_for, questions); uncertain: two causes fit the wording about equally (questions[0] separates "
        "them); no_known_failure: see unrecognized_errors"
    )
    findings: list[Diagnosis] = Field(description="Best first; each says how it matched")
    questions: list[str] = Field(
        default_factory=list, description="When only suspected: what tells the candidates apart"
    )
    findings_omitted: int
    unrecognized_errors: list[UnrecognizedError] = Field(
        description="Error-looking lines no entry matched (distinct, first occurrence)"
    )
    unrecognized_errors_omitted: int = Field(description="Distinct unrecognized messages not listed")
    probes: list[Probe] = Field(default_factory=list, description="Live checks, when run_probes is true")
    route: list[Route] = Field(default_factory=list, description="Where the fix belongs when not in this server")
    scanned: Scanned


# --------------------------------------------------------------------------------------------------------
# Probes: the other tools that confirm a diagnosis
# --------------------------------------------------------------------------------------------------------

_PROBE_CONFIRMS: dict[str, set[str]] = {
    "probe_environment": {
        "ray_not_running",
        "ray_resources_insufficient",
        "backend_not_installed",
        "backend_flag_missing_or_multiple",
        "backend_unsupported",
        "missing_env_var_or_path",
        "model_loading",
    },
    "check_reward_data": {"reward_data_missing_ground_truth", "data_format_other"},
    "inspect_config": {
        "config_load_error",
        "eval_or_interval_config",
        "staleness_or_partial_rollout",
        "debug_trace_output",
        "resource_mismatch_num_workers",
        "backend_unsupported",
        "missing_env_var_or_path",
    },
}


#: The operations a diagnosis may run as probes, by tool name: (parameter model, run).
_PROBES: dict[str, tuple[type[BaseModel], Callable[[Any, RunContext], ToolResult]]] = {
    "probe_environment": (probe_environment.Params, probe_environment.run),
    "check_reward_data": (check_reward_data.Params, check_reward_data.run),
    "inspect_config": (inspect_config.Params, inspect_config.run),
}


def _run_probe(tool: str, args: dict[str, Any], ctx: RunContext, diagnosed: list[Diagnosis]) -> Probe:
    model, run_probe = _PROBES[tool]
    try:
        params = model(**args)
    except Exception as exc:  # a bad argument for the colleague's tool
        return Probe(tool=tool, status="failed", summary=f"{tool} refused the arguments: {_short(exc)}")
    try:
        res = run_probe(params, ctx)
    except ToolInputError as exc:
        return Probe(tool=tool, status="failed", summary=f"{tool}: {exc.message}")
    except Exception as exc:
        return Probe(tool=tool, status="failed", summary=f"{tool} failed: {type(exc).__name__}")
    findings = [f for f in getattr(res, "findings", []) or [] if isinstance(f, Finding) and f.severity != "info"]
    cats = {f.category for f in findings}
    relevant = _PROBE_CONFIRMS.get(tool, set())
    confirms = [d.failure_mode_id for d in diagnosed if d.category in cats and d.category in relevant]
    return Probe(tool=tool, status="ok", summary=res.summary, confirms=confirms, findings=findings[:8])


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


# --------------------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------------------


def _log_files(params: Params, ctx: RunContext) -> LogFiles:
    """The log files to read (newest first), how many were left out and which were refused."""
    if not params.log_path:
        return LogFiles()
    root = ctx.paths.check(params.log_path, kind="any", what="log_path")
    if not root.is_dir():
        return LogFiles(files=[LogFile(root, os.stat(root).st_size)])
    listed = collect_log_files(root, ctx)
    if not listed.files:
        raise ToolInputError(
            "no_log_files",
            f"log_path {params.log_path!r} is a directory without readable *.log/*.txt/*.out/*.err files "
            f"(searched {MAX_DIR_DEPTH} levels deep)" + (f"; {'; '.join(listed.notes[:3])}" if listed.notes else ""),
            "Pass the logs directory of the run (<work_dir>/<timestamp>/logs) or a log file.",
        )
    return listed


def _scan(params: Params, ctx: RunContext, listed: LogFiles) -> tuple[Scanner, Scanned]:
    """Stream the pasted text and the files through the signature scanner, within the byte budgets."""
    text = params.text if params.text and params.text.strip() else ""
    text_bytes = len(text.encode("utf-8", "replace"))
    total = sum(min(f.size, MAX_FILE_BYTES) for f in listed.files) + text_bytes
    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done += n
        ctx.progress(done, max(total, done), "scanning logs")

    scanner = Scanner(load_catalog(), EVIDENCE_CAP[params.detail], progress, ctx.limits)
    sources: list[str] = []
    if text:
        scanner.scan_bytes_stream("text", text_chunks(text), text_bytes)
        sources.append("text")
    limit = log_scanner.FULL_SCAN_MAX_BYTES
    exact = text_bytes <= limit and all(f.size <= limit for f in listed.files)
    read = scan_log_files(scanner, listed, ctx.paths)
    sources += read.sources
    notes = read.notes
    omitted_files = read.omitted
    notes.extend(scanner.notes)
    scanned = Scanned(
        sources=sources[:20],
        sources_omitted=max(0, len(sources) - 20) + omitted_files,
        bytes=scanner.bytes,
        lines=scanner.lines,
        candidate_lines=scanner.candidates,
        scan_mode="exact" if exact else "markers",
        notes=notes[:10],
    )
    return scanner, scanned


def _probes(params: Params, ctx: RunContext, shown: list[Diagnosis]) -> list[Probe]:
    """The live checks run_probes asks for: environment always, data and config when given."""
    if not params.run_probes:
        return []
    checks = sorted(
        {
            c
            for d in shown
            for call in d.confirm_with
            if call.tool == "probe_environment"
            for c in call.arguments.get("checks", [])
        }
        or {"backend", "ray"}
    )
    probes = [_run_probe("probe_environment", {"checks": checks, "detail": "summary"}, ctx, shown)]
    if params.data_path:
        probes.append(_run_probe("check_reward_data", {"path": params.data_path, "detail": "summary"}, ctx, shown))
    if params.config_path:
        probes.append(_run_probe("inspect_config", {"path": params.config_path, "detail": "summary"}, ctx, shown))
    return probes


def run(params: Params, ctx: RunContext) -> Result:
    if not (params.text and params.text.strip()) and not params.log_path:
        raise ToolInputError(
            "no_input",
            "Nothing to diagnose: give `text` (a pasted error or log excerpt) and/or `log_path`.",
            "Paste the traceback or the last few hundred log lines into `text`, or pass the log file/directory.",
        )
    listed = _log_files(params, ctx)
    scanner, scanned = _scan(params, ctx, listed)
    hints = scanner.backend_hints
    values: dict[str, Any] = {"nodes": None, **report_values(params.text)}
    values.update(data_path=params.data_path, config_path=params.config_path, log_path=params.log_path)
    if hints:
        values["backend"] = max(hints, key=lambda k: hints[k])
    catalog = load_catalog()
    described = described_lines(params.text) if params.text else []
    described += [(n, t) for src, n, t, _c in scanner.unrecognized.values() if src != "text"]
    from_log = bool(listed.files) or is_log(params.text or "")
    ranked = rank_findings(catalog, rank(catalog, scanner, values), described, values, from_log)
    diagnosed = demote_recovered(ranked, scanner, params.text)
    note_cleanup_after_failure(diagnosed)
    probes = _probes(params, ctx, diagnosed[: params.max_findings])
    probed = [(p.tool, f) for p in probes if p.status == "ok" for f in p.findings]
    diagnosed = judge_probes(catalog, diagnosed, probed, values, params.text or "")
    shown = diagnosed[: params.max_findings]
    unrec_all = sorted(scanner.unrecognized.values(), key=lambda it: (it[0] != "text", it[1]))
    unrec = [
        UnrecognizedError(source=s, line=n, text=t, count=c)
        for s, n, t, c in unrec_all[: UNRECOGNIZED_CAP[params.detail]]
    ]
    verdict = choose_verdict(shown)
    return Result(
        summary=summarize(verdict, shown, len(diagnosed), scanner, len(unrec_all)),
        verdict=verdict,
        findings=shown,
        findings_omitted=len(diagnosed) - len(shown),
        unrecognized_errors=unrec,
        unrecognized_errors_omitted=max(0, len(unrec_all) - len(unrec)),
        questions=separating_questions(catalog, shown, values)
        if verdict in ("suspected_from_description", "uncertain", "no_known_failure", "blocker_found_by_probe")
        else [],
        probes=probes,
        route=_routes(shown, scanner),
        scanned=scanned,
    )


def _routes(shown: list[Diagnosis], scanner: Scanner) -> list[Route]:
    reasons = {
        "data_preparation": "the training/eval data must be converted or fixed before the RL run",
        "sft_training": "the traceback runs through XTuner's SFT trainer, not the RL trainer",
        "model_backends": "the error is raised inside the inference engine (LMDeploy/SGLang/vLLM)",
        "legacy_cli": "the command or config uses the legacy XTuner CLI or removed V1 RL APIs",
    }
    areas: dict[str, list[str]] = {}
    for d in shown:
        if d.route:
            areas.setdefault(d.route, []).append(d.failure_mode_id)
    for area in scanner.routes:
        areas.setdefault(area, [])
    return [Route(area=a, reason=reasons[a], failure_mode_ids=ids) for a, ids in areas.items()]  # type: ignore[arg-type]
