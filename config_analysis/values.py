"""The value model of the static config evaluator: literals, collections, class calls, functions, unresolved values.

Each value remembers its line, its source expression and the env vars it depends on; the helpers read literal
values and items out of it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Val:
    line: int
    expr: str
    env: tuple[str, ...] = ()  # env vars the value depends on
    env_defaulted: tuple[str, ...] = ()  # env vars not supplied whose default was used


@dataclass(eq=False)
class Lit(Val):
    value: Any = None  # the Python value, of whatever type the config computes


@dataclass(eq=False)
class Coll(Val):
    kind: str = "list"  # list | tuple | dict
    items: list[Val] = field(default_factory=list)
    keys: list[Val] | None = None  # for dicts


@dataclass(eq=False)
class Obj(Val):
    cls: str = ""
    kwargs: dict[str, Val] = field(default_factory=dict)
    kw_lines: dict[str, int] = field(default_factory=dict)
    args: list[Val] = field(default_factory=list)
    splat: bool = False  # has **kwargs that could not be expanded
    conditional: bool = False  # built inside an ``if`` whose test is unresolved
    synthetic: bool = False  # a class default, not written in the config
    node: ast.Call | None = None  # the call as written at module level (None inside an inlined function)

    def kw_line(self, name: str) -> int:
        """Line of keyword ``name`` in the call, else the line of the call."""
        return self.kw_lines.get(name, self.line)


@dataclass(eq=False)
class Func(Val):
    name: str = ""
    node: ast.FunctionDef | None = None  # set when the body is a single ``return <expr>`` (inlined on call)


@dataclass(eq=False)
class Unres(Val):
    reason: str = ""


def merge_deps(*vals: Val) -> tuple[tuple[str, ...], tuple[str, ...]]:
    env: list[str] = []
    dflt: list[str] = []
    for v in vals:
        env.extend(x for x in v.env if x not in env)
        dflt.extend(x for x in v.env_defaulted if x not in dflt)
    return tuple(env), tuple(dflt)


def with_deps(v: Val, *extra: Val) -> Val:
    env, dflt = merge_deps(v, *extra)
    if (env, dflt) == (v.env, v.env_defaulted):
        return v
    if isinstance(v, Lit):
        return Lit(v.line, v.expr, env, dflt, value=v.value)
    if isinstance(v, Unres):
        return Unres(v.line, v.expr, env, dflt, reason=v.reason)
    return v


def to_python(v: Val) -> Any:
    """Python value of a Lit / Coll of Lits; raises ValueError otherwise."""
    if isinstance(v, Lit):
        return v.value
    if isinstance(v, Coll):
        if v.kind == "dict":
            return {to_python(k): to_python(i) for k, i in zip(v.keys or [], v.items, strict=False)}
        items = [to_python(i) for i in v.items]
        return tuple(items) if v.kind == "tuple" else items
    raise ValueError("not a literal")


def is_lit(v: Val | None) -> bool:
    if v is None:
        return False
    try:
        to_python(v)
        return True
    except (ValueError, TypeError):
        return False


def coll_get(v: Val, key: Any) -> Val | None:
    """Item of a dict-like Coll/Lit by literal key."""
    if isinstance(v, Coll) and v.kind == "dict":
        for k, item in zip(v.keys or [], v.items, strict=False):
            if isinstance(k, Lit) and k.value == key:
                return item
        return None
    if isinstance(v, Lit) and isinstance(v.value, dict) and key in v.value:
        return Lit(v.line, v.expr, v.env, v.env_defaulted, value=v.value[key])
    return None


def elements(v: Val) -> list[Val] | None:
    """Items of a list/tuple value, or None."""
    if isinstance(v, Coll) and v.kind in ("list", "tuple"):
        return list(v.items)
    if isinstance(v, Lit) and isinstance(v.value, list | tuple):
        return [Lit(v.line, v.expr, v.env, v.env_defaulted, value=x) for x in v.value]
    return None
