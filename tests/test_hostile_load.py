"""No client can stall the server: many slow calls, calls past their deadline, and a client that vanishes.

The slow calls are what an attacker needs nothing planted for: ``probe_environment`` against a loopback "dashboard"
of the test's own that drips one byte every 0.5 s (tests/listeners.py). The server is the real ``xtuner-rl-mcp
serve`` over stdio (raw JSON-RPC lines) and over streamable HTTP on 127.0.0.1. Every listener and target is on
127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from .hostile_support import raw_server
from .listeners import drip, listening
from .test_hostile_http import http_server


def _probe_call(rid: int, url: str, timeout_s: float) -> dict:
    args = {"checks": ["ray"], "ray_address": url, "timeout_s": timeout_s}
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "probe_environment", "arguments": args},
    }


def _error_code(msg: dict) -> str | None:
    result = msg.get("result") or {}
    if not result.get("isError"):
        return None
    text = result["content"][0]["text"]
    return json.loads(text[text.index("{") :])["error"]["code"]


def _collect(srv, ids: set, timeout: float) -> dict:
    """Every response with an id in ``ids``, in whatever order they come."""
    got: dict = {}
    deadline = time.monotonic() + timeout
    while set(got) != ids:
        msg = json.loads(srv.read_line(max(0.01, deadline - time.monotonic())))
        if isinstance(msg, dict) and msg.get("id") in ids:
            got[msg["id"]] = msg
    return got


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.slow
def test_ping_and_listing_answer_while_50_slow_calls_are_in_flight(tmp_path: Path) -> None:
    with (
        listening(drip) as lst,
        raw_server(["--allow-root", str(tmp_path), "--max-calls-per-session", "64"], tmp_path) as srv,
    ):
        srv.initialize()
        for rid in range(1, 51):
            srv.send(json.dumps(_probe_call(rid, lst.url, 4.0)).encode())
        deadline = time.monotonic() + 30
        while len(lst.seen) < 16 and time.monotonic() < deadline:  # the pool's 16 workers are all dripping
            time.sleep(0.05)
        assert len(lst.seen) >= 16
        for n in range(5):
            t0 = time.monotonic()
            pong, _ = srv.request({"jsonrpc": "2.0", "id": f"ping{n}", "method": "ping"}, timeout=5)
            assert pong.get("result") == {} and time.monotonic() - t0 < 2.0
        listed, _ = srv.request({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}, timeout=10)
        assert len(listed["result"]["tools"]) == 9
        answers = list(_collect(srv, set(range(1, 51)), timeout=120).values())
        # Every slow call answered on its own (the drip was cut at its timeout), none was dropped or refused.
        assert all(_error_code(a) is None for a in answers)
        assert all("not reachable" in a["result"]["structuredContent"]["summary"] for a in answers)
        assert _children(srv.proc.pid) == []


def test_a_session_over_its_limit_is_told_busy_at_once(tmp_path: Path) -> None:
    with listening(drip) as lst, raw_server(["--allow-root", str(tmp_path)], tmp_path) as srv:
        srv.initialize()
        for rid in range(1, 9):
            srv.send(json.dumps(_probe_call(rid, lst.url, 5.0)).encode())
        while len(lst.seen) < 8:
            time.sleep(0.05)
        t0 = time.monotonic()
        refused, _ = srv.request(_probe_call(99, lst.url, 5.0), timeout=5)
        assert _error_code(refused) == "busy" and time.monotonic() - t0 < 2.0
        assert all(_error_code(a) is None for a in _collect(srv, set(range(1, 9)), timeout=60).values())


def test_a_call_past_the_servers_deadline_answers_and_its_work_stops(tmp_path: Path) -> None:
    with listening(drip) as lst, raw_server(["--allow-root", str(tmp_path), "--call-timeout", "2"], tmp_path) as srv:
        srv.initialize()
        t0 = time.monotonic()
        answer, _ = srv.request(_probe_call(1, lst.url, 60.0), timeout=20)
        assert _error_code(answer) == "deadline_exceeded"
        assert time.monotonic() - t0 < 6
        deadline = time.monotonic() + 5
        while not lst.ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lst.ended, "the abandoned probe kept reading the drip after the call's deadline"


def _post(port: int, body: dict, headers: dict[str, str]) -> socket.socket:
    """Send one MCP POST over a raw socket and return the socket without reading the answer."""
    payload = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(payload)}\r\n{head}\r\n"
        ).encode()
        + payload
    )
    return sock


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_an_http_client_that_disconnects_cancels_its_work(tmp_path: Path, era: str, monkeypatch) -> None:
    monkeypatch.setenv("XTUNER_RL_MCP_LOG_LEVEL", "INFO")  # the server logs each cancelled call
    with listening(drip) as lst, http_server(tmp_path) as port:
        headers: dict[str, str] = {}
        call = _probe_call(7, lst.url, 60.0)
        if era == "legacy":
            import httpx2

            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            r = httpx2.post(
                f"http://127.0.0.1:{port}/mcp",
                json=init,
                headers={"Accept": "application/json, text/event-stream"},
                timeout=30,
            )
            headers = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            sock = _post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
            sock.close()
        else:
            call["params"]["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers = {
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "probe_environment",
            }
        sock = _post(port, call, headers)
        deadline = time.monotonic() + 20
        while not lst.seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lst.seen, "the probe never reached the listener"
        sock.close()  # the client vanishes mid-call
        log = tmp_path / f"http-{port}.log"
        deadline = time.monotonic() + 15
        while "probe_environment call cancelled" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "probe_environment call cancelled" in log.read_text(), "the call kept running after its client left"


def test_nothing_is_left_running_after_the_stdio_server_exits(tmp_path: Path) -> None:
    with listening(drip) as lst:
        with raw_server(["--allow-root", str(tmp_path)], tmp_path) as srv:
            srv.initialize()
            for rid in range(1, 5):
                srv.send(json.dumps(_probe_call(rid, lst.url, 30.0)).encode())
            while len(lst.seen) < 4:
                time.sleep(0.05)
            pid = srv.proc.pid
        # The client closed stdin mid-call: the server ends and takes its work with it.
        assert srv.proc.poll() is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert subprocess.run(["pgrep", "-P", str(pid)], capture_output=True).stdout == b""
