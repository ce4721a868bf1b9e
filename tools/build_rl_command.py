"""MCP face of build_rl_command: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.build_rl_command`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.build_rl_command import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Writes a shell-safe launch plan for an XTuner V1 RL run, never running it: exports (one "
    "XTUNER_USE_* flag), the CLI command, `ray start` per node and a bash script that waits until Ray "
    "offers the GPUs, CPUs and memory the config needs; config problems as findings.\n"
    "Use when: you need the command or script to launch a run.\n"
    "Not for: a live cluster (probe_environment), reward data (check_reward_data), go/no-go (preflight)."
)
SPEC = ToolSpec("build_rl_command", "Build an XTuner RL launch plan", DESCRIPTION, Params, Result, run)
