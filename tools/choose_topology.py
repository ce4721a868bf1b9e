"""MCP face of choose_topology: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.choose_topology`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.choose_topology import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Chooses colocated sync, colocated async or disaggregated for an XTuner V1 GRPO run and sizes it "
    "(workers/CPUs/memory passing XTuner's Ray checks, rollout TP/EP, staleness, GPU memory) with a "
    "paste-ready config and diagram; with `config`, that is your file with only forced values changed, each "
    "listed.\n"
    "Use when: planning a run or re-sizing it for another cluster or model.\n"
    "Not for: a config's errors (inspect_config), a live cluster (probe_environment), go/no-go "
    "(preflight)."
)
SPEC = ToolSpec("choose_topology", "Choose XTuner RL topology and resources", DESCRIPTION, Params, Result, run)
