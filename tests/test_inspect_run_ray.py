"""inspect_run across nodes: worker logs of the suite's real two-node loopback Ray cluster, read through Ray's log
API (dashboard HTTP), diagnosed together with the run's local logs -- only when it is the operator's cluster; and a
dead address answers in time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import PathPolicy, RunContext
from xtuner_rl_mcp.operations import inspect_run as tool

from .ray_cluster import HEAD_IP, WORKER_IP, dead_address, wait_logs_served
from .run_dir_generator import RunSpec, generate

pytestmark = pytest.mark.ray

MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.33 GiB of which 1.06 GiB is free."
)

# A test-only driver: one task pinned to the worker node prints an XTuner-style error to its stderr, which Ray keeps
# in that node's worker-*.err. (The tool itself never starts a driver.)
_DRIVER = textwrap.dedent(
    """
    import sys, ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    ray.init(address=sys.argv[1], log_to_driver=False)
    node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == sys.argv[2])

    @ray.remote(num_cpus=0)
    def fail(msg):
        print(msg, file=sys.stderr, flush=True)
        return 1

    ray.get(fail.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(sys.argv[3]))
    ray.shutdown()
    """
)


def _ctx(root: Path, env: dict[str, str]) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings([root]), environ=env)


def test_worker_logs_from_every_node_are_diagnosed_with_the_local_ones(ray_cluster, tmp_path):
    subprocess.run(
        [sys.executable, "-c", _DRIVER, ray_cluster.gcs_address, WORKER_IP, MESSAGE],
        env=ray_cluster.env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    wait_logs_served(ray_cluster)
    generate(tmp_path, RunSpec(steps=4, total_steps=8, idle_s=30))
    t0 = time.monotonic()
    # The server's own RAY_TMPDIR holds the cluster's address file: the local cluster Ray itself would join, so it is
    # the operator's cluster and its log API may be read.
    res = tool.run(
        tool.Params(path=str(tmp_path), ray_address=ray_cluster.gcs_address, ray_timeout_s=60),
        _ctx(tmp_path, ray_cluster.env),
    )
    print(f"collected in {time.monotonic() - t0:.1f}s: {res.remote_logs}")
    remote = res.remote_logs
    assert remote is not None and remote.nodes == 2, remote
    assert remote.dashboard_url and remote.bytes > 0
    # both nodes answered (the loopback nodes share one --temp-dir, so each also lists the other's files)
    assert {f.split(":", 1)[0] for f in remote.files} == {HEAD_IP, WORKER_IP}, remote.files
    oom = next(f for f in res.findings if f.id == "logs.cuda_out_of_memory")
    assert oom.location.split(":", 1)[0] in (HEAD_IP, WORKER_IP) and ":worker-" in oom.location
    assert MESSAGE[:40] in oom.evidence
    assert res.state == "failed" and res.logs.verdict == "failure_found"
    assert any(s.endswith("rank_0.log") for s in res.logs.sources)  # local logs were read in the same pass
    assert "worker log(s) from 2 node(s)" in res.summary


def test_client_given_cluster_is_probed_but_its_logs_are_not_read(ray_cluster, tmp_path):
    """The same head given by a client, on a server whose own address file does not name it: loopback, so it is
    probed (without credentials), but worker-log text is read only from a cluster the operator configured."""
    generate(tmp_path, RunSpec(steps=2, total_steps=2))
    env = {k: v for k, v in ray_cluster.env.items() if k not in ("RAY_TMPDIR", "TMPDIR")}
    env["TMPDIR"] = str(tmp_path / "server-tmp")
    res = tool.run(
        tool.Params(path=str(tmp_path), ray_address=ray_cluster.gcs_address, ray_timeout_s=60), _ctx(tmp_path, env)
    )
    remote = res.remote_logs
    assert remote is not None and remote.dashboard_url == ray_cluster.dashboard_url, remote
    assert remote.files == [] and remote.bytes == 0
    assert any("not read" in e for e in remote.errors), remote.errors


def test_unreachable_cluster_answers_within_the_deadline(tmp_path):
    generate(tmp_path, RunSpec(steps=2, total_steps=2))
    t0 = time.monotonic()
    res = tool.run(tool.Params(path=str(tmp_path), ray_address=dead_address(), ray_timeout_s=5), _ctx(tmp_path, {}))
    assert time.monotonic() - t0 < 8
    assert res.remote_logs is not None and res.remote_logs.nodes == 0 and res.remote_logs.errors
    assert res.state == "finished"  # the local answer still stands
