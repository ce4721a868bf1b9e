"""The run's scalar tracker, in either format, as per-tag step series (only the tags this engine uses).

``_log_step`` hands one dict of scalars per train step to the tracker (xtuner/v1/train/rl_trainer.py:1340-1429);
the initial evaluation logs ``eval/*`` at step 0 (rl_trainer.py:886-887). ``exp_tracker="jsonl"`` appends
``json.dumps({**scalars, "step": step})`` lines to ``logs/exp_tracking/tracker.jsonl``
(xtuner/v1/_writer/jsonl_writer.py:13,29,65-67, flushed every 30 s: :109,136-138); the default ``"tensorboard"``
calls ``SummaryWriter.add_scalar`` once per tag (xtuner/v1/_writer/tb_writer.py:34-35), read by ``tensorboard``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from ..core import PathPolicy, ToolInputError, open_guarded
from ..core.files import refusal
from ..core.limits import UNLIMITED, CallLimits
from .tensorboard import read_scalars

#: Scalars read by name. Keys are the tracker tags (rl_trainer.py:1346, 1358-1363, 1378, 1400-1401, 1421). The
#: training_samples count of data_info is not among them: _log_step keeps it out of the response/* scalars
#: (rl_trainer.py:1367-1378); response/batch_size carries the same number (:1262-1263).
TAGS = (
    "time/step",
    "time/produce_batch",
    "time/training",
    "time/evaluation",
    "response/rewards/mean",
    "response/rewards/min",
    "response/rewards/max",
    "response/advantages/min",
    "response/advantages/max",
    "response/response_len/mean",
    "response/response_len/max",
    "response/batch_size",
    "entropy/rollout",
    "entropy/train",
    "async/completed_samples",
    "async/aborted_samples",
    "async/expired_samples",
    "async/failed_samples",
    "async/filtered_samples",
)
_WANTED = frozenset(TAGS)
EVAL_PREFIX = "eval/"
MAX_EVAL_TAGS = 16
MAX_STEPS = 200_000
MAX_JSONL_BYTES = 512 << 20
MAX_EVENT_BYTES = 1 << 30
#: A tracker line is a few KiB of scalars; a longer one is skipped unread.
MAX_RECORD_BYTES = 1 << 20
#: Bytes read between two checks of the call's deadline.
CHECK_BYTES = 1 << 20


@dataclass
class Tracker:
    """Scalars by tag, each ``{step: value}``; ``last_step`` is the newest step any scalar was logged at."""

    format: str = "none"
    scalars: dict[str, dict[int, float]] = field(default_factory=dict)
    eval_tags: list[str] = field(default_factory=list)
    records: int = 0
    bad_records: int = 0
    non_finite: int = 0  # nan/inf scalars skipped (a diverged loss, Python's json NaN/Infinity)
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        seen: set[int] = set()
        for series in self.scalars.values():
            seen.update(series)
        return sorted(seen)

    @property
    def last_step(self) -> int | None:
        steps = [max(s) for s in self.scalars.values() if s]
        return max(steps) if steps else None

    def series(self, tag: str) -> dict[int, float]:
        return self.scalars.get(tag, {})

    def _want(self, tag: str) -> bool:
        if tag in _WANTED or tag in self.eval_tags:
            return True
        if tag.startswith(EVAL_PREFIX) and len(self.eval_tags) < MAX_EVAL_TAGS:
            self.eval_tags.append(tag)
            return True
        return False

    def _add(self, tag: str, step: int, value: float) -> None:
        if not math.isfinite(value):
            self.non_finite += 1
            return
        series = self.scalars.setdefault(tag, {})
        if len(series) < MAX_STEPS or step in series:
            series[step] = value  # the last write of a step wins, as TensorBoard shows it

    def _note_non_finite(self) -> None:
        if self.non_finite:
            self.notes.append(f"{self.non_finite} non-finite scalar value(s) (nan/inf) were skipped")


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        return float(v)
    except OverflowError:  # an integer beyond a double
        return math.inf


def _record(raw: bytes) -> object:
    """One line: orjson, else the standard library, which also reads the NaN/Infinity that ``json.dumps`` writes."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _skip_rest_of_line(f: BinaryIO, limits: CallLimits) -> None:
    """Read through the next newline a piece at a time (never a whole over-long line in memory)."""
    while (piece := f.readline(MAX_RECORD_BYTES)) and not piece.endswith(b"\n"):
        limits.check()


def read_jsonl(path: Path, paths: PathPolicy, limits: CallLimits = UNLIMITED) -> Tracker:
    """``tracker.jsonl``: one JSON object per ``add_scalars`` call; a torn last line is skipped."""
    tr = Tracker(format="jsonl")
    with open_guarded(paths, path, what="logs/exp_tracking/tracker.jsonl") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSONL_BYTES:
            f.seek(size - MAX_JSONL_BYTES)
            _skip_rest_of_line(f, limits)
            tr.notes.append(f"tracker.jsonl is {size >> 20} MiB: read its last {MAX_JSONL_BYTES >> 20} MiB")
        done = next_check = 0
        while raw := f.readline(MAX_RECORD_BYTES + 1):
            done += len(raw)
            if done >= next_check:
                limits.check()
                next_check = done + CHECK_BYTES
            if len(raw) > MAX_RECORD_BYTES:
                if not raw.endswith(b"\n"):
                    _skip_rest_of_line(f, limits)
                tr.bad_records += 1
                continue
            try:
                rec = _record(raw)
            except (ValueError, RecursionError):
                tr.bad_records += 1
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
                tr.bad_records += 1
                continue
            tr.records += 1
            step = rec["step"]
            for tag, v in rec.items():
                num = _number(v)
                if num is not None and tag != "step" and tr._want(tag):
                    tr._add(tag, step, num)
    tr._note_non_finite()
    return tr


def read_events(files: list[Path], paths: PathPolicy, limits: CallLimits = UNLIMITED) -> Tracker:
    """TensorBoard event files, oldest first (their names start with the creation time)."""
    tr = Tracker(format="tensorboard")
    budget = MAX_EVENT_BYTES
    for path in files:
        if budget <= 0:
            tr.notes.append(f"event files beyond {MAX_EVENT_BYTES >> 20} MiB were not read")
            break
        try:
            with open_guarded(paths, path, what=f"logs/exp_tracking/{path.name}") as f:
                for step, _wall, tag, value in read_scalars(f, tr._want, budget, limits):
                    tr.records += 1
                    tr._add(tag, step, value)
                budget -= os.fstat(f.fileno()).st_size
        except ToolInputError as exc:
            tr.notes.append(f"logs/exp_tracking/{path.name} {refusal(exc)}: not read")
    tr._note_non_finite()
    return tr


def load(tracker_jsonl: Path | None, events: list[Path], paths: PathPolicy, limits: CallLimits = UNLIMITED) -> Tracker:
    """The tracker in the format the run wrote; a file refused at open is a note, not an error."""
    if tracker_jsonl is not None:
        try:
            return read_jsonl(tracker_jsonl, paths, limits)
        except ToolInputError as exc:
            return Tracker(format="jsonl", notes=[f"logs/exp_tracking/tracker.jsonl {refusal(exc)}: not read"])
    if events:
        return read_events(events, paths, limits)
    return Tracker()
