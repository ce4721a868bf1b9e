"""The fields of a user's config as XTuner's trainer receives them, by path from ``trainer`` and by the view's keys.

A config file keeps a value when the trainer gets the same value from it; so comparing two versions of a config
(the user's and the one a plan writes) means walking what ``trainer`` holds — every keyword written in every class
call it reaches, list item and dict entry — and comparing values, not text. :func:`trainer_fields` is that walk;
:func:`field_changes` compares two walks. :func:`owner_of` finds the call and keyword behind a planning key
(``"rollout.tensor_parallel_size"``, ``"resources.num_workers"``, ``"worker.pack_max_length"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..config_analysis.field_values import field_val, lit
from ..config_analysis.patches import owner_of as view_owner_of
from ..config_analysis.values import Coll, Func, Lit, Obj, Unres, Val, elements
from ..config_analysis.view import ConfigView, tasks_of

#: Fields a walk visits at most, and how deep it goes (a config holds a few hundred).
MAX_FIELDS = 5000
MAX_DEPTH = 16
MAX_SHOWN_CHARS = 120


class SourceText:
    """Python source written into a config as is (``32 * 1024**3``, ``AsyncReplayBufferConfig()``): the patch
    engine writes a value as its ``repr``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class FieldChange(BaseModel):
    """One field of the trainer whose value differs between two versions of a config."""

    field: str
    old: str | None
    new: str | None

    def __str__(self) -> str:
        return f"{self.field}: {self.old or '(not set)'} → {self.new or '(not set)'}"


@dataclass(frozen=True)
class TrainerField:
    """One value the trainer holds: its path, the value, and its line in the config."""

    path: str
    val: Val


def shown(v: Val) -> str:
    """The value as a reader compares it: a literal's repr, ``Cls(...)`` for a call, else its source text."""
    if isinstance(v, Lit):
        text = repr(v.value)
    elif isinstance(v, Obj):
        text = f"{v.cls}(...)"
    elif isinstance(v, Coll):
        text = {"list": "[...]", "tuple": "(...)", "dict": "{...}"}[v.kind]
    elif isinstance(v, Func):
        text = f"<function {v.name}>"
    else:
        text = f"`{v.expr}`"
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


def _key(v: Val) -> tuple[str, Any]:
    """What two values must share to be the same: a literal's value and type, a call's class, else the text."""
    if isinstance(v, Lit):
        return ("lit", (type(v.value).__name__ if isinstance(v.value, bool) else "", v.value))
    if isinstance(v, Obj):
        return ("obj", v.cls)
    if isinstance(v, Coll):
        return ("coll", (v.kind, len(v.items)))
    if isinstance(v, Func):
        return ("func", v.name)
    return ("unres", v.expr)


def trainer_fields(trainer: Val | None) -> dict[str, TrainerField]:
    """Every value the trainer holds, by path (``trainer.rollout_config.tensor_parallel_size``); leaves and calls."""
    out: dict[str, TrainerField] = {}

    def walk(path: str, v: Val, depth: int, seen: tuple[int, ...]) -> None:
        if len(out) >= MAX_FIELDS or depth > MAX_DEPTH or id(v) in seen:
            return
        out[path] = TrainerField(path, v)
        inner = (*seen, id(v))
        if isinstance(v, Obj):
            for i, a in enumerate(v.args):
                walk(f"{path}({i})", a, depth + 1, inner)
            for name, kv in v.kwargs.items():
                walk(f"{path}.{name}", kv, depth + 1, inner)
        elif isinstance(v, Coll) and v.kind == "dict":
            for k, item in zip(v.keys or [], v.items, strict=False):
                label = repr(k.value) if isinstance(k, Lit) else k.expr
                walk(f"{path}[{label}]", item, depth + 1, inner)
        elif isinstance(v, Coll):
            for i, item in enumerate(v.items):
                walk(f"{path}[{i}]", item, depth + 1, inner)

    if trainer is not None:
        walk("trainer", trainer, 0, ())
    return out


def field_changes(before: dict[str, TrainerField], after: dict[str, TrainerField]) -> list[FieldChange]:
    """Fields whose value differs, appeared or disappeared between two walks, in the order of the first."""
    out: list[FieldChange] = []
    for path, f in before.items():
        g = after.get(path)
        if g is None:
            out.append(FieldChange(field=path, old=shown(f.val), new=None))
        elif _key(f.val) != _key(g.val):
            out.append(FieldChange(field=path, old=shown(f.val), new=shown(g.val)))
    out += [FieldChange(field=p, old=None, new=shown(g.val)) for p, g in after.items() if p not in before]
    return out


# --------------------------------------------------------------------------------------------------------
# Planning keys
# --------------------------------------------------------------------------------------------------------


def _first_task(view: ConfigView) -> Obj | None:
    trainer = view.trainer
    if not isinstance(trainer, Obj):
        return None
    tasks = tasks_of(field_val(trainer, "agent_loop_manager_cfg")[0])
    return tasks[0] if tasks else None


def _tokenize_fn(task: Obj) -> Val | None:
    """The tokenize function of the task's first dataset (prompt length lives in its ``max_length``)."""
    sampler = field_val(task, "sampler_config")[0]
    loader = field_val(sampler, "dataloader_cfg")[0] if isinstance(sampler, Obj) else None
    datasets = elements(field_val(loader, "dataset_config_list")[0]) if isinstance(loader, Obj) else None
    first = datasets[0] if datasets else None
    if isinstance(first, Coll) and first.kind == "dict":
        for k, item in zip(first.keys or [], first.items, strict=False):
            if isinstance(k, Lit) and k.value == "tokenize_fn":
                return item
    return None


def owner_of(view: ConfigView, key: str) -> tuple[Obj, str] | None:
    """The call and keyword behind a planning key: the view's keys and the trainer's resources (as the patch
    engine reads them), plus ``worker.*`` (train_worker_cfg), ``task.*`` (the first train task), ``sample_params.*``
    and ``tokenize.*`` (its sampling parameters and tokenize function)."""
    owner, _, name = key.partition(".")
    trainer = view.trainer
    obj: Val | None = None
    if owner == "task":
        obj = _first_task(view)
    elif owner == "worker" and isinstance(trainer, Obj):
        obj = field_val(trainer, "train_worker_cfg")[0]
    elif owner in ("sample_params", "tokenize"):
        task = _first_task(view)
        if task is not None and owner == "sample_params":
            loop = field_val(task, "agent_loop_config")[0]
            obj = field_val(loop, "sample_params")[0] if isinstance(loop, Obj) else None
        elif task is not None:
            obj = _tokenize_fn(task)
    else:
        return view_owner_of(view, key)
    return (obj, name) if isinstance(obj, Obj) and not obj.synthetic else None


def current_value(view: ConfigView, key: str) -> tuple[bool, Any, Val | None]:
    """(resolved, value, the value as evaluated) of a planning key: the keyword written, else XTuner's default."""
    found = owner_of(view, key)
    if found is None:
        return False, None, None
    obj, name = found
    val, _ = field_val(obj, name)
    if isinstance(val, Unres):
        return False, None, val
    ok, py = lit(val)
    return ok, py, val


def path_index(view: ConfigView) -> dict[int, str]:
    """Object id -> its path from trainer (the first path that reaches it)."""
    out: dict[int, str] = {}
    for path, f in trainer_fields(view.trainer).items():
        out.setdefault(id(f.val), path)
    return out


def key_path(view: ConfigView, key: str, index: dict[int, str]) -> str | None:
    """The trainer path a planning key names (``resources.num_workers`` -> ``trainer.resources.num_workers``)."""
    found = owner_of(view, key)
    if found is None or id(found[0]) not in index:
        return None
    return f"{index[id(found[0])]}.{found[1]}"
