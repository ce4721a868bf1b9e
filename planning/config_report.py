"""What a plan made from the user's config answers with: the config itself where only forced values change, and a
report saying, for every value, whether it was kept, changed (with the rule), added (with why), taken from the
environment (with what it resolved to) or assumed.

The snippet is the user's file edited (``config_edits``) whenever the plan keeps its topology family; switching
between colocated and disaggregated rewrites the classes and resources throughout, so then the snippet is a new
config and the report lists every field of the user's file the new one does not carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..config_analysis.field_values import field_val
from ..config_analysis.patches import literal
from ..config_analysis.values import Obj
from ..config_analysis.view import view_of_source
from ..xtuner_rules import resources as rr
from .citations import SRC_ASYNC, SRC_INTERVALS, SRC_SYNC
from .config_edits import ConfigEdit, Target, write_targets
from .config_env import EnvValue, env_values
from .config_fields import (
    FieldChange,
    SourceText,
    current_value,
    field_changes,
    key_path,
    owner_of,
    path_index,
    trainer_fields,
)
from .config_plan import ConfigReading, Staleness, effective_staleness, plan_values
from .models import PlanRequest
from .topology import config_classes
from .topology_plan import TopologyPlan

SRC_REPLAY_BUFFERS = "xtuner/v1/rl/replay_buffer.py:693-737"
MAX_NOT_CARRIED = 40
#: Keys a plan writes only when the caller asked for them (the plan's figures use their sum, context_length).
LENGTH_KEYS = ("sample_params.max_tokens", "tokenize.max_length")


class ConfigPlanReport(BaseModel):
    """Planning from your config: every value kept, changed (with its rule), added, read from the environment or
    assumed; nothing else differs between your file and the snippet."""

    config: str
    snippet_basis: Literal["your_config", "skeleton"] = Field(
        description="your_config: the snippet is your file with only the edits below; skeleton: a new config"
    )
    basis_why: str
    topology_in_config: str | None = None
    kept: list[str] = Field(default_factory=list, description="Values the plan is sized from, kept as you wrote them")
    changed: list[ConfigEdit] = Field(default_factory=list, description="Values the plan changes, each with its rule")
    added: list[ConfigEdit] = Field(
        default_factory=list, description="Keywords your config leaves at XTuner's default that the plan sets"
    )
    launch_env: dict[str, str] = Field(
        default_factory=dict, description="Exports the plan needs (a changed value your config reads from env)"
    )
    also_changed: list[FieldChange] = Field(
        default_factory=list, description="Other fields an edit changes (a name they share)"
    )
    not_applied: list[str] = Field(
        default_factory=list, description="Plan values that could not be written into your file"
    )
    assumed: list[str] = Field(
        default_factory=list, description="Values the plan used that your config leaves unset or unresolved"
    )
    environment: list[EnvValue] = Field(default_factory=list, description="Every variable your config reads")
    unresolved: list[str] = Field(default_factory=list, description="Values that could not be read statically")
    not_carried: list[FieldChange] = Field(
        default_factory=list, description="skeleton basis: fields of your config the new one does not keep"
    )
    not_carried_omitted: int = 0
    staleness: Staleness | None = None
    patch: str | None = Field(default=None, description="Unified diff from your config to the snippet")


def _same(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _code(value: Any) -> SourceText | None:
    """How a plan value is written when not as its literal: GiB multiples as ``N * 1024**3``, integral floats
    without ``.0``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= rr.GIB and value % rr.GIB == 0:
        return SourceText(f"{value // rr.GIB} * 1024**3")
    if isinstance(value, float) and value.is_integer():
        return SourceText(f"{value:g}")
    return None


def _kept(path: str, expr: str, value: Any, where: str) -> str:
    """'trainer.resources.num_workers = 8 * NNODE (= 8, rl.py:49)'."""
    shown_value = literal(value)
    return f"{path} = {expr} ({where})" if expr == shown_value else f"{path} = {expr} (= {shown_value}, {where})"


def _reasons(reading: ConfigReading, plan: TopologyPlan) -> dict[str, tuple[str, str]]:
    """The reading's reasons plus the intervals XTuner rejects (rounded up to a multiple of the sync interval)."""
    out = dict(reading.reasons)
    for f in plan.findings:
        if f.id == "topo.interval_rounded" and f.location:
            out.setdefault(f"trainer.{f.location}", (f.evidence, SRC_INTERVALS))
    return out


def _swap_targets(reading: ConfigReading, plan: TopologyPlan) -> list[Target]:
    """Colocated sync <-> async as requested: the first train task's strategy and the trainer's replay buffer."""
    view = reading.view
    why = f"you passed topology={plan.topology}; your config is {reading.topology}"
    cls = plan.strategy.class_name
    knobs = ", ".join(f"{k}={literal(v)}" for k, v in plan.strategy.params.items())
    src = SRC_ASYNC if "Async" in cls else SRC_SYNC
    out = [Target("task.produce_strategy_config", SourceText(f"{cls}({knobs})"), why, src, (plan.strategy.module, cls))]
    buffer = config_classes(plan.topology).replay_buffer
    found = owner_of(view, "trainer.replay_buffer_config")
    now = field_val(*found)[0] if found is not None else None
    if not (isinstance(now, Obj) and now.cls == buffer):
        out.append(
            Target(
                "trainer.replay_buffer_config",
                SourceText(f"{buffer}()"),
                why,
                SRC_REPLAY_BUFFERS,
                ("xtuner.v1.rl.replay_buffer", buffer),
            )
        )
    return out


def config_report(
    reading: ConfigReading,
    plan: TopologyPlan,
    p: PlanRequest,
    skeleton: str,
    label: str,
    check: Callable[[], None] = lambda: None,
) -> tuple[ConfigPlanReport, str]:
    """The report and the snippet for a plan made from the user's config (see the module docstring)."""
    view, env = reading.view, reading.env
    report = ConfigPlanReport(
        config=view.name,
        snippet_basis="your_config",
        basis_why="the plan keeps your config's topology: the snippet is your file with only the edits listed",
        topology_in_config=reading.topology,
        unresolved=list(view.unresolved),
        staleness=effective_staleness(view),
    )
    if reading.topology is not None:
        report.kept.append(f"topology {reading.topology} ({view.trainer_class}, {view.strategy_class or 'default'})")
    kept_strategy = plan.strategy.class_name == view.strategy_class
    values = plan_values(
        p, plan.resources.groups, plan.training, plan.rollout, plan.strategy.params if kept_strategy else {}
    )
    reasons = _reasons(reading, plan)
    index = path_index(view)
    report.environment = env_values(view, env, {path for k in values if (path := key_path(view, k, index))})
    targets: list[Target] = []
    report.assumed = list(reading.assumed)
    for key, want in values.items():
        ok, cur, val = current_value(view, key)
        if not ok or (key in LENGTH_KEYS and key not in reasons):
            continue
        found = owner_of(view, key)
        written = found is not None and found[1] in found[0].kwargs
        if _same(cur, want):
            if written and val is not None:
                report.kept.append(_kept(key_path(view, key, index) or key, val.expr, cur, f"{view.name}:{val.line}"))
        elif key in reasons:
            targets.append(Target(key, want, *reasons[key], code=_code(want)))
        else:
            report.assumed.append(f"{key}: your config gives {cur!r}; the plan's figures use {want!r}")
    family_change = (plan.topology == "disaggregated") != (reading.topology == "disaggregated")
    if reading.topology is None or family_change:
        report.snippet_basis = "skeleton"
        report.basis_why = (
            f"you asked for {plan.topology} and your config is {reading.topology}: the trainer, managers, tasks and "
            "resources change throughout, so the snippet is a new config; `not_carried` lists what of yours it lacks"
            if reading.topology is not None
            else f"your trainer class {view.trainer_class} is not one planning knows: the snippet is a new config"
        )
        report.kept = []  # a new config keeps nothing as written; `not_carried` says what it lacks
        _not_carried(report, reading, skeleton)
        return report, skeleton
    if plan.topology != reading.topology:
        targets += _swap_targets(reading, plan)
    outcome = write_targets(view, env, targets, label, check)
    report.changed = [e for e in outcome.edits if e.kind != "added"]
    report.added = [e for e in outcome.edits if e.kind == "added"]
    report.launch_env = outcome.launch_env
    report.also_changed = outcome.also_changed
    report.not_applied = outcome.not_applied
    report.patch = outcome.patch
    return report, outcome.source


def _not_carried(report: ConfigPlanReport, reading: ConfigReading, skeleton: str) -> None:
    ours = trainer_fields(reading.view.trainer)
    theirs = trainer_fields(view_of_source(reading.view.name, skeleton, reading.env).trainer)
    lost = [c for c in field_changes(ours, theirs) if c.old is not None]
    report.not_carried = lost[:MAX_NOT_CARRIED]
    report.not_carried_omitted = max(0, len(lost) - MAX_NOT_CARRIED)
