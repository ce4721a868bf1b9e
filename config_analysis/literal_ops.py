"""Arithmetic and comparisons on literal config values, bounded in time and memory: big operations are refused."""

from __future__ import annotations

import ast
import math
from typing import Any

MAX_SEQ_LEN = 10_000
MAX_INT_BITS = 256


def safe_binop(op: ast.operator, a: Any, b: Any) -> Any:
    """Arithmetic on literals with size guards; raises ValueError when refused or invalid."""
    if isinstance(op, ast.Pow):
        if not isinstance(a, int | float) or not isinstance(b, int | float) or abs(b) > 64:
            raise ValueError("power refused")
        if isinstance(a, int) and abs(a) > 2**16 and b > 4:
            raise ValueError("power refused")
    if isinstance(op, ast.Mult):
        for seq, n in ((a, b), (b, a)):
            if (
                isinstance(seq, str | list | tuple | bytes)
                and isinstance(n, int)
                and len(seq) * max(n, 0) > MAX_SEQ_LEN
            ):
                raise ValueError("repetition refused")
    if isinstance(op, ast.Add) and isinstance(a, str | list | tuple | bytes) and hasattr(b, "__len__"):
        if len(a) + len(b) > MAX_SEQ_LEN:
            raise ValueError("concatenation refused")
    if isinstance(op, ast.LShift) and isinstance(b, int) and b > MAX_INT_BITS:
        raise ValueError("shift refused")
    ops = {
        ast.Add: lambda x, y: x + y,
        ast.Sub: lambda x, y: x - y,
        ast.Mult: lambda x, y: x * y,
        ast.Div: lambda x, y: x / y,
        ast.FloorDiv: lambda x, y: x // y,
        ast.Mod: lambda x, y: x % y,
        ast.Pow: lambda x, y: x**y,
        ast.LShift: lambda x, y: x << y,
        ast.RShift: lambda x, y: x >> y,
        ast.BitOr: lambda x, y: x | y,
        ast.BitAnd: lambda x, y: x & y,
    }
    fn = ops.get(type(op))
    if fn is None:
        raise ValueError("operator not supported")
    if isinstance(a, str) and isinstance(op, ast.Mod):
        raise ValueError("%-formatting not evaluated")
    try:
        out = fn(a, b)
    except Exception as exc:
        raise ValueError(str(exc)) from None
    if isinstance(out, int) and out.bit_length() > MAX_INT_BITS:
        raise ValueError("result too large")
    if isinstance(out, float) and not math.isfinite(out):
        raise ValueError("non-finite result")
    return out


COMPARE_OPS = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def replace_too_big(text: str, args: list[Any]) -> bool:
    if len(args) < 2 or not all(isinstance(a, str) for a in args[:2]):
        return True
    old, new = args[0], args[1]
    hits = text.count(old) if old else len(text) + 1
    return len(text) + hits * len(new) > MAX_SEQ_LEN
