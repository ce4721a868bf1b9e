"""The one-line answer of diagnose_symptom: the verdict with the finding that decides it and its confidence."""

from __future__ import annotations

from .log_scanner import Scanner
from .models import Diagnosis
from .ranking import competing


def summarize(verdict: str, shown: list[Diagnosis], total: int, scanner: Scanner, unrec: int) -> str:
    """Lead with the deciding finding; say what the live checks found when they ran."""
    tail = f"scanned {scanner.lines:,} lines"
    if unrec:
        tail = f"{unrec} unrecognized error line(s); " + tail
    probed = [d for d in shown if d.severity == "blocker" and d.match in ("probe", "description_and_probe")]
    if verdict == "blocker_found_by_probe":
        top = probed[0]
        suspects = [d for d in shown if d.match == "description"][:2]
        also = ", ".join(f"{d.failure_mode_id} ({d.confidence:.2f})" for d in suspects)
        read = f"; suspected from the report: {also}" if also else "; the report matched no exact error message"
        more = f" ({len(probed) - 1} more)" if len(probed) > 1 else ""
        return f"Live check found a blocker: {top.failure_mode_id} — {top.title}{more}{read}; {tail}."
    probe_note = f"; live checks: {len(probed)} blocker(s), first {probed[0].failure_mode_id}" if probed else ""
    if verdict == "no_known_failure":
        return f"No known XTuner RL failure matched; see questions for what to look for; {tail}."
    if verdict == "uncertain":
        pair = competing(shown)
        ids = " and ".join(f"{d.failure_mode_id} ({d.confidence:.2f})" for d in pair or shown[:2])
        return (
            f"Uncertain: {ids} fit the report about equally; the first question tells them apart{probe_note}; {tail}."
        )
    if verdict == "suspected_from_description":
        suspects = [d for d in shown if d.match == "description"] or shown
        ids = ", ".join(f"{d.failure_mode_id} ({d.confidence:.2f})" for d in suspects[:3])
        return (
            f"No exact error message matched; suspected from the description: {ids} — confirm with look_for"
            f"{probe_note}; {tail}."
        )
    top = shown[0]
    lead = {
        "failure_found": "Most likely cause",
        "hang_suspected": "Run looks stuck",
        "warnings_only": "No fatal error; top warning",
    }[verdict]
    more = f"; {total - 1} more finding(s)" if total > 1 else ""
    return f"{lead}: {top.failure_mode_id} ({top.confidence:.2f}) — {top.title}{more}{probe_note}; {tail}."
