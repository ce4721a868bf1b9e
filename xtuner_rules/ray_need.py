"""What Ray must offer a run, as one answer: the cluster-wide minimum of XTuner's checks, what each node holds, the
same ``ray start`` for every node, and the arithmetic — from the requirements in :mod:`.resources`."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from .resources import PG_CPU_HEADROOM, SRC_PG_CPU, SRC_PG_MEMORY, Accelerator, RayRequirements, bytes_to_gib


class RayNeed(BaseModel):
    """What Ray must offer a run: cluster-wide minimum, what each node and the head must offer, and the arithmetic.

    The one answer to "how big must Ray be": build_rl_command's script waits for it, preflight and the live fit
    check it, choose_topology plans with it. ``known`` is false when a value it needs could not be read."""

    model_config = ConfigDict(extra="forbid")

    known: bool
    why_unknown: str = ""
    accelerator: Accelerator = "GPU"
    accelerators: int = 0
    cpus: int = Field(default=0, description="Smallest idle-cluster Ray CPU total passing XTuner's checks")
    memory_gib: float = Field(default=0.0, description="Smallest idle-cluster Ray memory, GiB")
    memory_bytes: int = 0
    per_node_cpus: int = Field(default=0, description="Ray CPUs a node must offer for the bundles placed on it")
    per_node_memory_bytes: int = Field(default=0, description="Ray memory a node must offer for its bundles, bytes")
    per_node_memory_gib: float = 0.0
    uniform_node_cpus: int = Field(
        default=0, description="The same `ray start --num-cpus` on every node that passes: bundles and the total"
    )
    uniform_node_memory_bytes: int = 0
    uniform_node_memory_gib: float = 0.0
    arithmetic: str = Field(default="", description="How the figures follow from the config's values")
    source: str = f"{SRC_PG_CPU}; {SRC_PG_MEMORY}"

    def text(self) -> str:
        """'16 GPUs, 202 CPUs, 266 GiB' for a summary."""
        return f"{self.accelerators} {self.accelerator}s, {self.cpus} CPUs, {self.memory_gib:g} GiB"


def _node_loads(requirements: RayRequirements, nodes: int, accelerators_per_node: int) -> list[tuple[float, int]]:
    """(CPUs, memory) each node holds once PACK places every group's bundles, groups in creation order."""
    loads = [[0.0, 0.0, 0] for _ in range(max(1, nodes))]  # accelerators used, CPUs, memory
    for pg in requirements.placement_groups:
        per_bundle = max(pg.num_accelerators_per_worker, 1e-9)
        remaining = pg.num_workers
        for slot in loads:
            room = int((accelerators_per_node - slot[0] + 1e-9) // per_bundle)
            take = min(remaining, max(0, room))
            slot[0] += take * pg.num_accelerators_per_worker
            slot[1] += take * pg.num_cpus_per_worker
            slot[2] += take * pg.cpu_memory_per_worker_bytes
            remaining -= take
        if remaining:  # more bundles than the nodes' accelerators: the last node takes the rest (a fit will say so)
            loads[-1][1] += remaining * pg.num_cpus_per_worker
            loads[-1][2] += remaining * pg.cpu_memory_per_worker_bytes
    return [(slot[1], int(slot[2])) for slot in loads]


def _arithmetic(requirements: RayRequirements, where: dict[str, str]) -> str:
    parts = [
        f"{pg.name}: {pg.num_workers} workers × {pg.num_cpus_per_worker:g} CPU + {PG_CPU_HEADROOM} = "
        f"{pg.cpus_needed:g} CPUs, {pg.num_workers} × {bytes_to_gib(pg.cpu_memory_per_worker_bytes):g} GiB + 10 GiB = "
        f"{pg.memory_needed_gib:g} GiB" + (f" ({where[pg.name]})" if where.get(pg.name) else "")
        for pg in requirements.placement_groups
    ]
    if len(requirements.placement_groups) > 1:
        parts.append("each later group is checked against what the earlier ones left available")
    if requirements.cpus_external:
        parts.append(
            f"CPU pools (rollout controller, judgers, agent loops): {requirements.cpus_external:g} CPUs, "
            f"{bytes_to_gib(requirements.memory_external_bytes):g} GiB outside the groups"
        )
    return "; ".join(parts)


def ray_need(
    requirements: RayRequirements, nodes: int, accelerators_per_node: int, where: dict[str, str] | None = None
) -> RayNeed:
    """The cluster-wide, per-node and head figures for ``requirements`` on ``nodes`` identical nodes.

    Each node must hold the bundles PACK places on it (a full 8-GPU node of 12-CPU workers: 96 CPUs). The +10 CPUs /
    10 GiB headroom of each group's check and the CPU pools are cluster-wide: any node's spare capacity counts. So
    the same ``--num-cpus`` on every node must reach both the bundles and the total divided by the nodes."""
    loads = _node_loads(requirements, nodes, accelerators_per_node)
    per_cpus = math.ceil(max(c for c, _ in loads))
    per_mem = max(m for _, m in loads)
    total_cpus = math.ceil(requirements.min_cluster_cpus)
    uniform_cpus = max(per_cpus, math.ceil(total_cpus / max(1, nodes)))
    uniform_mem = max(per_mem, math.ceil(requirements.min_cluster_memory_bytes / max(1, nodes)))
    return RayNeed(
        known=True,
        accelerator=requirements.accelerator,
        accelerators=int(requirements.accelerators_total),
        cpus=total_cpus,
        memory_gib=requirements.min_cluster_memory_gib,
        memory_bytes=requirements.min_cluster_memory_bytes,
        per_node_cpus=per_cpus,
        per_node_memory_bytes=per_mem,
        per_node_memory_gib=bytes_to_gib(per_mem),
        uniform_node_cpus=uniform_cpus,
        uniform_node_memory_bytes=uniform_mem,
        uniform_node_memory_gib=bytes_to_gib(uniform_mem),
        arithmetic=_arithmetic(requirements, where or {}),
    )
