"""resource_rules: XTuner's placement-group, external-pool and divisibility checks, reproduced as pure functions.

Expected numbers are derived in each test from the rule as the XTuner source states it (b934f46,
ray_accelerator_worker.py:104-122, ray_cpu_worker.py:410-448, rollout/lmdeploy.py, rollout/sglang.py), not copied
from the implementation. One test reads a real Ray cluster (started by the shared session fixture).
"""

from __future__ import annotations

import pytest
from xtuner_rl_mcp.xtuner_rules import resources as rr
from xtuner_rl_mcp.xtuner_rules.ray_need import ray_need

GIB = 1024**3


def idle(cpus: float, mem_gib: float, gpus: float = 8, nodes: list[rr.NodeCapacity] | None = None):
    return rr.ClusterCapacity(
        accelerators_total=gpus, cpus_total=cpus, memory_total_bytes=mem_gib * GIB, nodes=nodes or []
    )


def row(rows: list[rr.FitRow], check: str) -> rr.FitRow:
    return next(r for r in rows if r.check == check)


def test_defaults_match_the_dossier_numbers():
    # 8 workers with XTuner's defaults (12 CPUs, 16 GiB each) need 12*8+10 CPUs and 16*8+10 GiB.
    pg = rr.accelerator_pg_requirements(8)
    assert pg.cpus_needed == 12 * 8 + 10 == 106
    assert pg.memory_needed_bytes == (16 * 8 + 10) * GIB
    assert pg.memory_needed_gib == 138
    assert pg.accelerators_needed == 8
    # The async GSM8K example uses 32 GiB per worker.
    assert rr.accelerator_pg_requirements(8, cpu_memory_per_worker_bytes=32 * GIB).memory_needed_gib == 266


def test_accelerator_check_counts_workers_not_fractional_accelerators():
    pg = rr.accelerator_pg_requirements(4, num_accelerators_per_worker=0.5)
    assert pg.accelerators_needed == 4  # XTuner compares num_workers with the available GPUs
    assert pg.accelerators_reserved == 2


@pytest.mark.parametrize(
    ("cpus", "mem_gib", "failing"),
    [
        (106, 138, set()),
        (105, 138, {"pg:train CPU"}),
        (106, 137.5, {"pg:train memory"}),
        (64, 64, {"pg:train CPU", "pg:train memory"}),
    ],
)
def test_pg_checks_and_exact_messages(cpus, mem_gib, failing):
    req = rr.ray_requirements([rr.accelerator_pg_requirements(8)])
    rows = rr.check_fit(req, idle(cpus, mem_gib))
    assert {r.check for r in rows if not r.ok and r.check.startswith("pg:")} == failing
    cpu = row(rows, "pg:train CPU")
    # Ray reports floats; XTuner's needed CPU is a float because the pydantic field is float.
    assert cpu.xtuner_message == f"Not enough available CPUs in Ray cluster, {float(cpus)} less than 106.0."
    mem = row(rows, "pg:train memory")
    assert mem.xtuner_message == (
        f"Not enough available memory in Ray cluster, {float(mem_gib * GIB)} less than {138 * GIB}."
    )
    assert row(rows, "pg:train GPU").xtuner_message == "Not enough available GPUS in Ray cluster, 8.0 less than 8."


def test_npu_message_names_npus():
    pg = rr.accelerator_pg_requirements(16, accelerator="NPU")
    cluster = rr.ClusterCapacity(accelerator="NPU", accelerators_total=8, cpus_total=1000, memory_total_bytes=1e13)
    r = row(rr.check_fit(rr.ray_requirements([pg]), cluster), "pg:train NPU")
    assert not r.ok
    assert r.xtuner_message == "Not enough available NPUS in Ray cluster, 8.0 less than 16."


def test_second_group_sees_what_the_first_holds():
    # Disaggregated: train group first, then rollout, each checked against what is *available* then.
    train = rr.accelerator_pg_requirements(8, name="train")
    rollout = rr.accelerator_pg_requirements(8, name="rollout")
    req = rr.ray_requirements([train, rollout])
    # Each alone needs 106 CPUs; together the second needs 96 held + 106 = 202.
    assert req.min_cluster_cpus == 96 + 106
    rows = rr.check_fit(req, idle(201, 10_000, gpus=16))
    assert row(rows, "pg:train CPU").ok
    bad = row(rows, "pg:rollout CPU")
    assert not bad.ok and bad.available == 201 - 96
    assert bad.xtuner_message == "Not enough available CPUs in Ray cluster, 105.0 less than 106.0."
    assert rr.fits(rr.check_fit(req, idle(202, 10_000, gpus=16)))


def test_external_pools_against_cluster_minus_groups():
    pools = [rr.rollout_controller_pool(), rr.judger_pool("openai/gsm8k", num_workers=4, num_cpus_per_worker=2)]
    req = rr.ray_requirements([rr.accelerator_pg_requirements(8)], pools)
    assert req.cpus_external == 1 + 8
    assert req.memory_external_bytes == 5 * GIB
    # Groups hold 96 CPUs; externals need 9 more, so 105 would do for them, but the group's own +10 needs 106.
    assert req.min_cluster_cpus == 106
    rows = rr.check_fit(req, idle(104, 1000))
    ext = row(rows, "external pools CPU")
    assert not ext.ok and ext.available == 104 - 96
    msg = ext.xtuner_message
    assert msg.startswith("Insufficient PG-external Ray resources for registered external CPU pools:\n")
    # XTuner validates at each registration: the judger (2nd pool) is where the sum first exceeds 8.
    assert "CPU requested=9, available_outside_accelerator_pg=8, cluster_total=104, accelerator_pg_reserved=96" in msg
    assert "  - rollout_controller: 1 workers * 1 CPU, 1073741824 memory each" in msg
    assert "  - judger:openai/gsm8k: 4 workers * 2 CPU, 1073741824 memory each" in msg


def test_external_memory_and_node_checks():
    pools = [rr.rollout_controller_pool(), rr.agent_loop_pool("SingleTurnAgentLoopConfig", num_cpus_per_worker=8)]
    req = rr.ray_requirements([rr.accelerator_pg_requirements(8)], pools)
    assert req.min_cluster_memory_bytes == 138 * GIB  # externals (2 GiB) fit inside the +10 GiB headroom
    node = rr.NodeCapacity(accelerators=8, cpus=100, memory_bytes=129 * GIB)
    rows = rr.check_fit(req, idle(100, 129, nodes=[node]))
    # 100 CPUs on one node: 96 held by bundles, 4 left; the agent loop wants 8 per worker on one node.
    per_node = row(rows, "external pools CPU per worker on one node (estimated PACK placement)")
    assert not per_node.ok and per_node.available == 4
    assert "pool 'agent_loop:SingleTurnAgentLoopConfig' requests 8 CPU per worker, but the largest node has only 4" in (
        per_node.xtuner_message
    )
    mem = row(rows, "external pools memory")
    assert not mem.ok and mem.available == 1 * GIB
    assert f"memory requested={2 * GIB}, available_outside_accelerator_pg={GIB}" in mem.xtuner_message


def test_bundle_placement_row():
    nodes = [rr.NodeCapacity(accelerators=8, cpus=64, memory_bytes=512 * GIB) for _ in range(2)]
    req = rr.ray_requirements([rr.accelerator_pg_requirements(16)])
    rows = rr.check_fit(req, idle(128, 1024, gpus=16, nodes=nodes))
    place = row(rows, "pg bundles placeable on the nodes (estimated PACK placement)")
    assert not place.ok  # 8 bundles x 12 CPUs = 96 > 64 CPUs per node
    req7 = rr.ray_requirements([rr.accelerator_pg_requirements(16, num_cpus_per_worker=7)])
    assert row(rr.check_fit(req7, idle(128, 1024, gpus=16, nodes=nodes)), place.check).ok


def test_repeated_pool_names_get_suffixes():
    pools = rr.unique_pool_names([rr.judger_pool("openai/gsm8k"), rr.judger_pool("openai/gsm8k"), rr.judger_pool("x")])
    assert [p.name for p in pools] == ["judger:openai/gsm8k", "judger:openai/gsm8k#2", "judger:x"]


@pytest.mark.parametrize(
    ("pgs", "pools"),
    [
        ([(8, 12, 16)], 2),
        ([(16, 6, 8)], 0),
        ([(4, 12, 16), (12, 4, 32)], 3),
        ([(3, 1.5, 5)], 1),
    ],
)
def test_min_cluster_is_tight(pgs, pools):
    """The reported minimum passes every check, and one CPU or one byte less fails one."""
    groups = [rr.accelerator_pg_requirements(n, c, m * GIB, name=f"g{i}") for i, (n, c, m) in enumerate(pgs)]
    ext = [rr.rollout_controller_pool()] + [rr.judger_pool(f"j{i}") for i in range(pools)]
    req = rr.ray_requirements(groups, ext)
    gpus = sum(n for n, _, _ in pgs)

    def cluster(cpus, mem):
        return rr.ClusterCapacity(accelerators_total=gpus, cpus_total=cpus, memory_total_bytes=mem)

    assert rr.fits(rr.check_fit(req, cluster(req.min_cluster_cpus, req.min_cluster_memory_bytes)))
    assert not rr.fits(rr.check_fit(req, cluster(req.min_cluster_cpus - 1, req.min_cluster_memory_bytes)))
    assert not rr.fits(rr.check_fit(req, cluster(req.min_cluster_cpus, req.min_cluster_memory_bytes - 1)))


@pytest.mark.parametrize(
    ("workers", "tp", "ep", "backend", "per_node", "broken"),
    [
        (8, 1, 1, "lmdeploy", 8, set()),
        (8, 2, 1, "lmdeploy", 8, set()),
        (7, 2, 1, "lmdeploy", 8, {"rollout.workers_divisible_by_engine"}),
        (8, 1, 4, "lmdeploy", 8, set()),
        (6, 1, 4, "lmdeploy", 8, {"rollout.workers_divisible_by_ep"}),
        (8, 2, 2, "lmdeploy", 8, {"rollout.tp_or_ep_is_one"}),
        (24, 12, 1, "sglang", 8, {"rollout.sglang_cross_node_engine"}),
        (32, 16, 1, "sglang", 8, set()),
        (12, 4, 1, "sglang", 8, set()),
        (8, 1, 1, "vllm", 8, {"rollout.vllm_topology_not_implemented"}),
    ],
)
def test_rollout_shape_rules(workers, tp, ep, backend, per_node, broken):
    rules = rr.rollout_shape_rules(workers, tp, ep, backend, per_node)
    assert {r.rule for r in rules if not r.ok} == broken
    engine = ep if ep > 1 else tp
    for r in rules:
        if r.rule == "rollout.workers_divisible_by_engine":
            assert (
                r.xtuner_message == f"num_rollout_workers={workers} must be divisible by num_gpus_per_engine={engine}."
            )
        if r.rule == "rollout.workers_divisible_by_ep":
            assert r.xtuner_message == f"num_rollout_workers={workers} must be divisible by expert_parallel_size={ep}."


def test_sp_size_rule():
    assert rr.sp_size_rule(2, 8).ok
    bad = rr.sp_size_rule(3, 8)
    assert not bad.ok
    assert bad.xtuner_message == "Found sp_size 3, world_size 8.sequence parallel size must be a divisor of world size."


@pytest.mark.ray
def test_check_fit_on_a_real_ray_cluster(ray_cluster):
    """Feed a real cluster's totals (read by the read-only probe) into check_fit; expectations from its node specs."""
    from xtuner_rl_mcp.cluster import ray as probe
    from xtuner_rl_mcp.cluster.ray_address import RayAccess
    from xtuner_rl_mcp.core import RunContext

    access = RayAccess.from_context(RunContext(environ=ray_cluster.env))
    snap = probe.probe_cluster(ray_cluster.gcs_address, access=access)
    assert snap.nodes, snap.errors
    nodes = [
        rr.NodeCapacity(accelerators=n.total.get("GPU", 0), cpus=n.total.get("CPU", 0), memory_bytes=n.total["memory"])
        for n in snap.nodes
    ]
    cluster = rr.ClusterCapacity(
        accelerators_total=ray_cluster.total("GPU"),
        cpus_total=ray_cluster.total("CPU"),
        memory_total_bytes=ray_cluster.total("memory"),
        nodes=nodes,
    )
    gpus = int(ray_cluster.total("GPU"))
    req = rr.ray_requirements([rr.accelerator_pg_requirements(gpus)], [rr.rollout_controller_pool()])
    rows = rr.check_fit(req, cluster)
    needed_cpus = 12 * gpus + 10
    assert row(rows, "pg:train CPU").ok == (needed_cpus <= ray_cluster.total("CPU"))
    needed_mem = (16 * gpus + 10) * GIB
    assert row(rows, "pg:train memory").ok == (needed_mem <= ray_cluster.total("memory"))
    per_node_cpus = min(n.num_cpus for n in ray_cluster.nodes)
    per_node_gpus = max(n.num_gpus for n in ray_cluster.nodes)
    place = row(rows, "pg bundles placeable on the nodes (estimated PACK placement)")
    assert place.ok == (12 * per_node_gpus <= per_node_cpus)


def test_per_node_figures_hold_each_nodes_bundles_and_keep_the_headroom_cluster_wide():
    one = rr.ray_requirements([rr.accelerator_pg_requirements(8, 12, 32 * rr.GIB)], [rr.rollout_controller_pool()])
    n = ray_need(one, 1, 8)
    assert (n.per_node_cpus, n.per_node_memory_bytes) == (96, 256 * rr.GIB)  # 8 bundles of 12 CPUs, 32 GiB
    assert (n.uniform_node_cpus, n.uniform_node_memory_bytes) == (106, 266 * rr.GIB)  # + the cluster-wide 10
    two = rr.ray_requirements([rr.accelerator_pg_requirements(16, 12, 32 * rr.GIB)], [rr.rollout_controller_pool()])
    n = ray_need(two, 2, 8)
    assert (n.per_node_cpus, n.per_node_memory_bytes) == (96, 256 * rr.GIB)  # never 202 / 2
    assert (n.uniform_node_cpus, n.uniform_node_memory_bytes) == (101, 261 * rr.GIB)
    # Uneven: 9 workers on 2 x 8 GPUs -> one node holds 8 bundles (96 CPUs), more than half of 118.
    uneven = rr.ray_requirements([rr.accelerator_pg_requirements(9, 12, 16 * rr.GIB)])
    n = ray_need(uneven, 2, 8)
    assert (n.per_node_cpus, n.uniform_node_cpus, n.uniform_node_memory_bytes) == (96, 96, 128 * rr.GIB)
    # Disaggregated on one node: 4 train bundles of 4 CPUs and 4 rollout bundles of 12 share it.
    disagg = rr.ray_requirements(
        [
            rr.accelerator_pg_requirements(4, 4, rr.GIB, name="train"),
            rr.accelerator_pg_requirements(4, 12, rr.GIB, name="rollout"),
        ],
        [rr.rollout_controller_pool()],
    )
    n = ray_need(disagg, 1, 8)
    assert (n.cpus, n.per_node_cpus) == (74, 64)  # rollout's check sees 64 - 16 held: 16 + 48 + 10


@pytest.mark.parametrize(
    "workers,engine,limit,fix",
    [
        (6, 4, None, "use 4 or 8 rollout GPUs with TP 4, or TP 1/2/3/6 on 6"),
        (6, 4, 6, "use 4 rollout GPUs with TP 4, or TP 1/2/3/6 on 6"),
        (3, 4, 8, "use 4 rollout GPUs with TP 4, or TP 1/3 on 3"),
        (24, 16, 32, "use 16 or 32 rollout GPUs with TP 16, or TP 1/2/3/4/6/8/24 on 24"),
    ],
)
def test_engine_layout_fix_names_the_layouts_that_pass(workers, engine, limit, fix):
    text = rr.engine_layout_fix(workers, engine, "TP", 8, limit)
    assert text.startswith(fix), text
    ok_workers, ok_engines = rr.engine_layout_options(workers, engine, 8, limit)
    assert all(w % engine == 0 for w in ok_workers) and all(workers % e == 0 for e in ok_engines)
