"""xtuner-rl-mcp: an MCP server that plans, checks and troubleshoots XTuner V1 RL (GRPO) runs.

The repository root is this package: ``server/`` holds the MCP wiring, ``tools/`` one thin face per tool over
``operations/``, ``references/`` the knowledge the tools read. The tools are also plain Python functions, loaded on
first use so that ``import xtuner_rl_mcp`` stays cheap::

    from xtuner_rl_mcp import check_reward_data, inspect_config

    result = inspect_config(path="rl.py", env={"WORK_DIR": "/runs/w"}, roots=["."])
    for f in result.findings:
        print(f.location, f.id, f.title, f.patch or "")

Each takes its tool's arguments as keywords plus ``roots`` and ``deadline_s`` and returns the tool's pydantic
``Result`` (see :mod:`.api`; ``__init__.pyi`` holds the signatures).
"""

from __future__ import annotations

from typing import Any

from .operations import TOOLS  # the tools available as functions, named once (same names as the MCP tools)

__version__ = "0.1.0"

#: The XTuner source every claim of this server is checked against.
XTUNER_COMMIT = "b934f462095c1e750229de35367c50ae36caa786"
XTUNER_COMMIT_SHORT = "b934f46"

__all__ = ["XTUNER_COMMIT", "XTUNER_COMMIT_SHORT", "__version__", *TOOLS]


def __getattr__(name: str) -> Any:
    """Load a tool function on first use (PEP 562) and keep it."""
    if name not in TOOLS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .api import function

    value = function(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *TOOLS])
