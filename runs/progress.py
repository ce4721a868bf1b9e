"""Where a run is: its step counter, step times and last activity, read from the tails of its rank logs.

Log lines come from loguru with the format ``[XTuner][RANK <r>][YYYY-MM-DD HH:mm:ss][LEVEL][<tag>] <message>``
(xtuner/v1/utils/logger.py:15-32, file sink ``rank_<rank>.log`` at :94-97). The trainer logs
``Train step <n>/<total> start`` before each step (xtuner/v1/train/rl_trainer.py:1718 colocated, :2009 disaggregated)
and after it ``Train step <n>/<total>`` followed by ``Train step <n> finished and timing listed:`` and one
`` - <timer> : <seconds>s`` line per timer (rl_trainer.py:1346-1348, 1424-1426); ``Eval: <k>: <v> ...`` follows when
it evaluated (:1427-1428).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core import PathPolicy, ToolInputError, open_guarded
from ..core.files import refusal
from ..core.limits import UNLIMITED, CallLimits

TAIL_BYTES = 4 << 20
_PREFIX_RE = re.compile(r"^\[XTuner\](?:\[RANK \d+\])?\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\]\[(\w+)\]")
_START_RE = re.compile(r"Train step (\d+)/(\d+) start")
_DONE_RE = re.compile(r"Train step (\d+) finished and timing listed")
_TIMER_RE = re.compile(r"^ - (\w+)\s*: ([0-9.]+)s\s*$")
_TOTAL_RE = re.compile(r"Train step (\d+)/(\d+)")
_FINISHED_NO_EVAL = "Final train step reached without scheduled evaluation"  # rl_trainer.py:1811
_REACHED_RE = re.compile(r"Train steps (\d+) reached, stop training")  # rl_trainer.py:1696,1984

SRC_STEP_START = "xtuner/v1/train/rl_trainer.py:1718"
SRC_STEP_TIMING = "xtuner/v1/train/rl_trainer.py:1346-1348"
SRC_LOG_FORMAT = "xtuner/v1/utils/logger.py:15-32"


@dataclass
class LogProgress:
    """What the log tails say."""

    started_step: int | None = None  # newest "Train step n/T start"
    finished_step: int | None = None  # newest "Train step n finished and timing listed"
    total_steps: int | None = None
    step_times: dict[int, float] = field(default_factory=dict)  # from the ' - step : Xs' timer lines
    last_line: str | None = None
    last_time: str | None = None  # the newest log timestamp (local time of the run)
    last_level: str | None = None
    final_without_eval: bool = False
    reached: bool = False
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _tail_lines(paths: PathPolicy, path: Path) -> list[str]:
    """The whole lines of the file's last ``TAIL_BYTES`` (opened through the path policy)."""
    with open_guarded(paths, path, what="rank log") as f:
        size = os.fstat(f.fileno()).st_size
        if size > TAIL_BYTES:
            f.seek(size - TAIL_BYTES)
            f.readline(TAIL_BYTES)  # to the next line start (a longer line is read from its middle)
        data = f.read(TAIL_BYTES)
    return data.decode("utf-8", "replace").splitlines()


def read_logs(rank_logs: dict[int, Path], paths: PathPolicy, limits: CallLimits = UNLIMITED) -> LogProgress:
    """Parse the last 4 MiB of each rank log (rank 0 first; other ranks only fill what rank 0 lacks)."""
    lp = LogProgress()
    for _rank, path in sorted(rank_logs.items())[:16]:
        limits.check()
        try:
            lines = _tail_lines(paths, path)
        except ToolInputError as exc:
            lp.notes.append(f"logs/{path.name} {refusal(exc)}: not read")
            continue
        except OSError:
            continue
        lp.files.append(str(path))
        _parse(lines, lp)
    return lp


def _parse(lines: list[str], lp: LogProgress) -> None:
    done_step: int | None = None
    for line in lines:
        m = _PREFIX_RE.match(line)
        if m:
            if lp.last_time is None or m.group(1) >= lp.last_time:
                lp.last_time, lp.last_level, lp.last_line = m.group(1), m.group(2), line.strip()[:400]
            done_step = None
        if "Train step" in line:
            if s := _START_RE.search(line):
                step, total = int(s.group(1)), int(s.group(2))
                lp.started_step = max(lp.started_step or 0, step)
                lp.total_steps = total
            elif d := _DONE_RE.search(line):
                done_step = int(d.group(1))
                lp.finished_step = max(lp.finished_step or 0, done_step)
            elif (t := _TOTAL_RE.search(line)) and lp.total_steps is None:
                lp.total_steps = int(t.group(2))
        elif done_step is not None and (tm := _TIMER_RE.match(line)) and tm.group(1) == "step":
            lp.step_times[done_step] = float(tm.group(2))
        if _FINISHED_NO_EVAL in line:
            lp.final_without_eval = True
        if _REACHED_RE.search(line):
            lp.reached = True


def newest_mtime(
    policy: PathPolicy, files: list[Path], folders: list[Path], max_entries: int = 5000
) -> tuple[float | None, str | None]:
    """The newest modification time among ``files`` (each checked with the path policy again) and the plain files
    directly inside ``folders`` (folders already checked inside the roots; links in them are not followed)."""
    times: list[tuple[float, str]] = []
    for p in files:
        try:
            times.append((os.stat(policy.check(p, kind="file", what="run file")).st_mtime, str(p)))
        except (ToolInputError, OSError):
            continue
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                entries = list(itertools.islice(it, max_entries))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_file(follow_symlinks=False):
                    times.append((e.stat(follow_symlinks=False).st_mtime, e.path))
            except OSError:
                continue
    newest = max(times, default=None)
    return (newest[0], newest[1]) if newest else (None, None)
