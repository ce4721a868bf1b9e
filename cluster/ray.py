"""Read-only probing of a live Ray cluster, shared by probe_environment, preflight, diagnose and choose_topology.

What it never does: ``ray.init`` (that registers a driver job for good, spawns idle workers and writes logs),
``ray start``/``ray stop``, KV writes. Ray is never imported in this process: the GCS is read by a short-lived
child process of the same Python (``ray._raylet.GcsClient``, the autoscaler SDK and ``GlobalState``, none of
which create a job or a file), run bounded (``core.process.run_bounded``: own session, group kill, output cap). A
dashboard address (``http://...``) is read over HTTP instead (``cluster.http_get``), which needs no Ray at all.
Every address goes through the address policy first (``cluster.ray_address``): the server's credentials go only to
an operator-configured cluster, a client-given one is probed only on loopback and without them. The whole probe
answers within ``timeout_s`` and the call's deadline, including dead or black-hole addresses (a TCP pre-check turns
"connection refused" into an answer within milliseconds).

Ray-side APIs used (tested with Ray 2.60): ``GcsClient.internal_kv_get`` / ``get_all_node_info`` (private),
``ray.autoscaler.v2.sdk.get_cluster_status`` (developer API), ``ray._private.state.GlobalState.placement_group_table``
(private). Dashboard endpoints: ``/api/version``, ``/api/v0/cluster_metadata``, ``/api/v0/nodes``,
``/api/v0/placement_groups``, ``/api/cluster_status``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import DEFAULT_LIST_CAP, ToolInputError, cap
from ..core.process import run_bounded
from .http_get import HttpAuthError, HttpError, http_get
from .ray_address import (
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_GCS_PORT,
    AddressFile,
    RayAccess,
    RayTarget,
    address_file_path,
    parse_endpoint,
    read_address_file,
)

#: XTuner connects with ``ray.init(address="auto")`` (xtuner/v1/train/cli/rl.py:45-46).
SRC_RAY_INIT = "xtuner/v1/train/cli/rl.py:45-46"
#: XTuner reuses a non-removed placement group with the same name, without checking its shape.
SRC_PG_REUSE = "xtuner/v1/rl/utils/ray_accelerator_worker.py:300-305"
#: Colocated runs name their group "train"; disaggregated runs use ``xtuner_rl_disagg_<exp>_{train,rollout}``.
SRC_PG_NAME_TRAIN = "xtuner/v1/rl/utils/ray_accelerator_worker.py:280"
SRC_PG_NAME_DISAGG = "xtuner/v1/train/rl_trainer.py:1917-1922"
XTUNER_PG_NAMES = ("train",)
XTUNER_PG_PREFIX = "xtuner_rl_disagg_"

#: Most bytes the GCS probe process may print (a JSON snapshot; thousands of nodes fit).
CHILD_OUTPUT_CAP = 16 << 20
#: Most bytes of one dashboard JSON answer.
DASHBOARD_JSON_CAP = 8 << 20
AUTH_HINT = (
    "The cluster uses Ray token authentication. Make the cluster's token available to this server and to the "
    "XTuner driver: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<token> (or RAY_AUTH_TOKEN_PATH=<file>, or put it "
    "in ~/.ray/auth_token), then probe again. For a dashboard address the token is sent as 'Authorization: Bearer'."
)
UNTRUSTED_AUTH_HINT = (
    "The cluster uses Ray token authentication, and this server offers its Ray credentials only to clusters the "
    "operator configured: ask the operator to start the server with --ray-address <this address> (or RAY_ADDRESS in "
    "the server's environment) and RAY_AUTH_TOKEN set, then probe again."
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
    trusted: bool = Field(
        default=False, description="A cluster the operator configured: the server's Ray credentials were offered"
    )
    auth_required: bool = Field(default=False, description="The cluster refused us for lack of a valid token")
    auth_hint: str = Field(default="", description="How to supply the token, when auth_required")
    timed_out: bool = Field(
        default=False, description="No answer before the probe's time ran out: the cluster's state is unknown"
    )
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


def resolve_address(
    explicit: str | None, access: RayAccess, client_environ: Mapping[str, str] | None = None
) -> AddressResolution:
    """Explicit argument, then ``RAY_ADDRESS``, then the local address file; ``auto`` means 'discover'.

    ``client_environ``: an environment the client gave (its ``RAY_ADDRESS``, and ``RAY_TMPDIR``/``TMPDIR`` for the
    address file, which is then read only inside the allowed roots); None: the server's own."""
    env = access.server_environ if client_environ is None else client_environ
    file_path = address_file_path(env)
    candidates: list[tuple[AddressSource, str | None]] = [
        ("explicit", explicit),
        ("RAY_ADDRESS", env.get("RAY_ADDRESS")),
    ]
    for source, value in candidates:
        if value is None or not value.strip() or value.strip().lower() in ("auto", "local"):
            continue
        kind, note = classify_address(value)
        return AddressResolution(address=value.strip(), source=source, kind=kind, address_file=file_path, note=note)
    found: AddressFile = (
        access.local_file if file_path == access.local_file.path else read_address_file(file_path, access.paths)
    )
    if found.address:
        return AddressResolution(
            address=found.address, source="address_file", kind="gcs", address_file=file_path, note=found.note
        )
    return AddressResolution(
        address=None,
        source="none",
        kind="none",
        address_file=file_path,
        note=f"no address given and RAY_ADDRESS unset; {found.note}",
    )


def tcp_check(ip: str, port: int, timeout: float) -> str | None:
    """None when something accepts TCP connections at the (already checked) ``ip``, else why not (refusals come
    back in ~1 ms)."""
    try:
        with socket.create_connection((ip, port), timeout=max(0.05, timeout)):
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


#: How a probe that ran out of time says so (the cluster may be slow or loaded, not gone).
NO_ANSWER = "no answer within"


def _run_child(target: RayTarget, budget: float, access: RayAccess) -> tuple[dict[str, Any] | None, str]:
    """Run the GCS probe in a bounded child of this Python; an untrusted cluster gets no credentials and a fresh
    empty HOME (removed afterwards)."""
    empty_home = None if target.trusted else tempfile.mkdtemp(prefix="xtuner-rl-mcp-ray-home-")
    try:
        env = access.child_environ(target, empty_home)
        env.update(
            RAY_py_gcs_connect_timeout_s=str(max(1, int(budget / 2))),
            RAY_gcs_rpc_server_connect_timeout_s="1",
            RAY_USAGE_STATS_ENABLED="0",
            PYTHONDONTWRITEBYTECODE="1",
        )
        argv = [sys.executable, "-c", _GCS_CHILD, target.gcs_connect(), str(max(1, int(budget)))]
        done = run_bounded(argv, timeout=budget, env=env, output_cap=CHILD_OUTPUT_CAP, limits=access.limits)
    finally:
        if empty_home is not None:
            shutil.rmtree(empty_home, ignore_errors=True)
    if done.error:
        return None, f"could not start the probe process: {done.error}"
    if done.cancelled or done.timed_out:
        access.limits.check()
        if b"probe: imported" not in done.stderr:
            return None, (
                f"{NO_ANSWER} {budget:.1f}s: the probe process was still importing ray (this machine is "
                "busy or its disk is cold); the cluster was not reached yet - raise timeout_s"
            )
        return None, (
            f"{NO_ANSWER} {budget:.1f}s: the address accepts TCP connections but the GCS did not reply "
            "(not a Ray GCS, a firewall, or an overloaded head)"
        )
    if done.truncated:
        return None, f"the probe process printed more than {CHILD_OUTPUT_CAP} bytes; not read"
    text = done.stdout.decode(errors="replace").strip()
    try:
        data = json.loads(text) if text else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        last = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return None, f"probe process failed: {last[:500]}"
    return data, ""


# --------------------------------------------------------------------------------------------------------
# Dashboard HTTP probe (no Ray needed)
# --------------------------------------------------------------------------------------------------------


def dashboard_json(target: RayTarget, path: str, timeout: float, access: RayAccess) -> Any:
    """One JSON answer of the dashboard's API (bounded, capped, credentials only when trusted)."""
    reply = http_get(
        target.http(),
        target.endpoint.base_path + path,
        timeout=timeout,
        max_bytes=DASHBOARD_JSON_CAP,
        bearer=access.bearer(target),
        limits=access.limits,
    )
    if reply.truncated:
        raise HttpError(f"answer larger than {DASHBOARD_JSON_CAP} bytes; not read")
    try:
        return json.loads(reply.body)
    except ValueError:
        raise HttpError("the answer is not JSON") from None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _dig(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]...`` where each level is a dict, else None (a dashboard answer may have any shape)."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _http_probe(snap: RaySnapshot, target: RayTarget, deadline: float, access: RayAccess) -> None:
    """Fill ``snap`` from the dashboard's REST API (used for http addresses)."""
    url = target.endpoint.display()
    snap.method = "dashboard_http"
    snap.dashboard_url = url
    if target.ip is None:
        snap.errors.append(f"dashboard {url} not reachable: {target.resolve_error}")
        return

    def left() -> float:
        return min(3.0, deadline - time.monotonic())

    try:
        version = dashboard_json(target, "/api/version", left(), access)
    except HttpAuthError as exc:
        snap.reachable = True
        snap.auth_required = True
        snap.auth_hint = AUTH_HINT if target.trusted else UNTRUSTED_AUTH_HINT
        snap.errors.append(f"dashboard refused the request: {exc}")
        return
    except HttpError as exc:
        snap.errors.append(f"dashboard {url} not reachable: {exc}")
        snap.timed_out = exc.timed_out
        return
    snap.reachable = True
    ray_version = _dig(version, "ray_version")
    snap.cluster_ray_version = ray_version if isinstance(ray_version, str) else None
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
            got[key] = dashboard_json(target, path, left(), access)
        except HttpError as exc:
            snap.errors.append(f"{path}: {exc}")
    try:
        _fill_from_dashboard(snap, got)
    except (TypeError, ValueError, AttributeError, KeyError):
        snap.errors.append("the dashboard's answers do not have the shape of Ray's API; partly read")


def _fill_from_dashboard(snap: RaySnapshot, got: dict[str, Any]) -> None:
    meta = _dig(got, "metadata", "data") or {}
    python_version, ray_version = meta.get("pythonVersion"), meta.get("rayVersion")
    snap.cluster_python_version = python_version if isinstance(python_version, str) else None
    snap.cluster_ray_version = (ray_version if isinstance(ray_version, str) else None) or snap.cluster_ray_version
    nodes_raw = _dig(got, "nodes", "data", "result", "result") or []
    alive = [n for n in nodes_raw if isinstance(n, dict) and n.get("state") == "ALIVE"]
    names = {name for n in alive for name in (n.get("resources_total") or {})}
    uncamel = {_camel(n): n for n in names}
    load = _dig(got, "status", "data", "clusterStatus", "loadMetricsReport") or {}
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
                node_id=str(n.get("node_id", "")),
                ip=str(n.get("node_ip", "")),
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
    pgs_raw = _dig(got, "pgs", "data", "result", "result") or []
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
            if isinstance(p, dict)
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


def _reported_dashboard(data: dict[str, Any]) -> str | None:
    """The dashboard URL the GCS keeps in its KV, when it is a plain ``host:port``."""
    raw = data.get("dashboard")
    endpoint = parse_endpoint(str(raw), require_port=True) if raw else None
    return f"http://{endpoint.hostport()}" if endpoint is not None and endpoint.kind == "gcs" else None


def _fill_from_gcs(snap: RaySnapshot, data: dict[str, Any]) -> None:
    meta = data.get("metadata") or {}
    snap.cluster_ray_version = meta.get("ray_version")
    snap.cluster_python_version = meta.get("python_version")
    snap.dashboard_url = _reported_dashboard(data)
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
    access: RayAccess,
    client_environ: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
) -> RaySnapshot:
    """Look at the Ray cluster read-only and answer within ``timeout_s`` (and the call's deadline).

    ``address`` (a client's argument) or else discovery (``resolve_address``) names the cluster; ``access`` decides
    whether it may be contacted and with which credentials -- a refused address raises ``ray_address_not_allowed``
    before anything is sent. ``client_environ``: the environment a client gave for discovery, if any."""
    start = time.monotonic()
    deadline = start + access.limits.remaining(max(0.5, timeout_s))
    resolution = resolve_address(address, access, client_environ)
    snap = RaySnapshot(
        ray_installed=ray_installed(),
        local_ray_version=local_ray_version(),
        local_python_version=platform.python_version(),
        resolution=resolution,
        method="none",
        reachable=False,
    )
    if resolution.kind in ("none", "ray_client", "invalid") or not resolution.address:
        snap.errors.append(resolution.note)
        snap.elapsed_s = round(time.monotonic() - start, 3)
        return snap
    what = "ray_address" if resolution.source == "explicit" else f"the address from {resolution.source}"
    target = access.decide(resolution.address, what=what)
    snap.trusted = target.trusted
    try:
        if resolution.kind == "dashboard":
            _http_probe(snap, target, deadline, access)
        else:
            _gcs_probe(snap, target, resolution, deadline, access)
    finally:
        compare_versions(snap)
        snap.elapsed_s = round(time.monotonic() - start, 3)
    return snap


def _gcs_probe(
    snap: RaySnapshot, target: RayTarget, resolution: AddressResolution, deadline: float, access: RayAccess
) -> None:
    host, port = target.endpoint.host, target.endpoint.port
    snap.gcs_address = target.endpoint.hostport()
    if target.ip is None:
        snap.errors.append(f"nothing accepts connections at GCS {snap.gcs_address} ({target.resolve_error})")
        return
    refused = tcp_check(target.ip, port, min(1.0, max(0.05, deadline - time.monotonic())))
    if refused:
        access.limits.check()
        snap.errors.append(f"nothing accepts connections at GCS {snap.gcs_address} ({refused})")
        if resolution.source == "address_file":
            snap.notes.append(
                f"{resolution.address_file} is stale: it names a cluster that is gone (killed without `ray stop`?)"
            )
        return
    fallback_url = f"http://{host}:{DEFAULT_DASHBOARD_PORT}"
    if not snap.ray_installed:
        snap.errors.append("ray is not installed in this server's Python, so the GCS cannot be read over gRPC")
        if _dashboard_fallback(snap, fallback_url, target, deadline, access):
            return
        snap.reachable = True  # something accepts connections at the GCS port
        snap.errors.append(
            f"something listens at {snap.gcs_address} but it cannot be read here; pass the dashboard URL "
            f"({fallback_url}) to read it over HTTP"
        )
        return
    data, err = _run_child(target, deadline - time.monotonic(), access)
    if data is None:
        snap.errors.append(err)
        snap.timed_out = err.startswith(NO_ANSWER)
        return
    snap.method = "gcs"
    snap.errors.extend(str(e)[:600] for e in (data.get("errors") or [])[:10])
    if data.get("auth_required"):
        snap.reachable = True
        snap.auth_required = True
        snap.auth_hint = AUTH_HINT if target.trusted else UNTRUSTED_AUTH_HINT
        return
    connected = any(k in data for k in ("metadata", "nodes", "usage"))
    snap.reachable = connected
    if connected:
        _fill_from_gcs(snap, data)
        return
    # The GCS answered nothing usable (e.g. a protobuf change across Ray versions): try the dashboard.
    _dashboard_fallback(snap, _reported_dashboard(data) or fallback_url, target, deadline, access)


def _dashboard_fallback(snap: RaySnapshot, url: str, gcs: RayTarget, deadline: float, access: RayAccess) -> bool:
    """Read the cluster over the dashboard's HTTP API when the GCS path cannot; True when that worked. The URL is
    trusted when the GCS is; otherwise it passes the address policy on its own (refused: noted, not contacted)."""
    if deadline - time.monotonic() < 0.3:
        return False
    try:
        target = access.decide(url, what="the dashboard address", vouched=gcs.trusted)
    except ToolInputError as exc:
        snap.errors.append(exc.message)
        return False
    if target.ip is None or tcp_check(target.ip, target.endpoint.port, min(1.0, deadline - time.monotonic())):
        return False
    snap.notes.append(f"read through the dashboard at {url} because the GCS could not be read from here")
    _http_probe(snap, target, deadline, access)
    return snap.reachable
