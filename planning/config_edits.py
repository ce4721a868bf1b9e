"""Writing a plan into the user's own config: only the values the plan must force change, each where it is written.

A plan made from a config answers with that config, edited: every value the plan keeps stays as the user wrote it
(text, comments, env reads and all), and each value it must change becomes one edit at the keyword or the
module-level name that sets it (the patch engine, ``config_analysis/patches.py``, finds where). A value read from
the environment is changed in the environment when exporting one variable gives the plan's value (``export
TRAIN_NUM_WORKERS=8``), else rewritten as a literal. After the edits the file is evaluated again: an edit that does
not give its field the plan's value is dropped and reported, and any other field that changed with it (a shared
name) is reported too, so nothing changes without being listed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..config_analysis.field_values import field_val
from ..config_analysis.patches import Edit, SourcePatcher, literal, unified_diff
from ..config_analysis.values import Obj, Val
from ..config_analysis.view import ConfigView, view_of_source
from .config_fields import (
    FieldChange,
    SourceText,
    current_value,
    field_changes,
    key_path,
    owner_of,
    path_index,
    shown,
    trainer_fields,
)


@dataclass(frozen=True)
class Target:
    """A value the plan needs at a planning key, and the rule (or request) that forces it."""

    key: str
    value: Any  # what the field must hold (a class-valued target: its call, compared by class)
    why: str
    source: str
    import_from: tuple[str, str] | None = None  # a class-valued target: (module, class) to import
    code: SourceText | None = None  # how to write the value when not as its literal

    @property
    def written(self) -> Any:
        return self.code if self.code is not None else self.value


class ConfigEdit(BaseModel):
    """One value of the user's config the plan changes or adds, where, and why."""

    kind: Literal["changed", "added", "env"] = Field(
        description="changed: a value you wrote; added: a keyword your config leaves at XTuner's default; env: "
        "export a variable your config reads"
    )
    field: str = Field(description="What the trainer gets: trainer.rollout_config.tensor_parallel_size, ...")
    location: str = Field(description="'file:line' in your config")
    old: str = Field(description="The line(s) as you wrote them (env: the variable's read)")
    new: str = Field(description="What they become (env: the export)")
    old_value: str | None
    new_value: str
    why: str
    source: str = Field(description="XTuner path:line of the rule, or 'your request'")
    patch: str | None = Field(default=None, description="Unified diff of this edit alone against your file")

    def __str__(self) -> str:
        return f"{self.field} {self.old_value or '(default)'} → {self.new_value}: {self.why}"


@dataclass
class EditOutcome:
    """The edited config and everything said about it."""

    source: str
    edits: list[ConfigEdit] = field(default_factory=list)
    launch_env: dict[str, str] = field(default_factory=dict)
    also_changed: list[FieldChange] = field(default_factory=list)
    not_applied: list[str] = field(default_factory=list)
    patch: str | None = None


@dataclass
class _Planned:
    target: Target
    edits: list[Edit]
    kind: Literal["changed", "added"]
    path: str
    imports: list[Edit] = field(default_factory=list)


def apply_edits(source: str, edits: list[Edit]) -> str | None:
    """The source with ``edits`` applied (None when two overlap); insertions at one offset keep their order, and an
    edit given twice (the comma two insertions after one keyword both need) is made once."""
    out: list[str] = []
    pos = 0
    for e in sorted(dict.fromkeys(edits), key=lambda e: (e.start, e.end)):
        if e.start < pos:
            return None
        out += [source[pos : e.start], e.text]
        pos = e.end
    return "".join(out) + source[pos:]


def _lines_of(source: str, edits: list[Edit]) -> tuple[int, str, str]:
    """(first line, the whole lines the edits touch, those lines after them)."""
    lo, hi = min(e.start for e in edits), max(e.end for e in edits)
    start = source.rfind("\n", 0, lo) + 1
    end_nl = source.find("\n", hi)
    end = len(source) if end_nl < 0 else end_nl
    old = source[start:end]
    shifted = [Edit(e.start - start, e.end - start, e.text) for e in edits]
    return source.count("\n", 0, lo) + 1, old, apply_edits(old, shifted) or old


def _import_edit(patcher: SourcePatcher, tree: ast.Module | None, module: str, name: str) -> Edit | None:
    """Import ``name`` from ``module``: next to an import from that module, else on a line after the last import."""
    if tree is None:
        return None
    last: ast.stmt | None = None
    for st in tree.body:
        if isinstance(st, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name) == name for a in st.names):
                return None
            last = st
    for st in tree.body:
        if isinstance(st, ast.ImportFrom) and st.module == module and st.level == 0:
            _, end = patcher.span(st.names[-1])
            return Edit(end, end, f", {name}")
    if last is None:
        return Edit(0, 0, f"from {module} import {name}\n")
    _, end = patcher.span(last)
    return Edit(end, end, f"\nfrom {module} import {name}")


def _env_export(view: ConfigView, env: Mapping[str, str], t: Target, val: Val) -> tuple[str, str] | None:
    """(variable, value) when exporting one variable the config reads with a default gives the target's value."""
    if isinstance(t.value, bool) or not isinstance(t.value, int | float):
        return None
    text = f"{t.value:g}" if isinstance(t.value, float) and t.value.is_integer() else str(t.value)
    for var in val.env_defaulted:
        trial = view_of_source(view.name, view.source, {**env, var: text})
        ok, got, _ = current_value(trial, t.key)
        if ok and got == t.value:
            return var, text
    return None


def _plan_one(
    view: ConfigView, env: Mapping[str, str], patcher: SourcePatcher, paths: dict[int, str], t: Target
) -> _Planned | tuple[str, str] | str:
    """The edits for one target, an env export (variable, value), or why it cannot be written."""
    found = owner_of(view, t.key)
    if found is None:
        return f"{t.key}: no such call in your config"
    obj, name = found
    path = key_path(view, t.key, paths) or t.key
    extra = [_import_edit(patcher, view.tree, *t.import_from)] if t.import_from else []
    imports = [e for e in extra if e is not None]
    if name not in obj.kwargs:
        inserted = patcher.insert_keyword(obj, name, t.written)
        if not inserted:
            return f"{t.key}: the call at line {obj.line} cannot be edited (built inside a function)"
        return _Planned(t, [*inserted, *imports], "added", path, imports)
    val = obj.kwargs[name]
    edit = patcher.set_keyword(obj, name, t.written)
    if edit is None and (val.env or val.env_defaulted):
        export = _env_export(view, env, t, val)
        if export is not None:
            return export
        kw = patcher.keyword(obj, name)
        if kw is not None:
            start, end = patcher.span(kw.value)
            edit = Edit(start, end, literal(t.written))
    if edit is None:
        return f"{t.key}: line {obj.kw_line(name)} sets it in a way that cannot be edited exactly"
    return _Planned(t, [edit, *imports], "changed", path, imports)


def _satisfied(view: ConfigView, t: Target) -> bool:
    """Whether the edited config gives the target's field the target's value (a class-valued one: its class)."""
    if t.import_from:
        found = owner_of(view, t.key)
        got = field_val(*found)[0] if found is not None else None
        return isinstance(got, Obj) and got.cls == t.import_from[1]
    ok, got, _ = current_value(view, t.key)
    return ok and got == t.value and isinstance(got, bool) == isinstance(t.value, bool)


def write_targets(
    view: ConfigView,
    env: Mapping[str, str],
    targets: list[Target],
    label: str,
    check: Callable[[], None] = lambda: None,
) -> EditOutcome:
    """The user's config with each target written where its value is set; see the module docstring."""
    patcher = SourcePatcher.of(view, label)
    paths = original_paths = path_index(view)
    planned: list[_Planned] = []
    out = EditOutcome(source=view.source)
    exports: dict[str, tuple[Target, str]] = {}
    seen = view  # the config under the plan's env and the exports so far (an export can satisfy a later target)
    for t in targets:
        check()
        if exports and _satisfied(seen, t):
            continue
        got = _plan_one(seen, {**env, **{k: v for k, (_, v) in exports.items()}}, patcher, paths, t)
        if isinstance(got, str):
            out.not_applied.append(f"{got}; the plan needs {t.value} ({t.why}) — set it by hand")
        elif isinstance(got, tuple):
            exports[got[0]] = (t, got[1])
            seen = view_of_source(view.name, view.source, {**env, **{k: v for k, (_, v) in exports.items()}})
            paths = path_index(seen)
        else:
            planned.append(got)
    launch_env = {var: text for var, (_, text) in exports.items()}
    new_view = view
    while True:
        check()
        text = apply_edits(view.source, [e for p in planned for e in p.edits])
        if text is None:  # two edits overlap: keep the first of them
            dropped = planned.pop()
            out.not_applied.append(
                f"{dropped.target.key}: overlaps another edit; the plan needs {dropped.target.value}"
            )
            continue
        new_view = view_of_source(view.name, text, {**env, **launch_env}, path=view.path)
        bad = [p for p in planned if not _satisfied(new_view, p.target)]
        if not bad:
            break
        for p in bad:
            planned.remove(p)
            out.not_applied.append(
                f"{p.target.key}: editing line {_lines_of(view.source, p.edits[:1])[0]} does not give it "
                f"{p.target.value}; set it by hand ({p.target.why})"
            )
    out.source, out.launch_env = text, launch_env
    out.edits = [_edit_record(view, patcher, p) for p in planned]
    out.edits += [
        _env_record(view, key_path(view, t.key, original_paths) or t.key, var, t, value)
        for var, (t, value) in exports.items()
    ]
    before = trainer_fields(view.trainer)
    own = [p.path for p in planned] + [e.field for e in out.edits if e.kind == "env"]
    out.also_changed = [
        c
        for c in field_changes(before, trainer_fields(new_view.trainer))
        if not any(c.field == p or c.field.startswith((p + ".", p + "[", p + "(")) for p in own)
    ]
    out.patch = unified_diff(label, view.source, text)
    return out


def _edit_record(view: ConfigView, patcher: SourcePatcher, p: _Planned) -> ConfigEdit:
    own = [e for e in p.edits if e not in p.imports]
    line, old, new = _lines_of(view.source, own)
    found = owner_of(view, p.target.key)
    was = field_val(*found)[0] if found is not None else None
    old_value = (was.expr if found is not None and found[1] in found[0].kwargs else shown(was)) if was else None
    return ConfigEdit(
        kind=p.kind,
        field=p.path,
        location=f"{view.name}:{line}",
        old=old,
        new=new,
        old_value=old_value,
        new_value=literal(p.target.written),
        why=p.target.why,
        source=p.target.source,
        patch=patcher.diff(p.edits),
    )


def _env_record(view: ConfigView, path: str, var: str, t: Target, value: str) -> ConfigEdit:
    read = next((r for r in view.env_reads if r.name == var), None)
    return ConfigEdit(
        kind="env",
        field=path,
        location=f"{view.name}:{read.line}" if read else view.name,
        old=read.expr if read else var,
        new=f"export {var}={value}",
        old_value=f"{var} unset (default {read.default})" if read and read.default else None,
        new_value=value,
        why=t.why,
        source=t.source,
    )
