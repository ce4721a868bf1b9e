"""The Mermaid diagram of a plan: which node holds which placement-group bundles, and the CPU pools beside them."""

from __future__ import annotations

from ..planning.models import RolloutPlan, Topology, WorkerGroupPlan
from ..xtuner_rules import resources as rr


def _bundle_nodes(count: int, start: int, per_node: int) -> list[tuple[int, int, int]]:
    """PACK-style estimate: (node, first bundle, last bundle) for bundles start..start+count-1 filling nodes."""
    out: list[tuple[int, int, int]] = []
    b = 0
    while b < count:
        slot = start + b
        node, offset = divmod(slot, per_node)
        take = min(per_node - offset, count - b)
        out.append((node, b, b + take - 1))
        b += take
    return out


MAX_DIAGRAM_NODES = 6


def build_diagram(
    topology: Topology,
    nodes: int,
    per_node: int,
    groups: list[WorkerGroupPlan],
    pools: list[rr.ExternalCPUPool],
    rollout: RolloutPlan,
    accelerator: str,
    cpus_per_node: float | None,
) -> str:
    lines = ["flowchart TB", '  driver["driver: python -m xtuner.v1.train.cli.rl<br/>trainer + agent-loop manager"]']
    placed: dict[int, list[str]] = {}
    start = 0
    for g in groups:
        role = {
            "shared": f"training workers + rollout engines ({rollout.num_engines} x {rollout.num_gpus_per_engine})",
            "train": "training workers (FSDP)",
            "rollout": f"rollout engines ({rollout.num_engines} x {rollout.num_gpus_per_engine} {accelerator})",
        }[g.role]
        pg = "train" if g.role in ("shared", "train") else "rollout"
        for node, first, last in _bundle_nodes(g.num_workers, start, per_node):
            placed.setdefault(node, []).append(
                f"pg {pg} bundles {first}-{last}: {last - first + 1} {accelerator}, "
                f"{g.num_cpus_per_worker:g} CPU + {g.cpu_memory_per_worker_gib:g} GiB each<br/>{role}"
            )
        start += g.num_workers
    shown = sorted(placed)[:MAX_DIAGRAM_NODES]
    cpu_txt = f", {cpus_per_node:g} CPU" if cpus_per_node else ""
    for node in shown:
        lines.append(f'  subgraph N{node}["node {node}: {per_node} {accelerator}{cpu_txt}"]')
        for i, text in enumerate(placed[node]):
            lines.append(f'    N{node}_{i}["{text}"]')
        lines.append("  end")
    hidden = len(placed) - len(shown)
    if hidden > 0:
        lines.append(f'  more["... {hidden} more node(s) with the same layout"]')
    idle = nodes - len(placed)
    if idle > 0:
        lines.append(f'  idle["{idle} node(s) without XTuner bundles"]')
    lines.append('  subgraph EXT["CPU pools outside the placement groups"]')
    for i, pool in enumerate(pools):
        lines.append(f'    P{i}["{pool.name}: {pool.num_workers} x {pool.num_cpus_per_worker:g} CPU"]')
    lines.append("  end")
    for node in shown:
        for i, _ in enumerate(placed[node]):
            lines.append(f"  driver --> N{node}_{i}")
    lines.append("  driver --> EXT")
    if topology == "disaggregated":
        lines.append("  %% weights flow from the train group to the rollout group over NCCL at sync points")
    return "\n".join(lines)
