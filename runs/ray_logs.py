"""Collect a run's worker logs from every node of a Ray cluster, read-only, through Ray's own log API.

The dashboard serves each node's Ray log directory over HTTP: ``GET /api/v0/logs?node_id=..&glob=..`` lists files
(grouped by kind) and ``GET /api/v0/logs/file?node_id=..&filename=..&lines=N`` returns the last N lines -- the
endpoints ``ray.util.state.list_logs`` / ``get_log`` call. The bounded client ``cluster.http_get`` is used, so nothing
here imports Ray, creates a driver job or writes a file. The dashboard URL of a GCS address is read by
``cluster.ray.probe_cluster`` (a child process with a hard deadline). XTuner's actors log to stderr as well as to
``rank_<r>.log`` (xtuner/v1/utils/logger.py:81), so their messages land in the Ray worker files ``worker-*.err`` /
``worker-*.out`` on the node that ran them. The whole collection has one deadline (and the call's), every request
is capped, and log text is read only from a cluster the operator configured (``cluster.ray_address``): a
client-given loopback address is probed for its shape, but its answers never reach the diagnosis as log lines.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass, field

from ..cluster.http_get import HttpError, HttpReply, http_get
from ..cluster.ray import probe_cluster
from ..cluster.ray_address import RayAccess, RayTarget
from ..core import ToolInputError

MAX_FILES_PER_NODE = 40
MAX_NODES = 64
TAIL_LINES = 2000
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 3 << 20
MAX_LISTING_BYTES = 8 << 20
DEFAULT_GLOB = "worker-*"
UNTRUSTED_LOGS = (
    "worker logs are read only from a cluster the operator configured (--ray-address or RAY_ADDRESS in the "
    "server's environment, or the server's own local cluster); {address} is not one, so its logs were not read"
)


@dataclass
class RemoteLog:
    node_ip: str
    node_id: str
    filename: str
    text: str


@dataclass
class Collected:
    address: str
    dashboard_url: str | None = None
    nodes: int = 0
    logs: list[RemoteLog] = field(default_factory=list)
    omitted: int = 0
    bytes: int = 0
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


def _files(listing: object) -> list[str]:
    """Worker stdout/stderr files of a ``/api/v0/logs`` answer (``{"data": {"result": {kind: [names]}}}``)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    groups = data.get("result") if isinstance(data, dict) else None
    if not isinstance(groups, dict):
        return []
    names = [n for kind in groups.values() if isinstance(kind, list) for n in kind if isinstance(n, str)]
    picked = [n for n in names if n.rsplit("/", 1)[-1].startswith("worker-") and n.endswith((".err", ".out"))]
    return sorted(set(picked), key=lambda n: (not n.endswith(".err"), n))


def collect(
    address: str,
    *,
    access: RayAccess,
    timeout_s: float = 20.0,
    glob: str = DEFAULT_GLOB,
    tail_lines: int = TAIL_LINES,
) -> Collected:
    """The tails of every node's worker logs, within ``timeout_s``, the call's deadline and the byte caps.

    A refused ``address`` raises ``ray_address_not_allowed`` before anything is sent."""
    start = time.monotonic()
    deadline = start + access.limits.remaining(max(1.0, timeout_s))
    out = Collected(address=address)
    snap = probe_cluster(address, access=access, timeout_s=min(10.0, max(1.0, timeout_s / 2)))
    out.errors.extend(snap.errors[:5])
    out.dashboard_url = snap.dashboard_url
    if not snap.reachable or not out.dashboard_url:
        if not out.dashboard_url:
            out.errors.append("no dashboard URL: Ray's log API needs the dashboard (ray start --include-dashboard)")
        out.elapsed_s = round(time.monotonic() - start, 3)
        return out
    try:
        dashboard = access.decide(out.dashboard_url, what="the dashboard address", vouched=snap.trusted)
    except ToolInputError as exc:
        dashboard = None
        out.errors.append(exc.message)
    if dashboard is not None and not dashboard.trusted:
        out.errors.append(UNTRUSTED_LOGS.format(address=address))
    elif dashboard is not None and dashboard.ip is not None:
        nodes = snap.nodes[:MAX_NODES]
        out.nodes = len(nodes)
        for node in nodes:
            if time.monotonic() >= deadline:
                access.limits.check()
                out.errors.append("time budget spent before every node was read")
                break
            _node_logs(out, dashboard, access, node.node_id, node.ip, glob, tail_lines, deadline)
    out.elapsed_s = round(time.monotonic() - start, 3)
    return out


def _get(
    dashboard: RayTarget, access: RayAccess, path: str, query: dict[str, object], timeout: float, cap: int
) -> HttpReply:
    return http_get(
        dashboard.http(),
        f"{dashboard.endpoint.base_path}{path}?{urllib.parse.urlencode(query)}",
        timeout=timeout,
        max_bytes=cap,
        bearer=access.bearer(dashboard),
        limits=access.limits,
    )


def _node_logs(
    out: Collected,
    dashboard: RayTarget,
    access: RayAccess,
    node_id: str,
    ip: str,
    glob: str,
    tail: int,
    deadline: float,
) -> None:
    query: dict[str, object] = {"node_id": node_id, "glob": glob, "timeout": 5}
    try:
        reply = _get(dashboard, access, "/api/v0/logs", query, min(5.0, deadline - time.monotonic()), MAX_LISTING_BYTES)
        if reply.truncated:
            raise HttpError(f"listing larger than {MAX_LISTING_BYTES} bytes")
        listing = json.loads(reply.body)
    except HttpError as exc:
        out.errors.append(f"{ip}: listing logs failed: {exc}")
        return
    except ValueError:
        out.errors.append(f"{ip}: listing logs failed: the answer is not JSON")
        return
    names = _files(listing)
    out.omitted += max(0, len(names) - MAX_FILES_PER_NODE)
    for name in names[:MAX_FILES_PER_NODE]:
        left = deadline - time.monotonic()
        if left <= 0.2 or out.bytes >= MAX_TOTAL_BYTES:
            out.omitted += 1
            continue
        query = {"node_id": node_id, "filename": name, "lines": tail, "timeout": 5}
        try:
            data = _get(dashboard, access, "/api/v0/logs/file", query, min(5.0, left), MAX_FILE_BYTES).body
        except HttpError as exc:
            out.errors.append(f"{ip}:{name}: {exc}")
            continue
        if not data.strip():
            continue
        data = data[: max(0, MAX_TOTAL_BYTES - out.bytes)]
        out.bytes += len(data)
        out.logs.append(RemoteLog(ip, node_id, name, data.decode("utf-8", "replace")))
