"""How tool calls share the server: a bounded pool of their own, a limit per session, a deadline per call.

Blocking tool work runs on worker threads drawn from this server's own capacity limiter, never from anyio's
default one, which the stdio transport uses to read its input: however many calls hang, the reader and ``ping``
keep answering. A session (a stdio or in-memory connection, an HTTP session or client) may have only so many
calls in flight; one more is answered "busy, retry" at once instead of queueing forever. Every call has a
wall-clock deadline covering its wait for a thread and its work: past it the call answers ``deadline_exceeded``,
its :class:`CallLimits` is cancelled so the engine stops at its next check (subprocesses are killed, sockets give
up), and its thread is abandoned. Threads still finishing abandoned work count against a ceiling, so a flood of
calls that ignore their deadline cannot grow the process without bound.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..core import CallLimits

T = TypeVar("T")


@dataclass(frozen=True)
class ServerLimits:
    """The operator's bounds on tool calls (flags of ``serve``)."""

    call_timeout_s: float = 300.0  # wall clock per call, waiting included
    workers: int = 16  # tool calls running at once, whole server (most wait on sockets or subprocesses)
    max_live_threads: int = 48  # running plus abandoned-but-not-finished worker threads
    calls_per_session: int = 8  # calls in flight per session: one session can hold at most half the workers


class Busy(Exception):
    """The call was not admitted (too many in flight); the client should retry later."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DeadlineExceeded(Exception):
    """The call ran past its deadline and was abandoned."""


class CallGate:
    """Admission, the worker pool and the live-thread ceiling of one server."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self._limiter: anyio.CapacityLimiter | None = None
        self._lock = threading.Lock()
        self._live = 0

    @property
    def live_threads(self) -> int:
        with self._lock:
            return self._live

    @contextmanager
    def admit(self, in_flight: Counter[str], session: str) -> Iterator[None]:
        """Count one call of ``session`` in flight for as long as the block runs; :class:`Busy` past the limit."""
        if in_flight[session] >= self.limits.calls_per_session:
            raise Busy(
                f"this session already has {in_flight[session]} calls in flight (limit "
                f"{self.limits.calls_per_session}); retry when one has answered"
            )
        in_flight[session] += 1
        try:
            yield
        finally:
            in_flight[session] -= 1
            if in_flight[session] <= 0:
                del in_flight[session]

    async def run_blocking(self, fn: Callable[[], T], limits: CallLimits) -> T:
        """Run ``fn`` on this server's pool within ``limits``' deadline; cancel ``limits`` when giving up on it."""
        if self._limiter is None:  # created on the event loop that serves the calls
            self._limiter = anyio.CapacityLimiter(self.limits.workers)
        ceiling = self.limits.max_live_threads
        with self._lock:
            if self._live >= ceiling:
                raise Busy(
                    f"the server is finishing {self._live} running or abandoned calls (ceiling {ceiling}); retry shortly"
                )
        state = {"started": False, "skipped": False}

        def work() -> Any:
            with self._lock:
                if state["skipped"] or self._live >= ceiling:
                    state["skipped"] = True
                    return None
                state["started"] = True
                self._live += 1
            try:
                return fn()
            finally:
                with self._lock:
                    self._live -= 1

        try:
            with anyio.fail_after(limits.remaining()):
                result = await anyio.to_thread.run_sync(work, limiter=self._limiter, abandon_on_cancel=True)
        except TimeoutError:
            limits.cancel()
            raise DeadlineExceeded from None
        except BaseException:
            limits.cancel()
            raise
        finally:
            with self._lock:
                state["skipped"] = state["skipped"] or not state["started"]
        if state["skipped"]:
            raise Busy(f"the server is finishing {self.live_threads} running or abandoned calls; retry shortly")
        if limits.past_deadline():
            # the work saw its deadline pass and returned before the timer fired (a loaded machine): the answer is
            # still the deadline's, as the call was promised
            limits.cancel()
            raise DeadlineExceeded
        return result
