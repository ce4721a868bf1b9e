"""Run a program the server chose, bounded: own session, hard deadline, output capped while it streams, memory
limit, and the whole process group killed on the way out, so nothing outlives the call.

Only programs the server itself names are run here (this Python for its own probes, ``nvidia-smi``, or a training
interpreter the operator allowed at start); a client never names the program.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .limits import UNLIMITED, CallLimits

DEFAULT_OUTPUT_CAP = 1 << 20
DEFAULT_MEMORY_LIMIT = 2 << 30


@dataclass
class Completed:
    """What a bounded run gave back."""

    returncode: int | None  # None: killed at the deadline or on cancel
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    cancelled: bool = False
    truncated: bool = False  # output went past the cap and the process was stopped
    error: str = ""  # could not start

    @property
    def ok(self) -> bool:
        return not self.error and not self.timed_out and not self.cancelled and self.returncode == 0


def _with_memory_limit(argv: Sequence[str], limit: int | None) -> list[str]:
    """``argv`` under an address-space limit, set by ``/bin/sh``'s ``ulimit -v`` just before it execs the program
    (no Python code runs between fork and exec, which is unsafe in a threaded server)."""
    if not limit or not os.path.exists("/bin/sh"):
        return list(argv)
    return ["/bin/sh", "-c", f'ulimit -v {max(1, limit // 1024)} 2>/dev/null; exec "$0" "$@"', *argv]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, OSError):
        proc.kill()


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str = "/",
    output_cap: int = DEFAULT_OUTPUT_CAP,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    limits: CallLimits = UNLIMITED,
) -> Completed:
    """Run ``argv`` in a new session; stop it at ``timeout`` (or the call's deadline, whichever comes first), when
    its output passes ``output_cap`` bytes, or when the call is cancelled. The process group is always killed at
    the end, so children it left in the background die with it."""
    budget = limits.remaining(timeout)
    try:
        proc = subprocess.Popen(
            _with_memory_limit(argv, memory_limit),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return Completed(None, b"", b"", error=f"could not start {argv[0]}: {exc.strerror or exc}")
    out = Completed(None, b"", b"")
    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    total = 0
    deadline = time.monotonic() + budget
    sel = selectors.DefaultSelector()
    try:
        if input is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.write(input)
            with contextlib.suppress(OSError):
                proc.stdin.close()
        assert proc.stdout is not None and proc.stderr is not None
        for stream, slot in ((proc.stdout, 1), (proc.stderr, 2)):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream, selectors.EVENT_READ, slot)
        while sel.get_map():
            if limits.cancelled.is_set():
                out.cancelled = True
                break
            left = deadline - time.monotonic()
            if left <= 0:
                out.timed_out = True
                break
            leader_done = proc.poll() is not None
            ready = sel.select(timeout=0 if leader_done else min(left, 0.2))
            for key, _ in ready:
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunks[key.data].append(data)
                total += len(data)
            if total > output_cap:
                out.truncated = True
                break
            if leader_done and not ready:
                break  # the program ended; whatever it left in the background holds the pipes and is killed below
        if not (out.cancelled or out.timed_out or out.truncated):
            try:
                out.returncode = proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                out.timed_out = True
    finally:
        sel.close()
        _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    out.stdout = b"".join(chunks[1])[:output_cap]
    out.stderr = b"".join(chunks[2])[:output_cap]
    return out
