"""Issue 20's environment requests, replayed the way an assistant sends them: through the real MCP client.

- "Is my cluster big enough for 16 workers?" — probe_environment's summary leads with the fit and its numbers.
- "My run died before rollout; now there is no Ray cluster" — the missing cluster is a blocker when one is expected,
  and the answer says that a stopped cluster after a run is XTuner's own exit cleanup.
- The pre-launch catch-22 — preflight before a launch whose script starts Ray: no cluster is a plan step (with the
  CPUs/memory/GPUs the plan's ``ray start`` must offer), not a blocker; a cluster already running here is the conflict.

Ray is real where it is used (tests/ray_cluster.py); elsewhere an isolated RAY_TMPDIR guarantees "no cluster here"
even when other test sessions run Ray on this machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from .conftest import make_server
from .xtuner_config_samples import COLOCATED_ASYNC, ENV, write

pytestmark = pytest.mark.anyio

#: 16 workers x 12 CPUs + XTuner's fixed +10 headroom; 16 x 16 GiB + 10 GiB (ray_accelerator_worker.py:115, :119).
NEED_16 = "needs 16 GPU, 202 CPUs, 266 GiB Ray memory"


def isolated(tmp_path: Path) -> dict[str, str]:
    """A planned env whose Ray address file lives in an empty directory: no cluster can be found by accident."""
    (tmp_path / "raytmp").mkdir(exist_ok=True)
    return {"RAY_TMPDIR": str(tmp_path / "raytmp"), "TMPDIR": str(tmp_path / "raytmp")}


async def test_big_enough_for_16_workers_leads_with_the_fit(mcp_client, tmp_path):
    r = await mcp_client.call_tool(
        "probe_environment",
        {"checks": ["ray", "env"], "expected": {"num_workers": 16}, "env": isolated(tmp_path), "timeout_s": 2},
    )
    assert not r.is_error
    sc = r.structured_content
    assert sc["summary"].startswith(f"fit unknown ({NEED_16}"), sc["summary"]
    assert sc["fit"]["min_cluster_cpus"] == 202 and sc["fit"]["min_cluster_memory_gib"] == 266


@pytest.mark.ray
async def test_big_enough_for_16_workers_against_a_live_cluster(mcp_client, ray_head):
    r = await mcp_client.call_tool(
        "probe_environment",
        {"checks": ["ray"], "expected": {"num_workers": 16}, "ray_address": ray_head.gcs_address, "timeout_s": 10},
    )
    sc = r.structured_content
    fit = sc["fit"]
    verdict = "ok" if fit["ok"] else "FAILS"
    assert sc["summary"].startswith(f"fit {verdict}: {NEED_16}; cluster has "), sc["summary"]
    assert f"{ray_head.total('GPU'):g} GPU" in sc["summary"].split(";")[1]
    if not fit["ok"]:
        assert sc["counts"]["blocker"] >= 1 and sc["findings"][0]["stage"] == "placement_group"


async def test_run_died_before_rollout_and_ray_is_gone(mcp_client, tmp_path):
    """After a crash the cluster is gone; when a running cluster is expected that is a blocker, explained."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    r = await mcp_client.call_tool(
        "preflight",
        {"config": str(cfg), "env": {**ENV, **isolated(tmp_path)}, "backend": "lmdeploy", "cluster": "running"},
    )
    sc = r.structured_content
    assert sc["verdict"] == "no_go" and sc["cluster_mode"] == "running"
    (ray,) = [b for b in sc["blockers"] if b["id"] == "probe.ray_not_running"]
    assert "XTuner's own cleanup" in ray["evidence"] and "ray stop --force" in ray["evidence"]
    assert ray["stage"] == "ray_connect" and ray["owner"] == "cluster_setup"


async def test_prelaunch_catch22_is_gone(mcp_client, tmp_path):
    """The plan starts Ray: no running cluster is a step of the plan, with the numbers its `ray start` needs."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    r = await mcp_client.call_tool(
        "preflight", {"config": str(cfg), "env": {**ENV, **isolated(tmp_path)}, "backend": "lmdeploy"}
    )
    sc = r.structured_content
    assert sc["cluster_mode"] == "plan_starts_ray"
    assert not [b for b in sc["blockers"] if b["category"] == "ray_not_running"], sc["blockers"]
    need = sc["ray_need"]
    # COLOCATED_ASYNC: 8 workers x 12 CPUs x 32 GiB, plus the judger and rollout-controller pools
    assert need["accelerators"] == 8 and need["cpus"] >= 8 * 12 + 10 and need["memory_gib"] >= 8 * 32 + 10
    assert f"Ray must offer 8 GPUs, {need['cpus']:g} CPUs, {need['memory_gib']:g} GiB" in sc["summary"]
    # blockers, if any (this server has no lmdeploy), come in the order XTuner would hit them
    stages = [b.get("stage") for b in sc["blockers"]]
    from xtuner_rl_mcp.core.findings import STAGE_ORDER

    order = [STAGE_ORDER.get(s or "", 99) for s in stages]
    assert order == sorted(order), stages


@pytest.mark.ray
async def test_prelaunch_with_a_cluster_already_running_here(tmp_path, ray_head):
    """A planned RAY_TMPDIR is read only inside the allowed roots, so this server also allows the cluster's."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    env = {**ENV, "RAY_TMPDIR": str(ray_head.tmp), "TMPDIR": str(ray_head.tmp)}
    async with Client(make_server(tmp_path, ray_head.tmp), raise_exceptions=True) as client:
        r = await client.call_tool("preflight", {"config": str(cfg), "env": env, "backend": "lmdeploy"})
    sc = r.structured_content
    (b,) = [b for b in sc["blockers"] if b["id"] == "preflight.ray_already_running"]
    assert ray_head.gcs_address in b["title"] and "cluster='running'" in b["fix"] and b["stage"] == "launch"
