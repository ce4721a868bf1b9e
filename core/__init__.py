"""Shared contracts every layer uses: findings and results, errors, the path policy, the tool spec.

Tools are plain functions ``run(params, ctx) -> Result``; the server turns each ``ToolSpec`` into an MCP tool.
Nothing here imports MCP or any engine.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ToolInputError
from .files import guarded_dir, guarded_file, open_guarded, read_guarded, read_text_input, try_read_guarded
from .limits import CallCancelled, CallLimits
from .paths import MAX_PATH_CHARS, PathKind, PathPolicy
from .policy import OperatorPolicy
from .process import Completed, run_bounded

if TYPE_CHECKING:
    from .findings import (
        CATEGORIES,
        DEFAULT_LIST_CAP,
        SEVERITY_ORDER,
        XTUNER_SOURCE,
        Category,
        Detail,
        Finding,
        Owner,
        Severity,
        ToolResult,
        cap,
        count_severities,
        dedupe_findings,
        sort_findings,
    )
    from .spec import ProgressFn, RunContext, ToolSpec, params_model_config

#: Names whose modules need pydantic, loaded on first use (PEP 562): a scan worker process, which needs only the
#: guarded opener and the limits, starts without importing pydantic.
_LAZY = {
    **dict.fromkeys(
        (
            "CATEGORIES",
            "DEFAULT_LIST_CAP",
            "SEVERITY_ORDER",
            "XTUNER_SOURCE",
            "Category",
            "Detail",
            "Finding",
            "Owner",
            "Severity",
            "ToolResult",
            "cap",
            "count_severities",
            "dedupe_findings",
            "sort_findings",
        ),
        ".findings",
    ),
    **dict.fromkeys(("ProgressFn", "RunContext", "ToolSpec", "params_model_config"), ".spec"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CATEGORIES",
    "DEFAULT_LIST_CAP",
    "MAX_PATH_CHARS",
    "SEVERITY_ORDER",
    "XTUNER_SOURCE",
    "CallCancelled",
    "CallLimits",
    "Category",
    "Completed",
    "Detail",
    "Finding",
    "OperatorPolicy",
    "Owner",
    "PathKind",
    "PathPolicy",
    "ProgressFn",
    "RunContext",
    "Severity",
    "ToolInputError",
    "ToolResult",
    "ToolSpec",
    "cap",
    "count_severities",
    "dedupe_findings",
    "guarded_dir",
    "guarded_file",
    "open_guarded",
    "params_model_config",
    "read_guarded",
    "read_text_input",
    "run_bounded",
    "sort_findings",
    "try_read_guarded",
]
