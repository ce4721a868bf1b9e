"""Which data files a path names -- one file, every *.jsonl below a directory, or a glob -- each checked against
the path policy, with bounded walks that never enter a linked directory; and telling Parquet files (not JSONL)
apart by their magic bytes.

A file named directly that the policy refuses is an error. A file found by listing a directory or matching a glob
that the policy refuses (a link out of the roots, a FIFO) is returned as refused, with why, and is not read."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core import PathPolicy, ToolInputError, open_guarded
from ..core.files import refusal

MAX_FILES = 10_000
MAX_WALK_DIRS = 20_000
#: Directory levels a glob's ``**`` descends.
MAX_GLOB_DEPTH = 64
GLOB_CHARS = frozenset("*?[")


@dataclass
class DataFiles:
    """The data files to scan (resolved, inside the roots) and those listed but refused: (path, why)."""

    files: list[Path] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def glob_base(pattern: str) -> str:
    parts = Path(pattern).parts
    base: list[str] = []
    for part in parts:
        if any(ch in part for ch in GLOB_CHARS):
            break
        base.append(part)
    return str(Path(*base)) if base else "."


class _Walk:
    """A bounded glob walk: at most ``MAX_WALK_DIRS`` directories listed, links to directories never entered."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs = 0

    def entries(self, folder: str) -> list[os.DirEntry[str]]:
        self.dirs += 1
        if self.dirs > MAX_WALK_DIRS:
            raise ToolInputError(
                "too_many_files", f"{self.root} is too large a tree to search", "Pass a narrower directory or a glob."
            )
        try:
            with os.scandir(folder) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError:
            return []

    def glob(self, folder: str, parts: tuple[str, ...], depth: int = 0) -> Iterator[os.DirEntry[str]]:
        """Non-directory entries below ``folder`` matching ``parts`` (fnmatch per component; ``**`` any depth up to
        ``MAX_GLOB_DEPTH``; hidden names only when the component starts with a dot, as :mod:`glob` does)."""
        head, rest = parts[0], parts[1:]
        if head == "**":
            if rest:
                yield from self.glob(folder, rest, depth)
            for e in self.entries(folder):
                if e.name.startswith("."):
                    continue
                if _is_real_dir(e):
                    if depth < MAX_GLOB_DEPTH:
                        yield from self.glob(e.path, parts, depth + 1)
                elif not rest:
                    yield e
            return
        for e in self.entries(folder):
            if (e.name.startswith(".") and not head.startswith(".")) or not fnmatch.fnmatchcase(e.name, head):
                continue
            if rest:
                if _is_real_dir(e):
                    yield from self.glob(e.path, rest, depth + 1)
            elif not _is_real_dir(e):
                yield e


def _is_real_dir(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _jsonl_under(root: Path) -> Iterator[str]:
    """Every non-directory ``*.jsonl`` entry below ``root`` (linked directories are not entered); bounded walk."""
    walk = _Walk(root)
    stack = [str(root)]
    while stack:
        for e in walk.entries(stack.pop()):
            if _is_real_dir(e):
                stack.append(e.path)
            elif e.name.endswith(".jsonl"):
                yield e.path


def _checked(paths: PathPolicy, found: Iterator[str], out: DataFiles) -> None:
    """Each listed path through the path policy: kept (resolved) or refused with why; at most ``4 * MAX_FILES``."""
    kept: set[Path] = set()
    for i, path in enumerate(found):
        if i >= MAX_FILES * 4:
            break
        try:
            kept.add(paths.check(path, kind="file", what="data file"))
        except ToolInputError as exc:
            out.refused.append((path, f"{refusal(exc)}: not read"))
    out.files = sorted(kept)


def resolve_files(raw: str, paths: PathPolicy) -> DataFiles:
    """The data files ``raw`` names (file, directory, or glob), each checked against the path policy."""
    text = os.path.expanduser(raw.strip()) if raw else raw
    out = DataFiles()
    if text and any(ch in text for ch in GLOB_CHARS):
        pattern = text if os.path.isabs(text) else str(paths.roots[0] / text)
        base_text = glob_base(pattern)
        base = paths.check(base_text, kind="dir", what="glob base directory")
        parts = Path(pattern).parts[len(Path(base_text).parts) :]
        _checked(paths, (e.path for e in _Walk(base).glob(str(base), parts)), out)
        if not out.files and not out.refused:
            raise ToolInputError(
                "no_files_matched", f"glob {raw!r} matched no file (searched under {base})", "Check the pattern."
            )
    else:
        target = paths.check(text, kind="any")
        if target.is_dir():
            _checked(paths, _jsonl_under(target), out)
            if not out.files and not out.refused:
                raise ToolInputError(
                    "no_jsonl_files", f"directory {raw!r} holds no *.jsonl file", "Pass the data file itself."
                )
        else:
            out.files = [target]
    if len(out.files) > MAX_FILES:
        raise ToolInputError(
            "too_many_files", f"{len(out.files)} files match {raw!r}; at most {MAX_FILES}", "Narrow the path or glob."
        )
    return out


def is_parquet(path: Path, paths: PathPolicy) -> bool:
    try:
        with open_guarded(paths, path, what="data file") as fh:
            return fh.read(4) == b"PAR1"
    except ToolInputError:
        return False
