"""Spreading a scan over this machine: byte-range tasks planned from file sizes, scanned in this process or over
local worker processes (fresh interpreters fed length-prefixed pickles over stdin/stdout), and the worker's loop.

Every range is read through the guarded opener with the caller's path policy (in the workers too: the policy
travels with each task). Workers run in their own session; when the call is cancelled or passes its deadline their
process groups are killed at once, so no worker outlives the call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from ..core import PathPolicy, open_guarded
from ..core.limits import UNLIMITED, CallCancelled, CallLimits
from .jsonl import READ_BUFFER_BYTES, Opener, merge_ranges, plan_ranges, scan_range
from .jsonl_results import FileResult, RangeResult, ScanOptions

#: Below this total size everything is scanned in this process (process start-up would cost more than it saves).
PARALLEL_MIN_BYTES = 8 << 20
#: Byte-range size for parallel scans: small enough to balance two cores and report progress, big enough to amortise.
MIN_RANGE_BYTES = 4 << 20
MAX_RANGE_BYTES = 32 << 20
#: Environment of scan workers (local processes and Ray tasks). PYTHONHASHSEED=0: every worker hashes prompts alike,
#: so duplicates are found across ranges (jsonl_duplicates.HASH_DOMAIN).
WORKER_HASH_ENV = {"PYTHONHASHSEED": "0"}
#: glibc malloc settings for local workers: each block allocates and frees a few MiB, which by default goes back to
#: the kernel and faults in again (about 500 page faults per MiB scanned; ~20% of a worker's time). Other C libraries
#: ignore these variables.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}
#: What a local worker process runs (see ``worker_main``).
WORKER_COMMAND = "from xtuner_rl_mcp.scanners.parallel import worker_main; worker_main()"

#: Seconds between two looks at the call's limits while waiting for the workers.
WAIT_SLICE_S = 0.1
#: Seconds given to a drive thread to see its killed worker's pipe close.
JOIN_AFTER_KILL_S = 2.0

Task = tuple[str, int, int]  # path, start, end
#: progress(bytes done, message)
Progress = Callable[[int, str], None]


def guarded_opener(paths: PathPolicy) -> Opener:
    """How a scan opens a data file: the path policy's one guarded opener (roots per file, regular files only)."""
    return functools.partial(open_guarded, paths, what="data file", buffering=READ_BUFFER_BYTES)


def plan_tasks(files: list[tuple[str, int]], parallel: bool, workers: int) -> list[Task]:
    """Byte-range tasks for (path, size) files: big files cut into ranges when ``parallel``, others whole."""
    total = sum(size for _, size in files)
    chunk = max(MIN_RANGE_BYTES, min(MAX_RANGE_BYTES, total // max(1, workers * 4)))
    tasks: list[Task] = []
    for path, size in files:
        if parallel and size >= PARALLEL_MIN_BYTES:
            tasks.extend((path, s, e) for s, e in plan_ranges(size, chunk))
        else:
            tasks.append((path, 0, size))
    return tasks


def merge_by_file(paths: list[str], results: list[RangeResult], opts: ScanOptions) -> list[FileResult]:
    """The ranges scanned (any order, any engine) merged into one result per path, in the order of ``paths``."""
    by_file: dict[str, list[RangeResult]] = {}
    for r in results:
        by_file.setdefault(r.path, []).append(r)
    return [merge_ranges(p, by_file.get(p, []), opts) for p in paths]


def scan_local(
    tasks: list[Task],
    opts: ScanOptions,
    workers: int,
    progress: Progress,
    paths: PathPolicy,
    limits: CallLimits = UNLIMITED,
) -> tuple[list[RangeResult], str, int]:
    """Scan tasks in this process (small inputs) or over ``workers`` local worker processes."""
    total = sum(e - s for _, s, e in tasks)
    if workers > 1 and total >= PARALLEL_MIN_BYTES and len(tasks) > 1:
        try:
            return (
                scan_processes(tasks, opts, min(workers, len(tasks)), progress, paths, limits),
                "processes",
                min(workers, len(tasks)),
            )
        except WorkersUnavailable:
            pass  # e.g. the package is not importable by a fresh interpreter: scan here instead
    opener = guarded_opener(paths)
    results = []
    done = 0
    for path, start, end in tasks:
        results.append(
            scan_range(
                path,
                start,
                end,
                opts,
                functools.partial(_scanning, progress, done),
                open_file=opener,
                limits=limits,
            )
        )
        done += end - start
        progress(done, f"scanned {os.path.basename(path)}")
    return results, "in_process", 1


def _scanning(progress: Progress, done: int, n: int) -> None:
    """Progress of the range being scanned in this process: ``n`` bytes into it, ``done`` before it."""
    progress(done + n, "scanning")


class WorkersUnavailable(Exception):
    pass


def scan_processes(
    tasks: list[Task],
    opts: ScanOptions,
    n: int,
    progress: Progress,
    paths: PathPolicy,
    limits: CallLimits = UNLIMITED,
) -> list[RangeResult]:
    """Byte ranges over ``n`` worker processes, fed from a shared queue (balanced; progress per range).

    Workers are fresh interpreters running ``worker_main`` (started with ``subprocess``, not multiprocessing: a
    'spawn' pool re-imports the caller's ``__main__``, which breaks unguarded scripts), each in its own session.
    They are ours alone and are always reaped: stdin closed, then killed if they do not exit -- and killed at once,
    process group and all, when the call is cancelled or past its deadline.
    """
    cmd = [sys.executable, "-c", WORKER_COMMAND]
    env = {**os.environ, **WORKER_HASH_ENV, **WORKER_MALLOC_ENV}
    procs: list[subprocess.Popen[bytes]] = []
    threads: list[threading.Thread] = []
    todo: queue.Queue[Task] = queue.Queue()
    for task in tasks:
        todo.put(task)
    done_q: queue.Queue[tuple[Task, RangeResult | Exception]] = queue.Queue()

    def drive(proc: subprocess.Popen[bytes]) -> None:
        to_worker, from_worker = proc.stdin, proc.stdout
        if to_worker is None or from_worker is None:  # started with pipes: never None
            return
        while True:
            try:
                task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                send_message(to_worker, (*task, opts, paths))
                done_q.put((task, recv_message(from_worker)))
            except Exception as exc:  # worker died or pipe broke: report, and stop using this worker
                done_q.put((task, exc))
                return

    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            )
        threads = [threading.Thread(target=drive, args=(p,), daemon=True) for p in procs]
        for t in threads:
            t.start()
        results, retry, done = _collect(tasks, threads, done_q, progress, limits)
        if not results and tasks:
            raise WorkersUnavailable
        for t in threads:
            t.join()
        while True:  # ranges no worker could take (a worker died): scan them here
            try:
                retry.append(todo.get_nowait())
            except queue.Empty:
                break
        opener = guarded_opener(paths)
        for path, start, end in retry:
            results.append(scan_range(path, start, end, opts, open_file=opener, limits=limits))
            done += end - start
            progress(done, f"scanned {os.path.basename(path)} bytes {start}-{end}")
        return results
    except CallCancelled:
        _kill(procs, threads, todo)
        raise
    except OSError as exc:
        raise WorkersUnavailable from exc
    finally:
        _reap(procs)


def _collect(
    tasks: list[Task],
    threads: list[threading.Thread],
    done_q: queue.Queue[tuple[Task, RangeResult | Exception]],
    progress: Progress,
    limits: CallLimits,
) -> tuple[list[RangeResult], list[Task], int]:
    """The workers' results as they arrive (with progress), the tasks whose worker failed, and the bytes done;
    :class:`CallCancelled` as soon as the call is cancelled or past its deadline."""
    results: list[RangeResult] = []
    retry: list[Task] = []
    done = 0
    failed = 0
    while len(results) + failed < len(tasks):
        limits.check()
        try:
            task, res = done_q.get(timeout=WAIT_SLICE_S)
        except queue.Empty:
            if not any(t.is_alive() for t in threads) and done_q.empty():
                break  # every worker is gone; whatever is left is scanned by the caller
            continue
        if isinstance(res, Exception):
            failed += 1
            retry.append(task)
            continue
        results.append(res)
        done += task[2] - task[1]
        progress(done, f"scanned {os.path.basename(task[0])} bytes {task[1]}-{task[2]}")
    return results, retry, done


def _kill(procs: list[subprocess.Popen[bytes]], threads: list[threading.Thread], todo: queue.Queue[Task]) -> None:
    """Stop a cancelled pool now: no more tasks handed out, every worker's process group killed, and the drive
    threads given a moment to see their pipes close."""
    with contextlib.suppress(queue.Empty):
        while True:
            todo.get_nowait()
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(p.pid, signal.SIGKILL)
    for t in threads:
        t.join(timeout=JOIN_AFTER_KILL_S)


def _reap(procs: list[subprocess.Popen[bytes]]) -> None:
    """Close every worker's stdin (it exits at EOF), wait for it, and kill it if it does not exit."""
    for p in procs:
        with contextlib.suppress(OSError):
            if p.stdin is not None:
                p.stdin.close()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        with contextlib.suppress(OSError):
            if p.stdout is not None:
                p.stdout.close()


# --------------------------------------------------------------------------------------------------------
# The worker side: length-prefixed pickles over stdin/stdout
# --------------------------------------------------------------------------------------------------------


def send_message(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def recv_message(stream: IO[bytes]) -> Any:  # whatever the other side pickled
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("worker closed its output")
    n = int.from_bytes(head, "little")
    data = stream.read(n)
    if len(data) < n:
        raise EOFError("worker output cut short")
    return pickle.loads(data)


def worker_main() -> None:
    """Entry point of a local worker process: scan the (path, start, end, options, path policy) tasks from stdin."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            path, start, end, opts, paths = recv_message(stdin)
        except EOFError:
            return
        send_message(stdout, scan_range(path, start, end, opts, open_file=guarded_opener(paths)))
