"""MCP face of inspect_config: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.inspect_config`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.inspect_config import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Reads an XTuner V1 RL config (.py) with ast, never running it, and predicts XTuner's load/build "
    "errors (missing `trainer`, unknown fields, class mix-ups, intervals, eval, judgers), citing "
    "XTuner's message and path:line; lists env vars, settings, tasks, resources.\n"
    "Use when: you wrote or edited a config: will it load, which env vars does it need?\n"
    "Not for: data (check_reward_data), cluster (probe_environment), go/no-go (preflight)."
)
SPEC = ToolSpec("inspect_config", "Inspect an XTuner RL config statically", DESCRIPTION, Params, Result, run)
