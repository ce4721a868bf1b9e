"""Ray resources for a plan: cluster shape (given or probed), per-worker CPUs/memory that pass XTuner's checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..cluster import ray as ray_cluster
from ..cluster.fit import Shortage, shortages
from ..cluster.ray_address import RayAccess
from ..core import Finding, RunContext, ToolInputError
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_NPU_NODE
from .models import ClusterSource, PlanRequest, WorkerGroupPlan

#: Smallest per-worker Ray memory (GiB) we will shrink to before calling the cluster too small.
MIN_WORKER_MEMORY_GIB = 4


@dataclass(frozen=True)
class ClusterShape:
    """The accelerators a plan lays out: node count and size, and the Ray capacity when known."""

    accelerator: rr.Accelerator
    nodes: int
    per_node: int
    total: int
    cpus_per_node: float | None
    cluster: rr.ClusterCapacity | None
    source: ClusterSource


@dataclass(frozen=True)
class WorkerAsk:
    """What one worker of a group asks Ray for: the config's values, else XTuner's defaults (12 CPUs, 16 GiB)."""

    cpus: float = rr.DEFAULT_NUM_CPUS_PER_WORKER
    memory: int = rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES
    accelerators: float = 1.0


DEFAULT_ASK = WorkerAsk()


@dataclass(frozen=True)
class RaySizing:
    """Per-worker CPUs and memory of each group (by role), XTuner's Ray requirements at those values, and the fit."""

    per_group: dict[str, WorkerAsk]
    requirements: rr.RayRequirements
    rows: list[rr.FitRow]
    fits: bool | None

    def ask(self, role: str) -> WorkerAsk:
        return self.per_group.get(role, DEFAULT_ASK)


def _npu_per_node_finding(per_node: int) -> Finding:
    return Finding(
        id="topo.npu_gpus_per_node_forced",
        severity="warning",
        category="resource_mismatch_num_workers",
        title=f"XTuner assumes 16 NPUs per node (RolloutConfig.gpus_per_node is forced to 16); "
        f"gpus_per_node={per_node} was given",
        evidence="RolloutConfig(device='NPU') sets gpus_per_node=16; AcceleratorResourcesConfig sets "
        "num_accelerators_per_node=16",
        fix="Keep whole 16-NPU nodes; engine sizes above one node assume 16 per node.",
        reference=f"{CB}#divisibility-rules",
        source=SRC_NPU_NODE,
        owner="cluster_setup",
    )


def resolve_cluster(p: PlanRequest, ctx: RunContext) -> tuple[ClusterShape, list[Finding]]:
    """Nodes, accelerators per node and Ray capacity: from the request, or from a live read-only Ray probe."""
    findings: list[Finding] = []
    acc: rr.Accelerator = p.accelerator
    per_node = p.gpus_per_node or (rr.NPU_ACCELERATORS_PER_NODE if acc == "NPU" else 8)
    if acc == "NPU" and per_node != rr.NPU_ACCELERATORS_PER_NODE:
        findings.append(_npu_per_node_finding(per_node))
    cluster: rr.ClusterCapacity | None = None
    cluster_source: ClusterSource = "not_given"
    if p.nodes is None and not p.use_cluster:
        raise ToolInputError(
            "nodes_missing", "give nodes (machines with accelerators), or use_cluster=true", "Pass nodes."
        )
    nodes = p.nodes or 1
    cpus_per_node = p.cpus_per_node
    if p.use_cluster:
        ctx.progress(1, 4, "probing Ray")
        cluster = probe_cluster(p, ctx)
        cluster_source = "ray_probe"
        acc = cluster.accelerator
        accel_nodes = [n for n in cluster.nodes if n.accelerators > 0]
        if not accel_nodes:
            raise ToolInputError(
                "cluster_has_no_accelerators",
                "the Ray cluster registers no GPU or NPU resources",
                "Start the Ray nodes with --num-gpus (or --resources NPU) on the accelerator machines.",
            )
        nodes = len(accel_nodes)
        per_node = int(max(n.accelerators for n in accel_nodes))
        cpus_per_node = max(n.cpus for n in accel_nodes)
    elif p.cpus_per_node is not None and p.memory_gib_per_node is not None:
        cluster = rr.ClusterCapacity.uniform(nodes, per_node, p.cpus_per_node, p.memory_gib_per_node, acc)
        cluster_source = "given"
    elif p.cpus_per_node is not None or p.memory_gib_per_node is not None:
        raise ToolInputError(
            "cluster_incomplete",
            "give both cpus_per_node and memory_gib_per_node (or neither)",
            "Add the missing one, as `ray status` reports it for one node.",
        )
    total = int(cluster.accelerators_total) if cluster_source == "ray_probe" and cluster else nodes * per_node
    shape = ClusterShape(acc, nodes, per_node, total, cpus_per_node, cluster, cluster_source)
    return shape, findings


def probe_cluster(p: PlanRequest, ctx: RunContext) -> rr.ClusterCapacity:
    """Live read-only Ray probe (cluster/ray.py), turned into the capacity XTuner checks its groups against."""
    snap = ray_cluster.probe_cluster(p.ray_address, access=RayAccess.from_context(ctx), timeout_s=p.ray_timeout_s)
    if not snap.nodes and snap.timed_out:
        raise ToolInputError(
            "cluster_probe_timed_out",
            f"use_cluster=true but the Ray cluster gave no answer within {p.ray_timeout_s:g} s (unknown, not absent): "
            + "; ".join(snap.errors)[:300],
            "Retry with a larger ray_timeout_s (a loaded head answers slowly), or give cpus_per_node and "
            "memory_gib_per_node.",
        )
    if not snap.nodes:
        raise ToolInputError(
            "cluster_unreachable",
            "use_cluster=true but the Ray cluster could not be read: " + ("; ".join(snap.errors) or "no nodes"),
            "Start Ray (or pass ray_address / set RAY_ADDRESS), or give cpus_per_node and memory_gib_per_node.",
        )
    npu = sum(n.total.get("NPU", 0.0) for n in snap.nodes)
    accelerator: rr.Accelerator = "NPU" if npu > 0 else "GPU"
    nodes = [
        rr.NodeCapacity(
            accelerators=n.total.get(accelerator, 0.0),
            cpus=n.total.get("CPU", 0.0),
            memory_bytes=n.total.get("memory", 0.0),
        )
        for n in snap.nodes
    ]
    # XTuner checks groups against what is available now; Ray omits fully used resources (absent = 0). Without
    # usage figures the cluster is taken as idle.
    avail = snap.available
    return rr.ClusterCapacity(
        accelerator=accelerator,
        accelerators_total=sum(n.accelerators for n in nodes),
        cpus_total=sum(n.cpus for n in nodes),
        memory_total_bytes=sum(n.memory_bytes for n in nodes),
        accelerators_available=avail.get(accelerator, 0.0) if avail else None,
        cpus_available=avail.get("CPU", 0.0) if avail else None,
        memory_available_bytes=avail.get("memory", 0.0) if avail else None,
        nodes=nodes,
    )


def fit_per_worker(
    groups: list[tuple[str, int]],
    accelerator: rr.Accelerator,
    pools: list[rr.ExternalCPUPool],
    cluster: rr.ClusterCapacity | None,
    asks: dict[str, WorkerAsk] | None = None,
) -> tuple[dict[str, WorkerAsk], rr.RayRequirements, list[rr.FitRow]]:
    """Each group's per-worker CPUs and memory: what ``asks`` (the config's values by role; default XTuner's) says
    when no cluster is known or it fits, else the largest common caps on CPUs and memory under which every check
    passes (a group that asks for less keeps its own value)."""
    asks = asks or {}

    def capped(c: float, m: int) -> dict[str, WorkerAsk]:
        out = {}
        for role, _ in groups:
            a = asks.get(role, DEFAULT_ASK)
            out[role] = WorkerAsk(min(a.cpus, c), min(a.memory, m), a.accelerators)
        return out

    def build(per: dict[str, WorkerAsk]) -> rr.RayRequirements:
        pgs = [
            rr.accelerator_pg_requirements(
                n,
                per[role].cpus,
                per[role].memory,
                accelerator=accelerator,
                num_accelerators_per_worker=per[role].accelerators,
                name="train" if role == "shared" else role,
            )
            for role, n in groups
        ]
        return rr.ray_requirements(pgs, pools)

    first = capped(float("inf"), 1 << 62)
    req = build(first)
    if cluster is None:
        return first, req, []
    rows = rr.check_fit(req, cluster)
    if rr.fits(rows):
        return first, req, rows

    # Every check is monotone in the per-worker request, so binary-search the largest CPU cap (at the smallest
    # memory), then the largest memory cap at that CPU cap: a handful of evaluations even for thousands of nodes.
    def ok(c: int, m_gib: int) -> bool:
        return rr.fits(rr.check_fit(build(capped(float(c), m_gib * rr.GIB)), cluster))

    def largest(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
        if not pred(lo):
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if pred(mid) else (lo, mid - 1)
        return lo

    top_c = max(1, int(max(a.cpus for a in first.values())))
    top_m = max(MIN_WORKER_MEMORY_GIB, max(a.memory for a in first.values()) // rr.GIB)
    c_best = largest(1, top_c, lambda c: ok(c, MIN_WORKER_MEMORY_GIB))
    if c_best is not None:
        m_best = largest(MIN_WORKER_MEMORY_GIB, top_m, lambda m: ok(c_best, m))
        if m_best is not None:
            per = capped(float(c_best), m_best * rr.GIB)
            r = build(per)
            return per, r, rr.check_fit(r, cluster)
    return first, req, rows


def size_ray_groups(
    p: PlanRequest,
    shape: ClusterShape,
    group_shape: list[tuple[str, int]],
    given_pools: list[rr.ExternalCPUPool] | None = None,
    asks: dict[str, WorkerAsk] | None = None,
) -> tuple[RaySizing, list[Finding]]:
    """Ray requirements: XTuner's own arithmetic (resource_rules), sized to the cluster if known.

    ``given_pools`` and ``asks`` come from the user's config (its CPU pools and each group's per-worker values).
    """
    if given_pools:
        pools = rr.unique_pool_names(given_pools)
    else:
        pools = [rr.rollout_controller_pool()]
        if p.judger_cpu_workers:
            pools.append(rr.judger_pool("openai/gsm8k", num_workers=p.judger_cpu_workers))
        pools = rr.unique_pool_names(pools)
    per, req, rows = fit_per_worker(group_shape, shape.accelerator, pools, shape.cluster, asks)
    fit_ok = rr.fits(rows) if shape.cluster is not None else None
    sizing = RaySizing(per, req, rows, fit_ok)
    return sizing, fit_findings(sizing, shape, asks)


def fit_findings(sizing: RaySizing, shape: ClusterShape, asks: dict[str, WorkerAsk] | None = None) -> list[Finding]:
    """Lowered per-worker resources, each failing check, or a note that the fit was not checked."""
    findings: list[Finding] = []
    req = sizing.requirements
    was = asks or {}
    lowered = [(role, was.get(role, DEFAULT_ASK), now) for role, now in sizing.per_group.items()]
    lowered = [(role, before, now) for role, before, now in lowered if now != before]
    if shape.cluster is not None and sizing.fits and lowered:
        role, before, now = lowered[0]
        findings.append(
            Finding(
                id="topo.resources_reduced",
                severity="warning",
                category="ray_resources_insufficient",
                title=f"Per-worker resources lowered to {now.cpus:g} CPU and {now.memory // rr.GIB} GiB to fit the cluster",
                evidence=f"{'your config' if asks else 'XTuner defaults'}: {before.cpus:g} CPU, {before.memory / rr.GIB:g} GiB "
                f"per {role} worker; {req.placement_groups[0].num_workers} workers × that + 10 CPUs / 10 GiB is more "
                "than the cluster offers",
                fix="Keep these values, or add CPUs/memory to the Ray nodes (ray start --num-cpus/--memory).",
                reference=f"{CB}#resource-checks",
                source=rr.SRC_PG_CPU,
                owner="config_edit",
            )
        )
    findings += [_too_small_finding(s) for s in shortages(sizing.rows)]
    if shape.cluster is None:
        findings.append(_not_checked_finding(sizing, shape))
    return findings


def _too_small_finding(shortage: Shortage) -> Finding:
    first = shortage.rows[0]
    return Finding(
        id="topo.cluster_too_small",
        severity="blocker",
        category="ray_resources_insufficient",
        title=f"Cluster too small ({shortage.resource}): {shortage.checks}",
        evidence=shortage.evidence,
        location=first.check,
        fix=(
            "Free the accelerators (another job or a stale placement group holds them) or plan fewer workers."
            if first.unit == "count"
            else "Add CPUs/memory to the Ray nodes (ray start --num-cpus/--memory) or add nodes; even 1 CPU "
            "and 4 GiB per worker do not fit."
        ),
        reference=f"{CB}#external-cpu-pools" if shortage.pools_only else f"{CB}#resource-checks",
        source=first.source,
        owner="cluster_setup",
    )


def _not_checked_finding(sizing: RaySizing, shape: ClusterShape) -> Finding:
    req, nodes = sizing.requirements, shape.nodes
    per_node_cpus = math.ceil(req.min_cluster_cpus / max(1, nodes))
    per_node_mem = math.ceil(req.min_cluster_memory_bytes / rr.GIB / max(1, nodes))
    return Finding(
        id="topo.cluster_not_checked",
        severity="info",
        category="ray_resources_insufficient",
        title="Cluster CPUs/memory not given; fit not checked",
        evidence=f"the run needs at least {req.min_cluster_cpus:g} Ray CPUs and "
        f"{req.min_cluster_memory_gib:g} GiB Ray memory in total (about {per_node_cpus} CPUs and "
        f"{per_node_mem} GiB per node, and {max(a.cpus for a in sizing.per_group.values()) * shape.per_node:g} CPUs "
        "on each fully used node)",
        fix="Pass cpus_per_node and memory_gib_per_node (from `ray status`), or use_cluster=true.",
        reference=f"{CB}#resource-checks",
        source=rr.SRC_PG_CPU,
    )


def worker_groups(
    group_shape: list[tuple[str, int]], sizing: RaySizing, accelerator: rr.Accelerator
) -> list[WorkerGroupPlan]:
    """One WorkerGroupPlan per placement group, at its fitted per-worker CPUs and memory."""
    out = []
    for role, n in group_shape:
        a = sizing.ask(role)
        out.append(
            WorkerGroupPlan(
                role=role,
                num_workers=n,
                accelerator=accelerator,
                num_accelerators_per_worker=a.accelerators,
                num_cpus_per_worker=a.cpus,
                cpu_memory_per_worker_bytes=a.memory,
                cpu_memory_per_worker_gib=round(a.memory / rr.GIB, 3),
            )
        )
    return out
