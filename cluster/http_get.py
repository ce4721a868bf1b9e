"""One bounded HTTP GET over a raw socket, for the Ray dashboard's REST and log APIs (stdlib only).

Bounded as a whole: the connect, the TLS handshake, the request and every read get only the time left before one
deadline (the request's own timeout or the call's, whichever comes first), so a server that drips one byte at a time
is cut at the deadline, not kept alive by each byte. Redirects are never followed (a 3xx is an error naming the
status), the answer is cut at a size cap, ``Connection: close`` ends it, chunked bodies are decoded. The socket
connects to the IP address the caller already checked (``cluster.ray_address``), never to a name resolved again.
Error messages name what failed and never carry any of the response's content.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass

from ..core.limits import UNLIMITED, CallLimits

#: Most bytes of status line plus headers read before the answer is refused.
MAX_HEADER_BYTES = 64 << 10
#: Longest a single socket wait lasts, so a cancelled call is noticed quickly.
POLL_S = 0.25


class HttpError(Exception):
    """The request failed; the message is safe to show (no response content). ``timed_out``: the time ran out
    before an answer (the server may be slow, not gone)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class HttpAuthError(HttpError):
    """The server refused the request for lack of valid credentials (401 or 403)."""


@dataclass(frozen=True)
class HttpTarget:
    """Where to send a request: the URL's scheme, host (for ``Host`` and TLS) and port, and the checked IP."""

    scheme: str
    host: str
    ip: str
    port: int

    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class HttpReply:
    """A 2xx answer: its body (decoded from chunks), at most the cap; ``truncated`` when more was sent."""

    status: int
    body: bytes
    truncated: bool


class _Reader:
    """Buffered reads from one socket, each wait bounded by the time left before the deadline."""

    def __init__(self, sock: socket.socket, deadline: float, limits: CallLimits) -> None:
        self.sock = sock
        self.deadline = deadline
        self.limits = limits
        self.buf = bytearray()
        self.eof = False

    def fill(self) -> bool:
        """Read more into the buffer; False at end of stream."""
        if self.eof:
            return False
        while True:
            self.limits.check()
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise HttpError("no complete answer before the deadline", timed_out=True)
            self.sock.settimeout(min(left, POLL_S))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                self.eof = True
                return False
            self.buf += data
            return True

    def take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def until(self, sep: bytes, limit: int, what: str) -> bytes:
        """Bytes up to and without ``sep``, which is consumed; at most ``limit`` bytes are waited for."""
        while True:
            at = self.buf.find(sep)
            if at >= 0:
                out = self.take(at)
                del self.buf[: len(sep)]
                return out
            if len(self.buf) > limit:
                raise HttpError(f"{what} longer than {limit} bytes")
            if not self.fill():
                raise HttpError(f"connection closed inside the {what}")

    def exactly(self, n: int, what: str) -> bytes:
        while len(self.buf) < n:
            if not self.fill():
                raise HttpError(f"connection closed inside the {what}")
        return self.take(n)


def _status(head: bytes) -> int:
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise HttpError("the answer is not HTTP/1.x")
    return int(parts[1])


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in head.split(b"\r\n")[1:]:
        name, sep, value = raw.partition(b":")
        if sep:
            out[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return out


def _body(reader: _Reader, headers: dict[str, str], cap: int) -> tuple[bytes, bool]:
    """The body, at most ``cap`` bytes; True when the server sent (or announced) more."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return _chunked(reader, cap)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise HttpError("invalid Content-Length")
        n = int(length)
        data = reader.exactly(min(n, cap), "body")
        return data, n > cap
    while len(reader.buf) <= cap and reader.fill():
        pass
    data = reader.take(cap)
    return data, bool(reader.buf)


def _chunked(reader: _Reader, cap: int) -> tuple[bytes, bool]:
    out = bytearray()
    while True:
        line = reader.until(b"\r\n", 1024, "chunk header").split(b";", 1)[0].strip()
        try:
            size = int(line, 16)
        except ValueError:
            raise HttpError("invalid chunk header") from None
        if size == 0:
            return bytes(out), False
        if len(out) + size > cap:
            out += reader.exactly(cap - len(out), "chunk")
            return bytes(out), True
        out += reader.exactly(size, "chunk")
        reader.exactly(2, "chunk")


def _connect(target: HttpTarget, deadline: float, limits: CallLimits) -> socket.socket:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HttpError("no time left to connect", timed_out=True)
    try:
        sock = socket.create_connection((target.ip, target.port), timeout=left)
    except OSError as exc:
        limits.check()
        raise HttpError(
            f"cannot connect to {target.host}:{target.port}: {exc.strerror or type(exc).__name__}",
            timed_out=isinstance(exc, TimeoutError),
        ) from None
    if target.scheme != "https":
        return sock
    try:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        return ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        raise HttpError(f"TLS with {target.host}:{target.port} failed: {type(exc).__name__}") from None


def http_get(
    target: HttpTarget,
    path: str,
    *,
    timeout: float,
    max_bytes: int,
    bearer: str | None = None,
    limits: CallLimits = UNLIMITED,
) -> HttpReply:
    """GET ``path`` (already URL-encoded) within ``timeout`` seconds and the call's deadline; a 2xx answer or
    :class:`HttpError`. ``bearer`` is sent as ``Authorization: Bearer`` -- pass it only for a trusted target."""
    if any(c in path for c in "\r\n\t ") or not path.startswith("/"):
        raise HttpError("invalid request path")
    deadline = time.monotonic() + limits.remaining(max(0.0, timeout))
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {target.host_header()}",
        "Accept: application/json, text/plain",
        "User-Agent: xtuner-rl-mcp",
        "Connection: close",
    ]
    if bearer:
        lines.append(f"Authorization: Bearer {bearer}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    sock = _connect(target, deadline, limits)
    try:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            sock.sendall(request)
        except OSError as exc:
            limits.check()
            raise HttpError(f"sending the request failed: {type(exc).__name__}") from None
        reader = _Reader(sock, deadline, limits)
        try:
            head = reader.until(b"\r\n\r\n", MAX_HEADER_BYTES, "header")
            status = _status(head)
            if status in (401, 403):
                raise HttpAuthError(f"HTTP {status}")
            if 300 <= status < 400:
                raise HttpError(f"HTTP {status}: redirects are not followed")
            if not 200 <= status < 300:
                raise HttpError(f"HTTP {status}")
            body, truncated = _body(reader, _headers(head), max_bytes)
        except OSError as exc:
            limits.check()
            raise HttpError(f"reading the answer failed: {type(exc).__name__}") from None
        return HttpReply(status, body, truncated)
    finally:
        sock.close()
