"""Fixes as unified diffs: edits computed from the config's own ast positions, rendered against the file as it was
read. The server never writes a file; an agent (or a person) applies the diff with ``git apply`` or ``patch -p1``
from the allowed root the file lies under.

Three edits cover the rules: set a keyword argument's value (where the value is written: the keyword itself, or a
module-level ``name = <value>`` the keyword alone uses), insert a keyword into a call, remove a keyword; plus renaming
a config class together with its import. A value that comes from the environment is never patched (the fix belongs
in the launch env), nor a call built inside a function, nor a keyword later overwritten by an attribute assignment.
:func:`value_patch` is the one call for planners: new values by the view's keys (``"trainer.sync_weights_interval"``,
``"strategy.max_staleness"``), one diff.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .field_values import field_val
from .values import Obj, Val
from .view import ConfigView, tasks_of

#: Lines of context around each change, as ``diff -u`` and ``git diff`` use.
CONTEXT_LINES = 3
#: The parsed nodes that carry a source position.
Located = ast.expr | ast.stmt | ast.keyword | ast.alias


@dataclass(frozen=True)
class Edit:
    """Replace the characters ``[start, end)`` of the source with ``text``."""

    start: int
    end: int
    text: str


def patch_label(real_path: str | None, roots: Sequence[Path], fallback: str) -> str:
    """The file's path in the diff header: relative to the allowed root it lies under (else its name), so the diff
    applies from that root."""
    if real_path:
        for root in roots:
            try:
                rel = os.path.relpath(real_path, root)
            except ValueError:
                continue
            if not rel.startswith(".."):
                return rel.replace(os.sep, "/")
    return fallback


class SourcePatcher:
    """Edits of one config's source, from its parsed tree; :meth:`diff` renders them as one unified diff."""

    def __init__(self, source: str, tree: ast.Module | None, label: str) -> None:
        self.source = source
        self.tree = tree
        self.label = label
        self._lines = source.splitlines(keepends=True)
        self._starts: list[int] = []
        pos = 0
        for line in self._lines:
            self._starts.append(pos)
            pos += len(line)
        self._starts.append(pos)
        self._name_loads: dict[str, int] | None = None

    @classmethod
    def of(cls, view: ConfigView, label: str | None = None) -> SourcePatcher:
        return cls(view.source, view.tree, label or view.name)

    # ---- positions --------------------------------------------------------------------------------------------

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of an ast position (``col`` counts UTF-8 bytes, as ast does)."""
        if lineno - 1 >= len(self._lines):
            return len(self.source)
        line = self._lines[lineno - 1]
        chars = len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
        return self._starts[lineno - 1] + chars

    def span(self, node: Located) -> tuple[int, int]:
        """Character offsets of a parsed node's start and end (a node without an end position: its start)."""
        start = self.offset(node.lineno, node.col_offset)
        if node.end_lineno is None or node.end_col_offset is None:
            return start, start
        return start, self.offset(node.end_lineno, node.end_col_offset)

    def _line_start(self, offset: int) -> int:
        return self.source.rfind("\n", 0, offset) + 1

    def _line_end(self, offset: int) -> int:
        """Offset just past the newline of the line holding ``offset``."""
        nl = self.source.find("\n", offset)
        return len(self.source) if nl < 0 else nl + 1

    # ---- finding the call and the keyword ---------------------------------------------------------------------

    @staticmethod
    def keyword(obj: Obj, name: str) -> ast.keyword | None:
        """The keyword of ``obj``'s call that gives ``name`` its value (None when a later assignment overrides it)."""
        if obj.node is None:
            return None
        for kw in obj.node.keywords:
            if kw.arg == name:
                return kw if obj.kw_lines.get(name) == kw.value.lineno else None
        return None

    def _loads(self, name: str) -> int:
        if self._name_loads is None:
            counts: dict[str, int] = {}
            for node in ast.walk(self.tree) if self.tree is not None else ():
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    counts[node.id] = counts.get(node.id, 0) + 1
            self._name_loads = counts
        return self._name_loads.get(name, 0)

    def _sole_binding(self, name: str) -> ast.expr | None:
        """The value of ``name = <value>``, when that is the name's only module-level binding and the name is read
        exactly once (so changing it changes nothing else)."""
        if self.tree is None or self._loads(name) != 1:
            return None
        found: list[ast.expr] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del) and node.id == name:
                found.append(node)
        if len(found) != 1:
            return None
        for st in self.tree.body:
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and st.targets[0].id == name
            ):
                return st.value
        return None

    # ---- edits ------------------------------------------------------------------------------------------------

    def set_keyword(self, obj: Obj, name: str, value: Any, current: Val | None = None) -> Edit | None:
        """Give keyword ``name`` of ``obj``'s call the literal ``value`` where it is written: the module-level
        assignment of a name the keyword alone reads, else the keyword's own expression. None when the value comes
        from the environment or the call cannot be edited."""
        kw = self.keyword(obj, name)
        val = current if current is not None else obj.kwargs.get(name)
        if kw is None or (val is not None and (val.env or val.env_defaulted)):
            return None
        target: ast.expr = kw.value
        if isinstance(target, ast.Name):
            bound = self._sole_binding(target.id)
            if bound is not None:
                target = bound
        start, end = self.span(target)
        return Edit(start, end, literal(value))

    def insert_keyword(self, obj: Obj, name: str, value: Any) -> list[Edit]:
        """Add ``name=value`` to ``obj``'s call, on a line of its own when the call has one keyword per line (a
        comment after the last keyword stays on its line)."""
        call = obj.node
        if call is None or any(kw.arg == name for kw in call.keywords):
            return []
        text = f"{name}={literal(value)}"
        items: list[Located] = [*call.args, *call.keywords]
        _, close = self.span(call)
        close -= 1  # the closing parenthesis
        if not items:
            return [Edit(close, close, text)]
        last = max(items, key=lambda n: self.span(n)[1])
        _, last_end = self.span(last)
        between = self.source[last_end:close]
        if "\n" not in between:
            return [Edit(last_end, last_end, f", {text}")]
        first = min(items, key=lambda n: self.span(n)[0])
        first_start, _ = self.span(first)
        indent = self.source[self._line_start(first_start) : first_start]
        if indent.strip():  # the first argument shares the line with the call: align with the last one
            last_start, _ = self.span(last)
            indent = " " * (last_start - self._line_start(last_start))
        eol = last_end + between.index("\n")
        new_line = Edit(eol, eol, f"\n{indent}{text},")
        if between.lstrip(" \t").startswith(","):
            return [new_line]
        return [Edit(last_end, last_end, ","), new_line]

    def remove_keyword(self, obj: Obj, name: str) -> Edit | None:
        """Delete ``name=...`` from ``obj``'s call: its whole line(s) when it stands alone, else inline with its
        comma."""
        call = obj.node
        kw = next((k for k in call.keywords if k.arg == name), None) if call is not None else None
        if call is None or kw is None:
            return None
        start, end = self.span(kw)
        before = self.source[self._line_start(start) : start]
        line_end = self._line_end(end)
        after = self.source[end:line_end]
        rest = after.lstrip(" \t")
        rest = rest[1:] if rest.startswith(",") else rest
        if not before.strip() and (not rest.strip() or rest.lstrip().startswith("#")):
            return Edit(self._line_start(start), line_end, "")
        items: list[Located] = sorted([*call.args, *call.keywords], key=lambda n: self.span(n)[0])
        i = items.index(kw)
        if i + 1 < len(items):
            nxt, _ = self.span(items[i + 1])
            return Edit(start, nxt, "")
        if i > 0:
            _, prev_end = self.span(items[i - 1])
            _, close = self.span(call)
            tail = self.source[end : close - 1]
            keep = "," if tail.strip().startswith(",") else ""
            return Edit(prev_end, end + (tail.index(",") + 1 if keep else 0), keep)
        _, close = self.span(call)
        return Edit(start, close - 1, "")

    def rename_call(self, obj: Obj, new_cls: str) -> list[Edit]:
        """Call ``new_cls`` instead of ``obj.cls``, importing it next to the old class when the file lacks it."""
        call = obj.node
        if call is None or self.tree is None:
            return []
        if not isinstance(call.func, ast.Name):  # module.Class(...): whether the module has new_cls is unknown
            return []
        start, end = self.span(call.func)
        edits = [Edit(start, end, new_cls)]
        if self._imports(new_cls):
            return edits
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname is None and alias.name == obj.cls:
                        _, a_end = self.span(alias)
                        return [*edits, Edit(a_end, a_end, f", {new_cls}")]
        return []  # the old class is not imported by name: a rename alone would not load

    def _imports(self, name: str) -> bool:
        for node in ast.walk(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.ImportFrom | ast.Import):
                if any((a.asname or a.name) == name for a in node.names):
                    return True
        return False

    # ---- rendering --------------------------------------------------------------------------------------------

    def diff(self, edits: Iterable[Edit | None]) -> str | None:
        """The unified diff of ``edits`` (None when there is none, or two of them overlap)."""
        chosen = sorted({e for e in edits if e is not None}, key=lambda e: (e.start, e.end))
        if not chosen:
            return None
        out: list[str] = []
        pos = 0
        for e in chosen:
            if e.start < pos:
                return None
            out.append(self.source[pos : e.start])
            out.append(e.text)
            pos = e.end
        out.append(self.source[pos:])
        return unified_diff(self.label, self.source, "".join(out))


def unified_diff(label: str, old: str, new: str) -> str | None:
    """``git diff``-style text from ``old`` to ``new`` (with the no-newline marker git apply needs)."""
    if old == new:
        return None
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{label}", f"b/{label}", n=CONTEXT_LINES
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def literal(value: Any) -> str:
    """Python source for a literal value, strings double-quoted as the XTuner examples write them."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


# ---- the one call for planners ----------------------------------------------------------------------------------


def owner_of(view: ConfigView, key: str) -> tuple[Obj, str] | None:
    """The config object and field behind a key: the view's (``trainer.*``, ``rollout.*``, ``sampler.*`` and
    ``strategy.*`` of the first train task) or a trainer resources field (``resources.num_workers``,
    ``train_resources.*``, ``rollout_resources.*``)."""
    trainer = view.trainer
    if not isinstance(trainer, Obj) or "." not in key:
        return None
    owner, field = key.split(".", 1)
    obj: Val | None = None
    if owner == "trainer":
        obj = trainer
    elif owner == "rollout":
        obj = field_val(trainer, "rollout_config")[0]
    elif owner in ("sampler", "strategy"):
        tasks = tasks_of(field_val(trainer, "agent_loop_manager_cfg")[0])
        if tasks:
            obj = field_val(tasks[0], "sampler_config" if owner == "sampler" else "produce_strategy_config")[0]
    elif owner in ("resources", "train_resources", "rollout_resources"):
        obj = field_val(trainer, owner)[0]
    return (obj, field) if isinstance(obj, Obj) and not obj.synthetic else None


def value_patch(view: ConfigView, changes: Mapping[str, Any], label: str | None = None) -> str | None:
    """One diff setting each of the view's keys to its new value (inserting the keyword when the config leaves it
    at XTuner's default). None when any change cannot be made exactly (from env, built in a function)."""
    patcher = SourcePatcher.of(view, label)
    edits: list[Edit | None] = []
    for key, value in changes.items():
        found = owner_of(view, key)
        if found is None:
            return None
        obj, field = found
        made = (
            [patcher.set_keyword(obj, field, value)]
            if field in obj.kwargs
            else patcher.insert_keyword(obj, field, value)
        )
        if not made or None in made:
            return None
        edits += made
    return patcher.diff(edits)
