"""MCP face of inspect_config: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.inspect_config`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.inspect_config import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Reads an XTuner V1 RL config (.py) with ast, never running it; predicts XTuner's load/build errors "
    "(trainer, fields, classes, intervals, judgers) with XTuner's message and path:line; fixes as diffs "
    "(env_file: of the launch script).\n"
    "Use when: you wrote a config or launch script: will it load?\n"
    "Not for: data (check_reward_data), cluster (probe_environment), go/no-go (preflight)."
)
SPEC = ToolSpec("inspect_config", "Inspect an XTuner RL config statically", DESCRIPTION, Params, Result, run)
