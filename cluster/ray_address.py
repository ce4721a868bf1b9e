"""Which Ray clusters the server may contact, and with which credentials: one decision for every Ray-touching path.

The operator's clusters are the addresses configured at start (``ctx.policy.ray_addresses``: ``--ray-address``,
``XTUNER_RL_MCP_RAY_ADDRESSES``, ``RAY_ADDRESS`` in the server's environment) plus the local cluster Ray itself would
join: the ``ray_current_cluster`` file under the SERVER's own ``RAY_TMPDIR``/``TMPDIR`` (or ``/tmp``), when it is a
regular file owned by this user (or root). Those are *trusted*: the server's Ray credentials may go to them. Any other
address -- a tool argument, ``RAY_ADDRESS`` or ``RAY_TMPDIR`` in a tool's ``env`` argument, a dashboard an untrusted
GCS reports -- is probed only when every address its host resolves to is loopback, and then without any credential;
anything else is refused with ``ray_address_not_allowed`` before a packet is sent to it. Hostnames are resolved once,
and the probe connects to the IP address that was checked.

Comparison is on (kind, host, port) after normalising: host case, brackets and a trailing dot, the default ports
(6379 for a GCS, 8265 for an http(s) dashboard URL without one), http or https, any path or trailing slash. A
dashboard URL whose host is a trusted GCS host is the same cluster, and so is the dashboard a trusted GCS reports.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..core import PathPolicy, RunContext, ToolInputError
from ..core.files import open_guarded
from ..core.limits import CallLimits
from .http_get import HttpTarget

DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
ADDRESS_NOT_ALLOWED = "ray_address_not_allowed"
#: Bytes of an address file read at most; a longer file is not an address.
ADDRESS_FILE_CAP = 512
#: Longest a hostname lookup may take (bounded further by the call's deadline).
RESOLVE_TIMEOUT_S = 2.0
#: Variables that carry Ray credentials (token, TLS client key): kept from an untrusted probe.
CREDENTIAL_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY")
ALLOW_FIX = (
    "Ask the operator to allow that cluster: start the server with --ray-address ADDR (or set "
    "XTUNER_RL_MCP_RAY_ADDRESSES=ADDR or RAY_ADDRESS=ADDR in the server's environment). A cluster on this machine "
    "(127.0.0.1, localhost) is probed without that, and without credentials."
)

_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._~/%-]*$")


@dataclass(frozen=True)
class Endpoint:
    """A Ray address, normalised: a GCS ``host:port`` or a dashboard URL (scheme, host, port, path prefix)."""

    kind: Literal["gcs", "dashboard"]
    host: str
    port: int
    scheme: str = ""
    base_path: str = ""

    def hostport(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def display(self) -> str:
        return f"{self.scheme}://{self.hostport()}{self.base_path}" if self.kind == "dashboard" else self.hostport()


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return 0 < len(host) <= 253 and all(_LABEL.match(label) for label in host.split("."))


def _split_gcs(text: str) -> tuple[str, str | None] | None:
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        return host, rest[1:] or None
    if text.count(":") > 1:  # a bare IPv6 address, no port
        return text, None
    host, _, port = text.partition(":")
    return host, port if ":" in text else None


def parse_endpoint(raw: str, *, require_port: bool = False) -> Endpoint | None:
    """The normalised endpoint of a GCS ``host:port`` or an ``http(s)://`` dashboard URL; None when neither."""
    text = raw.strip()
    if not text or len(text) > 512:
        return None
    if text.lower().startswith(("http://", "https://")):
        try:
            url = urlsplit(text)
            port = url.port
        except ValueError:
            return None
        host = (url.hostname or "").rstrip(".")
        if url.username or url.password or url.query or url.fragment or not _SAFE_PATH.match(url.path):
            return None
        if not _valid_host(host) or port == 0 or (require_port and port is None):
            return None
        return Endpoint("dashboard", host, port or DEFAULT_DASHBOARD_PORT, url.scheme.lower(), url.path.rstrip("/"))
    parts = _split_gcs(text)
    if parts is None:
        return None
    host, port_text = parts[0].lower().rstrip("."), parts[1]
    if port_text is not None and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        return None
    if not _valid_host(host) or (require_port and port_text is None):
        return None
    return Endpoint("gcs", host, int(port_text) if port_text else DEFAULT_GCS_PORT)


def is_loopback(ip: str) -> bool:
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def resolve_host(host: str, port: int, timeout: float) -> tuple[list[str], str]:
    """Every address ``host`` resolves to (an IP literal and ``localhost`` without a lookup), or why none.

    The lookup runs on a helper thread so that a slow resolver cannot hold the call past ``timeout``."""
    if host == "localhost":
        return ["127.0.0.1"], ""
    try:
        return [str(ipaddress.ip_address(host))], ""
    except ValueError:
        pass
    box: list[list[str] | OSError] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            box.append(list(dict.fromkeys(str(info[4][0]) for info in infos)))
        except OSError as exc:
            box.append(exc)

    worker = threading.Thread(target=lookup, name="ray-address-lookup", daemon=True)
    worker.start()
    worker.join(max(0.05, timeout))
    if not box:
        return [], f"{host} did not resolve within {timeout:.1f}s"
    found = box[0]
    if isinstance(found, OSError):
        return [], f"{host} does not resolve ({type(found).__name__})"
    return found, ""


@dataclass(frozen=True)
class RayTarget:
    """An address the policy allowed: the IP address to connect to (the one checked) and whether credentials go."""

    endpoint: Endpoint
    trusted: bool
    ip: str | None
    resolve_error: str = ""

    def gcs_connect(self) -> str:
        """``ip:port`` for Ray's GCS client (the checked address, not the name)."""
        ip = self.ip or self.endpoint.host
        return f"[{ip}]:{self.endpoint.port}" if ":" in ip else f"{ip}:{self.endpoint.port}"

    def http(self) -> HttpTarget:
        return HttpTarget(self.endpoint.scheme or "http", self.endpoint.host, self.ip or "", self.endpoint.port)


@dataclass(frozen=True)
class AddressFile:
    """What an address file gave: a ``host:port``, or why nothing (the content is never repeated)."""

    path: str
    address: str | None
    note: str
    own: bool = False  # owned by this server's user or root: the local cluster Ray itself would join


def address_file_path(environ: Mapping[str, str]) -> str:
    """Where ``ray start`` leaves the address and ``ray.init(address="auto")`` looks for it (Linux rules)."""
    base = environ.get("RAY_TMPDIR") or environ.get("TMPDIR")
    return os.path.join(base or "/tmp", "ray", "ray_current_cluster")


def read_address_file(path: str, paths: PathPolicy) -> AddressFile:
    """The GCS address in ``path``, read through the guarded opener inside ``paths`` (non-blocking, regular files
    only, capped); used only if the whole content is one ``host:port``."""
    try:
        with open_guarded(paths, path, what="address file") as fh:
            data = fh.read(ADDRESS_FILE_CAP + 1)
            owner = os.fstat(fh.fileno()).st_uid
    except ToolInputError as exc:
        reasons = {
            "path_not_found": "does not exist: no local cluster started with `ray start`",
            "path_outside_roots": "is outside the allowed roots; not read",
            "path_special_file": "is not a regular file (FIFO, device or socket); not read",
        }
        return AddressFile(path, None, f"{path} {reasons.get(exc.code, 'cannot be read')}")
    text = data.decode("utf-8", "replace").strip() if len(data) <= ADDRESS_FILE_CAP else ""
    endpoint = parse_endpoint(text, require_port=True) if text else None
    if endpoint is None or endpoint.kind != "gcs":
        return AddressFile(path, None, f"{path} does not hold a Ray address (host:port); its content is not shown")
    return AddressFile(path, endpoint.hostport(), f"from {path}", own=owner in (os.getuid(), 0))


def own_address_file(environ: Mapping[str, str]) -> AddressFile:
    """The address file under the server's own temp dir (roots: that directory only)."""
    path = address_file_path(environ)
    return read_address_file(path, PathPolicy.from_strings([os.path.dirname(path)]))


@dataclass(frozen=True)
class RayAccess:
    """The operator's Ray clusters, the server's environment (credentials and child env), the allowed roots (for a
    client-chosen address file) and the call's deadline: everything a Ray probe needs to decide and to stay bounded."""

    trusted: tuple[Endpoint, ...]
    server_environ: Mapping[str, str]
    paths: PathPolicy
    local_file: AddressFile
    limits: CallLimits

    @classmethod
    def from_context(cls, ctx: RunContext) -> RayAccess:
        local = own_address_file(ctx.environ)
        configured = [a for a in ctx.policy.ray_addresses if a.strip().lower() not in ("auto", "local")]
        if local.address and local.own:
            configured.append(local.address)
        trusted = tuple(ep for ep in map(parse_endpoint, configured) if ep is not None)
        return cls(trusted, dict(ctx.environ), ctx.paths, local, ctx.limits)

    def is_trusted(self, endpoint: Endpoint) -> bool:
        for t in self.trusted:
            if (t.kind, t.host, t.port) == (endpoint.kind, endpoint.host, endpoint.port):
                return True
            if endpoint.kind == "dashboard" and t.kind == "gcs" and t.host == endpoint.host:
                return True
        return False

    def decide(self, raw: str, *, what: str = "ray_address", vouched: bool = False) -> RayTarget:
        """Allow ``raw`` (trusted, or loopback without credentials) or raise ``ray_address_not_allowed``.

        ``vouched``: the address was reported by a trusted cluster (its dashboard), so it is trusted too."""
        endpoint = parse_endpoint(raw)
        if endpoint is None:
            raise ToolInputError(
                "ray_address_invalid",
                f"{what} {raw.strip()[:200]!r} is neither host:port nor an http(s):// dashboard URL",
                "Pass the GCS address <head>:6379 or the dashboard URL http://<head>:8265.",
            )
        trusted = vouched or self.is_trusted(endpoint)
        ips, why = resolve_host(endpoint.host, endpoint.port, self.limits.remaining(RESOLVE_TIMEOUT_S))
        if not trusted and ips and not all(is_loopback(ip) for ip in ips):
            raise ToolInputError(
                ADDRESS_NOT_ALLOWED,
                f"{what} {endpoint.display()!r} is not a Ray cluster the operator configured and not on this "
                "machine (loopback): refused, nothing was sent to it",
                ALLOW_FIX,
                address=endpoint.display(),
            )
        return RayTarget(endpoint, trusted, ips[0] if ips else None, why)

    def refuse_early(self, raw: str | None) -> None:
        """Raise ``ray_address_not_allowed`` now, before a tool does any other work, for an address that would be
        refused; other forms (none, ``auto``, ``ray://``, invalid) are left to the probe to report."""
        if raw and raw.strip().lower() not in ("auto", "local") and parse_endpoint(raw) is not None:
            self.decide(raw)

    def bearer(self, target: RayTarget) -> str | None:
        """The token for ``Authorization: Bearer``: the server's own, and only to a trusted cluster."""
        return (self.server_environ.get("RAY_AUTH_TOKEN") or None) if target.trusted else None

    def child_environ(self, target: RayTarget, empty_home: str | None) -> dict[str, str]:
        """The server's environment for a Ray client process: with its credentials for a trusted cluster; for any
        other, none of them, token auth off and ``HOME`` at an empty directory (no ``~/.ray/auth_token``)."""
        env = {k: v for k, v in self.server_environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
        if target.trusted:
            if (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")) and not env.get("RAY_AUTH_MODE"):
                env["RAY_AUTH_MODE"] = "token"
            return env
        env = {k: v for k, v in env.items() if k not in CREDENTIAL_VARS and not k.startswith("RAY_TLS_")}
        env["RAY_AUTH_MODE"] = "disabled"
        if empty_home is not None:
            env["HOME"] = empty_home
        return env

    def check_in_process_driver(self, target: RayTarget) -> None:
        """A driver in THIS process (``ray.init``) presents the process's token whenever ``RAY_AUTH_MODE=token`` is
        set here; it cannot be withheld, so an untrusted cluster is refused then."""
        if not target.trusted and os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token":
            raise ToolInputError(
                ADDRESS_NOT_ALLOWED,
                f"ray_address {target.endpoint.display()!r} is not a cluster the operator configured, and a Ray driver "
                "in this server would present the server's Ray token (RAY_AUTH_MODE=token) to it: refused",
                ALLOW_FIX,
                address=target.endpoint.display(),
            )
