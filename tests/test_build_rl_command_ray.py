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
from xtuner_rl_mcp.operations.build_rl_command import Params, run

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


CONFIG = """\
import os
from xtuner.v1.rl.utils import AcceleratorResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig
NNODE = int(os.environ.get("WORLD_SIZE", "1"))
resources = AcceleratorResourcesConfig(num_workers=8 * NNODE, num_cpus_per_worker=12, cpu_memory_per_worker=32 * 1024**3)
trainer = RLColocateTrainerConfig(resources=resources)
"""


def _run_resource_check(ray_cluster, tmp_path, num_workers: int) -> tuple[object, subprocess.CompletedProcess]:
    """Only the '# 3b.' block of the head script (the resource check), against the real cluster's `ray status`."""
    from xtuner_rl_mcp.core import PathPolicy

    (tmp_path / "cfg.py").write_text(CONFIG)
    plan = run(
        Params(config=str(tmp_path / "cfg.py"), backend="lmdeploy", num_workers=num_workers),
        RunContext(paths=PathPolicy.from_strings([tmp_path])),
    )
    block = plan.script[plan.script.index("# 3b.") : plan.script.index("# 4. ")]
    env = dict(ray_cluster.env)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block], env=env, capture_output=True, text=True, timeout=120
    )
    return plan, proc


def test_resource_check_reads_real_ray_status(ray_cluster, tmp_path) -> None:
    """8 workers x (12 CPU, 32 GiB): XTuner needs 106 CPUs and 266 GiB; the shared cluster offers more."""
    cpus, mem_gib = ray_cluster.total("CPU"), ray_cluster.total("memory") / 1024**3
    assert cpus >= 106 and mem_gib >= 266, "the shared cluster is smaller than this test assumes"
    plan, proc = _run_resource_check(ray_cluster, tmp_path, 8)
    assert (plan.ray_need.cpus, plan.ray_need.memory_gib) == (106, 266)
    assert proc.returncode == 0, proc.stderr
    assert "(need 106 CPUs, 266 GiB)" in proc.stdout and f"Ray offers {cpus:g} CPUs" in proc.stdout


def test_resource_check_stops_on_a_real_cluster_that_is_too_small(ray_cluster, tmp_path) -> None:
    """16 workers need 16 x 12 + 10 = 202 CPUs and 16 x 32 + 10 = 522 GiB, more than the cluster has."""
    assert ray_cluster.total("CPU") < 202
    plan, proc = _run_resource_check(ray_cluster, tmp_path, 16)
    assert (plan.ray_need.cpus, plan.ray_need.memory_gib) == (202, 522)
    assert proc.returncode == 1
    assert "ERROR: XTuner needs 202 CPUs and 522 GiB of Ray memory" in proc.stderr
