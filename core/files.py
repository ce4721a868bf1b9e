"""The one guarded way to open a file: inside the allowed roots, regular files only, never blocking, size-capped.

Every file a tool reads on a caller's behalf is opened here. A path given by the caller *and* every path derived
from it (a file inside a run directory, a site-packages file of a training environment) is resolved again, so a
symlink anywhere along the way cannot lead out of the roots. The file is opened with ``O_NONBLOCK`` and checked
with ``fstat`` on the open descriptor: a FIFO, socket or device is refused at once instead of blocking the call, and
the check cannot be raced by swapping the file after a separate ``stat``. On Linux the open descriptor's real path
is checked against the roots as well, which closes the window between resolving and opening.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import ToolInputError
from .paths import PathPolicy

#: Default cap for a whole-file read (a JSON sidecar, a config, a metadata file).
DEFAULT_WHOLE_FILE_CAP = 8 << 20


def _open_flags() -> int:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    return flags | getattr(os, "O_NOFOLLOW", 0)


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@contextlib.contextmanager
def open_guarded(
    paths: PathPolicy, raw: str | os.PathLike[str], *, what: str = "file", buffering: int = -1
) -> Iterator[BinaryIO]:
    """Open ``raw`` for binary reading after every check above; a :class:`ToolInputError` says what failed."""
    real = paths.check(raw, kind="file", what=what)
    try:
        fd = os.open(real, _open_flags())
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component became a symlink after it was resolved
            raise ToolInputError("path_invalid", f"{what} {os.fspath(raw)!r} changed while it was opened") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ToolInputError("path_permission_denied", f"{what} {os.fspath(raw)!r} cannot be read") from None
        raise ToolInputError("path_invalid", f"{what} {os.fspath(raw)!r} cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolInputError(
                "path_special_file",
                f"{what} {os.fspath(raw)!r} is not a regular file (FIFO, device or socket); refused",
                "Pass a regular file.",
            )
        opened = _fd_path(fd)
        if opened is not None and not paths.contains(Path(opened)):
            raise ToolInputError(
                "path_outside_roots", f"{what} {os.fspath(raw)!r} changed to a place outside the allowed roots"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def file_size(paths: PathPolicy, raw: str | os.PathLike[str], *, what: str = "file") -> int:
    """The size of a checked regular file (no open needed: ``stat`` never blocks)."""
    real = paths.check(raw, kind="file", what=what)
    return os.stat(real).st_size


def read_guarded(
    paths: PathPolicy,
    raw: str | os.PathLike[str],
    *,
    what: str = "file",
    limit: int = DEFAULT_WHOLE_FILE_CAP,
    truncate: bool = False,
) -> bytes:
    """The whole file, at most ``limit`` bytes: a larger file is an error, or its first ``limit`` bytes when
    ``truncate`` (for sidecars where a prefix is still useful)."""
    with open_guarded(paths, raw, what=what) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        if not truncate:
            raise ToolInputError(
                "file_too_large",
                f"{what} {os.fspath(raw)!r} is larger than {limit:,} bytes; not read",
                "Pass a smaller file.",
                limit_bytes=limit,
            )
        data = data[:limit]
    return data


def read_text_input(
    paths: PathPolicy, raw: str, *, what: str, code: str, limit: int, fix: str, strict_utf8: bool = False
) -> tuple[str, str]:
    """(resolved path, text) of a small text input a tool reads whole (a config, a launch script): guarded, at most
    ``limit`` bytes, no NUL bytes, UTF-8 (undecodable bytes replaced unless ``strict_utf8``). Refusals are
    ``<code>_too_large``, ``<code>_binary`` and ``<code>_not_text``, each with ``fix``."""
    real = paths.check(raw, kind="file", what=what)
    try:
        data = read_guarded(paths, real, what=what, limit=limit)
    except ToolInputError as exc:
        if exc.code != "file_too_large":
            raise
        raise ToolInputError(
            f"{code}_too_large", f"{what} {raw!r} is larger than {limit:,} bytes: not a {what}", fix
        ) from None
    if b"\x00" in data:
        raise ToolInputError(f"{code}_binary", f"{what} {raw!r} looks binary (NUL bytes)", fix)
    try:
        return str(real), data.decode("utf-8", errors="strict" if strict_utf8 else "replace")
    except UnicodeDecodeError:
        raise ToolInputError(f"{code}_not_text", f"{what} {raw!r} is not UTF-8 text", fix) from None


def try_read_guarded(
    paths: PathPolicy, raw: str | os.PathLike[str], *, what: str = "file", limit: int = DEFAULT_WHOLE_FILE_CAP
) -> bytes | None:
    """Like :func:`read_guarded` with ``truncate``, but None when the file is absent, refused or unreadable."""
    try:
        return read_guarded(paths, raw, what=what, limit=limit, truncate=True)
    except ToolInputError:
        return None


def guarded_dir(paths: PathPolicy, raw: str | os.PathLike[str], *, what: str = "directory") -> Path | None:
    """The resolved directory when it exists inside the roots, else None (for optional sub-directories)."""
    try:
        return paths.check(raw, kind="dir", what=what)
    except ToolInputError:
        return None


def guarded_file(paths: PathPolicy, raw: str | os.PathLike[str], *, what: str = "file") -> Path | None:
    """The resolved regular file when it exists inside the roots, else None (for optional files)."""
    try:
        return paths.check(raw, kind="file", what=what)
    except ToolInputError:
        return None


#: Why a file derived from a caller's path was not read, by the refusal's code. No resolved path is named: where a
#: link out of the roots points, and whether that exists, stay unsaid.
_REFUSAL_PHRASES = {
    "path_outside_roots": "links outside the allowed roots",
    "path_special_file": "is not a regular file (FIFO, device or socket)",
    "path_permission_denied": "cannot be read (permission denied)",
    "path_not_found": "is a dangling link",
    "path_not_file": "is a directory",
    "path_not_dir": "is not a directory",
}


def refusal(exc: ToolInputError) -> str:
    """A short phrase for a note: ``f"logs/env.json {refusal(exc)}: not read"``."""
    if exc.code == "file_too_large":
        return f"is larger than {exc.details.get('limit_bytes', 0):,} bytes"
    return _REFUSAL_PHRASES.get(exc.code, "cannot be opened")
