"""Will a run fit the Ray cluster: XTuner's own resource checks (placement groups, external CPU pools) for the
run's requirements — from a config (``ConfigView.ray_requirements``) or a run shape a client describes
(:class:`Expected`) — against what a Ray snapshot says is available."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from ..core import Finding, params_model_config
from ..xtuner_rules import resources as rr
from .findings import probe_finding
from .ray import RaySnapshot

GIB = rr.GIB


class ExternalPoolSpec(BaseModel):
    model_config = params_model_config()

    name: str = Field(description="As XTuner registers it, e.g. 'judger:openai/gsm8k'")
    num_workers: int = Field(default=1, ge=1, le=100_000)
    num_cpus_per_worker: float = Field(default=rr.DEFAULT_POOL_CPUS_PER_WORKER, gt=0, le=100_000)
    cpu_memory_per_worker: int = Field(default=rr.DEFAULT_POOL_MEMORY_PER_WORKER_BYTES, gt=0, description="Bytes")


class Expected(BaseModel):
    """Run shape to test: what XTuner's AcceleratorResourcesConfig asks of Ray."""

    model_config = params_model_config()

    num_workers: int = Field(ge=1, le=100_000, description="Accelerator workers")
    num_cpus_per_worker: float = Field(default=rr.DEFAULT_NUM_CPUS_PER_WORKER, gt=0, le=100_000)
    cpu_memory_per_worker: int = Field(default=rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES, gt=0, description="Bytes")
    accelerator: Literal["GPU", "NPU"] = Field(default="GPU")
    num_accelerators_per_worker: float = Field(default=1.0, gt=0, le=64)
    rollout_num_workers: int | None = Field(
        default=None, ge=1, le=100_000, description="Disaggregated: rollout group, checked after train"
    )
    rollout_num_cpus_per_worker: float | None = Field(
        default=None, gt=0, le=100_000, description="Rollout group's; default num_cpus_per_worker"
    )
    rollout_cpu_memory_per_worker: int | None = Field(
        default=None, gt=0, description="Rollout group's, bytes; default cpu_memory_per_worker"
    )
    external_pools: list[ExternalPoolSpec] = Field(
        default_factory=list, max_length=100, description="Judger/agent-loop CPU pools; rollout_controller's is added"
    )
    tracing: bool = Field(default=False, description="TraceConfig enabled: needs otelcol, OpenTelemetry")


class FitReport(BaseModel):
    ok: bool | None = Field(description="All XTuner checks pass (null: not evaluated)")
    rows: list[rr.FitRow] = Field(default_factory=list)
    min_cluster_cpus: float | None = None
    min_cluster_memory_gib: float | None = None
    accelerator: str = "GPU"
    accelerators_needed: float | None = None
    cluster_available: dict[str, float] = Field(
        default_factory=dict, description="Available accelerators, CPUs, memory (GiB)"
    )
    note: str = ""


def requirements(expected: Expected) -> rr.RayRequirements:
    """What a run shape a client describes asks of Ray (each group with its own CPUs and memory, in XTuner's check
    order) — the same model a config's ``ConfigView.ray_requirements`` gives."""
    groups = [
        rr.accelerator_pg_requirements(
            expected.num_workers,
            expected.num_cpus_per_worker,
            expected.cpu_memory_per_worker,
            expected.accelerator,
            expected.num_accelerators_per_worker,
            name="train",
        )
    ]
    if expected.rollout_num_workers:
        groups.append(
            rr.accelerator_pg_requirements(
                expected.rollout_num_workers,
                expected.rollout_num_cpus_per_worker or expected.num_cpus_per_worker,
                expected.rollout_cpu_memory_per_worker or expected.cpu_memory_per_worker,
                expected.accelerator,
                expected.num_accelerators_per_worker,
                name="rollout",
            )
        )
    pools = [rr.rollout_controller_pool()] + [
        rr.external_pool(p.name, p.num_workers, p.num_cpus_per_worker, p.cpu_memory_per_worker)
        for p in expected.external_pools
    ]
    return rr.ray_requirements(groups, pools)


def evaluate_fit(req: rr.RayRequirements, snap: RaySnapshot | None) -> FitReport:
    """XTuner's resource checks (resource_rules) for ``req`` against what the cluster has available now."""
    report = FitReport(
        ok=None,
        min_cluster_cpus=req.min_cluster_cpus,
        min_cluster_memory_gib=req.min_cluster_memory_gib,
        accelerator=req.accelerator,
        accelerators_needed=req.accelerators_total,
    )
    if snap is None or not snap.reachable or snap.auth_required or not snap.total:
        report.note = "no readable Ray cluster: only the minimum idle-cluster figures are given"
        return report
    if not snap.available:
        report.note = "the cluster's available resources could not be read"
        return report
    acc = req.accelerator
    # Ray omits resources that are fully used: absent means 0 available.
    acc_available = snap.available.get(acc, 0.0)
    cpus_available = snap.available.get("CPU", 0.0)
    memory_available = snap.available.get("memory", 0.0)
    cluster = rr.ClusterCapacity(
        accelerator=acc,
        accelerators_total=snap.total.get(acc, 0.0),
        cpus_total=snap.total.get("CPU", 0.0),
        memory_total_bytes=snap.total.get("memory", 0.0),
        accelerators_available=acc_available,
        cpus_available=cpus_available,
        memory_available_bytes=memory_available,
        # Per-node totals, as XTuner's external-pool check takes them (ray_cpu_worker.py:574-593).
        nodes=[
            rr.NodeCapacity(
                accelerators=n.total.get(acc, 0.0),
                cpus=n.total.get("CPU", 0.0),
                memory_bytes=n.total.get("memory", 0.0),
            )
            for n in snap.nodes
        ],
    )
    report.cluster_available = {
        acc: acc_available,
        "CPU": cpus_available,
        "memory_gib": round(memory_available / GIB, 1),
    }
    report.rows = rr.check_fit(req, cluster)
    report.ok = rr.fits(report.rows)
    report.note = (
        "accelerator-group rows use the cluster's available resources now, as XTuner's check does; "
        "external-pool and per-node rows use totals minus what the new groups reserve"
    )
    return report


def fit_headline(fit: FitReport) -> str:
    """The fit in one clause: what the run needs from Ray and, when a cluster was read, what it has."""
    need = (
        f"needs {fit.accelerators_needed or 0:g} {fit.accelerator}, {fit.min_cluster_cpus or 0:g} CPUs, "
        f"{fit.min_cluster_memory_gib or 0:g} GiB Ray memory"
    )
    if fit.ok is None:
        return f"fit unknown ({need}; no readable cluster)"
    a = fit.cluster_available
    has = f"cluster has {a.get(fit.accelerator, 0):g} {fit.accelerator}, {a.get('CPU', 0):g} CPUs, {a.get('memory_gib', 0):g} GiB available"
    return f"fit {'ok' if fit.ok else 'FAILS'}: {need}; {has}"


def _amount(x: float, memory: bool) -> str:
    return f"{round(x / GIB, 1):g} GiB" if memory else f"{x:g}"


@dataclass(frozen=True)
class Shortage:
    """One resource the cluster has too little of, with every XTuner check it fails."""

    resource: str
    rows: tuple[rr.FitRow, ...]

    @property
    def pools_only(self) -> bool:
        return all(r.check.startswith("external") for r in self.rows)

    @property
    def checks(self) -> str:
        memory = self.resource == "memory"
        return "; ".join(
            f"{r.check}: needs {_amount(r.needed, memory)}, has {_amount(r.available, memory)}" for r in self.rows
        )

    @property
    def needed(self) -> str:
        return _amount(max(r.needed for r in self.rows), self.resource == "memory")

    @property
    def evidence(self) -> str:
        first = self.rows[0]
        return first.xtuner_message.splitlines()[0] if first.xtuner_message else first.check


def shortages(rows: list[rr.FitRow]) -> list[Shortage]:
    """The failing checks grouped by resource: one shortage of CPUs is one answer however many checks it fails."""
    by_resource: dict[str, list[rr.FitRow]] = {}
    for row in rows:
        if not row.ok:
            by_resource.setdefault(row.resource, []).append(row)
    return [Shortage(resource, tuple(group)) for resource, group in by_resource.items()]


def fit_findings(fit: FitReport) -> list[Finding]:
    """One blocker per resource that falls short, with every failing check's numbers."""
    return [
        probe_finding(
            "fit_external_pools" if s.pools_only else f"fit_{s.resource.lower()}",
            "blocker",
            "ray_resources_insufficient",
            f"Ray has too little {s.resource} for this run: {s.checks}",
            "external-cpu-pools" if s.pools_only else "resource-checks",
            source=s.rows[0].source,
            evidence=s.evidence,
            fix="Lower num_workers / num_cpus_per_worker / cpu_memory_per_worker, free resources held by other "
            "jobs or placement groups, or start Ray with more --num-cpus / --memory (both are logical): "
            f"the run needs {s.needed} {s.resource} available where the check runs.",
            location=s.rows[0].check,
            owner="cluster_setup",
        )
        for s in shortages(fit.rows)
    ]
