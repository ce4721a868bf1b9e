"""Pydantic-level rules on every class call: positional args, unknown/missing fields, mismatched classes."""

from __future__ import annotations

import re

from ..core.findings import Severity
from ..xtuner_rules import classes as xc
from .rule_context import Ctx, anchor_for
from .values import Obj, Val, elements


def check_objects(c: Ctx) -> None:
    """Pydantic-level checks on every class call: unknown kwargs, positional args, required fields, types."""
    for obj in c.ev.objects:
        spec = xc.get(obj.cls)
        fields = xc.fields_of(obj.cls)
        if spec is None or fields is None:
            continue
        cond = " (inside a conditional branch)" if obj.conditional else ""
        sev: Severity = "warning" if obj.conditional else "blocker"  # the branch may not run
        if obj.args:
            c.add(
                "config.positional_arguments",
                sev,
                "config_load_error",
                f"{obj.cls}(...) is called with positional arguments{cond}",
                evidence=f"`{obj.expr}` — pydantic models accept keyword arguments only: TypeError: "
                f"BaseModel.__init__() takes 1 positional argument but {len(obj.args) + 1} were given",
                line=obj.line,
                fix="Pass every value by name, e.g. Field=value.",
                anchor=anchor_for(obj.cls),
                source=spec.source,
            )
        if xc.forbids_extra(obj.cls) and not obj.splat:
            for kw in obj.kwargs:
                if kw in fields:
                    continue
                extra_fix = f"Remove `{kw}=`; {obj.cls} fields are: {', '.join(sorted(fields))}."
                if obj.cls == "RolloutConfig" and kw == "backend":
                    extra_fix = (
                        "Remove `backend=`: RolloutConfig has no backend field (its docstring is stale). Select the "
                        "backend with exactly one of XTUNER_USE_LMDEPLOY=1 / XTUNER_USE_SGLANG=1 in the environment "
                        "the Ray cluster is started with."
                    )
                c.add(
                    "config.unknown_field",
                    sev,
                    "config_load_error",
                    f"{obj.cls} has no field `{kw}`{cond}",
                    evidence=f"XTuner raises at config load: 1 validation error for {obj.cls}\n{kw}\n  Extra inputs "
                    f"are not permitted [type=extra_forbidden]",
                    line=obj.kw_line(kw),
                    fix=extra_fix,
                    anchor=anchor_for(obj.cls),
                    source=(xc.extra_owner(obj.cls) or spec).source,
                    patch=c.remove(obj, kw),
                )
        if not obj.splat and not obj.synthetic:
            for fname, f in fields.items():
                if f.required and fname not in obj.kwargs:
                    owner = xc.field_owner(obj.cls, fname) or spec
                    c.add(
                        "config.missing_required_field",
                        sev,
                        "config_load_error",
                        f"{obj.cls}(...) is missing required field `{fname}`{cond}",
                        evidence=f"XTuner raises at config load: 1 validation error for {obj.cls}\n{fname}\n  Field "
                        f"required [type=missing]",
                        line=obj.line,
                        fix=f"Add `{fname}=` ({f.type}).",
                        anchor=anchor_for(obj.cls),
                        source=f"{owner.path}:{f.line}",
                    )
        for kw, val in obj.kwargs.items():
            field_spec = fields.get(kw)
            if field_spec is None:
                continue
            check_field_type(c, obj, kw, field_spec, val)


def check_field_type(c: Ctx, obj: Obj, kw: str, f: xc.F, val: Val) -> None:
    allowed, complete = annotation_classes(f.type)
    if not allowed or not complete:
        return
    candidates = [val]
    if "list[" in f.type:
        candidates = elements(val) or [val]
    for item in candidates:
        if not isinstance(item, Obj) or xc.get(item.cls) is None:
            continue
        if any(xc.is_subclass(item.cls, a) for a in allowed):
            continue
        expected = " | ".join(allowed)
        owner = xc.field_owner(obj.cls, kw) or xc.get(obj.cls)
        counterpart = mode_counterpart(item, allowed)
        c.add(
            "config.class_mismatch",
            "warning" if obj.conditional else "blocker",
            "config_load_error",
            f"{obj.cls}.{kw} gets a {item.cls}, but XTuner expects {expected}",
            evidence=f"XTuner raises at config load: validation error for {obj.cls}\n{kw}\n  Input should be a valid "
            f"dictionary or instance of {allowed[0]} [type=model_type]",
            line=item.line,
            fix=pairing_fix(obj.cls, kw, item.cls),
            anchor="config-type-mismatches",
            source=f"{owner.path}:{f.line}" if owner else None,
            patch=c.rename(item, counterpart) if counterpart else None,
        )


def mode_counterpart(item: Obj, allowed: list[str]) -> str | None:
    """The other trainer mode's twin of ``item``'s class (``DisaggTaskSpecConfig`` <-> ``TaskSpecConfig``...) when
    it is what the field expects and takes every keyword ``item`` passes, each of the class it needs (so the rename
    never moves the mismatch one level down)."""
    twin = item.cls.removeprefix("Disagg") if item.cls.startswith("Disagg") else f"Disagg{item.cls}"
    fields = xc.fields_of(twin)
    if fields is None or item.splat or not any(xc.is_subclass(twin, a) for a in allowed):
        return None
    for kw, val in item.kwargs.items():
        if kw not in fields:
            return None
        expected, complete = annotation_classes(fields[kw].type)
        if not (expected and complete):
            continue
        children = (elements(val) or [val]) if "list[" in fields[kw].type else [val]
        if any(isinstance(ch, Obj) and not any(xc.is_subclass(ch.cls, e) for e in expected) for ch in children):
            return None
    return twin


def pairing_fix(parent: str, kw: str, got: str) -> str:
    if parent == "RLDisaggregatedTrainerConfig" and kw == "agent_loop_manager_cfg":
        return (
            "A disaggregated trainer needs DisaggAgentLoopManagerConfig(tasks=DisaggTaskSpecConfig(..., "
            "produce_strategy_config=DisaggAsyncProduceStrategyConfig(...))); or switch to RLColocateTrainerConfig."
        )
    if parent == "RLColocateTrainerConfig" and kw == "agent_loop_manager_cfg":
        return "A colocated trainer needs AgentLoopManagerConfig(tasks=TaskSpecConfig(...)); Disagg* classes are for RLDisaggregatedTrainerConfig."
    if parent == "DisaggAgentLoopManagerConfig":
        return "Inside DisaggAgentLoopManagerConfig use DisaggTaskSpecConfig for every task."
    if parent == "AgentLoopManagerConfig":
        return "Inside AgentLoopManagerConfig (colocated, and every eval manager) use TaskSpecConfig."
    if parent == "DisaggTaskSpecConfig" and kw == "produce_strategy_config":
        return (
            "Disaggregated train tasks support only DisaggAsyncProduceStrategyConfig (there is no disaggregated "
            "sync strategy); for on-policy behaviour keep max_staleness=0 and over_sample_threshold=0."
        )
    if parent == "TaskSpecConfig" and kw == "produce_strategy_config":
        return "Colocated tasks use SyncProduceStrategyConfig() or AsyncProduceStrategyConfig(...); Disagg* strategies are for DisaggTaskSpecConfig."
    if kw == "eval_agent_loop_manager_cfg":
        return "Evaluation always uses AgentLoopManagerConfig(tasks=TaskSpecConfig(...)), in both trainer modes."
    return f"Pass an instance of the expected class instead of {got}."


def annotation_classes(type_text: str) -> tuple[list[str], bool]:
    """Config classes named in an annotation, and whether every class-like name in it is a listed class."""
    names = re.findall(r"[A-Za-z_]\w*", type_text)
    ignore = {
        "None",
        "list",
        "dict",
        "tuple",
        "str",
        "int",
        "float",
        "bool",
        "Path",
        "Optional",
        "Union",
        "List",
        "Literal",
        "Any",
        "Dict",
        "Tuple",
    }
    classes = [n for n in names if n not in ignore]
    known = [n for n in classes if xc.get(n) is not None]
    return known, bool(classes) and len(known) == len(classes)
