"""MCP face of preflight: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.preflight`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.preflight import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "One go/no-go before an XTuner V1 RL launch: inspect_config, check_reward_data, probe_environment "
    "(fits Ray?), build_rl_command; the verdict, blockers and warnings with owners, on go the plan.\n"
    "Use when: all is prepared: can I launch now, who must fix what?\n"
    "Not for: one aspect (its tool); after launch (inspect_run, diagnose_symptom)."
)
SPEC = ToolSpec("preflight", "Go/no-go before an XTuner RL launch", DESCRIPTION, Params, Result, run, open_world=True)
