"""MCP face of check_reward_data: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.check_reward_data`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.check_reward_data import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Validates XTuner V1 RL JSONL (file, dir or glob) against the line contract (prompt, data_source, "
    "reward_model.ground_truth) and the judger's rules, streaming: line numbers, counts per code, "
    "statistics, a conversion command for raw GSM8K or chat files; can use a Ray cluster.\n"
    "Use when: before launch, or after KeyError: 'prompt' or a missing ground_truth.\n"
    "Not for: configs (inspect_config), failed-run logs (diagnose_symptom), a live run's rewards "
    "(inspect_run)."
)
SPEC = ToolSpec("check_reward_data", "Check RL JSONL data", DESCRIPTION, Params, Result, run)
