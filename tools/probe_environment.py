"""MCP face of probe_environment: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.probe_environment`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.probe_environment import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Live, read-only look at what an XTuner V1 RL run will meet: packages of this server's Python or of the "
    "training env (XTuner, Ray, backends; read from its files), binaries, XTUNER_USE_* flags, paths, GPUs, the Ray cluster (free "
    "resources, pending groups) and whether a run shape fits. Never starts or joins Ray.\n"
    "Use when: is Ray up and big enough, is the backend installed and flagged?\n"
    "Not for: planning (choose_topology), a config (inspect_config), data (check_reward_data), go/no-go "
    "(preflight)."
)
SPEC = ToolSpec(
    "probe_environment", "Probe environment and Ray cluster", DESCRIPTION, Params, Result, run, open_world=True
)
