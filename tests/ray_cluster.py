"""Real local Ray clusters for tests: CPU-only, fake GPUs, loopback, isolated temp dirs, nothing left behind.

Fixtures (session-scoped so the whole test run shares ONE cluster):

* ``ray_cluster`` -> :class:`RayCluster`: a head on ``127.0.0.2`` (dashboard on) plus a worker node on
  ``127.0.0.3``, each with 8 fake GPUs and a ``fake_accel`` custom resource. ``ray_cluster.nodes`` lists what each
  node advertises, so tests compute expectations instead of hard-coding them. Do not add or remove nodes from
  it; start your own with :func:`start_ray_cluster` if you need another shape (costs ~5 s per node).
* ``ray_head`` is the same cluster (the head address is what most tools need).

Helpers:

* :func:`start_ray_cluster` -- context manager for a custom cluster (function scope; slower).
* :func:`hold_placement_group` -- a driver subprocess holding a placement group until the block exits.
* :func:`snapshot` -- the cluster's processes, the files under its temp dir and its job ids (drivers included), to
  prove a probe left nothing behind (compare two snapshots with ``==``).
* :func:`free_port`, :func:`dead_address`.

The fixtures are registered once, in ``tests/conftest.py``; just name ``ray_cluster`` as a test argument. Import
only the helpers (``from .ray_cluster import hold_placement_group, snapshot``) -- importing the fixture functions
into a test module would define a second session fixture there and start a second cluster. Mark tests
``@pytest.mark.ray``. The fixtures skip when ``ray`` is not installed.

Why it looks like this (measured, see /work/shared/ray-probing-notes.md): ``127.0.0.1`` is silently replaced by the
host IP, so nodes use 127.0.0.2/3; every port comes from a free-port picker because other test runs start clusters
on this machine at the same time; each node runs ``ray start --block`` in its own session, is stopped with SIGINT
and then its process group is killed -- never ``ray stop`` (it stops every Ray on the host).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GIB = 1024**3
HEAD_IP = "127.0.0.2"
WORKER_IP = "127.0.0.3"
START_TIMEOUT_S = 90.0


def _ray_bin() -> str | None:
    candidate = os.path.join(os.path.dirname(sys.executable), "ray")  # no realpath: the venv python is a symlink
    return candidate if os.path.exists(candidate) else shutil.which("ray")


def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None and _ray_bin() is not None


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_address() -> str:
    """A ``host:port`` on loopback where nothing listens (connections are refused at once)."""
    return f"{HEAD_IP}:{free_port()}"


@dataclass(frozen=True)
class NodeSpec:
    """What one fake node advertises. ``memory`` is Ray's logical memory resource, in bytes."""

    ip: str
    num_cpus: int = 64
    num_gpus: int = 8
    memory: int = 160 * GIB
    resources: Mapping[str, float] = field(default_factory=lambda: {"fake_accel": 8})


@dataclass
class RayCluster:
    """A running test cluster. ``env`` is the environment to run drivers against it (isolated temp dir)."""

    gcs_address: str
    dashboard_url: str | None
    tmp: Path
    nodes: tuple[NodeSpec, ...]
    env: dict[str, str]
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def ray_tmpdir(self) -> Path:
        """The ``--temp-dir`` of the nodes; holds ``ray_current_cluster`` and the session logs."""
        return self.tmp / "ray"

    @property
    def address_file(self) -> Path:
        return self.ray_tmpdir / "ray_current_cluster"

    def total(self, resource: str) -> float:
        """Sum of a resource over the nodes as configured (CPU, GPU, memory or a custom name)."""
        key = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}.get(resource)
        if key:
            return float(sum(getattr(n, key) for n in self.nodes))
        return float(sum(n.resources.get(resource, 0) for n in self.nodes))


def node_env(tmp: str | os.PathLike[str]) -> dict[str, str]:
    """Environment for nodes and test drivers: no inherited RAY_* (no RAY_ADDRESS leaking in), light, no auth."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        RAY_TMPDIR=str(tmp),
        TMPDIR=str(tmp),  # dashboards leave pymp-* dirs in TMPDIR: keep them inside our dir
        RAY_USAGE_STATS_ENABLED="0",
        RAY_AUTH_MODE="disabled",  # a stray ~/.ray/auth_token would otherwise switch token auth on
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",
        RAY_prestart_worker_first_driver="0",  # no idle ray::IDLE workers (80 MB each) when a driver connects
    )
    return env


def _start_node(args: list[str], tmp: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    log = tmp / f"{name}.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [_ray_bin() or "ray", "start", "--block", "--disable-usage-stats", *args],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop_node(proc)
            raise RuntimeError(f"ray node {name} failed to start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.1)
    return proc


def _stop_node(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGINT the ``--block`` leader (it tears its children down), then kill whatever is left in its session."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _node_args(spec: NodeSpec, tmp: Path) -> list[str]:
    return [
        f"--node-ip-address={spec.ip}",
        f"--num-cpus={spec.num_cpus}",
        f"--num-gpus={spec.num_gpus}",
        f"--memory={spec.memory}",
        "--object-store-memory=80000000",
        f"--resources={json.dumps(dict(spec.resources))}",
        f"--temp-dir={tmp}/ray",
        f"--dashboard-agent-listen-port={free_port()}",
    ]


def _wait_ready(cluster: RayCluster, deadline: float) -> None:
    """'Runtime started' is not 'node registered': wait for every node in the GCS, then for the dashboard."""
    code = textwrap.dedent(
        """
        import sys, time
        from ray._raylet import GcsClient
        gc = GcsClient(address=sys.argv[1])
        end = time.monotonic() + float(sys.argv[3])
        while time.monotonic() < end:
            alive = [n for n in gc.get_all_node_info(timeout=2).values() if n.state == 0]
            if len(alive) >= int(sys.argv[2]):
                # Registered is not yet visible: wait until the resource view (what `ray status` and the
                # autoscaler SDK report) counts every node's GPUs too.
                from ray.autoscaler.v2.sdk import get_cluster_status
                try:
                    gpus = get_cluster_status(sys.argv[1]).total_resources().get("GPU", 0)
                except Exception:
                    gpus = -1
                if gpus >= float(sys.argv[4]):
                    sys.exit(0)
            time.sleep(0.1)
        sys.exit(1)
        """
    )
    left = max(1.0, deadline - time.monotonic())
    env = dict(cluster.env, RAY_py_gcs_connect_timeout_s="5", RAY_gcs_rpc_server_connect_timeout_s="2")
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            cluster.gcs_address,
            str(len(cluster.nodes)),
            str(left),
            str(sum(n.num_gpus for n in cluster.nodes)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=left + 30,
    )
    if r.returncode:
        raise RuntimeError(f"nodes did not register in time: {r.stderr[-2000:]}")
    while cluster.dashboard_url and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(cluster.dashboard_url + "/api/v0/nodes?limit=10", timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # 401 under token auth still means "up"
        except OSError:
            time.sleep(0.2)


def wait_logs_served(cluster: RayCluster, timeout: float = 60.0) -> None:
    """Wait until the dashboard lists the log directory of every alive node (HTTP 200). A node's agent may still
    answer 500 for a while after the node registered and ran tasks; tests that read every node's logs wait for it
    here, so that what they measure is the tool, not the cluster finishing its start."""
    if not cluster.dashboard_url:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(cluster.dashboard_url + "/api/v0/nodes?limit=100", timeout=5) as r:
                rows = json.loads(r.read())["data"]["result"]["result"]
            ids = [n["node_id"] for n in rows if n.get("state") == "ALIVE"]
            for node_id in ids:
                url = f"{cluster.dashboard_url}/api/v0/logs?node_id={node_id}&glob=worker-*&timeout=5"
                urllib.request.urlopen(url, timeout=10).close()
            if len(ids) >= len(cluster.nodes):
                return
        except (OSError, ValueError, KeyError, TypeError):
            pass  # HTTPError (a 500 while an agent starts) is an OSError
        time.sleep(0.5)


@contextlib.contextmanager
def start_ray_cluster(
    nodes: tuple[NodeSpec, ...] = (NodeSpec(HEAD_IP), NodeSpec(WORKER_IP)),
    *,
    dashboard: bool = True,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[RayCluster]:
    """Start a real cluster (first node is the head) and tear it down completely on exit.

    ``extra_env`` is added to the nodes' environment, e.g. ``{"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ...}``.
    """
    if not ray_available():
        pytest.skip("ray is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: AF_UNIX socket paths must stay < 108 bytes
    env = node_env(tmp)
    env.update(extra_env or {})
    gcs_port = free_port()
    dash_port = free_port()
    cluster = RayCluster(
        gcs_address=f"{nodes[0].ip}:{gcs_port}",
        dashboard_url=f"http://{nodes[0].ip}:{dash_port}" if dashboard else None,
        tmp=tmp,
        nodes=tuple(nodes),
        env=env,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        head_args = [
            "--head",
            f"--port={gcs_port}",
            f"--ray-client-server-port={free_port()}",
            f"--include-dashboard={'true' if dashboard else 'false'}",
        ]
        if dashboard:
            head_args += [f"--dashboard-host={nodes[0].ip}", f"--dashboard-port={dash_port}"]
        cluster.procs.append(_start_node([*head_args, *_node_args(nodes[0], tmp)], tmp, "head", env))
        for i, spec in enumerate(nodes[1:], 1):
            args = [f"--address={cluster.gcs_address}", *_node_args(spec, tmp)]
            cluster.procs.append(_start_node(args, tmp, f"node{i}", env))
        _wait_ready(cluster, deadline)
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            _stop_node(proc)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """The shared 2-node cluster (head 127.0.0.2 + worker 127.0.0.3, 8 fake GPUs each). Read-only for tests."""
    with start_ray_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def ray_head(ray_cluster: RayCluster) -> RayCluster:
    """Alias of ``ray_cluster`` for tests that only need a live head address."""
    return ray_cluster


# --------------------------------------------------------------------------------------------------------
# Placement groups held by a driver subprocess
# --------------------------------------------------------------------------------------------------------

_PG_DRIVER = textwrap.dedent(
    """
    import json, sys
    import ray
    from ray.util.placement_group import placement_group
    spec = json.loads(sys.argv[2])
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False, namespace=spec.get("namespace"))
    opts = {"lifetime": "detached"} if spec.get("detached") else {}
    pg = placement_group(spec["bundles"], strategy=spec["strategy"], name=spec["name"], **opts)
    print("created", pg.id.hex(), flush=True)
    sys.stdin.read()  # hold the group until the test closes stdin
    """
)


@dataclass
class HeldPlacementGroup:
    name: str
    pg_id: str
    bundles: list[dict[str, float]]
    strategy: str


@contextlib.contextmanager
def hold_placement_group(
    cluster: RayCluster,
    bundles: list[dict[str, float]],
    *,
    strategy: str = "PACK",
    name: str = "test_pg",
    timeout: float = 60.0,
) -> Iterator[HeldPlacementGroup]:
    """Create a placement group from a driver subprocess and keep it until the block exits.

    The group may be pending (e.g. infeasible bundles); creation does not wait for it to be placed. On exit the
    driver ends, so Ray removes the group (it stays listed as REMOVED).
    """
    spec = {"bundles": bundles, "strategy": strategy, "name": name}
    proc = subprocess.Popen(
        [sys.executable, "-c", _PG_DRIVER, cluster.gcs_address, json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=cluster.env,
        start_new_session=True,
    )
    try:
        line = _readline(proc, timeout)
        if not line.startswith("created"):
            raise RuntimeError(f"placement-group driver failed (rc={proc.poll()}): {line!r}")
        yield HeldPlacementGroup(name=name, pg_id=line.split()[1], bundles=bundles, strategy=strategy)
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
    try:
        if not sel.select(timeout):
            return ""
        return proc.stdout.readline().strip()  # type: ignore[union-attr]
    finally:
        sel.close()


# --------------------------------------------------------------------------------------------------------
# "Nothing left behind" checks
# --------------------------------------------------------------------------------------------------------


def _session_id(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[3])  # state ppid pgrp session


def cluster_processes(cluster: RayCluster) -> set[tuple[int, str]]:
    """(pid, command) of every live process in the nodes' sessions (zombies excluded)."""
    sessions = {p.pid for p in cluster.procs}
    out: set[tuple[int, str]] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or _session_id(pid) not in sessions:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_bytes().decode(errors="replace")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if "\nState:\tZ" in status:
            continue
        out.add((int(pid), cmd[:200]))
    return out


#: Files the head itself rewrites on its own schedule (the metrics agent's service-discovery file, written as a
#: temporary then renamed): they come and go whether or not anything probed the cluster.
HEAD_OWN_FILES = ("tmp_prom_metrics_service_discovery.json",)


def temp_files(cluster: RayCluster) -> set[str]:
    """Relative paths of every file and directory under the cluster's temp dir (but the head's own rewrites)."""
    root = cluster.tmp
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            if name not in HEAD_OWN_FILES:
                out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def cluster_jobs(cluster: RayCluster) -> frozenset[str]:
    """Ids of every job the cluster knows (drivers included), via the dashboard; empty without a dashboard."""
    if not cluster.dashboard_url:
        return frozenset()
    with urllib.request.urlopen(cluster.dashboard_url + "/api/jobs/", timeout=10) as resp:
        jobs = json.load(resp)
    return frozenset(str(j.get("job_id") or j.get("submission_id")) for j in jobs)


@dataclass(frozen=True)
class Snapshot:
    processes: frozenset[tuple[int, str]]
    files: frozenset[str]
    jobs: frozenset[str]


def snapshot(cluster: RayCluster) -> Snapshot:
    """The cluster's processes, temp-dir entries and jobs, to diff before/after a probe."""
    return Snapshot(frozenset(cluster_processes(cluster)), frozenset(temp_files(cluster)), cluster_jobs(cluster))
