"""Reading what to diagnose: pasted text and log files or directories, as bounded byte chunks. Every file is
checked with the path policy on its own (a link out of the roots or a FIFO among the logs is noted, not read) and
opened through the one guarded opener."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core import PathPolicy, RunContext, ToolInputError, open_guarded
from ..core.files import refusal
from .log_scanner import Scanner

CHUNK_BYTES = 8 << 20
MAX_FILE_BYTES = 1 << 30  # per file: larger files are read from the end (the failure is at the end)
MAX_TOTAL_BYTES = 2 << 30  # per call, over all files of a directory
MAX_FILES = 200
MAX_DIR_DEPTH = 4
MAX_NOTES = 20
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")


@dataclass(frozen=True)
class LogFile:
    """A log file checked inside the allowed roots (resolved), with its size when it was listed."""

    path: Path
    size: int


@dataclass
class LogFiles:
    """The log files of a directory, newest first; how many were left out; what was refused and why."""

    files: list[LogFile] = field(default_factory=list)
    omitted: int = 0
    notes: list[str] = field(default_factory=list)
    refused: int = 0

    def refuse(self, path: Path, exc: ToolInputError) -> None:
        self.refused += 1
        if len(self.notes) < MAX_NOTES:
            self.notes.append(f"{path} {refusal(exc)}: not read")


def collect_log_files(root: Path, ctx: RunContext) -> LogFiles:
    """Log files under a directory already checked inside the roots, newest first. Links are never followed into
    a directory; a linked file is read only when it resolves inside the roots to a regular file."""
    found: list[tuple[float, LogFile]] = []
    out = LogFiles()
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        ctx.limits.check()
        if len(Path(dirpath).parts) - base_depth >= MAX_DIR_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        logs = {name for name in filenames if name.lower().endswith(LOG_SUFFIXES)}
        for name in [*dirnames, *sorted(filenames)]:
            p = Path(dirpath) / name
            if name not in logs and not os.path.islink(p):
                continue
            try:  # every link is judged by the policy alike, whatever it points to (no oracle on its target)
                real = ctx.paths.check(p, kind="file" if name in logs else "any", what="log file")
                if name not in logs:
                    continue  # a link inside the roots to a directory or a non-log file: not followed
                st = os.stat(real)
            except ToolInputError as exc:
                out.refuse(p, exc)
                continue
            except OSError:
                continue
            found.append((st.st_mtime, LogFile(real, st.st_size)))
            if len(found) > 10 * MAX_FILES:
                break
    if out.refused > len(out.notes):
        out.notes.append(f"{out.refused - len(out.notes)} more log files refused")
    found.sort(key=lambda t: (-t[0], str(t[1].path)))
    out.files = [f for _, f in found[:MAX_FILES]]
    out.omitted = max(0, len(found) - MAX_FILES)
    return out


def file_chunks(paths: PathPolicy, path: Path, start: int, length: int) -> Iterator[bytes]:
    """``length`` bytes of a log file from ``start`` (at most: a growing log is read as it was listed), opened
    through the path policy."""
    with open_guarded(paths, path, what="log file") as f:
        if start:
            f.seek(start)
        left = length
        while left > 0:
            chunk = f.read(min(CHUNK_BYTES, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


@dataclass
class ReadLogs:
    """What :func:`scan_log_files` read: the sources, notes on partial or refused files, files left out."""

    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    omitted: int = 0


def scan_log_files(scanner: Scanner, listed: LogFiles, paths: PathPolicy) -> ReadLogs:
    """Stream listed log files (newest first) through ``scanner`` within one budget: each file at most
    MAX_FILE_BYTES (its tail, where a failure is), all of them at most MAX_TOTAL_BYTES. The one reader of log files
    for every tool that diagnoses them."""
    out = ReadLogs(notes=list(listed.notes), omitted=listed.omitted)
    budget = MAX_TOTAL_BYTES
    for log in listed.files:
        path, size = log.path, log.size
        if budget <= 0:
            out.omitted += 1
            continue
        start = max(0, size - min(MAX_FILE_BYTES, budget))
        budget -= size - start
        try:
            scanner.scan_bytes_stream(str(path), file_chunks(paths, path, start, size - start), size - start)
        except ToolInputError as exc:  # swapped for something refused since it was listed
            out.notes.append(f"{path} {refusal(exc)}: not read")
            continue
        if start:  # line numbers are only known when the file is read from its start
            out.notes.append(
                f"{path}: read the last {(size - start) >> 20} MiB of {size >> 20} MiB; line numbers count from "
                f"byte {start}"
            )
        out.sources.append(str(path))
    if out.omitted:
        out.notes.append(f"{out.omitted} more log files were not read (newest first, limits)")
    return out


def text_chunks(text: str) -> Iterator[bytes]:
    data = text.encode("utf-8", "replace")
    for i in range(0, len(data), CHUNK_BYTES):
        yield data[i : i + CHUNK_BYTES]
