"""Fixes that belong in the launch env file: diffs of the file the planned env came from, each checked before it
is offered.

A config value read from the environment (``int(os.environ.get("ROLLOUT_TP_SIZE", "1"))``) is changed where the
launch sets it: the env file's line, or a new ``export`` line when the file leaves the variable to the config's
default. Every such change is verified by evaluating the config again with the new value: the keyword must take
exactly the value the rule asks for and every other value of every config object must stay as it was (a variable
read in two places gets no patch). Backend flags are set only when the backend is known (the caller named it), a
cast that fails is rewritten only when the value is the same number written differently (``"2.0"`` for ``int``).
Names the caller's explicit ``env`` overrides are never patched in the file: the change would not take effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .evaluator import Evaluation, evaluate
from .launch_env import EnvFileEditor, LaunchEnvFile
from .values import Obj, Val, to_python
from .view import ConfigView

FLAGS = {"sglang": "XTUNER_USE_SGLANG", "vllm": "XTUNER_USE_VLLM", "lmdeploy": "XTUNER_USE_LMDEPLOY"}


@dataclass(frozen=True)
class EnvFileUse:
    """A launch env file as one analysis uses it: the file, its diff label (relative to the allowed root), the
    names the caller's explicit env overrides, and the rollout backend when the caller knows it."""

    file: LaunchEnvFile
    label: str
    overridden: frozenset[str] = frozenset()
    backend: str | None = None


def _fingerprint(ev: Evaluation) -> list[tuple[str, int, dict[str, str]]]:
    """Each object's class, line and keyword values (nested objects by class; unresolved ones by expression)."""
    out = []
    for o in ev.objects:
        vals: dict[str, str] = {}
        for k, v in o.kwargs.items():
            if isinstance(v, Obj):
                vals[k] = f"<{v.cls}@{v.line}>"
                continue
            try:
                vals[k] = repr(to_python(v))
            except (ValueError, TypeError):
                vals[k] = f"?{v.expr}"
        out.append((o.cls, o.line, vals))
    return out


def _spellings(value: Any) -> list[str]:
    """How the environment may write ``value`` (a bool as the config compares it, a number as str() gives it)."""
    if isinstance(value, bool):
        return ["1", "true", "True"] if value else ["0", "false", "False"]
    if isinstance(value, float) and value.is_integer():
        return [repr(value), str(int(value))]
    if isinstance(value, int | float | str):
        return [str(value) if not isinstance(value, float) else repr(value)]
    return []


class EnvFixer:
    """The env-file fixes of one analysis (``view`` evaluated with the planned env the file is part of)."""

    def __init__(self, view: ConfigView, use: EnvFileUse) -> None:
        self.view = view
        self.use = use
        self.file = use.file
        self.editor = EnvFileEditor(use.file, use.label)
        self._base: list[tuple[str, int, dict[str, str]]] | None = None

    # ---- where the file sets a name -----------------------------------------------------------------------------

    def where(self, name: str) -> str:
        """' (launch.sh:5 sets NAME=value)' for evidence, '' when the file does not set it."""
        e = self.file.entries.get(name)
        if e is None or name in self.use.overridden:
            return ""
        return f" ({self.file.name}:{e.line} sets {name}={e.written})"

    def _patchable(self, name: str) -> bool:
        """The file decides the name's value: it is not overridden and the file sets it editably, or not at all."""
        if name in self.use.overridden or name in self.file.shell_only:
            return False
        e = self.file.entries.get(name)
        return e is None or (e.value is not None and e.span is not None)

    def set_env(self, values: dict[str, str]) -> str | None:
        """One diff of the file giving each name its value (None when any of them is not the file's to set)."""
        if not values or not all(self._patchable(n) for n in values):
            return None
        return self.editor.setting(values)

    # ---- a config value that comes from the environment ---------------------------------------------------------

    def _evaluate(self, env: dict[str, str]) -> Evaluation | None:
        if self.view.tree is None:
            return None
        return evaluate(self.view.tree, env, self.view.source, self.view.env_unknown)

    def value(self, ev: Evaluation, obj: Obj, field: str, value: Any) -> tuple[str, str] | None:
        """(diff, note) setting the env variable behind ``obj.field`` so that it becomes ``value``, else None."""
        val: Val | None = obj.kwargs.get(field)
        if val is None or not val.env or self.view.env is None:
            return None
        idx = next((i for i, o in enumerate(ev.objects) if o is obj), None)
        if idx is None:
            return None
        if self._base is None:
            self._base = _fingerprint(ev)
        for name in val.env:
            if not self._patchable(name):
                continue
            for text in _spellings(value):
                after = self._evaluate({**self.view.env, name: text})
                if after is None or not self._only_changed(after, idx, field, value):
                    continue
                patch = self.set_env({name: text})
                if patch is None:
                    continue
                e = self.file.entries.get(name)
                note = (
                    f"The value comes from env var {name}, set at {self.file.name}:{e.line}; the patch changes it there."
                    if e is not None
                    else f"The value is the config's default for env var {name}, which {self.file.name} does not "
                    f"set; the patch adds `export {name}={text}`."
                )
                return patch, note
        return None

    def _only_changed(self, after: Evaluation, idx: int, field: str, value: Any) -> bool:
        """``after`` differs from the planned evaluation only in ``objects[idx].field``, which is now ``value``."""
        base = self._base or []
        new = _fingerprint(after)
        if len(new) != len(base) or after.invalid_casts != self.view_casts():
            return False
        for i, (old, cur) in enumerate(zip(base, new, strict=True)):
            if i != idx:
                if old != cur:
                    return False
                continue
            if old[:2] != cur[:2] or {k: v for k, v in old[2].items() if k != field} != {
                k: v for k, v in cur[2].items() if k != field
            }:
                return False
        got = after.objects[idx].kwargs.get(field)
        try:
            py = to_python(got) if got is not None else None
        except (ValueError, TypeError):
            return False
        return type(py) is type(value) and py == value

    def view_casts(self) -> list[tuple[int, str, str]]:
        return self.view.evaluation.invalid_casts if self.view.evaluation is not None else []

    # ---- a cast that fails on a value of the file ---------------------------------------------------------------

    def cast(self, ev: Evaluation, line: int, expr: str) -> tuple[str, str] | None:
        """(diff, note) rewriting the file's value behind a failing ``int(...)``/``float(...)`` when it is the same
        number written differently; None otherwise (the right value is the user's to choose)."""
        if self.view.env is None:
            return None
        names = [n for n, ln, *_ in ev.env_lookups if ln == line and n in self.file.values]
        for name in dict.fromkeys(names):
            if not self._patchable(name):
                continue
            current = self.file.values[name]
            for text in _same_number(current, expr):
                after = self._evaluate({**self.view.env, name: text})
                if after is None or any(ln == line for ln, *_ in after.invalid_casts):
                    continue
                if len(after.invalid_casts) != len(ev.invalid_casts) - 1:
                    continue
                patch = self.set_env({name: text})
                if patch is not None:
                    e = self.file.entries[name]
                    return patch, f"{self.file.name}:{e.line} sets {name}={e.written}; the patch writes {text}."
        return None

    # ---- backend flags -----------------------------------------------------------------------------------------

    def backend_needed(self) -> str | None:
        """Set the known backend's flag to 1 (None when the backend is not known)."""
        flag = FLAGS.get(self.use.backend or "")
        return self.set_env({flag: "1"}) if flag and self.use.backend != "vllm" else None

    def backend_multiple(self, flags_on: list[str]) -> str | None:
        """Zero every flag but the one to keep: the known backend's, else the one XTuner picks (not vLLM's)."""
        keep = FLAGS.get(self.use.backend or "") or (flags_on[0] if flags_on else "")
        if not keep or keep == FLAGS["vllm"]:
            return None
        values = {f: "0" for f in flags_on if f != keep}
        if keep not in flags_on:
            values[keep] = "1"
        return self.set_env(values)

    def backend_instead_of_vllm(self) -> str | None:
        """vLLM rollout cannot start: the known backend's flag instead (None when it is not known)."""
        flag = FLAGS.get(self.use.backend or "")
        if not flag or self.use.backend == "vllm":
            return None
        on = (self.view.env or {}).get(flag) == "1"
        return self.set_env({FLAGS["vllm"]: "0", **({} if on else {flag: "1"})})

    def export(self, name: str) -> str | None:
        """``export`` in front of a variable the script sets but never exports."""
        if name in self.use.overridden:
            return None
        return self.editor.diff([self.editor.export(name)])


def _same_number(text: str, expr: str) -> list[str]:
    """Other spellings of the number ``text`` holds, as ``int(...)``/``float(...)`` in ``expr`` would accept them."""
    raw = text.strip().strip("'\"").strip()
    out: list[str] = []
    if raw != text:
        out.append(raw)
    if expr.startswith("int("):
        try:
            f = float(raw)
        except ValueError:
            return out
        if f.is_integer() and abs(f) < 1e15:
            out.append(str(int(f)))
    return [o for o in dict.fromkeys(out) if o and o != text]
