"""What the server needs to expose a tool, and what a tool gets when it runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from .findings import ToolResult
from .limits import CallLimits
from .paths import PathPolicy
from .policy import OperatorPolicy

ProgressFn = Callable[[float, "float | None", "str | None"], None]


def _no_progress(progress: float, total: float | None = None, message: str | None = None) -> None:
    return None


@dataclass
class RunContext:
    """What a tool gets besides its parameters: allowed roots, progress reporting, the server's env, what the
    operator allowed at start, and the call's deadline and cancellation."""

    paths: PathPolicy = field(default_factory=lambda: PathPolicy.from_strings([os.getcwd()]))
    progress: ProgressFn = _no_progress
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    policy: OperatorPolicy = field(default_factory=OperatorPolicy.from_settings)
    limits: CallLimits = field(default_factory=CallLimits)


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
