"""The tools this server exposes, in the order they are listed."""

from __future__ import annotations

import importlib

from ..core import ToolSpec
from ..operations import TOOLS

#: One module under tools/ per tool, in the order they are listed; each defines ``SPEC: ToolSpec`` (the same names
#: are the Python API's functions).
TOOL_MODULES: tuple[str, ...] = TOOLS


def load_specs() -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    for name in TOOL_MODULES:
        module = importlib.import_module(f"{__package__.rsplit('.', 1)[0]}.tools.{name}")
        specs.append(module.SPEC)
    return specs
