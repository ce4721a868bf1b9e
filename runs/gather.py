"""Read one experiment within budgets: which trajectory files to scan, and the scan itself (with progress)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from ..core import PathPolicy, ToolInputError
from ..core.files import file_size, refusal
from ..core.limits import UNLIMITED, CallLimits
from .trajectories import FileStats, scan_file

RECENT_FILES = 20
MAX_EVAL_FILES = 50


def _size(paths: PathPolicy, path: Path) -> int | None:
    """The size of a file still inside the roots; None when it is gone or was swapped for something refused."""
    try:
        return file_size(paths, path, what="trajectory file")
    except (ToolInputError, OSError):
        return None


def select_files(
    files: dict[int, Path], max_files: int, max_bytes: int, paths: PathPolicy
) -> tuple[list[tuple[int, Path]], int]:
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
        size = _size(paths, files[step])
        if size is None or (picked and used + size > max_bytes):
            continue
        used += size
        picked.append((step, files[step]))
    picked.sort()
    return picked, len(steps) - len(picked)


def _scanned(
    progress: Callable[[float, float | None, str | None], None], what: str, total: int, base: int, n: int
) -> None:
    """Progress of the file being scanned: ``n`` bytes into it, ``base`` before it, of about ``total``."""
    progress(base + n, max(total, base + n), what)


def scan_files(
    picked: list[tuple[int, Path]],
    progress: Callable[[float, float | None, str | None], None],
    what: str,
    paths: PathPolicy,
    limits: CallLimits = UNLIMITED,
) -> tuple[list[FileStats], list[str]]:
    """Scan each file with the typed block decoder; progress in bytes over all files. Returns the files' stats and
    a note for each file refused when it was opened."""
    total = sum(_size(paths, p) or 0 for _, p in picked)
    done = 0
    out: list[FileStats] = []
    notes: list[str] = []
    for step, path in picked:
        try:
            stats = scan_file(path, step, partial(_scanned, progress, what, total, done), paths=paths, limits=limits)
        except ToolInputError as exc:
            notes.append(f"{path.parent.name}/{path.name} {refusal(exc)}: not read")
            continue
        out.append(stats)
        done += stats.bytes
    return out, notes
