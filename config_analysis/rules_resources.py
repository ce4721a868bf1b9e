"""Trainer resources as reported (GPU groups, judger/agent-loop CPU pools) and the placement-strategy rule."""

from __future__ import annotations

from ..xtuner_rules import classes as xc
from .field_values import field_val, json_field, lit
from .report import CPUPool, ResourcePool
from .rule_context import Ctx
from .rules_tasks import tasks_of
from .values import Coll, Obj, Val

SRC_PG_STRATEGY = "xtuner/v1/rl/utils/ray_accelerator_worker.py:82-86"


def resource_pool(c: Ctx, role: str, v: Val) -> ResourcePool:
    if not isinstance(v, Obj):
        return ResourcePool(role=role, unresolved=["*"], location=c.loc(v.line))
    out = ResourcePool(role=role, location=c.loc(v.line))
    for f, attr in (
        ("accelerator", "accelerator"),
        ("num_workers", "num_workers"),
        ("num_accelerators_per_worker", "num_accelerators_per_worker"),
        ("num_cpus_per_worker", "num_cpus_per_worker"),
        ("cpu_memory_per_worker", "cpu_memory_per_worker_bytes"),
    ):
        val, _ = field_val(v, f)
        ok, py = lit(val)
        if ok:
            setattr(out, attr, py)
        else:
            out.unresolved.append(f"{f}: {val.expr}")
    return out


def collect_resources(c: Ctx, t: Obj, mode: str) -> tuple[list[ResourcePool], list[CPUPool]]:
    pools: list[ResourcePool] = []
    if mode == "colocated":
        pools.append(resource_pool(c, "shared", field_val(t, "resources")[0]))
    elif mode == "disaggregated":
        pools.append(resource_pool(c, "train", field_val(t, "train_resources")[0]))
        pools.append(resource_pool(c, "rollout", field_val(t, "rollout_resources")[0]))
    cpu: list[CPUPool] = []
    for role in ("agent_loop_manager_cfg", "eval_agent_loop_manager_cfg"):
        for task in tasks_of(Ctx(c.path, c.ev, c.env), field_val(t, role)[0], role):
            tname = json_field(task, "task_name")
            loop, _ = field_val(task, "agent_loop_config")
            judger, _ = field_val(task, "judger_config")
            comps: list[tuple[str, Val]] = [(f"agent_loop:{loop.cls}", loop)] if isinstance(loop, Obj) else []
            judgers = [judger]
            if isinstance(judger, Obj) and judger.cls == "ComposedJudgerConfig":
                branches = judger.kwargs.get("branches")
                judgers = list(branches.items) if isinstance(branches, Coll) else []
            for j in judgers:
                if isinstance(j, Obj):
                    comps.append((f"judger:{json_field(j, 'judger_name')}", j))
            for label, comp in comps:
                cr = comp.kwargs.get("cpu_resources") if isinstance(comp, Obj) else None
                if not isinstance(cr, Obj):
                    continue
                # XTuner registers one pool per build, under a unique name (ray_cpu_worker.py:373-375)
                cpu.append(
                    CPUPool(
                        owner=f"{label} (task {tname})",
                        num_workers=json_field(cr, "num_workers"),
                        num_cpus_per_worker=json_field(cr, "num_cpus_per_worker"),
                        cpu_memory_per_worker_bytes=json_field(cr, "cpu_memory_per_worker"),
                        location=c.loc(cr.line),
                    )
                )
    return pools, cpu


def check_pg_strategies(c: Ctx) -> None:
    for obj in c.ev.objects:
        if obj.cls not in ("AcceleratorResourcesConfig", "CPUResourcesConfig") or "pg_pack_strategy" not in obj.kwargs:
            continue
        ok, v = lit(obj.kwargs["pg_pack_strategy"])
        if ok and v not in xc.VALID_PG_STRATEGIES:
            src = SRC_PG_STRATEGY if obj.cls.startswith("Accel") else "xtuner/v1/rl/utils/ray_cpu_worker.py:67-71"
            c.add(
                "config.pg_strategy_invalid",
                "blocker",
                "config_load_error",
                f"{obj.cls}.pg_pack_strategy={v!r} is not a Ray placement strategy",
                evidence=f"XTuner raises at config load: Value error, pg_pack_strategy must be one of "
                f"{set(xc.VALID_PG_STRATEGIES)}",
                line=obj.kw_line("pg_pack_strategy"),
                fix=f"Use one of {', '.join(xc.VALID_PG_STRATEGIES)}, or leave it unset for XTuner's default.",
                anchor="resources",
                source=src,
                patch=c.remove(obj, "pg_pack_strategy"),
            )
