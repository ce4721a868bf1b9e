"""MCP face of inspect_run: what the tool is for (its description) and its spec; the work is in
:mod:`..operations.inspect_run`."""

from __future__ import annotations

from ..core import ToolSpec
from ..operations.inspect_run import Params, Result, run

__all__ = ["DESCRIPTION", "SPEC", "Params", "Result", "run"]

DESCRIPTION = (
    "Health of a running or finished XTuner V1 RL run from its work dir: progress (step, time per step, "
    "stalled?), learning (reward, groups without signal, truncation, entropy, eval) and why not, as "
    "findings with fixes; log errors diagnosed (all nodes' with ray_address); per-step series, optional "
    "PNG.\n"
    'Use when: "reward is flat", "responses cut off", "stuck or slow?".\n'
    "Not for: before launch (preflight) or a crash log alone (diagnose_symptom)."
)
SPEC = ToolSpec(
    "inspect_run", "Inspect a running or finished RL run", DESCRIPTION, Params, Result, run, open_world=True
)
