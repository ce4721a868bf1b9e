"""The run's scalar tracker, in either format, as per-tag step series (only the tags this engine uses).

``_log_step`` hands one dict of scalars per train step to the tracker (xtuner/v1/train/rl_trainer.py:1340-1429);
the initial evaluation logs ``eval/*`` at step 0 (rl_trainer.py:886-887). ``exp_tracker="jsonl"`` appends
``json.dumps({**scalars, "step": step})`` lines to ``logs/exp_tracking/tracker.jsonl``
(xtuner/v1/_writer/jsonl_writer.py:13,29,65-67, flushed every 30 s: :109,136-138); the default ``"tensorboard"``
calls ``SummaryWriter.add_scalar`` once per tag (xtuner/v1/_writer/tb_writer.py:34-35), read by ``tensorboard``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .tensorboard import read_scalars

#: Scalars read by name. Keys are the tracker tags (rl_trainer.py:1346, 1358-1363, 1378, 1400-1401, 1421).
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
    "response/training_samples",
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


@dataclass
class Tracker:
    """Scalars by tag, each ``{step: value}``; ``last_step`` is the newest step any scalar was logged at."""

    format: str = "none"
    scalars: dict[str, dict[int, float]] = field(default_factory=dict)
    eval_tags: list[str] = field(default_factory=list)
    records: int = 0
    bad_records: int = 0
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
        series = self.scalars.setdefault(tag, {})
        if len(series) < MAX_STEPS or step in series:
            series[step] = value  # the last write of a step wins, as TensorBoard shows it


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def read_jsonl(path: Path) -> Tracker:
    """``tracker.jsonl``: one JSON object per ``add_scalars`` call; a torn last line is skipped."""
    tr = Tracker(format="jsonl")
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size > MAX_JSONL_BYTES:
            f.seek(size - MAX_JSONL_BYTES)
            f.readline()
            tr.notes.append(f"tracker.jsonl is {size >> 20} MiB: read its last {MAX_JSONL_BYTES >> 20} MiB")
        for raw in f:
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
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
    return tr


def read_events(files: list[Path]) -> Tracker:
    """TensorBoard event files, oldest first (their names start with the creation time)."""
    tr = Tracker(format="tensorboard")
    budget = MAX_EVENT_BYTES
    for path in files:
        if budget <= 0:
            tr.notes.append(f"event files beyond {MAX_EVENT_BYTES >> 20} MiB were not read")
            break
        for step, _wall, tag, value in read_scalars(path, tr._want, budget):
            tr.records += 1
            tr._add(tag, step, value)
        budget -= path.stat().st_size
    return tr


def load(tracker_jsonl: Path | None, events: list[Path]) -> Tracker:
    if tracker_jsonl is not None:
        return read_jsonl(tracker_jsonl)
    if events:
        return read_events(events)
    return Tracker()
