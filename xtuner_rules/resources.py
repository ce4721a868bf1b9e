"""XTuner's own Ray resource and shape checks, as pure functions (no Ray import).

Every rule here predicts a check XTuner runs at ``InternLM/xtuner@b934f46``; the ``source`` of each row points at
it. Units are explicit in names: ``*_bytes`` are bytes, ``*_gib`` are GiB (1024**3 bytes), CPU counts are Ray CPUs.

What XTuner checks, in the order it checks it:

1. For each accelerator placement group, in creation order (colocated: one group named ``train``; disaggregated:
   ``..._train`` then ``..._rollout``), ``AcceleratorResourcesConfig.validate_available_resources`` compares against
   the *currently available* Ray resources (``ray_accelerator_worker.py:97-122``, called from
   ``build_placement_group``, ``ray_accelerator_worker.py:280-291``):
   accelerators ``num_workers``; CPUs ``num_cpus_per_worker * num_workers + 10``; memory
   ``cpu_memory_per_worker * num_workers + 10 GiB``. A created group then holds its bundles, so the next group sees
   less available.
2. External CPU pools (``CPUResourceManager.validate_or_raise``, ``ray_cpu_worker.py:400-448``): the 1-CPU
   ``rollout_controller`` pool (``rollout/worker.py:541-545``) and every judger / agent-loop ``cpu_resources``
   (``judger/factory.py:25-28``, ``agent_loop/agent_loop.py:52-55``) must fit into
   ``cluster_total - accelerator_pg_reserved`` (``ray_cpu_worker.py:483-484``), for CPUs and memory; each pool's
   per-worker CPUs must fit on the node with most CPUs left outside the groups (``ray_cpu_worker.py:426-431``).
   The check runs at every registration, so the first pool that tips the sum over is where it fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GIB = 1024**3

#: Fixed CPU headroom added to every accelerator group's CPU check (ray_accelerator_worker.py:115).
PG_CPU_HEADROOM = 10
#: Fixed memory headroom added to every accelerator group's memory check (ray_accelerator_worker.py:119).
PG_MEMORY_HEADROOM_BYTES = 10 * GIB
#: AcceleratorResourcesConfig defaults (ray_accelerator_worker.py:68-71).
DEFAULT_NUM_CPUS_PER_WORKER = 12.0
DEFAULT_CPU_MEMORY_PER_WORKER_BYTES = 16 * GIB
#: CPUResourcesConfig defaults (ray_cpu_worker.py:57-61).
DEFAULT_POOL_CPUS_PER_WORKER = 1.0
DEFAULT_POOL_MEMORY_PER_WORKER_BYTES = GIB
#: Ascend nodes: XTuner forces 16 accelerators per node for NPU (ray_accelerator_worker.py:90-92,
#: rollout/worker.py:500-501).
NPU_ACCELERATORS_PER_NODE = 16

SRC_PG_ACCEL = "xtuner/v1/rl/utils/ray_accelerator_worker.py:104-112"
SRC_PG_CPU = "xtuner/v1/rl/utils/ray_accelerator_worker.py:115-118"
SRC_PG_MEMORY = "xtuner/v1/rl/utils/ray_accelerator_worker.py:119-122"
SRC_PG_BUNDLES = "xtuner/v1/rl/utils/ray_accelerator_worker.py:280-299"
SRC_PG_READY = "xtuner/v1/rl/utils/ray_accelerator_worker.py:300-307"
SRC_EXT_CPU = "xtuner/v1/rl/utils/ray_cpu_worker.py:415-419"
SRC_EXT_MEMORY = "xtuner/v1/rl/utils/ray_cpu_worker.py:420-425"
SRC_EXT_NODE = "xtuner/v1/rl/utils/ray_cpu_worker.py:426-431"
SRC_ROLLOUT_CONTROLLER = "xtuner/v1/rl/rollout/worker.py:541-545"
SRC_JUDGER_POOL = "xtuner/v1/rl/judger/factory.py:25-28"
SRC_AGENT_LOOP_POOL = "xtuner/v1/rl/agent_loop/agent_loop.py:52-55"
SRC_ENGINE_SIZE = "xtuner/v1/rl/rollout/worker.py:472-474"
SRC_LMDEPLOY_TP = "xtuner/v1/rl/rollout/lmdeploy.py:160-166"
SRC_LMDEPLOY_EP = "xtuner/v1/rl/rollout/lmdeploy.py:185-190"
SRC_SGLANG_TP = "xtuner/v1/rl/rollout/sglang.py:129-134"
SRC_SGLANG_CROSS_NODE = "xtuner/v1/rl/rollout/sglang.py:135-138"
SRC_TP_EP = "xtuner/v1/rl/weight_update/data.py:114"
SRC_SP = "xtuner/v1/rl/trainer/worker.py:428-432"
SRC_VLLM = "xtuner/v1/rl/rollout/vllm.py:135-142"

Accelerator = Literal["GPU", "NPU"]
FitResource = Literal["GPU", "NPU", "CPU", "memory"]
FitUnit = Literal["count", "cpus", "bytes"]
Backend = Literal["lmdeploy", "sglang", "vllm"]


def gib_to_bytes(gib: float) -> int:
    return round(gib * GIB)


def bytes_to_gib(n: float) -> float:
    return round(n / GIB, 3)


# --------------------------------------------------------------------------------------------------------
# Requirement models
# --------------------------------------------------------------------------------------------------------


class PlacementGroupRequirement(BaseModel):
    """What one XTuner accelerator placement group asks of Ray."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="'train' (colocated: shared with rollout) or 'rollout'")
    accelerator: Accelerator = Field(description="Ray accelerator resource name the bundles request")
    num_workers: int = Field(description="Bundles (one worker each)")
    num_accelerators_per_worker: float = Field(description="Accelerators per bundle")
    num_cpus_per_worker: float = Field(description="Ray CPUs per bundle")
    cpu_memory_per_worker_bytes: int = Field(description="Ray 'memory' per bundle, bytes")
    accelerators_needed: float = Field(description="What XTuner's check compares with available accelerators")
    cpus_needed: float = Field(description="num_cpus_per_worker * num_workers + 10, vs available")
    memory_needed_bytes: int = Field(description="cpu_memory_per_worker * num_workers + 10 GiB, bytes")
    memory_needed_gib: float = Field(description="memory_needed_bytes in GiB")
    accelerators_reserved: float = Field(description="Accelerators the bundles hold once created")
    cpus_reserved: float = Field(description="CPUs the bundles hold once created (no +10)")
    memory_reserved_bytes: int = Field(description="Memory the bundles hold once created, bytes")
    source: str = Field(default=SRC_PG_CPU, description="XTuner path:line of the check")


class ExternalCPUPool(BaseModel):
    """A CPU actor pool outside the accelerator groups (judger, agent loop, rollout controller)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="As XTuner logs it, e.g. 'judger:openai/gsm8k'")
    num_workers: int = Field(ge=1, description="Actors in the pool")
    num_cpus_per_worker: float = Field(gt=0, description="Ray CPUs per actor")
    cpu_memory_per_worker_bytes: int = Field(gt=0, description="Ray memory per actor, bytes")
    cpus: float = Field(description="num_workers * num_cpus_per_worker")
    memory_bytes: int = Field(description="num_workers * cpu_memory_per_worker_bytes")
    source: str = Field(description="XTuner path:line that registers this pool")


class RayRequirements(BaseModel):
    """What a run asks of Ray, and the smallest idle cluster passing every XTuner check."""

    model_config = ConfigDict(extra="forbid")

    accelerator: Accelerator
    placement_groups: list[PlacementGroupRequirement]
    external_pools: list[ExternalCPUPool]
    accelerators_total: float = Field(description="Accelerators reserved by all groups")
    cpus_reserved_by_groups: float = Field(description="CPUs held by all group bundles")
    cpus_external: float = Field(description="CPUs requested by external pools")
    memory_reserved_by_groups_bytes: int
    memory_external_bytes: int
    min_cluster_cpus: float = Field(description="Smallest idle-cluster CPUs passing every check (+10 incl.)")
    min_cluster_memory_bytes: int = Field(description="Smallest idle-cluster Ray memory passing every check")
    min_cluster_memory_gib: float = Field(description="min_cluster_memory_bytes in GiB")
    rule: str = Field(
        default="per group: CPUs per_worker*workers+10, memory per_worker*workers+10 GiB against what is available "
        "when the group is created; external pools against cluster_total - reserved by groups",
        description="The rule in one line",
    )


class NodeCapacity(BaseModel):
    """One Ray node's totals (what `ray start` registered)."""

    model_config = ConfigDict(extra="forbid")

    accelerators: float = Field(ge=0)
    cpus: float = Field(ge=0)
    memory_bytes: float = Field(ge=0)


class ClusterCapacity(BaseModel):
    """What the Ray cluster offers. ``*_available`` default to the totals (an idle cluster)."""

    model_config = ConfigDict(extra="forbid")

    accelerator: Accelerator = "GPU"
    accelerators_total: float = Field(ge=0)
    cpus_total: float = Field(ge=0)
    memory_total_bytes: float = Field(ge=0)
    accelerators_available: float | None = None
    cpus_available: float | None = None
    memory_available_bytes: float | None = None
    nodes: list[NodeCapacity] = Field(default_factory=list, description="Per-node totals, if known")

    @classmethod
    def uniform(
        cls,
        nodes: int,
        accelerators_per_node: float,
        cpus_per_node: float,
        memory_gib_per_node: float,
        accelerator: Accelerator = "GPU",
    ) -> ClusterCapacity:
        """A cluster of identical idle nodes."""
        mem = float(gib_to_bytes(memory_gib_per_node))
        node = NodeCapacity(accelerators=accelerators_per_node, cpus=cpus_per_node, memory_bytes=mem)
        return cls(
            accelerator=accelerator,
            accelerators_total=accelerators_per_node * nodes,
            cpus_total=cpus_per_node * nodes,
            memory_total_bytes=mem * nodes,
            nodes=[node.model_copy() for _ in range(nodes)],
        )


class FitRow(BaseModel):
    """One XTuner check evaluated against a cluster."""

    model_config = ConfigDict(extra="forbid")

    check: str = Field(description="What is checked, e.g. 'pg:train CPU'")
    resource: FitResource
    unit: FitUnit
    needed: float
    available: float
    ok: bool
    xtuner_message: str = Field(
        description="The text XTuner raises when this fails (passing external-pool rows: empty)"
    )
    source: str = Field(description="XTuner path:line of the check")


class RuleResult(BaseModel):
    """One shape/divisibility rule evaluated."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(description="Stable rule id, e.g. 'rollout.workers_divisible_by_engine'")
    ok: bool
    detail: str = Field(description="The values checked")
    xtuner_message: str = Field(default="", description="The exact text XTuner raises when it fails")
    source: str


# --------------------------------------------------------------------------------------------------------
# Building requirements
# --------------------------------------------------------------------------------------------------------


def accelerator_pg_requirements(
    num_workers: int,
    num_cpus_per_worker: float = DEFAULT_NUM_CPUS_PER_WORKER,
    cpu_memory_per_worker_bytes: int = DEFAULT_CPU_MEMORY_PER_WORKER_BYTES,
    accelerator: Accelerator = "GPU",
    num_accelerators_per_worker: float = 1,
    name: str = "train",
) -> PlacementGroupRequirement:
    """XTuner's placement-group check for one ``AcceleratorResourcesConfig`` (ray_accelerator_worker.py:97-122)."""
    if num_workers < 1:
        raise ValueError("num_workers must be >= 1")
    # Pydantic stores num_cpus_per_worker as float, so XTuner's CPU numbers print as floats (e.g. 106.0).
    cpus_per = float(num_cpus_per_worker)
    mem_per = int(cpu_memory_per_worker_bytes)
    return PlacementGroupRequirement(
        name=name,
        accelerator=accelerator,
        num_workers=num_workers,
        num_accelerators_per_worker=float(num_accelerators_per_worker),
        num_cpus_per_worker=cpus_per,
        cpu_memory_per_worker_bytes=mem_per,
        # The accelerator check compares num_workers, not num_workers * per_worker (ray_accelerator_worker.py:104-112).
        accelerators_needed=float(num_workers),
        cpus_needed=cpus_per * num_workers + PG_CPU_HEADROOM,
        memory_needed_bytes=mem_per * num_workers + PG_MEMORY_HEADROOM_BYTES,
        memory_needed_gib=bytes_to_gib(mem_per * num_workers + PG_MEMORY_HEADROOM_BYTES),
        accelerators_reserved=float(num_accelerators_per_worker) * num_workers,
        cpus_reserved=cpus_per * num_workers,
        memory_reserved_bytes=mem_per * num_workers,
        source=SRC_PG_CPU,
    )


def external_pool(
    name: str,
    num_workers: int = 1,
    num_cpus_per_worker: float = DEFAULT_POOL_CPUS_PER_WORKER,
    cpu_memory_per_worker_bytes: int = DEFAULT_POOL_MEMORY_PER_WORKER_BYTES,
    source: str = SRC_JUDGER_POOL,
) -> ExternalCPUPool:
    """One ``CPUResourcesConfig`` registered as an external pool (defaults: 1 worker, 1 CPU, 1 GiB)."""
    return ExternalCPUPool(
        name=name,
        num_workers=num_workers,
        num_cpus_per_worker=float(num_cpus_per_worker),
        cpu_memory_per_worker_bytes=int(cpu_memory_per_worker_bytes),
        cpus=num_workers * float(num_cpus_per_worker),
        memory_bytes=num_workers * int(cpu_memory_per_worker_bytes),
        source=source,
    )


def rollout_controller_pool() -> ExternalCPUPool:
    """The pool every run registers for its RolloutController: ``CPUResourcesConfig(num_workers=1)``."""
    return external_pool("rollout_controller", source=SRC_ROLLOUT_CONTROLLER)


def judger_pool(judger_name: str, num_workers: int = 1, num_cpus_per_worker: float = 1.0, **kw: int) -> ExternalCPUPool:
    """A judger with ``cpu_resources`` (registered as ``judger:<judger_name>``)."""
    return external_pool(f"judger:{judger_name}", num_workers, num_cpus_per_worker, source=SRC_JUDGER_POOL, **kw)


def agent_loop_pool(
    class_name: str, num_workers: int = 1, num_cpus_per_worker: float = 1.0, **kw: int
) -> ExternalCPUPool:
    """An agent loop with ``cpu_resources`` (registered as ``agent_loop:<ConfigClass>``)."""
    return external_pool(f"agent_loop:{class_name}", num_workers, num_cpus_per_worker, source=SRC_AGENT_LOOP_POOL, **kw)


def unique_pool_names(pools: Iterable[ExternalCPUPool]) -> list[ExternalCPUPool]:
    """Rename repeated registrations the way XTuner does: second ``name`` becomes ``name#2`` (ray_cpu_worker.py)."""
    counts: dict[str, int] = {}
    taken: set[str] = set()
    out: list[ExternalCPUPool] = []
    for pool in pools:
        count = counts.get(pool.name, 0) + 1
        counts[pool.name] = count
        name = pool.name
        if count > 1 or name in taken:
            while f"{pool.name}#{count}" in taken:
                count += 1
            counts[pool.name] = count
            name = f"{pool.name}#{count}"
        taken.add(name)
        out.append(pool.model_copy(update={"name": name}))
    return out


def ray_requirements(
    placement_groups: Sequence[PlacementGroupRequirement], external_pools: Sequence[ExternalCPUPool] = ()
) -> RayRequirements:
    """Totals and the smallest idle cluster that passes every check (groups in creation order)."""
    if not placement_groups:
        raise ValueError("at least one placement group is required")
    pools = unique_pool_names(external_pools)
    min_cpus = 0.0
    min_mem = 0
    held_cpus = 0.0
    held_mem = 0
    for pg in placement_groups:
        min_cpus = max(min_cpus, held_cpus + pg.cpus_needed)
        min_mem = max(min_mem, held_mem + pg.memory_needed_bytes)
        held_cpus += pg.cpus_reserved
        held_mem += pg.memory_reserved_bytes
    ext_cpus = sum(p.cpus for p in pools)
    ext_mem = sum(p.memory_bytes for p in pools)
    min_cpus = max(min_cpus, held_cpus + ext_cpus)
    min_mem = max(min_mem, held_mem + ext_mem)
    return RayRequirements(
        accelerator=placement_groups[0].accelerator,
        placement_groups=list(placement_groups),
        external_pools=pools,
        accelerators_total=sum(pg.accelerators_reserved for pg in placement_groups),
        cpus_reserved_by_groups=held_cpus,
        cpus_external=ext_cpus,
        memory_reserved_by_groups_bytes=held_mem,
        memory_external_bytes=ext_mem,
        min_cluster_cpus=min_cpus,
        min_cluster_memory_bytes=min_mem,
        min_cluster_memory_gib=bytes_to_gib(min_mem),
    )


# --------------------------------------------------------------------------------------------------------
# Checking a cluster
# --------------------------------------------------------------------------------------------------------


def _g(x: float) -> str:
    return f"{x:g}"


def _pack_bundles(
    groups: Sequence[PlacementGroupRequirement], nodes: Sequence[NodeCapacity], relax: int | None = None
) -> list[float] | None:
    """Estimate CPUs left per node after PACK placement of every bundle; None when bundles cannot be placed.

    ``relax`` (0 accelerators, 1 CPUs, 2 memory) ignores one resource, to find which one blocks placement.
    """
    left = [[n.accelerators, n.cpus, n.memory_bytes] for n in nodes]
    for pg in groups:
        need = [pg.num_accelerators_per_worker, pg.num_cpus_per_worker, float(pg.cpu_memory_per_worker_bytes)]
        if relax is not None:
            need[relax] = 0.0
        remaining = pg.num_workers
        # First fit, many bundles at once per node: O(nodes) per group whatever the worker count.
        for slot in left:
            if remaining == 0:
                break
            fit = min((int(slot[i] // need[i]) for i in range(3) if need[i] > 0), default=remaining)
            take = min(remaining, fit)
            if take > 0:
                for i in range(3):
                    slot[i] -= need[i] * take
                remaining -= take
        if remaining:
            return None
    return [slot[1] for slot in left]


def _placement_row(groups: Sequence[PlacementGroupRequirement], nodes: Sequence[NodeCapacity]) -> FitRow:
    """Can every bundle be placed on some node? Reports the resource that blocks it, per fully used node."""
    ok = _pack_bundles(groups, nodes) is not None
    biggest = max(nodes, key=lambda n: n.accelerators)
    g = max(groups, key=lambda x: x.num_cpus_per_worker)
    per_node = min(g.num_workers, int(biggest.accelerators // max(g.num_accelerators_per_worker, 1e-9)) or 1)
    resource: FitResource = "CPU"
    unit: FitUnit = "cpus"
    needed, available = per_node * g.num_cpus_per_worker, biggest.cpus
    if not ok:
        for idx in (1, 2, 0):
            if _pack_bundles(groups, nodes, relax=idx) is not None:
                if idx == 2:
                    resource, unit = "memory", "bytes"
                    needed, available = float(per_node * g.cpu_memory_per_worker_bytes), biggest.memory_bytes
                elif idx == 0:
                    resource, unit = g.accelerator, "count"
                    needed, available = float(g.num_workers), sum(n.accelerators for n in nodes)
                break
    return FitRow(
        check="pg bundles placeable on the nodes (estimated PACK placement)",
        resource=resource,
        unit=unit,
        needed=needed,
        available=available,
        ok=ok,
        xtuner_message="Ray GetTimeoutError from ray.get(pg.ready(), timeout=XTUNER_PG_READY_TIMEOUT=30): "
        "a bundle (accelerator + CPUs + memory) does not fit on any single node",
        source=SRC_PG_READY,
    )


def external_pools_message(
    pools: Sequence[ExternalCPUPool],
    *,
    cluster_cpus: float,
    cluster_memory_bytes: float,
    reserved_cpus: float,
    reserved_memory_bytes: float,
    max_node_external_cpus: float | None,
) -> str:
    """The RuntimeError text XTuner raises for these registered pools, or '' if they fit (ray_cpu_worker.py:410-448)."""
    ext_cpus = cluster_cpus - reserved_cpus
    ext_mem = int(cluster_memory_bytes - reserved_memory_bytes)
    req_cpus = sum(p.cpus for p in pools)
    req_mem = int(sum(p.memory_bytes for p in pools))
    errors: list[str] = []
    if req_cpus > ext_cpus:
        errors.append(
            f"CPU requested={_g(req_cpus)}, available_outside_accelerator_pg={_g(ext_cpus)}, "
            f"cluster_total={_g(cluster_cpus)}, accelerator_pg_reserved={_g(reserved_cpus)}"
        )
    if req_mem > 0 and req_mem > ext_mem:
        errors.append(
            f"memory requested={req_mem}, available_outside_accelerator_pg={ext_mem}, "
            f"cluster_total={int(cluster_memory_bytes)}, accelerator_pg_reserved={int(reserved_memory_bytes)}"
        )
    if max_node_external_cpus is not None:
        for p in pools:
            if p.num_cpus_per_worker > max_node_external_cpus:
                errors.append(
                    f"pool {p.name!r} requests {_g(p.num_cpus_per_worker)} CPU per worker, "
                    f"but the largest node has only {_g(max_node_external_cpus)} CPU outside accelerator PGs"
                )
    if not errors:
        return ""
    lines = [
        f"  - {p.name}: {p.num_workers} workers * {_g(p.num_cpus_per_worker)} CPU, {p.cpu_memory_per_worker_bytes} "
        "memory each"
        for p in pools
    ]
    return (
        "Insufficient PG-external Ray resources for registered external CPU pools:\n"
        + "\n".join(errors)
        + "\nRegistered pools:\n"
        + "\n".join(lines)
    )


def check_fit(requirements: RayRequirements, cluster: ClusterCapacity) -> list[FitRow]:
    """Evaluate every XTuner resource check in the order XTuner runs them.

    XTuner stops at the first failing check; rows after a failure still show whether they would pass.
    Accelerator-group checks use *available* resources, which shrink as each group is created; external
    pools use the cluster *totals* minus what the groups hold.
    """
    acc = cluster.accelerator
    avail_acc = (
        cluster.accelerators_available if cluster.accelerators_available is not None else cluster.accelerators_total
    )
    avail_cpu = cluster.cpus_available if cluster.cpus_available is not None else cluster.cpus_total
    avail_mem = (
        cluster.memory_available_bytes if cluster.memory_available_bytes is not None else cluster.memory_total_bytes
    )
    # Ray reports resources as floats; XTuner formats them as given.
    avail_acc, avail_cpu, avail_mem = float(avail_acc), float(avail_cpu), float(avail_mem)
    rows: list[FitRow] = []
    for pg in requirements.placement_groups:
        label = f"pg:{pg.name}"
        acc_name = pg.accelerator
        rows.append(
            FitRow(
                check=f"{label} {acc_name}",
                resource=acc_name,
                unit="count",
                needed=pg.accelerators_needed,
                available=avail_acc if acc_name == acc else 0.0,
                ok=pg.num_workers <= (avail_acc if acc_name == acc else 0.0),
                xtuner_message=f"Not enough available {acc_name}S in Ray cluster, "
                f"{avail_acc if acc_name == acc else 0} less than {pg.num_workers}.",
                source=SRC_PG_ACCEL,
            )
        )
        rows.append(
            FitRow(
                check=f"{label} CPU",
                resource="CPU",
                unit="cpus",
                needed=pg.cpus_needed,
                available=avail_cpu,
                ok=pg.cpus_needed <= avail_cpu,
                xtuner_message=f"Not enough available CPUs in Ray cluster, {avail_cpu} less than {pg.cpus_needed}.",
                source=SRC_PG_CPU,
            )
        )
        rows.append(
            FitRow(
                check=f"{label} memory",
                resource="memory",
                unit="bytes",
                needed=float(pg.memory_needed_bytes),
                available=avail_mem,
                ok=pg.memory_needed_bytes <= avail_mem,
                xtuner_message=f"Not enough available memory in Ray cluster, {avail_mem} less than "
                f"{pg.memory_needed_bytes}.",
                source=SRC_PG_MEMORY,
            )
        )
        avail_acc -= pg.accelerators_reserved
        avail_cpu -= pg.cpus_reserved
        avail_mem -= pg.memory_reserved_bytes

    reserved_cpus = requirements.cpus_reserved_by_groups
    reserved_mem = requirements.memory_reserved_by_groups_bytes
    ext_cpus = float(cluster.cpus_total) - reserved_cpus
    ext_mem = float(cluster.memory_total_bytes) - reserved_mem
    max_node_ext: float | None = None
    if cluster.nodes:
        left = _pack_bundles(requirements.placement_groups, cluster.nodes)
        max_node_ext = max(left) if left else None
        rows.append(_placement_row(requirements.placement_groups, cluster.nodes))
    # XTuner validates at every registration; the first pool that tips a sum over is where it raises.
    pools = requirements.external_pools
    message = ""
    for i in range(1, len(pools) + 1):
        message = external_pools_message(
            pools[:i],
            cluster_cpus=float(cluster.cpus_total),
            cluster_memory_bytes=float(cluster.memory_total_bytes),
            reserved_cpus=reserved_cpus,
            reserved_memory_bytes=reserved_mem,
            max_node_external_cpus=max_node_ext,
        )
        if message:
            break
    req_cpus = requirements.cpus_external
    req_mem = float(requirements.memory_external_bytes)
    if pools:
        rows.append(
            FitRow(
                check="external pools CPU",
                resource="CPU",
                unit="cpus",
                needed=req_cpus,
                available=ext_cpus,
                ok=req_cpus <= ext_cpus,
                xtuner_message=message if req_cpus > ext_cpus else "",
                source=SRC_EXT_CPU,
            )
        )
        rows.append(
            FitRow(
                check="external pools memory",
                resource="memory",
                unit="bytes",
                needed=req_mem,
                available=ext_mem,
                ok=req_mem <= ext_mem,
                xtuner_message=message if req_mem > ext_mem else "",
                source=SRC_EXT_MEMORY,
            )
        )
        if max_node_ext is not None:
            biggest = max(p.num_cpus_per_worker for p in pools)
            rows.append(
                FitRow(
                    check="external pools CPU per worker on one node (estimated PACK placement)",
                    resource="CPU",
                    unit="cpus",
                    needed=biggest,
                    available=max_node_ext,
                    ok=biggest <= max_node_ext,
                    xtuner_message=message if biggest > max_node_ext else "",
                    source=SRC_EXT_NODE,
                )
            )
    return rows


def fits(rows: Iterable[FitRow]) -> bool:
    return all(r.ok for r in rows)


# --------------------------------------------------------------------------------------------------------
# Shape and divisibility rules
# --------------------------------------------------------------------------------------------------------


def num_gpus_per_engine(tensor_parallel_size: int, expert_parallel_size: int) -> int:
    """Accelerators per rollout engine: EP if EP > 1, else TP (rollout/worker.py:472-474)."""
    return expert_parallel_size if expert_parallel_size > 1 else tensor_parallel_size


def rollout_shape_rules(
    num_rollout_workers: int,
    tensor_parallel_size: int = 1,
    expert_parallel_size: int = 1,
    backend: Backend = "lmdeploy",
    gpus_per_node: int = 8,
) -> list[RuleResult]:
    """Rollout engine layout rules XTuner enforces when it builds the rollout topology."""
    tp, ep, n = tensor_parallel_size, expert_parallel_size, num_rollout_workers
    engine = num_gpus_per_engine(tp, ep)
    out: list[RuleResult] = [
        RuleResult(
            rule="rollout.tp_or_ep_is_one",
            ok=tp == 1 or ep == 1,
            detail=f"tensor_parallel_size={tp}, expert_parallel_size={ep}",
            xtuner_message="Either tensor parallel size or engine parallel size must be 1.",
            source=SRC_TP_EP,
        )
    ]
    if backend == "lmdeploy" and ep > 1:
        out.append(
            RuleResult(
                rule="rollout.workers_divisible_by_ep",
                ok=n % ep == 0,
                detail=f"num_rollout_workers={n}, expert_parallel_size={ep}",
                xtuner_message=f"num_rollout_workers={n} must be divisible by expert_parallel_size={ep}.",
                source=SRC_LMDEPLOY_EP,
            )
        )
    else:
        out.append(
            RuleResult(
                rule="rollout.workers_divisible_by_engine",
                ok=n % engine == 0,
                detail=f"num_rollout_workers={n}, num_gpus_per_engine={engine}",
                xtuner_message=f"num_rollout_workers={n} must be divisible by num_gpus_per_engine={engine}.",
                source=SRC_SGLANG_TP if backend == "sglang" else SRC_LMDEPLOY_TP,
            )
        )
    if backend == "sglang":
        ok = not (engine > gpus_per_node and engine % gpus_per_node != 0)
        out.append(
            RuleResult(
                rule="rollout.sglang_cross_node_engine",
                ok=ok,
                detail=f"num_gpus_per_engine={engine}, gpus_per_node={gpus_per_node}",
                xtuner_message="SGLang cross-node rollout requires num_gpus_per_engine to be divisible by gpus_per_node.",
                source=SRC_SGLANG_CROSS_NODE,
            )
        )
    if backend == "vllm":
        out.append(
            RuleResult(
                rule="rollout.vllm_topology_not_implemented",
                ok=False,
                detail="XTUNER_USE_VLLM=1",
                xtuner_message="vLLM rollout topology has not been verified after topology refactor.",
                source=SRC_VLLM,
            )
        )
    return out


def sp_size_rule(sp_size: int, world_size: int) -> RuleResult:
    """Sequence parallel size must divide the training world size (rl/trainer/worker.py:428-432)."""
    return RuleResult(
        rule="train.sp_divides_world_size",
        ok=sp_size >= 1 and world_size % sp_size == 0,
        detail=f"sp_size={sp_size}, world_size={world_size}",
        xtuner_message=f"Found sp_size {sp_size}, world_size {world_size}."
        "sequence parallel size must be a divisor of world size.",
        source=SRC_SP,
    )


# --------------------------------------------------------------------------------------------------------
# What to ask Ray for, and the layouts that pass a divisibility rule
# --------------------------------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def engine_layout_options(
    num_rollout_workers: int, num_gpus_per_engine: int, gpus_per_node: int = 8, limit: int | None = None
) -> tuple[list[int], list[int]]:
    """Layouts that pass ``num_rollout_workers % num_gpus_per_engine == 0`` (lmdeploy.py:160-166, sglang.py:129-134).

    Returns (worker counts that work with this engine size: the multiples just below and above, capped by ``limit``
    accelerators; engine sizes that divide this worker count: divisors up to one node, then whole-node multiples).
    """
    n, e = num_rollout_workers, max(1, num_gpus_per_engine)
    below = (n // e) * e
    above = below + e if below != n else n
    workers = sorted({w for w in (below, above) if w >= e and (limit is None or w <= limit)})
    engines = [d for d in _divisors(n) if d <= gpus_per_node or d % gpus_per_node == 0]
    return workers, engines


def engine_layout_fix(
    num_rollout_workers: int,
    num_gpus_per_engine: int,
    kind: str = "TP",
    gpus_per_node: int = 8,
    limit: int | None = None,
) -> str:
    """The fix for a failed divisibility rule, with the numbers: 'use 4 or 8 rollout GPUs with TP 4, or TP 1/2/3/6
    on 6'. ``kind`` names the parallel size that sets the engine (TP, or EP when expert parallel is on)."""
    workers, engines = engine_layout_options(num_rollout_workers, num_gpus_per_engine, gpus_per_node, limit)
    parts = []
    if workers:
        parts.append(f"use {' or '.join(map(str, workers))} rollout GPUs with {kind} {num_gpus_per_engine}")
    if engines:
        parts.append(f"{kind} {'/'.join(map(str, engines))} on {num_rollout_workers}")
    return (", or ".join(parts) or f"change {kind} or the rollout GPU count") + (
        " (the rollout GPU count must be a multiple of the GPUs per engine)"
    )
