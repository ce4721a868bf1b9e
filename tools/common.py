"""Conventions every tool follows: result base model, the shared Finding, errors, path policy, caps.

Tools are plain functions ``run(params, ctx) -> Result``. The server turns each ``ToolSpec`` into an MCP tool;
the CLI's ``call`` goes through the same MCP path. Nothing in this module imports MCP.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

XTUNER_SOURCE = "InternLM/xtuner@b934f46"

Severity = Literal["blocker", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"blocker": 0, "warning": 1, "info": 2}

#: The failure-mode catalog's fixed category set (issue 3); every Finding uses one of them.
Category = Literal[
    "ray_not_running",
    "ray_resources_insufficient",
    "backend_not_installed",
    "backend_flag_missing_or_multiple",
    "backend_unsupported",
    "backend_runtime_error",
    "missing_env_var_or_path",
    "config_load_error",
    "reward_data_missing_ground_truth",
    "data_format_other",
    "resource_mismatch_num_workers",
    "staleness_or_partial_rollout",
    "eval_or_interval_config",
    "debug_trace_output",
    "model_loading",
    "other",
]
CATEGORIES: tuple[str, ...] = Category.__args__  # type: ignore[attr-defined]

#: Who fixes a problem: where preflight routes a finding.
Owner = Literal[
    "data_preparation",
    "backend_install",
    "cluster_setup",
    "config_edit",
    "launch_command",
    "model_files",
    "environment",
]

Detail = Literal["summary", "normal", "full"]

#: Default cap on list lengths in results; every capped list has a sibling ``*_omitted`` count.
DEFAULT_LIST_CAP = 50


class Finding(BaseModel):
    """One problem or observation, shared by every tool."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="Stable identifier, e.g. 'data.missing_ground_truth'; safe to match on")
    severity: Severity = Field(description="blocker: the run will fail; warning: likely wrong; info: note")
    category: Category = Field(description="Failure-mode category from the catalog's fixed set")
    title: str = Field(description="One line saying what is wrong")
    evidence: str = Field(default="", description="What was observed: the value, line or message")
    location: str | None = Field(default=None, description="Where: 'file:line' or a JSON pointer, if any")
    fix: str = Field(default="", description="What to do about it")
    reference: str = Field(
        default="", description="Resource URI of the explanation, e.g. xtuner-rl://references/data-contract"
    )
    source: str | None = Field(default=None, description="XTuner source 'path:line' the rule comes from")
    owner: Owner | None = Field(default=None, description="Who fixes it (used by preflight to route)")


class ToolResult(BaseModel):
    """Base of every tool result: opens with a one-line summary an agent can quote."""

    # Validators are built on first use, so a tool that is listed but never called costs less at start.
    model_config = ConfigDict(defer_build=True)

    summary: str = Field(description="One line an agent can quote")


class ToolInputError(Exception):
    """A user-fixable problem with a tool's input; the server turns it into a structured tool error."""

    def __init__(self, code: str, message: str, fix: str = "", **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fix = fix
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        if self.details:
            out["details"] = self.details
        return out


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Blockers first, then warnings, then info; stable within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


def dedupe_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Keep the first finding per (id, location)."""
    seen: set[tuple[str, str | None]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.id, f.location)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


T = TypeVar("T")


def cap(items: Sequence[T], limit: int) -> tuple[list[T], int]:
    """Return at most ``limit`` items and how many were left out."""
    limit = max(0, limit)
    return list(items[:limit]), max(0, len(items) - limit)


def count_severities(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {"blocker": 0, "warning": 0, "info": 0}
    for f in findings:
        counts[f.severity] += 1
    return counts


# --------------------------------------------------------------------------------------------------------
# Path policy: file-reading tools read only inside the allowed roots.
# --------------------------------------------------------------------------------------------------------

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

    def _inside(self, real: Path) -> bool:
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
        if not self._inside(real):
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
            raise ToolInputError("path_not_found", f"{what} {text!r} does not exist", "Check the path.") from None
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


# --------------------------------------------------------------------------------------------------------
# Run context and tool specification
# --------------------------------------------------------------------------------------------------------

ProgressFn = Callable[[float, "float | None", "str | None"], None]


def _no_progress(progress: float, total: float | None = None, message: str | None = None) -> None:
    return None


@dataclass
class RunContext:
    """What a tool gets besides its parameters: allowed roots, progress reporting, the server's env."""

    paths: PathPolicy = field(default_factory=lambda: PathPolicy.from_strings([os.getcwd()]))
    progress: ProgressFn = _no_progress
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class ToolSpec:
    """Everything the server needs to expose one tool."""

    name: str
    title: str
    description: str  # purpose, then "Use when:" and "Not for:" lines
    params: type[BaseModel]
    result: type[ToolResult]
    run: Callable[[Any, RunContext], ToolResult]
    read_only: bool = True
    idempotent: bool = True
    open_world: bool = False  # true only for live probes of things outside this process
    blocking: bool = True  # run on a worker thread (file or network I/O)


def params_model_config() -> ConfigDict:
    """Model config for tool parameter models: unknown arguments are an error."""
    return ConfigDict(extra="forbid", defer_build=True)
