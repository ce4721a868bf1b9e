"""Collect a run's worker logs from every node of a Ray cluster, read-only, through Ray's own log API.

The dashboard serves each node's Ray log directory over HTTP: ``GET /api/v0/logs?node_id=..&glob=..`` lists files
(grouped by kind) and ``GET /api/v0/logs/file?node_id=..&filename=..&lines=N`` returns the last N lines -- the
endpoints ``ray.util.state.list_logs`` / ``get_log`` call. Plain ``urllib`` is used, so nothing here imports Ray,
creates a driver job or writes a file. The dashboard URL of a GCS address is read by ``cluster.ray.probe_cluster``
(a child process with a hard deadline). XTuner's actors log to stderr as well as to ``rank_<r>.log``
(xtuner/v1/utils/logger.py:81), so their messages land in the Ray worker files ``worker-*.err`` / ``worker-*.out``
on the node that ran them. Every request has a timeout and the whole collection has one deadline.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..cluster.ray import probe_cluster

MAX_FILES_PER_NODE = 40
MAX_NODES = 64
TAIL_LINES = 2000
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 3 << 20
DEFAULT_GLOB = "worker-*"


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


def _get(url: str, timeout: float, token: str | None, limit: int) -> bytes:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=max(0.2, timeout)) as resp:
        return resp.read(limit)


def _files(listing: object) -> list[str]:
    """Worker stdout/stderr files of a ``/api/v0/logs`` answer (``{"data": {"result": {kind: [names]}}}``)."""
    if not isinstance(listing, dict):
        return []
    groups = ((listing.get("data") or {}).get("result")) or {}
    names = [n for kind in groups.values() if isinstance(kind, list) for n in kind if isinstance(n, str)]
    picked = [n for n in names if n.rsplit("/", 1)[-1].startswith("worker-") and n.endswith((".err", ".out"))]
    return sorted(set(picked), key=lambda n: (not n.endswith(".err"), n))


def collect(
    address: str,
    *,
    timeout_s: float = 20.0,
    environ: Mapping[str, str] | None = None,
    glob: str = DEFAULT_GLOB,
    tail_lines: int = TAIL_LINES,
) -> Collected:
    """The tails of every node's worker logs, within ``timeout_s`` and the byte caps."""
    start = time.monotonic()
    deadline = start + max(1.0, timeout_s)
    out = Collected(address=address)
    env = dict(environ or {})
    token = env.get("RAY_AUTH_TOKEN")
    snap = probe_cluster(address, environ=env, timeout_s=min(10.0, max(1.0, timeout_s / 2)), child_environ=env or None)
    out.errors.extend(snap.errors[:5])
    out.dashboard_url = snap.dashboard_url or (address if address.startswith(("http://", "https://")) else None)
    if not snap.reachable or not out.dashboard_url:
        if not out.dashboard_url:
            out.errors.append("no dashboard URL: Ray's log API needs the dashboard (ray start --include-dashboard)")
        out.elapsed_s = round(time.monotonic() - start, 3)
        return out
    base = out.dashboard_url.rstrip("/")
    nodes = snap.nodes[:MAX_NODES]
    out.nodes = len(nodes)
    for node in nodes:
        if time.monotonic() >= deadline:
            out.errors.append("time budget spent before every node was read")
            break
        _node_logs(out, base, node.node_id, node.ip, glob, tail_lines, deadline, token)
    out.elapsed_s = round(time.monotonic() - start, 3)
    return out


def _node_logs(
    out: Collected, base: str, node_id: str, ip: str, glob: str, tail: int, deadline: float, token: str | None
) -> None:
    q = urllib.parse.urlencode({"node_id": node_id, "glob": glob, "timeout": 5})
    try:
        listing = json.loads(_get(f"{base}/api/v0/logs?{q}", min(5.0, deadline - time.monotonic()), token, 8 << 20))
    except (OSError, ValueError, urllib.error.URLError) as exc:
        out.errors.append(f"{ip}: listing logs failed: {type(exc).__name__}: {str(exc)[:200]}")
        return
    names = _files(listing)
    out.omitted += max(0, len(names) - MAX_FILES_PER_NODE)
    for name in names[:MAX_FILES_PER_NODE]:
        left = deadline - time.monotonic()
        if left <= 0.2 or out.bytes >= MAX_TOTAL_BYTES:
            out.omitted += 1
            continue
        q = urllib.parse.urlencode({"node_id": node_id, "filename": name, "lines": tail, "timeout": 5})
        try:
            data = _get(f"{base}/api/v0/logs/file?{q}", min(5.0, left), token, MAX_FILE_BYTES)
        except (OSError, urllib.error.URLError) as exc:
            out.errors.append(f"{ip}:{name}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not data.strip():
            continue
        data = data[: max(0, MAX_TOTAL_BYTES - out.bytes)]
        out.bytes += len(data)
        out.logs.append(RemoteLog(ip, node_id, name, data.decode("utf-8", "replace")))


def as_text(col: Collected) -> str:
    """One text for the diagnosis engine: each file's lines prefixed by where they came from."""
    parts = []
    for log in col.logs:
        parts.append(f"==> {log.node_ip}:{log.filename} <==\n{log.text.rstrip()}\n")
    return "".join(parts)
