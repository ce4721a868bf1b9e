"""Source text of ast nodes, shortened for reports (shared by the config evaluator and the env-read scan)."""

from __future__ import annotations

import ast

MAX_EXPR_CHARS = 160


def expr_text(node: ast.AST, lines: list[str] | None = None) -> str:
    """Source text of an expression (from the file when ``lines`` is given), shortened for reports."""
    text = _segment(node, lines) if lines is not None else None
    if text is None:
        try:
            text = ast.unparse(node)
        except Exception:  # ast.unparse can fail on odd trees; the text is only for display
            text = type(node).__name__
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= MAX_EXPR_CHARS else text[: MAX_EXPR_CHARS - 3] + "..."


def _segment(node: ast.AST, lines: list[str]) -> str | None:
    """Slice the node's source from the file (ast offsets are UTF-8 byte columns); None if unavailable."""
    # only some node types carry positions (expressions, statements, keywords, ...)
    l0, c0 = getattr(node, "lineno", None), getattr(node, "col_offset", None)
    l1, c1 = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    if l0 is None or c0 is None or l1 is None or c1 is None or not (1 <= l0 <= l1 <= len(lines)):
        return None
    if l0 == l1:
        return lines[l0 - 1].encode()[c0:c1].decode(errors="replace")
    parts = [lines[l0 - 1].encode()[c0:].decode(errors="replace")]
    for i in range(l0, l1 - 1):
        parts.append(lines[i])
        if sum(len(x) for x in parts) > MAX_EXPR_CHARS * 2:
            return "\n".join(parts)
    parts.append(lines[l1 - 1].encode()[:c1].decode(errors="replace"))
    return "\n".join(parts)
