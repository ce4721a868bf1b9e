"""MCP face of lookup_reference: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.lookup_reference`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.lookup_reference import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Searches the XTuner V1 RL references and failure-mode catalog (English or Chinese): ranked whole "
    "passages with section, resource URI and cited XTuner source lines.\n"
    "Use when: a question about XTuner RL or one error message to explain, and your client cannot read "
    "resources.\n"
    "Not for: checking files or cluster (inspect_config, check_reward_data, probe_environment, "
    "preflight); a failed run's log (diagnose_symptom)."
)
SPEC = ToolSpec("lookup_reference", "Look up the XTuner RL references", DESCRIPTION, Params, Result, run)
