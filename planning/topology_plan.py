"""A whole topology plan in order: decide the topology, size the engines and groups, fit Ray, estimate memory."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import Finding, RunContext
from ..xtuner_rules import resources as rr
from .cluster_fit import ClusterShape, size_ray_groups, worker_groups
from .config_plan import ConfigReading, config_findings, group_asks, group_workers, strategy_knobs
from .memory import DEFAULT_GPU_MEMORY_GIB, TRAIN_MEMORY_HEADROOM, estimate_memory, memory_findings, train_memory
from .models import (
    Alternative,
    MemoryEstimate,
    ModelInfo,
    PlanRequest,
    ProduceStrategyPlan,
    ResourcesPlan,
    RolloutPlan,
    Topology,
    TrainingPlan,
)
from .rollout_engine import plan_rollout, size_engine
from .topology import decide_topology, idle_finding, produce_plan, split_groups, staleness_findings
from .training import pack_length, plan_training


@dataclass
class TopologyPlan:
    """Everything choose_topology answers with except the rendered config and diagram."""

    topology: Topology
    rationale: list[str]
    alternatives: list[Alternative]
    strategy: ProduceStrategyPlan
    resources: ResourcesPlan
    ray_requirements: rr.RayRequirements
    fit_rows: list[rr.FitRow]
    fits: bool | None
    rollout: RolloutPlan
    rollout_workers: int
    training: TrainingPlan
    memory: MemoryEstimate
    findings: list[Finding]


def plan_topology(
    p: PlanRequest,
    model: ModelInfo,
    shape: ClusterShape,
    findings: list[Finding],
    ctx: RunContext,
    reading: ConfigReading | None = None,
) -> TopologyPlan:
    """Plan the run on this cluster; findings already raised (cluster shape) come first.

    ``reading`` is the user's config: its worker counts, per-worker CPUs/memory, CPU pools and strategy are kept
    where XTuner's rules and the cluster allow; why a value had to change goes into the reading's reasons.
    """
    given = reading.view if reading is not None else None
    findings = list(findings)
    gpu_gib = p.gpu_memory_gib or DEFAULT_GPU_MEMORY_GIB[shape.accelerator]
    gpu_bytes = gpu_gib * rr.GIB
    util = p.gpu_memory_utilization or 0.8
    context_length = p.max_prompt_len + p.max_response_len
    pack_max_length = p.pack_max_length or pack_length(context_length)

    # Can the training state live on half of the accelerators (a precondition to split them)? Unknown without a size.
    half = max(1, shape.total // 2)
    tm = train_memory(model, half, pack_max_length, p.sp_size)
    train_fits_half = model.source == "unknown" or sum(tm.values()) <= TRAIN_MEMORY_HEADROOM * gpu_bytes
    topology, rationale, alternatives, more = decide_topology(p, shape.total, train_fits_half)
    findings += more
    ctx.progress(2, 4, "sizing")

    tp, ep, engine_fits, why = size_engine(p, model, topology, shape, gpu_gib, util)
    rationale.append(why)
    want = group_workers(given)
    engine = rr.num_gpus_per_engine(tp, ep)
    split = split_groups(p, model, topology, shape, engine, gpu_bytes, pack_max_length, want)
    if split.why:
        rationale.append(split.why)
    rule_idle = split.idle - (shape.total - min(want.get("shared", shape.total), shape.total))
    if rule_idle > 0 and not want:
        findings.append(idle_finding(split.idle, shape.total, tp, ep))
    asks = group_asks(given) if given is not None else None
    sizing, more = size_ray_groups(p, shape, split.groups, list(given.pools) if given else None, asks)
    findings += more
    if reading is not None:
        findings += config_findings(
            reading, shape.total, shape.per_node, (tp, ep), split.groups, sizing, shape.accelerator
        )
    rollout, more = plan_rollout(p, topology, shape, tp, ep, (split.rollout, split.train), util, context_length)
    findings += more
    memory = estimate_memory(model, p, split.train, rollout, pack_max_length, gpu_gib, topology)
    findings += memory_findings(memory, model, rollout, engine_fits, context_length)
    training, more = plan_training(p, split.train, pack_max_length, reading.disabled if reading else set())
    findings += more
    strategy = produce_plan(topology, p, strategy_knobs(given))
    findings += staleness_findings(topology, strategy, p)
    groups = worker_groups(split.groups, sizing, shape.accelerator)
    resources = ResourcesPlan(
        accelerator=shape.accelerator, accelerators_in_cluster=shape.total, groups=groups, idle_accelerators=split.idle
    )
    return TopologyPlan(
        topology=topology,
        rationale=rationale,
        alternatives=alternatives,
        strategy=strategy,
        resources=resources,
        ray_requirements=sizing.requirements,
        fit_rows=sizing.rows,
        fits=sizing.fits,
        rollout=rollout,
        rollout_workers=split.rollout,
        training=training,
        memory=memory,
        findings=findings,
    )
