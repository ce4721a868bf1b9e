"""The environment variables a user's config reads, what each resolved to for the plan, and what depends on it.

XTuner executes the config file when it loads it (``xtuner/v1/utils/config.py:17-29``), so every ``os.environ`` read
takes the value of the launching shell: a plan made from the file holds only for the values it assumed. Each read is
named with the value the plan used (set by the plan, like ``WORLD_SIZE`` = its node count, or the file's default),
the trainer fields it feeds, and whether the plan's numbers depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from ..config_analysis.values import Coll, Obj
from ..config_analysis.view import SRC_CONFIG_PY, ConfigView, view_of_source
from .config_fields import TrainerField, shown, trainer_fields

#: XTuner's launch script exports WORLD_SIZE as the node count, which the example configs multiply by 8.
SRC_WORLD_SIZE = "examples/v1/scripts/run_rl.sh:46"
MAX_FIELDS_SHOWN = 4


class EnvValue(BaseModel):
    """One environment variable the config reads."""

    name: str
    location: str = Field(description="'file:line' of its first read")
    required: bool = Field(description="os.environ[...]: loading the config fails when it is unset")
    plan_value: str | None = Field(description="What the plan evaluated it as; None: not known to the plan")
    value_source: str = Field(description="'set by the plan', 'default in your config' or 'unknown'")
    feeds: list[str] = Field(description="Trainer fields that depend on it, with the value the plan used")
    feeds_omitted: int = 0
    plan_depends: bool = Field(description="A value the plan is sized from depends on it")
    note: str


def _leaves(fields: dict[str, TrainerField], name: str) -> list[TrainerField]:
    return [f for f in fields.values() if name in f.val.env and not isinstance(f.val, Obj | Coll)]


def env_values(view: ConfigView, env: Mapping[str, str], plan_paths: set[str]) -> list[EnvValue]:
    """Every variable the config reads, in the order of first read (see the module docstring)."""
    fields = trainer_fields(view.trainer)
    out: list[EnvValue] = []
    seen: set[str] = set()
    for read in view.env_reads:
        if read.name is None or read.name in seen:
            continue
        seen.add(read.name)
        feeds = _leaves(fields, read.name)
        depends = any(f.path in plan_paths for f in feeds)
        shown_feeds = [f"{f.path} = {shown(f.val)}" for f in feeds]
        if read.name in env:
            source, value = "set by the plan", env[read.name]
            note = _unset_note(view, env, read.name, read.default, [f for f in feeds if f.path in plan_paths])
        elif read.required:
            source, value = "unknown", None
            note = "read when XTuner loads the config; the plan does not know it"
        else:
            source, value = "default in your config", read.default
            note = f"unset for the plan, so the default {read.default} was used; exporting {read.name} at launch " + (
                "changes values the plan is sized from" if depends else "changes no value the plan is sized from"
            )
        out.append(
            EnvValue(
                name=read.name,
                location=f"{view.name}:{read.line}",
                required=read.required,
                plan_value=value,
                value_source=source,
                feeds=shown_feeds[:MAX_FIELDS_SHOWN],
                feeds_omitted=max(0, len(shown_feeds) - MAX_FIELDS_SHOWN),
                plan_depends=depends,
                note=f"{note} ({SRC_CONFIG_PY} executes the config when it is loaded)",
            )
        )
    return out


def _unset_note(
    view: ConfigView, env: Mapping[str, str], name: str, default: str | None, feeds: list[TrainerField]
) -> str:
    """For a variable the plan set: export it at launch, and what the plan's fields become when it is unset."""
    text = f"the plan set {name}={env[name]}; export {name}={env[name]} before launching"
    if name == "WORLD_SIZE":
        text += f" (XTuner's launch script sets it to the node count, {SRC_WORLD_SIZE})"
    if not feeds:
        return text
    unset = trainer_fields(view_of_source(view.name, view.source, {k: v for k, v in env.items() if k != name}).trainer)
    changes = [
        f"{f.path} {shown(f.val)} → {shown(unset[f.path].val)}"
        for f in feeds
        if f.path in unset and shown(unset[f.path].val) != shown(f.val)
    ]
    if default is not None:
        text += f"; unset it is {default} and " + (", ".join(changes) if changes else "the plan's values stay the same")
    return text
