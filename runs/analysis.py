"""From raw run outputs to answers: progress and stall verdict, learning signals, compact per-step series."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..core import PathPolicy, cap
from .judging import judge_check
from .layout import RunLayout
from .models import ErrorCount, Learning, Progress, RunConfig, RunState, StepTimeTrend, Trend
from .progress import LogProgress, newest_mtime
from .tracker import Tracker
from .trajectories import FileStats

WINDOW = 5
#: A run counts as stalled when nothing was written for longer than its own steps take: max(STALL_MIN_S,
#: STALL_FACTOR x the median of its last 10 step times, its longest step). XTuner writes nothing while a step runs.
STALL_FACTOR = 5.0
STALL_MIN_S = 600.0
#: Before any step time is known (the first step loads, warms up and rolls out a whole batch): no stall verdict
#: within this many seconds of silence, unless the caller sets another bound.
FIRST_STEP_GRACE_S = 7200.0
TOP_ERRORS = 5


@dataclass
class Inputs:
    """Everything read from one experiment."""

    layout: RunLayout
    tracker: Tracker
    logs: LogProgress
    train: list[FileStats]
    evals: list[FileStats]
    train_files_omitted: int
    now: float
    failed_in_logs: str | None = None  # the top blocker diagnosis, when the logs end in one
    activity: tuple[float | None, str | None] = (None, None)  # newest write (mtime, file), see ``read_activity``
    notes: list[str] = field(default_factory=list)  # files refused while reading (beyond the layout's notes)
    config: RunConfig = field(default_factory=lambda: RunConfig(path=None))  # the run's config, see run_config
    first_step_grace_s: float = FIRST_STEP_GRACE_S


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _pct(num: int, den: int) -> float | None:
    return round(100.0 * num / den, 1) if den else None


def _r(x: float | None, nd: int = 4) -> float | None:
    """Rounded for the answer; None for nan/inf (huge tracker values overflow means), which JSON cannot carry."""
    return None if x is None or not math.isfinite(x) else round(x, nd)


# --------------------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------------------


def step_times(inp: Inputs) -> dict[int, float]:
    """time/step from the tracker, else from the log timing blocks."""
    return dict(inp.tracker.series("time/step")) or dict(inp.logs.step_times)


def last_step(inp: Inputs) -> int | None:
    cands = [inp.logs.finished_step, max(inp.layout.train_files, default=None)]
    tracked = [s for s in inp.tracker.steps if s > 0]
    cands.append(max(tracked) if tracked else None)
    vals = [c for c in cands if c is not None]
    return max(vals) if vals else None


def _trend_of_times(times: list[float]) -> tuple[float | None, float | None, StepTimeTrend]:
    if not times:
        return None, None, "unknown"
    first = statistics.median(times[:10])
    last = statistics.median(times[-10:])
    if len(times) < 6 or first <= 0:
        return first, last, "unknown"
    ratio = last / first
    trend: StepTimeTrend = "slowing" if ratio > 1.25 else "speeding_up" if ratio < 0.8 else "steady"
    return first, last, trend


def total_steps(inp: Inputs) -> int | None:
    """From the 'Train step n/total' log lines (what the trainer resolved), else the config's total_train_steps."""
    return inp.logs.total_steps if inp.logs.total_steps is not None else inp.config.count("total_train_steps")


def stall_threshold(times: list[float], grace_s: float) -> tuple[float, str]:
    """(seconds of silence that mean stalled, how they were derived) from the run's own step times."""
    if not times:
        return grace_s, f"the first-step grace {grace_s:.0f}s (no step time known yet; a step writes nothing)"
    median = statistics.median(times[-10:])
    longest = max(times)
    threshold = max(STALL_MIN_S, STALL_FACTOR * median, longest)
    return threshold, (
        f"{threshold:.0f}s = max({STALL_MIN_S:.0f}s, {STALL_FACTOR:g} x median step {median:.0f}s, "
        f"longest step {longest:.0f}s)"
    )


def progress(inp: Inputs) -> Progress:
    lay = inp.layout
    step = last_step(inp)
    total = total_steps(inp)
    times = [t for _, t in sorted(step_times(inp).items())]
    first, recent, trend = _trend_of_times(times)
    mtime, mfile = inp.activity
    idle = None if mtime is None else max(0.0, inp.now - mtime)
    threshold, basis = stall_threshold(times, inp.first_step_grace_s)
    evidence: list[str] = []
    state: RunState
    finished = step is not None and total is not None and step >= total
    if finished:
        state = "finished"
        evidence.append(f"last step {step} = total_steps {total}")
    elif inp.failed_in_logs:
        state = "failed"
        evidence.append(f"the logs end in an error: {inp.failed_in_logs}")
    elif idle is not None and idle > threshold:
        state = "stalled"
        evidence.append(f"nothing written for {idle:.0f}s, over the stall threshold {basis}; newest write: {mfile}")
    elif step is None and inp.logs.started_step is None:
        state = "not_started"
        evidence.append("no train step started or finished in the logs, tracker or trajectories yet")
    else:
        state = "running"
        if step is None:
            evidence.append(f"step {inp.logs.started_step} started, none finished yet")
        evidence.append(
            f"last write {idle:.0f}s ago, under the stall threshold {basis}"
            if idle is not None
            else "no file times available"
        )
    configured = inp.config.count("total_train_steps")
    if inp.logs.total_steps is not None and configured is not None and configured != inp.logs.total_steps:
        evidence.append(
            f"the config says total_train_steps={configured} ({inp.config.where('total_train_steps')}), the logs "
            f"{inp.logs.total_steps}: the config copy may belong to another launch"
        )
    if inp.logs.last_line:
        evidence.append(f"last log line: {inp.logs.last_line[:200]}")
    ckpts, ck_om = cap(lay.checkpoints[::-1], 10)
    hfs, hf_om = cap(lay.hf_exports[::-1], 10)
    eta = (total - step) * recent if state == "running" and total and step is not None and recent else None
    return Progress(
        state=state,
        last_step=step,
        total_steps=total,
        percent_done=_pct(step, total) if step is not None and total else None,
        step_time_s=_r(recent, 2),
        step_time_first_s=_r(first, 2),
        step_time_trend=trend,
        eta_s=_r(eta, 0),
        last_activity=None
        if mtime is None
        else datetime.fromtimestamp(mtime, timezone.utc).isoformat(timespec="seconds"),
        last_activity_file=mfile,
        idle_s=_r(idle, 1),
        stall_threshold_s=_r(threshold, 0),
        last_log_line=inp.logs.last_line,
        checkpoints=ckpts[::-1],
        checkpoints_omitted=ck_om,
        hf_exports=hfs[::-1],
        hf_exports_omitted=hf_om,
        evidence=evidence,
    )


def read_activity(lay: RunLayout, policy: PathPolicy) -> tuple[float | None, str | None]:
    """The newest write among the rank logs, the tracker, the newest trajectory files and the files in logs/."""
    files = list(lay.rank_logs.values())
    if lay.tracker_jsonl:
        files.append(lay.tracker_jsonl)
    files.extend(lay.tracker_events)
    if lay.train_files:
        files.append(lay.train_files[max(lay.train_files)])
    if lay.eval_files:
        files.append(lay.eval_files[max(lay.eval_files)])
    return newest_mtime(policy, files, [lay.logs_dir] if lay.logs_dir is not None else [])


# --------------------------------------------------------------------------------------------------------
# Learning
# --------------------------------------------------------------------------------------------------------


def reward_means(inp: Inputs) -> dict[int, float]:
    """Per-step reward mean: the trajectories' where read, the tracker's elsewhere."""
    out = {s: v for s, v in inp.tracker.series("response/rewards/mean").items() if s > 0}
    for fs in inp.train:
        if fs.reward_mean is not None:
            out[fs.step] = fs.reward_mean
    return dict(sorted(out.items()))


def trend(values: list[float], tol: float = 0.02) -> Trend:
    """rising/falling when the mean of the last third differs from the first third by more than ``tol``."""
    if len(values) < 3:
        return "unknown"
    k = max(1, len(values) // 3)
    a, b = sum(values[:k]) / k, sum(values[-k:]) / k
    scale = max(abs(a), abs(b), 1e-9)
    if abs(b - a) <= max(tol, 0.05 * scale):
        return "flat"
    return "rising" if b > a else "falling"


def eval_table(inp: Inputs) -> dict[int, dict[str, float]]:
    """Eval metrics per step: tracker eval/* scalars, else accuracy recomputed from eval_rollout files."""
    table: dict[int, dict[str, float]] = {}
    for tag in inp.tracker.eval_tags:
        for step, v in inp.tracker.series(tag).items():
            table.setdefault(step, {})[tag.removeprefix("eval/")] = v
    for fs in inp.evals:
        if fs.step not in table and fs.samples:
            # the default metric: share of samples scoring above 0 (xtuner/v1/rl/evaluator.py:20-28)
            table[fs.step] = {"accuracy": round(fs.reward_positive / fs.samples, 4)}
    return dict(sorted(table.items()))


def learning(inp: Inputs) -> Learning:
    train = sorted(inp.train, key=lambda f: f.step)
    win = train[-WINDOW:]
    rewards = reward_means(inp)
    rvals = list(rewards.values())
    groups = sum(f.groups for f in win)
    samples_w = sum(f.samples for f in win)
    status, top, top_om = _status_and_errors([*train, *inp.evals])
    sizes: dict[int, int] = {}
    for f in train:
        for size, n in f.group_sizes.items():
            sizes[size] = sizes.get(size, 0) + n
    ent = [v for s, v in sorted(inp.tracker.series("entropy/rollout").items()) if s > 0] or [
        v for s, v in sorted(inp.tracker.series("entropy/train").items()) if s > 0
    ]
    evals = eval_table(inp)
    latest = evals[max(evals)] if evals else {}
    best: dict[str, float] = {}
    for metrics in evals.values():
        for name, value in metrics.items():
            best[name] = max(best.get(name, value), value)
    return Learning(
        trajectory_files=len(inp.layout.train_files),
        steps_scanned=len(train),
        trajectory_files_omitted=inp.train_files_omitted,
        bytes_scanned=sum(f.bytes for f in [*train, *inp.evals]),
        samples=sum(f.samples for f in train),
        unreadable_lines=sum(f.unreadable for f in [*train, *inp.evals]),
        window=len(win),
        reward_mean_first=_r(_mean(rvals[:WINDOW])),
        reward_mean_last=_r(_mean(rvals[-WINDOW:])),
        reward_trend=trend(rvals),
        reward_std_last=_r(_mean(f.reward_std for f in win)),
        no_signal_groups_pct_last=_pct(sum(f.groups_no_signal for f in win), groups),
        all_zero_groups_pct_last=_pct(sum(f.groups_all_zero for f in win), groups),
        truncated_pct_last=_pct(sum(f.truncated for f in win), samples_w),
        response_len_mean_last=_r(_mean(f.response_len_mean for f in win), 1),
        response_len_max=max((f.response_len_max for f in train), default=None),
        group_size=max(sizes, key=lambda k: sizes[k]) if sizes else None,
        missing_labels=sum(f.missing_label for f in train),
        status_counts=status,
        top_errors=top,
        top_errors_omitted=top_om,
        entropy_first=_r(_mean(ent[:WINDOW])),
        entropy_last=_r(_mean(ent[-WINDOW:])),
        judge_check=judge_check(train),
        async_last={
            k: v
            for k in ("aborted", "expired", "failed")
            if (v := _r(_mean(list(_positive_steps(inp.tracker.series(f"async/{k}_samples")))[-WINDOW:]), 2))
            is not None
        },
        eval_steps=list(evals)[-50:],
        eval_next_step=next_eval_step(inp),
        eval_latest={k: round(v, 4) for k, v in latest.items()},
        eval_best={k: round(v, 4) for k, v in best.items()},
    )


def next_eval_step(inp: Inputs) -> int | None:
    """The next step the config evaluates at: a multiple of evaluate_step (rl_trainer.py:1760) within the run."""
    every = inp.config.count("evaluate_step")
    if inp.config.get("enable_evaluate") is not True or every is None:
        return None
    step = ((last_step(inp) or 0) // every + 1) * every
    total = total_steps(inp)
    return step if total is None or step <= total else None


def _status_and_errors(files: list[FileStats]) -> tuple[dict[str, int], list[ErrorCount], int]:
    """Sample status counts and the most frequent error messages over ``files``."""
    status: dict[str, int] = {}
    errors: dict[str, int] = {}
    for f in files:
        for k, v in f.status.items():
            status[k] = status.get(k, 0) + v
        for k, v in f.errors.items():
            errors[k] = errors.get(k, 0) + v
    ranked = sorted(errors.items(), key=lambda kv: -kv[1])
    top, omitted = cap([ErrorCount(message=k, count=v) for k, v in ranked], TOP_ERRORS)
    return status, top, omitted


def _positive_steps(series: dict[int, float]) -> list[float]:
    return [v for s, v in sorted(series.items()) if s > 0]


# --------------------------------------------------------------------------------------------------------
# Series
# --------------------------------------------------------------------------------------------------------

COLUMNS = (
    "reward_mean",
    "reward_std",
    "no_signal_groups_pct",
    "truncated_pct",
    "response_len_mean",
    "entropy_rollout",
    "step_time_s",
    "async_expired",
    "async_aborted",
    "async_failed",
)


def _pick(n: int, limit: int) -> list[int]:
    """Indices of ``limit`` evenly spread points over ``n``, first and last included."""
    if n <= limit:
        return list(range(n))
    if limit <= 1:
        return [n - 1]
    return sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def series(inp: Inputs, max_points: int) -> tuple[dict[str, list[float | None]], int]:
    """Columnar per-step series (``step`` plus COLUMNS), downsampled to ``max_points``; returns (series, steps)."""
    tr = inp.tracker
    by_step = {f.step: f for f in inp.train}
    rewards = reward_means(inp)
    times = step_times(inp)
    cols = {
        "entropy_rollout": tr.series("entropy/rollout"),
        "async_expired": tr.series("async/expired_samples"),
        "async_aborted": tr.series("async/aborted_samples"),
        "async_failed": tr.series("async/failed_samples"),
        "response_len_mean": tr.series("response/response_len/mean"),
    }
    steps = sorted({s for s in [*rewards, *times, *by_step, *(s for c in cols.values() for s in c)] if s > 0})
    keep = [steps[i] for i in _pick(len(steps), max_points)]
    out: dict[str, list[float | None]] = {"step": [float(s) for s in keep]}
    for name in COLUMNS:
        out[name] = [_cell(name, s, by_step.get(s), rewards, times, cols) for s in keep]
    return {k: v for k, v in out.items() if any(x is not None for x in v)}, len(steps)


def _cell(
    name: str,
    step: int,
    fs: FileStats | None,
    rewards: dict[int, float],
    times: dict[int, float],
    cols: dict[str, dict[int, float]],
) -> float | None:
    if name == "reward_mean":
        return _r(rewards.get(step))
    if name == "step_time_s":
        return _r(times.get(step), 2)
    if fs is not None:
        if name == "reward_std":
            return _r(fs.reward_std)
        if name == "no_signal_groups_pct":
            return _pct(fs.groups_no_signal, fs.groups)
        if name == "truncated_pct":
            return _pct(fs.truncated, fs.samples)
        if name == "response_len_mean" and fs.response_len_mean is not None:
            return _r(fs.response_len_mean, 1)
    if name in cols:
        return _r(cols[name].get(step))
    return None


def eval_series(inp: Inputs, max_points: int) -> dict[str, list[float | None]]:
    table = eval_table(inp)
    steps = list(table)
    keep = [steps[i] for i in _pick(len(steps), max_points)]
    names: list[str] = []
    for m in table.values():
        names.extend(k for k in m if k not in names)
    out: dict[str, list[float | None]] = {"step": [float(s) for s in keep]}
    for name in names[:12]:
        out[name] = [_r(table[s].get(name)) for s in keep]
    return out if keep else {}


def now() -> float:
    return time.time()


def rel(path: str | Path, base: Path) -> str:
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return str(path)
