"""Read one experiment within budgets: which trajectory files to scan, and the scan itself (with progress)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .trajectories import FileStats, scan_file

RECENT_FILES = 20
MAX_EVAL_FILES = 50


def select_files(files: dict[int, Path], max_files: int, max_bytes: int) -> tuple[list[tuple[int, Path]], int]:
    """The newest ``RECENT_FILES`` steps plus evenly spread older ones, up to ``max_files`` and ``max_bytes``
    (newest first when the bytes run out); returns ((step, path) oldest first, files left out)."""
    steps = sorted(files)
    if not steps:
        return [], 0
    recent = steps[-RECENT_FILES:]
    older = steps[: -len(recent)]
    room = max(0, max_files - len(recent))
    if len(older) > room:
        older = [older[round(i * (len(older) - 1) / max(1, room - 1))] for i in range(room)] if room else []
    chosen = sorted(set(older) | set(recent[-max_files:]), reverse=True)
    picked: list[tuple[int, Path]] = []
    used = 0
    for step in chosen:
        try:
            size = files[step].stat().st_size
        except OSError:
            continue
        if picked and used + size > max_bytes:
            continue
        used += size
        picked.append((step, files[step]))
    picked.sort()
    return picked, len(steps) - len(picked)


def scan_files(
    picked: list[tuple[int, Path]], progress: Callable[[float, float | None, str | None], None], what: str
) -> list[FileStats]:
    """Scan each file with the typed block decoder; progress in bytes over all files."""
    total = 0
    for _, p in picked:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    done = 0
    out: list[FileStats] = []
    for step, path in picked:
        base = done
        out.append(scan_file(path, step, lambda n, b=base: progress(b + n, max(total, b + n), what)))
        done += out[-1].bytes
    return out
