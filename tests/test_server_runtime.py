"""How calls share the server: a deadline per call, a limit per session, a pool apart from the transport, and
cancellation that reaches the engine. Real in-memory MCP clients against the real server with test tools whose
work is controlled by the test (a tool that waits on an event, one that ignores its deadline)."""

from __future__ import annotations

import json
import threading
import time

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel, Field
from xtuner_rl_mcp.core import CallLimits, PathPolicy, ToolResult, ToolSpec
from xtuner_rl_mcp.server.app import build_server
from xtuner_rl_mcp.server.runtime import CallGate, DeadlineExceeded, ServerLimits

pytestmark = pytest.mark.anyio


class WaitParams(BaseModel):
    seconds: float = Field(default=30.0, ge=0, le=600)
    obey: bool = Field(default=True, description="check ctx.limits while waiting")


class WaitResult(ToolResult):
    waited_s: float


class Probe:
    """What the test tool saw: how many are running, and how each ended."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.ended: list[str] = []
        self.release = threading.Event()


def waiting_tool(probe: Probe) -> ToolSpec:
    def run(params: WaitParams, ctx) -> WaitResult:
        start = time.monotonic()
        with probe.lock:
            probe.running += 1
        try:
            while time.monotonic() - start < params.seconds and not probe.release.is_set():
                if params.obey and ctx.limits.expired():
                    with probe.lock:
                        probe.ended.append("stopped")
                    return WaitResult(summary="stopped", waited_s=time.monotonic() - start)
                time.sleep(0.02)
            with probe.lock:
                probe.ended.append("finished")
            return WaitResult(summary="done", waited_s=time.monotonic() - start)
        finally:
            with probe.lock:
                probe.running -= 1

    return ToolSpec("wait", "Wait", "Test tool. Use when: testing. Not for: anything.", WaitParams, WaitResult, run)


def _error(result) -> dict:
    assert result.is_error, result
    text = result.content[0].text
    return json.loads(text[text.index("{") :])["error"]


def _server(tmp_path, probe: Probe, **limits):
    return build_server(
        PathPolicy.from_strings([str(tmp_path)]), specs=[waiting_tool(probe)], limits=ServerLimits(**limits)
    )


async def _wait_until(predicate, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.02)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_past_its_deadline_answers_and_its_work_stops(tmp_path, mode):
    probe = Probe()
    async with Client(_server(tmp_path, probe, call_timeout_s=1.0), mode=mode) as client:
        t0 = time.monotonic()
        result = await client.call_tool("wait", {"seconds": 60})
        elapsed = time.monotonic() - t0
        assert _error(result)["code"] == "deadline_exceeded"
        assert "--call-timeout" in _error(result)["fix"]
        # the tool would wait 60 s: an answer well before that is the deadline's (slack for a loaded CI machine)
        assert elapsed < 15, elapsed
        await _wait_until(lambda: probe.ended == ["stopped"], timeout=20)  # the engine saw its limits cancelled


async def test_a_session_over_its_limit_is_told_busy_and_others_still_run(tmp_path):
    probe = Probe()
    server = _server(tmp_path, probe, calls_per_session=2)
    async with Client(server) as first, Client(server) as second:
        results: dict[int, object] = {}

        async def call(i: int) -> None:
            results[i] = await first.call_tool("wait", {"seconds": 30})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, 0)
            tg.start_soon(call, 1)
            await _wait_until(lambda: probe.running == 2)
            t0 = time.monotonic()
            third = await first.call_tool("wait", {"seconds": 30})
            assert _error(third)["code"] == "busy" and time.monotonic() - t0 < 2
            # Another connection is a session of its own: it is admitted although the first one is full.
            other = await second.call_tool("wait", {"seconds": 0})
            assert not other.is_error
            probe.release.set()
        assert all(not r.is_error for r in results.values())


async def test_listing_and_ping_answer_while_every_worker_is_busy(tmp_path):
    probe = Probe()
    server = _server(tmp_path, probe, workers=4, calls_per_session=64)
    async with Client(server, mode="legacy") as client:
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(client.call_tool, "wait", {"seconds": 60})
            await _wait_until(lambda: probe.running == 4)
            for _ in range(5):
                with anyio.fail_after(2):
                    await client.session.send_ping()
                    assert (await client.list_tools()).tools[0].name == "wait"
            assert probe.running == 4  # the pool is bounded: 46 calls wait for a worker
            probe.release.set()
    assert probe.ended.count("finished") == 50


async def test_abandoned_work_counts_against_a_ceiling(tmp_path):
    probe = Probe()
    server = _server(tmp_path, probe, call_timeout_s=0.5, max_live_threads=3, workers=3, calls_per_session=10)
    async with Client(server) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(3):  # each ignores its deadline and keeps its thread for 2 s
                tg.start_soon(client.call_tool, "wait", {"seconds": 2, "obey": False})
            await _wait_until(lambda: probe.running == 3)
        # All three answered deadline_exceeded, but their threads are still finishing: no fourth thread.
        refused = await client.call_tool("wait", {"seconds": 0})
        assert _error(refused)["code"] == "busy"
        await _wait_until(lambda: probe.running == 0)
        assert not (await client.call_tool("wait", {"seconds": 0})).is_error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_cancelled_call_cancels_its_work(tmp_path, mode):
    probe = Probe()
    async with Client(_server(tmp_path, probe), mode=mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "wait", {"seconds": 60})
            await _wait_until(lambda: probe.running == 1)
            tg.cancel_scope.cancel()
        await _wait_until(lambda: probe.ended == ["stopped"])


class _LateTimer(CallLimits):
    """Limits whose timer fires 5 s late, as on a loaded machine; the deadline itself is as set (a stand-in for the
    event loop's lateness, which cannot be produced on demand)."""

    def remaining(self, cap: float | None = None) -> float:
        return super().remaining(cap) + 5.0


async def test_work_that_returns_after_its_deadline_still_answers_deadline_exceeded():
    gate = CallGate(ServerLimits())
    limits = _LateTimer(deadline=time.monotonic() + 0.3)

    def work() -> str:
        while not limits.expired():
            time.sleep(0.01)
        return "stopped"  # the work noticed the deadline and returned before the timer fired

    with pytest.raises(DeadlineExceeded):
        await gate.run_blocking(work, limits)
    assert limits.cancelled.is_set()
    assert await gate.run_blocking(lambda: "done", CallLimits.within(5.0)) == "done"
