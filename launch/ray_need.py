"""What Ray must offer for a launch: accelerators, CPUs and memory, from the config's resources and XTuner's own
placement-group arithmetic (``xtuner_rules.resources``), as totals, per node and as ``ray start`` flags.

XTuner checks, when it creates each accelerator placement group, ``num_cpus_per_worker * num_workers + 10`` CPUs
and ``cpu_memory_per_worker * num_workers + 10 GiB`` memory against what Ray has available
(``xtuner/v1/rl/utils/ray_accelerator_worker.py:115-122``); the judger / agent-loop CPU pools come on top
(``xtuner/v1/rl/utils/ray_cpu_worker.py:415-425``). For a colocated run ``--num-workers`` replaces the config's
``resources.num_workers`` before that check (``xtuner/v1/train/cli/rl.py:60-61``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..core import PathPolicy, ToolInputError
from ..planning.config_input import ConfigInput, GroupInput, analyse_config, read_plan_config
from ..xtuner_rules import resources as rr

SRC_NEED = f"{rr.SRC_PG_CPU}; {rr.SRC_PG_MEMORY}"


class RayNeed(BaseModel):
    """The Ray resources the run needs (``known``: false when the config's were unreadable)."""

    known: bool
    why_unknown: str = ""
    accelerator: str = "GPU"
    accelerators: int = 0
    cpus: int = Field(default=0, description="Smallest idle-cluster Ray CPU total passing XTuner's checks")
    memory_gib: float = Field(default=0.0, description="Smallest idle-cluster Ray memory, GiB")
    memory_bytes: int = 0
    per_node_cpus: int = Field(default=0, description="Ray CPUs each node should offer (ray start --num-cpus)")
    per_node_memory_bytes: int = Field(default=0, description="Ray memory each node should offer (--memory, bytes)")
    per_node_memory_gib: float = 0.0
    arithmetic: str = Field(default="", description="How the totals follow from the config's values")
    source: str = SRC_NEED


def _gib(n: float) -> str:
    return f"{n / rr.GIB:g} GiB"


def _requirement(g: GroupInput, workers: int) -> rr.PlacementGroupRequirement:
    cpw = g.num_cpus_per_worker.value if g.num_cpus_per_worker else rr.DEFAULT_NUM_CPUS_PER_WORKER
    mem = g.cpu_memory_per_worker.value if g.cpu_memory_per_worker else rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES
    return rr.accelerator_pg_requirements(
        workers,
        float(cpw),
        int(mem),
        accelerator="NPU" if g.accelerator == "NPU" else "GPU",
        num_accelerators_per_worker=g.num_accelerators_per_worker,
        name="train" if g.role == "shared" else g.role,
    )


def _where(ci: ConfigInput, g: GroupInput) -> str:
    lines = [x.line for x in (g.num_workers, g.num_cpus_per_worker, g.cpu_memory_per_worker) if x and x.line]
    return f" ({ci.name}:{','.join(map(str, lines))})" if lines else ""


def ray_need(ci: ConfigInput | None, passed_workers: int | None, nodes: int, gpus_per_node: int) -> RayNeed:
    """XTuner's Ray need for this config and launch shape; unknown (with why) when a value is unresolved."""
    if ci is None or not ci.groups:
        why = ci.why_not if ci is not None and ci.why_not else "the config's resources could not be read"
        return RayNeed(known=False, why_unknown=why)
    bad = [u for g in ci.groups for u in g.unresolved if not (passed_workers and u.startswith("shared.num_workers"))]
    if bad:
        return RayNeed(known=False, why_unknown="; ".join(bad)[:400])
    pgs = []
    for g in ci.groups:
        workers = passed_workers if (g.role == "shared" and passed_workers) else (g.num_workers and g.num_workers.value)
        if not isinstance(workers, int) or workers < 1:
            return RayNeed(known=False, why_unknown=f"{g.role}.num_workers is not a positive integer")
        pgs.append(_requirement(g, workers))
    req = rr.ray_requirements(pgs, ci.pools)
    per_cpus, per_mem = rr.per_node_minimum(req, nodes, gpus_per_node)
    parts = [
        f"{pg.name}: {pg.num_workers} workers × {pg.num_cpus_per_worker:g} CPU + {rr.PG_CPU_HEADROOM} = "
        f"{pg.cpus_needed:g} CPUs, {pg.num_workers} × {_gib(pg.cpu_memory_per_worker_bytes)} + 10 GiB = "
        f"{pg.memory_needed_gib:g} GiB{_where(ci, g)}"
        for pg, g in zip(pgs, ci.groups, strict=True)
    ]
    if req.cpus_external:
        parts.append(
            f"CPU pools (rollout controller, judgers, agent loops): {req.cpus_external:g} CPUs, "
            f"{_gib(req.memory_external_bytes)} outside the groups"
        )
    return RayNeed(
        known=True,
        accelerator=req.accelerator,
        accelerators=int(req.accelerators_total),
        cpus=int(-(-req.min_cluster_cpus // 1)),
        memory_gib=req.min_cluster_memory_gib,
        memory_bytes=req.min_cluster_memory_bytes,
        per_node_cpus=per_cpus,
        per_node_memory_bytes=per_mem,
        per_node_memory_gib=rr.bytes_to_gib(per_mem),
        arithmetic="; ".join(parts),
    )


def need_text(need: RayNeed) -> str:
    """'16 GPUs, 106 CPUs, 266 GiB' for a summary."""
    return f"{need.accelerators} {need.accelerator}s, {need.cpus} CPUs, {need.memory_gib:g} GiB"


def need_from_text(
    name: str, text: str | None, env: dict[str, str], passed_workers: int | None, nodes: int, gpus_per_node: int
) -> RayNeed:
    """The need for a config already read (build_rl_command reads it once for all its checks)."""
    if text is None:
        return RayNeed(known=False, why_unknown="the config could not be read")
    return ray_need(analyse_config(name, text, env), passed_workers, nodes, gpus_per_node)


def need_for_config(
    path: str, policy: PathPolicy, env: dict[str, str], passed_workers: int | None, nodes: int, gpus_per_node: int
) -> RayNeed:
    """The need for the config at ``path`` (inside the allowed roots), evaluated with the planned ``env``.

    For callers that have not read the config (preflight): never raises; an unreadable config is an unknown need.
    """
    try:
        ci = read_plan_config(path, policy, env)
    except (ToolInputError, OSError) as exc:
        return RayNeed(known=False, why_unknown=getattr(exc, "message", None) or str(exc))
    return ray_need(ci, passed_workers, nodes, gpus_per_node)
