"""Path policy: file-reading tools read only inside the allowed roots."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import ToolInputError

MAX_PATH_CHARS = 4096
PathKind = Literal["file", "dir", "any"]


@dataclass(frozen=True)
class PathPolicy:
    """The trees file-reading tools may read. Paths are checked after resolving symlinks."""

    roots: tuple[Path, ...]

    @classmethod
    def from_strings(cls, roots: Iterable[str | os.PathLike[str]]) -> PathPolicy:
        resolved = tuple(Path(os.path.realpath(os.path.expanduser(str(r)))) for r in roots)
        return cls(resolved or (Path(os.path.realpath(os.getcwd())),))

    def describe(self) -> list[str]:
        return [str(r) for r in self.roots]

    def contains(self, real: Path) -> bool:
        """Whether an already resolved path lies under one of the roots."""
        return any(real == root or root in real.parents for root in self.roots)

    def check(self, raw: str | os.PathLike[str], *, kind: PathKind = "any", what: str = "path") -> Path:
        """Resolve ``raw`` and return it if it is inside a root, exists and is of ``kind``.

        Relative paths are taken from the first root. Special files (FIFOs, devices, sockets) are refused
        so that a read can never block or run forever.
        """
        text = os.fspath(raw)
        if not isinstance(text, str) or not text.strip():
            raise ToolInputError("path_empty", f"{what} is empty", "Pass a file or directory path.")
        if "\x00" in text:
            raise ToolInputError("path_invalid", f"{what} contains a NUL byte", "Pass a plain path.")
        if len(text) > MAX_PATH_CHARS:
            raise ToolInputError("path_invalid", f"{what} is longer than {MAX_PATH_CHARS} characters")
        p = Path(os.path.expanduser(text))
        if not p.is_absolute():
            p = self.roots[0] / p
        try:
            real = Path(os.path.realpath(p))
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loops on some platforms
            raise ToolInputError("path_invalid", f"{what} {text!r} cannot be resolved: {exc}") from None
        if not self.contains(real):
            raise ToolInputError(
                "path_outside_roots",
                f"{what} {text!r} resolves to {str(real)!r}, outside the allowed roots",
                "Move the file under an allowed root, or start the server with --allow-root <dir> "
                "(or XTUNER_RL_MCP_ALLOW_ROOTS).",
                allowed_roots=self.describe(),
            )
        try:
            st = os.stat(real)
        except FileNotFoundError:
            where = "" if text == str(real) else f" (looked for {str(real)!r})"
            raise ToolInputError(
                "path_not_found",
                f"{what} {text!r} does not exist{where}; allowed roots: {', '.join(self.describe())}",
                "Check the path; a relative path is taken from the first allowed root.",
            ) from None
        except PermissionError:
            raise ToolInputError(
                "path_permission_denied", f"{what} {text!r} cannot be read: permission denied"
            ) from None
        except OSError as exc:
            raise ToolInputError("path_invalid", f"{what} {text!r} cannot be read: {exc.strerror}") from None
        is_dir = stat.S_ISDIR(st.st_mode)
        is_file = stat.S_ISREG(st.st_mode)
        if not (is_dir or is_file):
            raise ToolInputError(
                "path_special_file",
                f"{what} {text!r} is not a regular file or directory (FIFO, device or socket); refused",
                "Pass a regular file.",
            )
        if kind == "file" and not is_file:
            raise ToolInputError("path_not_file", f"{what} {text!r} is a directory, expected a file")
        if kind == "dir" and not is_dir:
            raise ToolInputError("path_not_dir", f"{what} {text!r} is a file, expected a directory")
        if not os.access(real, os.R_OK):
            raise ToolInputError("path_permission_denied", f"{what} {text!r} cannot be read: permission denied")
        return real
