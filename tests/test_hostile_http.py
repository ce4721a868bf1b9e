"""The streamable-HTTP transport over a real socket: loopback bind, Host/Origin checks, bearer token.

Each server is a real ``xtuner-rl-mcp serve --transport streamable-http`` subprocess on a free 127.0.0.1 port,
killed at teardown. Requests go over real TCP with httpx2 and with the SDK's own MCP client.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from .hostile_support import SERVER_CMD, free_port

TOKEN = "hostile-suite-token-0123456789"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextlib.contextmanager
def http_server(tmp_path: Path, *extra: str, token: str | None = None, host: str | None = None) -> Iterator[int]:
    """Start the server on a free port, wait until it accepts connections, yield the port, kill it after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "XTUNER_RL_MCP_TOKEN"}
    if token is not None:
        env["XTUNER_RL_MCP_TOKEN"] = token
    args = [*SERVER_CMD, "serve", "--transport", "streamable-http", "--port", str(port), "--allow-root", str(tmp_path)]
    if host:
        args += ["--host", host]
    log = open(tmp_path / f"http-{port}.log", "wb")
    proc = subprocess.Popen([*args, *extra], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited {proc.returncode}: {(tmp_path / f'http-{port}.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            assert time.monotonic() < deadline, "HTTP server did not start within 60 s"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _post(port: int, **headers: str) -> httpx2.Response:
    with httpx2.Client(timeout=15) as c:
        return c.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers={**HEADERS, **headers})


@pytest.fixture(scope="module")
def open_server(tmp_path_factory) -> Iterator[int]:
    with http_server(tmp_path_factory.mktemp("http-open")) as port:
        yield port


@pytest.fixture(scope="module")
def token_server(tmp_path_factory) -> Iterator[int]:
    with http_server(tmp_path_factory.mktemp("http-token"), token=TOKEN) as port:
        yield port


def test_valid_request_is_answered(open_server: int) -> None:
    r = _post(open_server)
    assert r.status_code == 200, r.text
    assert "xtuner-rl-mcp" in r.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "attacker:1234"])
def test_bad_host_is_refused(open_server: int, host: str) -> None:
    assert _post(open_server, Host=host).status_code == 421


@pytest.mark.parametrize("origin", ["http://evil.example", "https://127.0.0.1.evil.example", "null", "file://"])
def test_bad_origin_is_refused(open_server: int, origin: str) -> None:
    assert _post(open_server, Origin=origin).status_code == 403


def test_loopback_origin_is_accepted(open_server: int) -> None:
    assert _post(open_server, Origin=f"http://127.0.0.1:{open_server}").status_code == 200


@pytest.mark.parametrize(
    "auth",
    [
        None,
        "",
        "Bearer",
        "bearer wrong",
        "Bearer wrong",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        TOKEN,
    ],
)
def test_missing_or_wrong_token_is_401(token_server: int, auth: str | None) -> None:
    headers = {} if auth is None else {"Authorization": auth}
    r = _post(token_server, **headers)
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert TOKEN not in r.text


def test_right_token_is_200(token_server: int) -> None:
    assert _post(token_server, Authorization=f"Bearer {TOKEN}").status_code == 200


def test_right_token_bad_host_still_421(token_server: int) -> None:
    assert _post(token_server, Authorization=f"Bearer {TOKEN}", Host="evil.example").status_code == 421


@pytest.mark.anyio
async def test_real_client_with_token_lists_tools(token_server: int) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from xtuner_rl_mcp.server.registry import TOOL_MODULES

    url = f"http://127.0.0.1:{token_server}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = (await client.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(TOOL_MODULES)


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)  # an exception group (Python 3.11+, or the 3.10 backport)
    if isinstance(inner, (list, tuple)):
        return [leaf for e in inner for leaf in _leaves(e)]
    return [exc]


@pytest.mark.anyio
async def test_real_client_without_token_is_refused(token_server: int) -> None:
    from mcp import Client, MCPError

    caught: BaseException | None = None
    try:
        async with Client(f"http://127.0.0.1:{token_server}/mcp") as client:
            await client.list_tools()
    except Exception as exc:  # the SDK raises the refusal inside task groups
        caught = exc
    assert caught is not None, "a client without the token listed the tools"
    assert any(isinstance(leaf, MCPError) for leaf in _leaves(caught)), repr(caught)


def _non_loopback_ipv4() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this only picks the outgoing interface
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


def test_default_bind_is_loopback(open_server: int) -> None:
    from xtuner_rl_mcp.server.cli import build_parser

    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    with socket.create_connection(("127.0.0.1", open_server), timeout=2):
        pass
    ip = _non_loopback_ipv4()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to check the bind against")
    with pytest.raises(OSError), socket.create_connection((ip, open_server), timeout=2):
        pass
