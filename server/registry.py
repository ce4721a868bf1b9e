"""The tools this server exposes, in the order they are listed."""

from __future__ import annotations

import importlib

from ..core import ToolSpec

#: One module under tools/ per tool; each defines ``SPEC: ToolSpec``.
TOOL_MODULES: tuple[str, ...] = (
    "build_rl_command",
    "choose_topology",
    "lookup_reference",
    "inspect_config",
    "probe_environment",
    "check_reward_data",
    "preflight",
    "diagnose_symptom",
    "inspect_run",
)


def load_specs() -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for name in TOOL_MODULES:
        module = importlib.import_module(f"{__package__.rsplit('.', 1)[0]}.tools.{name}")
        specs.append(module.SPEC)
    return specs
