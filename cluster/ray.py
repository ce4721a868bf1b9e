"""Read-only probing of a live Ray cluster, shared by probe_environment, preflight, diagnose and choose_topology.

What it never does: ``ray.init`` (that registers a driver job for good, spawns idle workers and writes logs),
``ray start``/``ray stop``, KV writes. Ray is never imported in this process: the GCS is read by a short-lived
child process of the same Python (``ray._raylet.GcsClient``, the autoscaler SDK and ``GlobalState``, none of
which create a job or a file), killed at a hard deadline. A dashboard address (``http://...``) is read over plain
HTTP instead, which needs no Ray at all. Every path answers within ``timeout_s``, including dead or black-hole
addresses (a TCP pre-check turns "connection refused" into an answer within milliseconds).

Ray-side APIs used (tested with Ray 2.60): ``GcsClient.internal_kv_get`` / ``get_all_node_info`` (private),
``ray.autoscaler.v2.sdk.get_cluster_status`` (developer API), ``ray._private.state.GlobalState.placement_group_table``
(private). Dashboard endpoints: ``/api/version``, ``/api/v0/cluster_metadata``, ``/api/v0/nodes``,
``/api/v0/placement_groups``, ``/api/cluster_status``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import DEFAULT_LIST_CAP, cap

#: XTuner connects with ``ray.init(address="auto")`` (xtuner/v1/train/cli/rl.py:45-46).
SRC_RAY_INIT = "xtuner/v1/train/cli/rl.py:45-46"
#: XTuner reuses a non-removed placement group with the same name, without checking its shape.
SRC_PG_REUSE = "xtuner/v1/rl/utils/ray_accelerator_worker.py:300-305"
#: Colocated runs name their group "train"; disaggregated runs use ``xtuner_rl_disagg_<exp>_{train,rollout}``.
SRC_PG_NAME_TRAIN = "xtuner/v1/rl/utils/ray_accelerator_worker.py:280"
SRC_PG_NAME_DISAGG = "xtuner/v1/train/rl_trainer.py:1917-1922"
XTUNER_PG_NAMES = ("train",)
XTUNER_PG_PREFIX = "xtuner_rl_disagg_"

DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
AUTH_HINT = (
    "The cluster uses Ray token authentication. Make the cluster's token available to this server and to the "
    "XTuner driver: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<token> (or RAY_AUTH_TOKEN_PATH=<file>, or put it "
    "in ~/.ray/auth_token), then probe again. For a dashboard address the token is sent as 'Authorization: Bearer'."
)

AddressSource = Literal["explicit", "RAY_ADDRESS", "address_file", "none"]
AddressKind = Literal["gcs", "dashboard", "ray_client", "invalid", "none"]


class AddressResolution(BaseModel):
    """Which address would be probed, from where, and of what kind."""

    address: str | None = Field(description="As found (GCS host:port or dashboard URL)")
    source: AddressSource
    kind: AddressKind = Field(
        description="gcs: what ray.init needs; dashboard: http(s) URL, not GCS; ray_client: ray://, not probed"
    )
    address_file: str = Field(description="Where the local cluster's address file is looked up")
    note: str = Field(default="", description="Why this address, or what is wrong with it")


class RayNodeInfo(BaseModel):
    """One alive node: what it has and what is free (PG reservations count as used)."""

    node_id: str
    ip: str
    is_head: bool | None = None
    total: dict[str, float] = Field(description="Registered resources (CPU, GPU, memory bytes, custom)")
    available: dict[str, float] = Field(description="What is not used or reserved right now")


class PlacementGroupInfo(BaseModel):
    """A placement group that is not REMOVED."""

    pg_id: str
    name: str
    state: str = Field(description="PENDING, PREPARED, CREATED or RESCHEDULING")
    scheduling_state: str | None = Field(
        default=None, description="INFEASIBLE (never fits), NO_RESOURCES (waiting), FINISHED..."
    )
    strategy: str | None = None
    bundles: list[dict[str, float]] = Field(default_factory=list)
    xtuner_name: bool = Field(description="Named like a group XTuner creates and reuses ('train', ...)")


class RaySnapshot(BaseModel):
    """A read-only look at a Ray cluster."""

    ray_installed: bool = Field(description="'ray' importable in this server's Python")
    local_ray_version: str | None = Field(description="Ray version installed here (the client side)")
    local_python_version: str = Field(description="Python version of this server")
    resolution: AddressResolution
    method: Literal["gcs", "dashboard_http", "none"] = Field(description="How the cluster was read")
    reachable: bool = Field(description="The cluster answered (even if it refused auth)")
    auth_required: bool = Field(default=False, description="The cluster refused us for lack of a valid token")
    auth_hint: str = Field(default="", description="How to supply the token, when auth_required")
    gcs_address: str | None = None
    dashboard_url: str | None = None
    cluster_ray_version: str | None = None
    cluster_python_version: str | None = None
    version_mismatch: list[str] = Field(default_factory=list, description="Client/cluster Ray or Python differences")
    nodes: list[RayNodeInfo] = Field(default_factory=list, description="Alive nodes")
    nodes_omitted: int = 0
    total: dict[str, float] = Field(default_factory=dict, description="Cluster totals per resource")
    available: dict[str, float] = Field(
        default_factory=dict, description="Cluster-wide free resources (what XTuner checks)"
    )
    placement_groups: list[PlacementGroupInfo] = Field(default_factory=list, description="Non-removed groups")
    placement_groups_omitted: int = 0
    errors: list[str] = Field(default_factory=list, description="What failed, in the order it was tried")
    notes: list[str] = Field(default_factory=list, description="Caveats about the data (lag, partial reads)")
    elapsed_s: float = 0.0


# --------------------------------------------------------------------------------------------------------
# Local installation and address discovery
# --------------------------------------------------------------------------------------------------------


def ray_installed() -> bool:
    """Whether ``ray`` is importable here, without importing it."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


def local_ray_version() -> str | None:
    try:
        return importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return None


def address_file_path(environ: Mapping[str, str]) -> str:
    """Where ``ray start`` leaves the address and ``ray.init(address="auto")`` looks for it (Linux rules)."""
    base = environ.get("RAY_TMPDIR") or (environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
    return os.path.join(base or "/tmp", "ray", "ray_current_cluster")


def _read_address_file(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096).strip()
    except OSError:
        return None
    return text or None


_HOSTPORT = re.compile(r"^\[?(?P<host>[A-Za-z0-9_.:\-]+?)\]?(?::(?P<port>\d{1,5}))?$")


def classify_address(raw: str) -> tuple[AddressKind, str]:
    """Tell a GCS ``host:port`` from a dashboard URL or a Ray Client address; return (kind, note)."""
    text = raw.strip()
    low = text.lower()
    if low.startswith(("http://", "https://")):
        return "dashboard", (
            "This is a dashboard / job-submission URL, not a GCS address: ray.init rejects http addresses, so a "
            "driver launched with RAY_ADDRESS set to it fails. It is read over the dashboard's HTTP API instead."
        )
    if low.startswith("ray://"):
        return "ray_client", (
            "ray:// is a Ray Client address; this probe does not open Ray Client sessions. Pass the GCS address "
            f"(<head>:{DEFAULT_GCS_PORT}) or the dashboard URL (http://<head>:8265)."
        )
    m = _HOSTPORT.match(text)
    if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
        return "invalid", f"{text!r} is neither host:port nor an http(s):// dashboard URL"
    return "gcs", "GCS address (what ray.init connects to)"


def resolve_address(explicit: str | None, environ: Mapping[str, str]) -> AddressResolution:
    """Explicit argument, then ``RAY_ADDRESS``, then the local address file; ``auto`` means 'discover'."""
    file_path = address_file_path(environ)
    candidates: list[tuple[AddressSource, str | None]] = [
        ("explicit", explicit),
        ("RAY_ADDRESS", environ.get("RAY_ADDRESS")),
    ]
    for source, value in candidates:
        if value is None or not value.strip() or value.strip().lower() in ("auto", "local"):
            continue
        kind, note = classify_address(value)
        return AddressResolution(address=value.strip(), source=source, kind=kind, address_file=file_path, note=note)
    found = _read_address_file(file_path)
    if found:
        kind, note = classify_address(found)
        return AddressResolution(
            address=found, source="address_file", kind=kind, address_file=file_path, note=f"from {file_path}; {note}"
        )
    return AddressResolution(
        address=None,
        source="none",
        kind="none",
        address_file=file_path,
        note=f"no address given, RAY_ADDRESS unset and no {file_path}: no local cluster started with `ray start`",
    )


def split_hostport(address: str, default_port: int = DEFAULT_GCS_PORT) -> tuple[str, int]:
    m = _HOSTPORT.match(address.strip())
    if not m:
        raise ValueError(address)
    return m.group("host"), int(m.group("port") or default_port)


def tcp_check(host: str, port: int, timeout: float) -> str | None:
    """None when something accepts TCP connections there, else why not (refusals come back in ~1 ms)."""
    try:
        with socket.create_connection((host, port), timeout=max(0.05, timeout)):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------------------------------------
# GCS probe (child process)
# --------------------------------------------------------------------------------------------------------

# Runs in a fresh interpreter; prints one JSON object. Every step is guarded so partial data still comes back.
_GCS_CHILD = r"""
import json, sys
out = {"errors": [], "auth_required": False}
def fail(step, exc):
    text = f"{step}: {type(exc).__name__}: {exc}"
    out["errors"].append(text[:600])
    low = text.lower()
    if type(exc).__name__ == "AuthenticationError" or "invalidauthtoken" in low or "authentication token" in low:
        out["auth_required"] = True
def emit():
    sys.stdout.write(json.dumps(out)); sys.stdout.flush()
addr, t = sys.argv[1], int(sys.argv[2])
try:
    from ray._raylet import GcsClient
    sys.stderr.write("probe: imported\n"); sys.stderr.flush()
    gc = GcsClient(address=addr)
except BaseException as exc:
    fail("connect", exc); emit(); sys.exit(0)
try:
    raw = gc.internal_kv_get(b"CLUSTER_METADATA", namespace=b"cluster", timeout=t)
    out["metadata"] = json.loads(raw) if raw else {}
except BaseException as exc:
    fail("cluster metadata", exc)
    if out["auth_required"]:
        emit(); sys.exit(0)
try:
    raw = gc.internal_kv_get(b"dashboard", namespace=b"dashboard", timeout=t)
    out["dashboard"] = raw.decode() if raw else None
except BaseException as exc:
    fail("dashboard address", exc)
try:
    nodes = []
    for node in gc.get_all_node_info(timeout=t).values():
        if node.state != 0:
            continue
        nodes.append({"node_id": node.node_id.hex(), "ip": node.node_manager_address,
                      "is_head": bool(node.is_head_node), "total": dict(node.resources_total)})
    out["nodes"] = nodes
except BaseException as exc:
    fail("node table", exc)
try:
    from ray.autoscaler.v2.sdk import get_cluster_status
    st = get_cluster_status(addr, timeout=t)
    out["usage"] = {n.node_id: {u.resource_name: [u.total, u.used] for u in n.resource_usage.usage}
                    for n in list(st.active_nodes) + list(st.idle_nodes)}
    out["cluster_usage"] = {u.resource_name: [u.total, u.used] for u in st.cluster_resource_usage}
except BaseException as exc:
    fail("resource usage", exc)
try:
    from ray._private.state import GlobalState
    from ray._raylet import GcsClientOptions
    gs = GlobalState()
    gs._initialize_global_state(GcsClientOptions.create(addr, None, allow_cluster_id_nil=True,
                                                        fetch_cluster_id_if_nil=False))
    pgs = []
    for pg in gs.placement_group_table().values():
        pgs.append({"pg_id": pg.get("placement_group_id"), "name": pg.get("name") or "", "state": pg.get("state"),
                    "strategy": pg.get("strategy"),
                    "scheduling_state": (pg.get("stats") or {}).get("scheduling_state"),
                    "bundles": [dict(b) for _, b in sorted((pg.get("bundles") or {}).items())]})
    out["placement_groups"] = pgs
except BaseException as exc:
    fail("placement groups", exc)
emit()
"""


def _child_env(environ: Mapping[str, str], budget: float) -> dict[str, str]:
    """The server's env, minus address overrides Ray clients prefer over arguments, plus connect-time bounds."""
    env = {k: v for k, v in environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    connect = str(max(1, int(budget / 2)))
    env.update(
        RAY_py_gcs_connect_timeout_s=connect,
        RAY_gcs_rpc_server_connect_timeout_s="1",
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONDONTWRITEBYTECODE="1",
    )
    if (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")) and not env.get("RAY_AUTH_MODE"):
        env["RAY_AUTH_MODE"] = "token"
    return env


def _run_child(code: str, args: list[str], env: dict[str, str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Run ``code`` in a child of this Python in its own session; kill the whole session at the deadline."""
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
            start_new_session=True,
        )
    except OSError as exc:
        return None, f"could not start the probe process: {exc}"
    try:
        stdout, stderr = proc.communicate(timeout=max(0.1, timeout))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        stderr = b""
        with contextlib.suppress(subprocess.TimeoutExpired):
            stderr = proc.communicate(timeout=2)[1] or b""
        if b"probe: imported" not in stderr:
            return None, (
                f"no answer within {timeout:.1f}s: the probe process was still importing ray (this machine is "
                "busy or its disk is cold); the cluster was not reached yet - raise timeout_s"
            )
        return None, (
            f"no answer within {timeout:.1f}s: the address accepts TCP connections but the GCS did not reply "
            "(not a Ray GCS, a firewall, or an overloaded head)"
        )
    text = stdout.decode(errors="replace").strip()
    try:
        data = json.loads(text) if text else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        last = (stderr.decode(errors="replace").strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return None, f"probe process failed: {last[:500]}"
    return data, ""


# --------------------------------------------------------------------------------------------------------
# Dashboard HTTP probe (no Ray needed)
# --------------------------------------------------------------------------------------------------------


class _HttpAuthError(Exception):
    pass


def _http_json(base: str, path: str, timeout: float, token: str | None) -> Any:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(base.rstrip("/") + path, headers={"Accept": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=max(0.1, timeout)) as resp:
            body = resp.read(8 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise _HttpAuthError(f"HTTP {exc.code} {exc.reason} on {path}") from None
        raise
    return json.loads(body)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _http_probe(snap: RaySnapshot, url: str, deadline: float, token: str | None) -> None:
    """Fill ``snap`` from the dashboard's REST API (used for http addresses)."""
    snap.method = "dashboard_http"
    snap.dashboard_url = url

    def left() -> float:
        return min(3.0, deadline - time.monotonic())

    try:
        if left() <= 0:
            raise TimeoutError("time budget spent")
        version = _http_json(url, "/api/version", left(), token)
    except _HttpAuthError as exc:
        snap.reachable = True
        snap.auth_required = True
        snap.auth_hint = AUTH_HINT
        snap.errors.append(f"dashboard refused the request: {exc}")
        return
    except Exception as exc:  # URLError, timeout, bad JSON: the dashboard is not usable
        snap.errors.append(f"dashboard {url} not reachable: {type(exc).__name__}: {exc}")
        return
    snap.reachable = True
    snap.cluster_ray_version = version.get("ray_version") if isinstance(version, dict) else None
    steps = {
        "metadata": "/api/v0/cluster_metadata",
        "nodes": "/api/v0/nodes?detail=1&limit=1000",
        "pgs": "/api/v0/placement_groups?detail=1&limit=1000",
        "status": "/api/cluster_status",
    }
    got: dict[str, Any] = {}
    for key, path in steps.items():
        if left() <= 0:
            snap.errors.append(f"{path}: time budget spent")
            continue
        try:
            got[key] = _http_json(url, path, left(), token)
        except Exception as exc:
            snap.errors.append(f"{path}: {type(exc).__name__}: {exc}")
    meta = (got.get("metadata") or {}).get("data") or {}
    snap.cluster_python_version = meta.get("pythonVersion")
    snap.cluster_ray_version = meta.get("rayVersion") or snap.cluster_ray_version
    nodes_raw = (((got.get("nodes") or {}).get("data") or {}).get("result") or {}).get("result") or []
    alive = [n for n in nodes_raw if n.get("state") == "ALIVE"]
    names = {name for n in alive for name in (n.get("resources_total") or {})}
    uncamel = {_camel(n): n for n in names}
    status = ((got.get("status") or {}).get("data") or {}).get("clusterStatus") or {}
    load = status.get("loadMetricsReport") or {}
    usage = {uncamel.get(k, _snake(k)): v for k, v in (load.get("usage") or {}).items()}
    by_node = {}
    for node_id, res in (load.get("usageByNode") or {}).items():
        by_node[node_id.removeprefix("node").lower()] = {uncamel.get(k, _snake(k)): v for k, v in res.items()}
    nodes: list[RayNodeInfo] = []
    for n in alive:
        total = _public(n.get("resources_total") or {})
        used_pairs = by_node.get(str(n.get("node_id", "")).lower(), {})
        available = {k: float(total[k] - used_pairs[k][0]) for k in total if k in used_pairs}
        nodes.append(
            RayNodeInfo(
                node_id=n.get("node_id", ""),
                ip=n.get("node_ip", ""),
                is_head=n.get("is_head_node"),
                total=total,
                available=available,
            )
        )
    _set_nodes(snap, nodes)
    snap.total = _sum_totals(nodes)
    if usage:
        snap.available = _public(
            {k: float(v[1]) - float(v[0]) for k, v in usage.items() if isinstance(v, list) and len(v) == 2}
        )
        snap.notes.append("dashboard usage figures come from the autoscaler report, which can lag up to ~5 s")
    else:
        snap.notes.append("the dashboard gave no usage report: available resources unknown")
    pgs_raw = (((got.get("pgs") or {}).get("data") or {}).get("result") or {}).get("result") or []
    _set_pgs(
        snap,
        [
            {
                "pg_id": p.get("placement_group_id", ""),
                "name": p.get("name") or "",
                "state": p.get("state"),
                "strategy": p.get("strategy"),
                "scheduling_state": (p.get("stats") or {}).get("scheduling_state"),
                "bundles": [b.get("unit_resources") or {} for b in p.get("bundles") or []],
            }
            for p in pgs_raw
        ],
    )


# --------------------------------------------------------------------------------------------------------
# Assembling the snapshot
# --------------------------------------------------------------------------------------------------------


def _public(resources: Mapping[str, float]) -> dict[str, float]:
    """Drop Ray's per-node marker resources ('node:<ip>', 'node:__internal_head__')."""
    return {k: float(v) for k, v in resources.items() if not k.startswith("node:")}


def _sum_totals(nodes: list[RayNodeInfo]) -> dict[str, float]:
    out: dict[str, float] = {}
    for n in nodes:
        for k, v in n.total.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _set_nodes(snap: RaySnapshot, nodes: list[RayNodeInfo]) -> None:
    nodes.sort(key=lambda n: (not n.is_head, n.ip, n.node_id))
    snap.nodes, snap.nodes_omitted = cap(nodes, DEFAULT_LIST_CAP)


def _is_xtuner_name(name: str) -> bool:
    return name in XTUNER_PG_NAMES or name.startswith(XTUNER_PG_PREFIX)


def _set_pgs(snap: RaySnapshot, raw: list[dict[str, Any]]) -> None:
    pgs = [
        PlacementGroupInfo(
            pg_id=str(p.get("pg_id") or ""),
            name=str(p.get("name") or ""),
            state=str(p.get("state") or "UNKNOWN"),
            scheduling_state=p.get("scheduling_state"),
            strategy=p.get("strategy"),
            bundles=[{k: float(v) for k, v in b.items()} for b in p.get("bundles") or []],
            xtuner_name=_is_xtuner_name(str(p.get("name") or "")),
        )
        for p in raw
        if p.get("state") not in ("REMOVED", "REMOVING")
    ]
    # XTuner-named and pending groups first: they are the ones that matter.
    pgs.sort(key=lambda p: (not p.xtuner_name, p.state == "CREATED", p.name))
    snap.placement_groups, snap.placement_groups_omitted = cap(pgs, DEFAULT_LIST_CAP)


def _fill_from_gcs(snap: RaySnapshot, data: dict[str, Any]) -> None:
    meta = data.get("metadata") or {}
    snap.cluster_ray_version = meta.get("ray_version")
    snap.cluster_python_version = meta.get("python_version")
    if data.get("dashboard"):
        snap.dashboard_url = "http://" + str(data["dashboard"])
    usage: dict[str, dict[str, list[float]]] = data.get("usage") or {}
    nodes: list[RayNodeInfo] = []
    for n in data.get("nodes") or []:
        total = _public(n.get("total") or {})
        used = usage.get(n.get("node_id", ""), {})
        available = {k: float(total[k] - used[k][1]) for k in total if k in used}
        nodes.append(
            RayNodeInfo(
                node_id=n["node_id"], ip=n.get("ip", ""), is_head=n.get("is_head"), total=total, available=available
            )
        )
    _set_nodes(snap, nodes)
    cluster_usage: dict[str, list[float]] = data.get("cluster_usage") or {}
    snap.total = _sum_totals(nodes) or _public({k: v[0] for k, v in cluster_usage.items()})
    if cluster_usage:
        snap.available = _public({k: float(v[0]) - float(v[1]) for k, v in cluster_usage.items()})
    else:
        snap.notes.append("resource usage could not be read: available resources unknown")
    if "placement_groups" in data:
        _set_pgs(snap, data["placement_groups"])


def compare_versions(snap: RaySnapshot) -> None:
    """Fill ``version_mismatch`` from the client and cluster Ray/Python versions (ray.init refuses a mismatch)."""
    if snap.cluster_ray_version and snap.local_ray_version and snap.cluster_ray_version != snap.local_ray_version:
        snap.version_mismatch.append(
            f"Ray: cluster {snap.cluster_ray_version}, this environment {snap.local_ray_version}"
        )
    if snap.cluster_python_version and snap.cluster_python_version != snap.local_python_version:
        snap.version_mismatch.append(
            f"Python: cluster {snap.cluster_python_version}, this environment {snap.local_python_version}"
        )


def probe_cluster(
    address: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
    child_environ: Mapping[str, str] | None = None,
) -> RaySnapshot:
    """Look at the Ray cluster read-only and answer within ``timeout_s``.

    ``environ`` decides address discovery (``RAY_ADDRESS``, ``RAY_TMPDIR``/``TMPDIR``); ``child_environ`` (default:
    this process's environment) is what the probe process runs with, so Ray's own token variables apply.
    """
    start = time.monotonic()
    deadline = start + max(0.5, timeout_s)
    env = dict(os.environ) if environ is None else dict(environ)
    run_env = dict(os.environ) if child_environ is None else dict(child_environ)
    resolution = resolve_address(address, env)
    snap = RaySnapshot(
        ray_installed=ray_installed(),
        local_ray_version=local_ray_version(),
        local_python_version=platform.python_version(),
        resolution=resolution,
        method="none",
        reachable=False,
    )
    try:
        _probe(snap, resolution, deadline, timeout_s, run_env)
    finally:
        compare_versions(snap)
        snap.elapsed_s = round(time.monotonic() - start, 3)
    return snap


def _probe(
    snap: RaySnapshot, resolution: AddressResolution, deadline: float, timeout_s: float, run_env: dict[str, str]
) -> None:
    if resolution.kind in ("none", "ray_client", "invalid") or not resolution.address:
        snap.errors.append(resolution.note)
        return
    token = run_env.get("RAY_AUTH_TOKEN")
    if resolution.kind == "dashboard":
        _http_probe(snap, resolution.address, deadline, token)
        return
    host, port = split_hostport(resolution.address)
    snap.gcs_address = f"{host}:{port}"
    refused = tcp_check(host, port, min(1.0, max(0.05, deadline - time.monotonic())))
    if refused:
        snap.errors.append(f"nothing accepts connections at GCS {snap.gcs_address} ({refused})")
        if resolution.source == "address_file":
            snap.notes.append(
                f"{resolution.address_file} is stale: it names a cluster that is gone (killed without `ray stop`?)"
            )
        return
    if not snap.ray_installed:
        snap.errors.append("ray is not installed in this server's Python, so the GCS cannot be read over gRPC")
        if _dashboard_fallback(snap, f"http://{host}:{DEFAULT_DASHBOARD_PORT}", deadline, token):
            return
        snap.reachable = True  # something accepts connections at the GCS port
        snap.errors.append(
            f"something listens at {snap.gcs_address} but it cannot be read here; pass the dashboard URL "
            f"(http://{host}:{DEFAULT_DASHBOARD_PORT}) to read it over HTTP"
        )
        return
    budget = deadline - time.monotonic()
    data, err = _run_child(
        _GCS_CHILD, [snap.gcs_address, str(max(1, int(budget)))], _child_env(run_env, budget), budget
    )
    if data is None:
        snap.errors.append(err)
        return
    snap.method = "gcs"
    snap.errors.extend(data.get("errors") or [])
    if data.get("auth_required"):
        snap.reachable = True
        snap.auth_required = True
        snap.auth_hint = AUTH_HINT
        return
    connected = any(k in data for k in ("metadata", "nodes", "usage"))
    snap.reachable = connected
    if connected:
        _fill_from_gcs(snap, data)
        return
    # The GCS answered nothing usable (e.g. a protobuf change across Ray versions): try the dashboard.
    url = "http://" + data["dashboard"] if data.get("dashboard") else f"http://{host}:{DEFAULT_DASHBOARD_PORT}"
    _dashboard_fallback(snap, url, deadline, token)


def _dashboard_fallback(snap: RaySnapshot, url: str, deadline: float, token: str | None) -> bool:
    """Read the cluster over the dashboard's HTTP API when the GCS path cannot; True when that worked."""
    left = deadline - time.monotonic()
    if left < 0.3:
        return False
    try:
        host, port = split_hostport(url.split("://", 1)[1].split("/", 1)[0], DEFAULT_DASHBOARD_PORT)
    except ValueError:
        return False
    if tcp_check(host, port, min(1.0, left)) is not None:
        return False
    snap.notes.append(f"read through the dashboard at {url} because the GCS could not be read from here")
    _http_probe(snap, url, deadline, token)
    return snap.reachable
