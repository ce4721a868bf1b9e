"""Planning from the user's own config: which of its choices a plan keeps, which XTuner's rules or the cluster force
to change (with the numbers), and the effective staleness it runs with.

Values the caller passed explicitly win over the config (and are reported as such); everything else the config sets
is copied into the request the planner runs on.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..config_analysis.view import ConfigView
from ..core import Finding
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_STALE
from .cluster_fit import RaySizing
from .models import PlanRequest, Topology

SRC_PRODUCER_STALE = "xtuner/v1/rl/agent_loop_manager/producer.py:364"

#: config value -> request field it sets
FIELD_MAP = {
    "rollout.tensor_parallel_size": "tensor_parallel_size",
    "rollout.expert_parallel_size": "expert_parallel_size",
    "rollout.gpu_memory_utilization": "gpu_memory_utilization",
    "trainer.sync_weights_interval": "sync_weights_interval",
    "trainer.total_train_steps": "total_train_steps",
    "trainer.train_batch_size": "train_batch_size",
    "trainer.enable_evaluate": "enable_evaluate",
    "trainer.evaluate_step": "evaluate_step",
    "trainer.checkpoint_interval": "checkpoint_interval",
    "trainer.hf_interval": "hf_interval",
    "sampler.prompt_repeat_k": "prompt_repeat_k",
}


class Staleness(BaseModel):
    steps: int = Field(description="How many train steps a sample may lag the trained weights")
    formula: str = Field(description="The arithmetic with the config's values")
    source: str = SRC_STALE


class ConfigPlanReport(BaseModel):
    """What planning from the config kept and changed."""

    config: str
    topology_in_config: str | None = None
    kept: list[str] = Field(default_factory=list, description="Config values the plan keeps, with their lines")
    changed: list[str] = Field(default_factory=list, description="What the plan changes and why (rule or cluster)")
    unresolved: list[str] = Field(default_factory=list, description="Values that could not be read statically")
    staleness: Staleness | None = None


def effective_staleness(ci: ConfigView) -> Staleness | None:
    """(max_staleness + 1) * sync_weights_interval for async strategies (produce_utils.py:97-99, applied at
    producer.py:364); a synchronous strategy lags by at most the sync interval."""
    sync = ci.get("trainer.sync_weights_interval")
    if not isinstance(sync, int) or sync < 1:
        return None
    if ci.strategy_class and "Async" in ci.strategy_class:
        ms = ci.get("strategy.max_staleness")
        if not isinstance(ms, int):
            return None
        return Staleness(
            steps=(ms + 1) * sync,
            formula=f"(max_staleness {ms} + 1) × sync_weights_interval {sync} = {(ms + 1) * sync} "
            f"({ci.line('strategy.max_staleness')}, {ci.line('trainer.sync_weights_interval')})",
        )
    return Staleness(
        steps=sync,
        formula=f"synchronous production: weights sync every {sync} step(s) ({ci.line('trainer.sync_weights_interval')})",
        source="xtuner/v1/rl/agent_loop_manager/producer.py:151",
    )


def config_topology(ci: ConfigView) -> Topology | None:
    if ci.mode == "disaggregated":
        return "disaggregated"
    if ci.mode == "colocated":
        return "colocated_async" if ci.strategy_class and "Async" in ci.strategy_class else "colocated_sync"
    return None


def request_updates(
    ci: ConfigView, explicit: set[str], current: dict[str, Any]
) -> tuple[dict[str, Any], ConfigPlanReport]:
    """The request fields the config sets (unless passed explicitly), and the kept/changed report so far."""
    report = ConfigPlanReport(config=ci.name, unresolved=list(ci.unresolved))
    upd: dict[str, Any] = {}
    topo = config_topology(ci)
    report.topology_in_config = topo
    if topo is not None:
        if "topology" in explicit and current.get("topology") not in (None, topo):
            report.changed.append(f"topology {current['topology']} as requested, not the config's {topo}")
        else:
            upd["topology"] = topo
            report.kept.append(f"topology {topo} ({ci.trainer_class}, {ci.strategy_class or 'default strategy'})")
    for name, fname in FIELD_MAP.items():
        g = ci.values.get(name)
        if g is None or g.value is None:
            continue
        value = g.value
        if fname in ("checkpoint_interval", "hf_interval", "evaluate_step") and (
            not isinstance(value, int) or value < 1
        ):
            continue  # -1 / None disable these; the planner then proposes its own value
        if fname in explicit and current.get(fname) != value:
            report.changed.append(f"{fname}={current.get(fname)} as requested, not the config's {value}")
            continue
        upd[fname] = value
        if not g.default:
            report.kept.append(f"{fname}={value} ({ci.line(name)})")
    ctx = ci.get("rollout.context_length")
    if isinstance(ctx, int) and "max_response_len" not in explicit:
        prompt = current.get("max_prompt_len") or 1024
        if ctx > prompt:
            upd["max_response_len"] = ctx - prompt
            report.kept.append(f"context_length={ctx} ({ci.line('rollout.context_length')})")
    if ci.mode == "disaggregated" and len(ci.groups) == 2 and "rollout_gpus" not in explicit:
        rg = ci.groups[1].num_workers
        if rg is not None and isinstance(rg.value, int) and rg.value >= 1:
            upd["rollout_gpus"] = rg.value
    return upd, report


def group_workers(ci: ConfigView | None) -> dict[str, int]:
    """Workers per role the config asks for ('shared', 'train', 'rollout'), where literal."""
    out: dict[str, int] = {}
    for g in ci.groups if ci is not None else []:
        if g.num_workers is not None and isinstance(g.num_workers.value, int) and g.num_workers.value >= 1:
            out[g.role] = g.num_workers.value
    return out


def per_worker(ci: ConfigView | None) -> tuple[float, int] | None:
    """(CPUs, memory bytes) per worker of the config's first group, when both are literal."""
    if ci is None or not ci.groups:
        return None
    g = ci.groups[0]
    cpus = g.num_cpus_per_worker.value if g.num_cpus_per_worker else rr.DEFAULT_NUM_CPUS_PER_WORKER
    mem = g.cpu_memory_per_worker.value if g.cpu_memory_per_worker else rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES
    if not isinstance(cpus, int | float) or not isinstance(mem, int) or cpus <= 0 or mem <= 0:
        return None
    return float(cpus), int(mem)


def strategy_knobs(ci: ConfigView | None) -> tuple[str, dict[str, Any]] | None:
    """The config's produce strategy class and its async knobs (as written or XTuner's defaults)."""
    if ci is None or not ci.strategy_class:
        return None
    knobs = {k.split(".", 1)[1]: g.value for k, g in ci.values.items() if k.startswith("strategy.")}
    return ci.strategy_class, knobs


def _layout_finding(ci: ConfigView, want: int, planned: int, tp: int, ep: int, per_node: int, total: int) -> Finding:
    engine = rr.num_gpus_per_engine(tp, ep)
    kind = "EP" if ep > 1 else "TP"
    g = ci.groups[0].num_workers
    return Finding(
        id="topo.config_layout_rejected",
        severity="blocker",
        category="resource_mismatch_num_workers",
        title=f"Your config fails XTuner's rollout check: num_rollout_workers={want} must be divisible by "
        f"num_gpus_per_engine={engine}",
        evidence=f"XTuner raises at rollout start: num_rollout_workers={want} must be divisible by "
        f"num_gpus_per_engine={engine}. ({kind} {engine}; {want} workers)",
        location=f"{ci.name}:{g.line}" if g is not None and g.line else ci.name,
        fix=rr.engine_layout_fix(want, engine, kind, per_node, limit=total) + f". This plan uses {planned}.",
        reference=f"{CB}#divisibility-rules",
        source=rr.SRC_LMDEPLOY_TP,
        owner="config_edit",
        stage="rollout_start",
    )


def config_findings(
    ci: ConfigView,
    report: ConfigPlanReport,
    total: int,
    per_node: int,
    engine: tuple[int, int],
    groups: list[tuple[str, int]],
    sizing: RaySizing,
    p: PlanRequest,
) -> list[Finding]:
    """Compare the plan with the config: fill ``report`` (kept / changed, staleness) and flag what XTuner rejects."""
    tp, ep = engine
    out: list[Finding] = []
    want = group_workers(ci)
    planned = dict(groups)
    for role, asked in want.items():
        got = planned.get(role)
        if got is None:
            continue
        if got == asked:
            report.kept.append(f"{role} num_workers={asked}")
        elif role == "shared" and asked <= total and asked % rr.num_gpus_per_engine(tp, ep):
            report.changed.append(f"num_workers {asked} → {got}: XTuner's rollout divisibility rule")
            out.append(_layout_finding(ci, asked, got, tp, ep, per_node, total))
        elif asked > total:
            report.changed.append(f"{role} num_workers {asked} → {got}: the cluster has {total} accelerators")
        else:
            report.changed.append(f"{role} num_workers {asked} → {got}: to fit the cluster and engine size")
    start = per_worker(ci)
    if start is not None:
        now = (sizing.cpus_per_worker, sizing.memory_per_worker)
        txt = f"{start[0]:g} CPU, {start[1] / rr.GIB:g} GiB per worker"
        if now != start:
            report.changed.append(f"{txt} → {now[0]:g} CPU, {now[1] / rr.GIB:g} GiB: the cluster's Ray CPUs/memory")
        else:
            report.kept.append(txt)
    report.staleness = effective_staleness(ci)
    if report.staleness is not None and p.sync_weights_interval != ci.get("trainer.sync_weights_interval"):
        report.changed.append(
            f"sync_weights_interval {ci.get('trainer.sync_weights_interval')} → {p.sync_weights_interval} (requested)"
        )
    return out
