"""A call's wall-clock deadline and cancellation, shared by the server (which sets them) and the engines (which
check them in their loops and hand the remaining time to every socket, subprocess and wait)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


class CallCancelled(Exception):
    """The call passed its deadline or its caller went away; the engine stops and the server answers for it."""

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class CallLimits:
    """When a call must be done by (``time.monotonic()``), and an event set when it is cancelled."""

    deadline: float | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def within(cls, seconds: float | None) -> CallLimits:
        return cls(deadline=None if seconds is None else time.monotonic() + seconds)

    def remaining(self, cap: float | None = None) -> float:
        """Seconds left (never negative), at most ``cap``; ``cap`` (or a day) when there is no deadline."""
        left = float("inf") if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        if cap is not None:
            left = min(left, cap)
        return left if left != float("inf") else 86400.0

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def expired(self) -> bool:
        return self.cancelled.is_set() or self.past_deadline()

    def check(self) -> None:
        """Raise :class:`CallCancelled` when the call was cancelled or is past its deadline."""
        if self.cancelled.is_set():
            raise CallCancelled("cancelled")
        if self.past_deadline():
            raise CallCancelled("deadline")

    def cancel(self) -> None:
        self.cancelled.set()


#: Limits for direct engine calls (tests, benchmarks, the Python API): no deadline, never cancelled.
UNLIMITED = CallLimits()
