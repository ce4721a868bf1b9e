"""Every environment read in a config file (``os.environ[...]``, ``.get``, ``os.getenv``), found by walking its ast."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .source_text import expr_text


@dataclass
class EnvRead:
    """One environment read found anywhere in the file."""

    name: str | None  # None when the key is not a literal
    line: int
    required: bool  # os.environ[...] (KeyError if unset) vs get/getenv with a default
    default: str | None  # source text of the default, if any
    expr: str


def collect_env_reads(tree: ast.Module, lines: list[str] | None = None) -> list[EnvRead]:
    """Every ``os.environ[...]``, ``os.environ.get(...)`` and ``os.getenv(...)`` in the file, functions included."""
    reads: list[EnvRead] = []

    def is_os(n: ast.expr) -> bool:
        return isinstance(n, ast.Name) and n.id in ("os", "_os")

    def is_environ(n: ast.expr) -> bool:
        return (isinstance(n, ast.Attribute) and n.attr == "environ" and is_os(n.value)) or (
            isinstance(n, ast.Name) and n.id == "environ"
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            reads.append(
                EnvRead(key if isinstance(key, str) else None, node.lineno, True, None, expr_text(node, lines))
            )
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            getter = (isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault") and is_environ(f.value)) or (
                isinstance(f, ast.Attribute) and f.attr == "getenv" and is_os(f.value)
            )
            getter = getter or (isinstance(f, ast.Name) and f.id == "getenv")
            if getter:
                k = node.args[0]
                key = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None
                dflt = expr_text(node.args[1], lines) if len(node.args) > 1 else None
                reads.append(EnvRead(key, node.lineno, False, dflt, expr_text(node, lines)))
    reads.sort(key=lambda r: r.line)
    return reads
