"""MCP face of preflight: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.preflight`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.preflight import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "One go/no-go before launching an XTuner V1 RL run: runs inspect_config, check_reward_data (train, "
    "eval), probe_environment (does the config fit Ray?) and build_rl_command; returns the verdict, "
    "de-duplicated blockers and warnings with owners, and on go the launch plan.\n"
    "Use when: all is prepared: can I launch now, who must fix what?\n"
    "Not for: one aspect (its own tool); after launch: health (inspect_run), a failed log "
    "(diagnose_symptom)."
)
SPEC = ToolSpec("preflight", "Go/no-go before an XTuner RL launch", DESCRIPTION, Params, Result, run, open_world=True)
