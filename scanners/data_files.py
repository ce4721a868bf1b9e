"""Which data files a path names -- one file, every *.jsonl below a directory, or a glob -- each checked against
the path policy, with bounded walks; and telling Parquet files (not JSONL) apart by their magic bytes."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from ..core import PathPolicy, ToolInputError

MAX_FILES = 10_000
MAX_WALK_DIRS = 20_000
GLOB_CHARS = frozenset("*?[")


def glob_base(pattern: str) -> str:
    parts = Path(pattern).parts
    base: list[str] = []
    for part in parts:
        if any(ch in part for ch in GLOB_CHARS):
            break
        base.append(part)
    return str(Path(*base)) if base else "."


def _jsonl_under(root: Path) -> list[Path]:
    """Regular *.jsonl files below ``root`` (symlinked directories are not entered); bounded walk."""
    found: list[Path] = []
    for i, (dirpath, dirnames, filenames) in enumerate(os.walk(root)):
        if i >= MAX_WALK_DIRS or len(found) > MAX_FILES:
            raise ToolInputError(
                "too_many_files", f"{root} is too large a tree to search", "Pass a narrower directory or a glob."
            )
        dirnames.sort()
        for name in filenames:
            if name.endswith(".jsonl") and os.path.isfile(os.path.join(dirpath, name)):
                found.append(Path(dirpath, name))
    return found


def resolve_files(raw: str, paths: PathPolicy) -> list[Path]:
    """The data files ``raw`` names (file, directory, or glob), each checked against the path policy."""
    text = os.path.expanduser(raw.strip()) if raw else raw
    if text and any(ch in text for ch in GLOB_CHARS):
        pattern = text if os.path.isabs(text) else str(paths.roots[0] / text)
        base = paths.check(glob_base(pattern), kind="dir", what="glob base directory")
        found = []
        for i, hit in enumerate(glob.iglob(pattern, recursive=True)):
            if i >= MAX_FILES * 4:
                break
            if os.path.isfile(hit):
                found.append(hit)
        files = sorted({paths.check(h, kind="file") for h in found})
        if not files:
            raise ToolInputError(
                "no_files_matched", f"glob {raw!r} matched no file (searched under {base})", "Check the pattern."
            )
    else:
        target = paths.check(text, kind="any")
        if target.is_dir():
            files = sorted({paths.check(h, kind="file") for h in _jsonl_under(target)})
            if not files:
                raise ToolInputError(
                    "no_jsonl_files", f"directory {raw!r} holds no *.jsonl file", "Pass the data file itself."
                )
        else:
            files = [target]
    if len(files) > MAX_FILES:
        raise ToolInputError(
            "too_many_files", f"{len(files)} files match {raw!r}; at most {MAX_FILES}", "Narrow the path or glob."
        )
    return files


def is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False
