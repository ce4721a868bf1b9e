"""The launch script's GPU wait loop against a real Ray cluster's ``ray status`` (no stub).

Uses the shared session cluster from tests/ray_cluster.py (a head and a worker node, fake GPUs on loopback). Only
the wait-loop part of the generated script runs here; starting and stopping Ray is the fixture's job.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from xtuner_rl_mcp.core import RunContext
from xtuner_rl_mcp.tools.build_rl_command import Params, run

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed"),
]


def _wait_block(script: str) -> str:
    """The lines from the '# 3. Wait' comment up to the '# 4.' step."""
    start = script.index("# 3. Wait")
    return "set -euo pipefail\n" + script[start : script.index("# 4. ", start)]


def _run_wait(ray_cluster, gpus_per_node: int, wait_s: int = 1) -> subprocess.CompletedProcess:
    nodes = len(ray_cluster.nodes)
    plan = run(
        Params(
            config="cfg.py",
            backend="sglang",
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            head_address="127.0.0.2",
            wait_timeout_s=wait_s,
        ),
        RunContext(),
    )
    env = dict(ray_cluster.env)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    return subprocess.run(
        ["bash", "-c", _wait_block(plan.script)], env=env, capture_output=True, text=True, timeout=120
    )


def test_wait_loop_reads_real_ray_status(ray_cluster) -> None:
    per_node = {int(n.num_gpus) for n in ray_cluster.nodes}
    assert len(per_node) == 1, "the shared cluster's nodes advertise different GPU counts"
    total = int(ray_cluster.total("GPU"))
    # A node's GPUs can reach `ray status` a moment after it registered: let the loop retry, as on a real cluster.
    ok = _run_wait(ray_cluster, per_node.pop(), wait_s=60)
    assert ok.returncode == 0, ok.stderr
    assert f"Ray cluster shows {total} GPUs (need {total})." in ok.stdout


def test_wait_loop_fails_on_real_cluster_with_too_few_gpus(ray_cluster) -> None:
    total = int(ray_cluster.total("GPU"))
    per_node = total // len(ray_cluster.nodes) + 1
    short = _run_wait(ray_cluster, per_node)
    assert short.returncode == 1
    assert f"Ray shows {total} GPUs after 1 checks; need {per_node * len(ray_cluster.nodes)}" in short.stderr
