"""probe_environment against a live local Ray head (and a dead address) against ``ray status``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_common import PEERS, PY, REPO, log, measured, median, server_cmd, work_s

# ------------------------------------------------------------------------------------------------------------
# probe_environment vs ray status
# ------------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def ray_head() -> Iterator[dict[str, Any]]:
    """A CPU-only local Ray head with 8 fake GPUs in its own temp dir and session; stopped by pid group."""
    ray_bin = Path(PY).with_name("ray")
    if not ray_bin.exists():
        raise FileNotFoundError("ray CLI not installed")
    tmp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_TMPDIR=tmp, TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0", RAY_prestart_worker_first_driver="0")
    gcs = _free_port()
    logf = Path(tmp) / "head.log"
    args = [
        str(ray_bin), "start", "--head", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.2",
        f"--port={gcs}", f"--ray-client-server-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.2", f"--dashboard-port={_free_port()}",
        "--num-cpus=2", "--num-gpus=8", "--memory=8000000000", "--object-store-memory=80000000", f"--temp-dir={tmp}/ray",
    ]  # fmt: skip
    with logf.open("w") as fh:
        proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 90
        while "Ray runtime started" not in logf.read_text():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("ray head did not start: " + logf.read_text()[-1500:])
            time.sleep(0.2)
        time.sleep(2)  # let the node register before the first probe
        yield {"address": f"127.0.0.2:{gcs}", "env": env}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _probe_arg() -> str | None:
    from xtuner_rl_mcp.operations.probe_environment import Params

    return next((a for a in ("ray_address", "address") if a in Params.model_fields), None)


def _timed(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, text = out.returncode, out.stdout
    except subprocess.TimeoutExpired:
        rc, text = None, ""
    return {"wall_s": time.perf_counter() - t0, "rc": rc, "stdout": text}


def _probe_args(address: str) -> dict[str, Any]:
    """Arguments that make probe_environment do what ``ray status`` does: the Ray check only."""
    from xtuner_rl_mcp.operations.probe_environment import Params

    args: dict[str, Any] = {"ray_address": address}
    if "checks" in Params.model_fields:
        args["checks"] = ["ray"]
    return args


def bench_probe(runs: int, tools: list[str]) -> dict[str, Any]:
    if "probe_environment" not in tools:
        return {"skipped": "probe_environment is not registered"}
    if _probe_arg() != "ray_address":
        return {"skipped": "probe_environment has no ray_address argument"}
    res: dict[str, Any] = {"runs": runs, "notes": []}
    call = [*server_cmd(), "call", "probe_environment", "--allow-root", str(REPO)]
    ray_bin = Path(PY).with_name("ray")

    def ours_cli(address: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return [_timed([*call, "--args", json.dumps(_probe_args(address))], env=env) for _ in range(runs)]

    def ours_inproc(address: str) -> list[dict[str, Any]]:
        cmd = [*PEERS, "tool", "probe_environment", str(REPO), json.dumps(_probe_args(address))]
        return [measured(cmd) for _ in range(runs)]

    dead = f"127.0.0.1:{_free_port()}"
    log("probe: dead address")
    dead_cli, dead_in = ours_cli(dead), ours_inproc(dead)
    res["dead_address"] = {
        "address": dead,
        "cli_wall_s": median([r["wall_s"] for r in dead_cli]),
        "run_s": median([w for r in dead_in if (w := work_s(r["stdout_tail"])) is not None]),
        "summary": _summary(dead_cli[-1]["stdout"]),
    }
    if ray_bin.exists():
        status = _timed([str(ray_bin), "status", "--address", dead], timeout=120)
        res["dead_address"]["ray_status_wall_s"] = status["wall_s"]
        res["dead_address"]["ray_status_rc"] = status["rc"]
    else:
        res["notes"].append("ray CLI not installed: ray status comparison skipped")
        return res
    try:
        with ray_head() as head:
            log(f"probe: live head at {head['address']}")
            os.environ.update(head["env"])  # the measured children see the head's RAY_TMPDIR
            ours, inproc = ours_cli(head["address"], head["env"]), ours_inproc(head["address"])
            peer = [
                _timed([str(ray_bin), "status", "--address", head["address"]], env=head["env"]) for _ in range(runs)
            ]
            res["live"] = {
                "probe_environment_cli_s": median([r["wall_s"] for r in ours]),
                "probe_environment_run_s": median([w for r in inproc if (w := work_s(r["stdout_tail"])) is not None]),
                "ray_status_cli_s": median([r["wall_s"] for r in peer]),
                "ray_status_rc": peer[-1]["rc"],
                "summary": _summary(ours[-1]["stdout"]),
            }
            res["live"]["ratio_ours_vs_ray_status"] = (
                res["live"]["probe_environment_cli_s"] / res["live"]["ray_status_cli_s"]
            )
    except (FileNotFoundError, RuntimeError) as exc:
        res["notes"].append(f"live Ray comparison skipped: {exc}")
    return res


def _summary(stdout: str) -> str:
    with contextlib.suppress(ValueError):
        obj = json.loads(stdout)
        return str(obj.get("summary") or obj.get("error", {}).get("message", ""))[:200]
    return stdout[:200]
