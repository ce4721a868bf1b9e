"""The installed XTuner RL entry point, named once for every rendered launch line."""

from __future__ import annotations

#: Module run as ``python -m`` to start an XTuner V1 RL run (the installed entry point, not a checkout path).
RL_ENTRY_POINT = "xtuner.v1.train.cli.rl"
