"""Security policy: allowed file roots, loopback-first HTTP, Host/Origin checks and an optional bearer token."""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcp.server.transport_security import TransportSecuritySettings

from ..core import PathPolicy

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

ALLOW_ROOTS_ENV = "XTUNER_RL_MCP_ALLOW_ROOTS"
TOKEN_ENV_DEFAULT = "XTUNER_RL_MCP_TOKEN"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def resolve_roots(cli_roots: Sequence[str] | None, environ: dict[str, str] | None = None) -> PathPolicy:
    """--allow-root wins; else XTUNER_RL_MCP_ALLOW_ROOTS (os.pathsep-separated); else the working directory."""
    environ = dict(os.environ) if environ is None else environ
    roots: list[str] = [r for r in (cli_roots or []) if r]
    if not roots:
        roots = [r for r in environ.get(ALLOW_ROOTS_ENV, "").split(os.pathsep) if r.strip()]
    if not roots:
        roots = [os.getcwd()]
    return PathPolicy.from_strings(roots)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """Host/Origin checks stay on for every bind address: loopback names by default, plus what is listed."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if not is_loopback(host) and host not in ("0.0.0.0", "::"):
        hosts += [host, f"{host}:*"]
    for h in allowed_hosts:
        hosts += [h] if ":" in h else [h, f"{h}:*"]
    origins += list(allowed_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerTokenMiddleware:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, else 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        header = b""
        for k, v in scope.get("headers", []):
            if k == b"authorization":
                header = v
                break
        scheme, _, given = header.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token):
            return await self.app(scope, receive, send)
        body = b'{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="xtuner-rl-mcp"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
