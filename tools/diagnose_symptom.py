"""MCP face of diagnose_symptom: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.diagnose_symptom`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.diagnose_symptom import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Diagnoses a failed or stuck XTuner V1 RL run from pasted errors, a log file or dir, or a description in "
    "words (English or Chinese): ranked failure modes with calibrated confidence, evidence, cause, fixes with the "
    "message's numbers, confirming tool calls and XTuner source; unmatched errors listed. Follows chained and "
    "Ray-wrapped tracebacks; says uncertain when two causes fit.\n"
    "Use when: a run crashed or hung and you have its error text or logs.\n"
    "Not for: before launch (preflight); a run still going or finished without a crash (inspect_run); "
    "general questions (lookup_reference)."
)
SPEC = ToolSpec("diagnose_symptom", "Diagnose a failed or stuck RL run", DESCRIPTION, Params, Result, run)
