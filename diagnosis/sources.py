"""Reading what to diagnose: pasted text and log files or directories, as bounded byte chunks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..core import RunContext, ToolInputError

CHUNK_BYTES = 8 << 20
MAX_FILE_BYTES = 1 << 30  # per file: larger files are read from the end (the failure is at the end)
MAX_TOTAL_BYTES = 2 << 30  # per call, over all files of a directory
MAX_FILES = 200
MAX_DIR_DEPTH = 4
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")


def collect_log_files(root: Path, ctx: RunContext) -> tuple[list[Path], int]:
    """Log files under a directory, newest first; returns (files, omitted)."""
    found: list[tuple[float, Path]] = []
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if len(Path(dirpath).parts) - base_depth >= MAX_DIR_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        for name in sorted(filenames):
            if not name.lower().endswith(LOG_SUFFIXES):
                continue
            p = Path(dirpath) / name
            try:
                real = ctx.paths.check(str(p), kind="file", what="log file")
                found.append((real.stat().st_mtime, real))
            except (ToolInputError, OSError):
                continue
            if len(found) > 10 * MAX_FILES:
                break
    found.sort(key=lambda t: (-t[0], str(t[1])))
    files = [p for _, p in found]
    return files[:MAX_FILES], max(0, len(files) - MAX_FILES)


def file_chunks(path: Path, start: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        if start:
            f.seek(start)
        while True:
            chunk = f.read(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk


def text_chunks(text: str) -> Iterator[bytes]:
    data = text.encode("utf-8", "replace")
    for i in range(0, len(data), CHUNK_BYTES):
        yield data[i : i + CHUNK_BYTES]
