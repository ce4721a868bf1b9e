"""The tools as plain Python functions: ``from xtuner_rl_mcp import inspect_config`` — no MCP, no event loop.

Each function takes the tool's arguments as keywords (the fields of its ``Params``, validated by the same pydantic
model the MCP server uses), plus ``roots`` (the directories it may read; default the working directory) and
``deadline_s`` (a wall-clock deadline; default none), runs the same operation the MCP tool and the command line run,
and returns the same pydantic ``Result``. A problem the caller can fix raises
:class:`~xtuner_rl_mcp.core.ToolInputError` (``code``, ``message``, ``fix``); invalid arguments raise pydantic's
``ValidationError``; a passed deadline raises :class:`~xtuner_rl_mcp.core.CallCancelled`. What only an operator
grants (interpreters that may run, Ray clusters that may get credentials) comes from the process environment, as
for the server (``XTUNER_RL_MCP_ALLOW_PYTHON``, ``XTUNER_RL_MCP_RAY_ADDRESSES``).

``xtuner_rl_mcp/__init__.py`` loads a function on first use (PEP 562), so ``import xtuner_rl_mcp`` stays cheap;
``__init__.pyi`` (written by ``python -m xtuner_rl_mcp.api``) gives type checkers every signature.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from .core import CallLimits, PathPolicy, RunContext
from .operations import TOOLS

#: Each tool's operation module (``Params``, ``Result``, ``run``).
MODULES: dict[str, str] = {name: f"operations.{name}" for name in TOOLS}

Roots = Sequence["str | os.PathLike[str]"]
#: The keywords every function takes besides its tool's parameters (no tool has a parameter of these names).
CALL_KEYWORDS = ("roots", "deadline_s")


def context(roots: Roots | None = None, deadline_s: float | None = None) -> RunContext:
    """What an in-process call runs with: ``roots`` (default the working directory) and a deadline."""
    return RunContext(paths=PathPolicy.from_strings(roots or [os.getcwd()]), limits=CallLimits.within(deadline_s))


def module_of(name: str) -> types.ModuleType:
    return importlib.import_module(f"{__package__}.{MODULES[name]}")


def function(name: str) -> Callable[..., Any]:
    """The Python function of tool ``name``: keywords -> its ``Params`` -> ``run`` -> its ``Result``."""
    module = module_of(name)

    def call(*, roots: Roots | None = None, deadline_s: float | None = None, **arguments: Any) -> Any:
        return module.run(module.Params(**arguments), context(roots, deadline_s))

    call.__name__ = call.__qualname__ = name
    call.__module__ = __package__ or "xtuner_rl_mcp"
    call.__doc__ = f"{(module.__doc__ or '').strip().splitlines()[0]}\n\nArguments: the fields of {name}'s Params."
    return call


# ---- the type stub ---------------------------------------------------------------------------------------------


def _type_text(tp: Any, imports: dict[str, str]) -> str:
    """Stub text for a Params annotation; pydantic models also accept a plain mapping."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if origin is Literal:
        return f"Literal[{', '.join(json.dumps(a) for a in args)}]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a, imports) for a in args)
    if origin in (list, dict, tuple, set):
        return f"{origin.__name__}[{', '.join(_type_text(a, imports) for a in args)}]"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        alias = imports.setdefault(tp.__module__, f"_m{len(imports)}")
        return f"{alias}.{tp.__name__} | Mapping[str, Any]"
    if isinstance(tp, type) and tp.__module__ == "builtins":
        return tp.__name__
    raise TypeError(f"no stub text for {tp!r}")


def render_stub() -> str:
    """The text of ``__init__.pyi``: the package's names and one typed function per tool."""
    imports: dict[str, str] = {}
    functions = []
    for name in MODULES:
        module = module_of(name)
        result = imports.setdefault(module.__name__, f"_m{len(imports)}")
        lines = [f"def {name}(", "    *,"]
        assert not set(module.Params.model_fields) & set(CALL_KEYWORDS), f"{name}: a parameter shadows {CALL_KEYWORDS}"
        for field, info in module.Params.model_fields.items():
            text = _type_text(info.annotation, imports)
            lines.append(f"    {field}: {text}," if info.is_required() else f"    {field}: {text} = ...,")
        lines += [
            "    roots: Sequence[str | os.PathLike[str]] | None = ...,",
            "    deadline_s: float | None = ...,",
            f") -> {result}.Result: ...",
        ]
        functions.append("\n".join(lines))
    head = [
        '"""Signatures of the in-process API (written by `python -m xtuner_rl_mcp.api`; do not edit)."""',
        "",
        "import os",
        "from collections.abc import Mapping, Sequence",
        "from typing import Any, Literal",
        "",
        *(f"import {module} as {alias}" for module, alias in sorted(imports.items())),
        "",
        "__version__: str",
        "XTUNER_COMMIT: str",
        "XTUNER_COMMIT_SHORT: str",
        "TOOLS: tuple[str, ...]",
        "__all__ = [",
        *(f'    "{name}",' for name in sorted(["XTUNER_COMMIT", "XTUNER_COMMIT_SHORT", "__version__", *MODULES])),
        "]",
    ]
    return "\n".join(head) + "\n\n" + "\n\n".join(functions) + "\n"


def formatted(text: str) -> str:
    """``text`` as the repository's formatter writes a stub (ruff, when installed)."""
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff is None:
        return text
    out = subprocess.run(
        [ruff, "format", "--stdin-filename", "__init__.pyi", "-"], input=text, capture_output=True, text=True
    )
    return out.stdout if out.returncode == 0 else text


if __name__ == "__main__":
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.pyi")
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(formatted(render_stub()))
    sys.stdout.write(f"wrote {target}\n")
