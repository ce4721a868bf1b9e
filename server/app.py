"""Build the MCP server: one MCP tool per ``ToolSpec``, plus resources and prompts.

Every tool goes through ``_make_handler``: arguments are validated against the tool's parameter model,
blocking work runs on a worker thread, progress is forwarded, user-fixable problems become a structured
``ToolError`` and anything unexpected is logged here and reported without a traceback.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from .. import __version__
from ..tools.common import PathPolicy, RunContext, ToolInputError, ToolSpec
from . import registry

log = logging.getLogger("xtuner_rl_mcp")

SERVER_NAME = "xtuner-rl-mcp"

INSTRUCTIONS = """\
Plans, checks and troubleshoots XTuner V1 reinforcement-learning (GRPO) runs, true to XTuner main@b934f46.
Read-only: it never launches training and never starts or stops Ray.
Typical order: lookup_reference for questions; choose_topology to plan; check_reward_data on the JSONL;
inspect_config on the Python config; probe_environment for packages/env/Ray; build_rl_command for the launch
script; preflight for one go/no-go; diagnose_symptom for a failed or stuck run (paste the log).
Every result opens with a one-line `summary`; findings carry id, severity, evidence, fix and a reference URI.
"""

_PROGRESS_MIN_INTERVAL_S = 0.1


def error_payload(code: str, message: str, fix: str = "", **details: Any) -> str:
    """The JSON text of a structured tool error."""
    err: dict[str, Any] = {"code": code, "message": message}
    if fix:
        err["fix"] = fix
    if details:
        err["details"] = details
    return json.dumps({"error": err}, ensure_ascii=False, default=str)


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False)[:10]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {e.get('msg')}")
    return "; ".join(parts)


def _signature_for(spec: ToolSpec) -> tuple[inspect.Signature, dict[str, Any]]:
    """A flat keyword signature built from the parameter model, so the input schema lists its fields."""
    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context}
    for name, f in spec.params.model_fields.items():
        extra = Field(
            description=f.description, title=f.title, examples=f.examples, json_schema_extra=f.json_schema_extra
        )
        ann = Annotated[(f.annotation, *f.metadata, extra)]  # type: ignore[valid-type]
        default = inspect.Parameter.empty if f.is_required() else f.get_default(call_default_factory=True)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default))
        annotations[name] = ann
    annotations["return"] = spec.result
    return inspect.Signature(params, return_annotation=spec.result), annotations


def _make_handler(spec: ToolSpec, paths: PathPolicy) -> Any:
    async def handler(ctx: Context, **kwargs: Any) -> Any:
        try:
            params = spec.params.model_validate(kwargs)
        except ValidationError as exc:
            raise ToolError(
                error_payload("invalid_arguments", _validation_message(exc), "Correct the arguments.")
            ) from None

        last = [0.0]

        def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            now = time.monotonic()
            final = total is not None and done >= total
            if not final and now - last[0] < _PROGRESS_MIN_INTERVAL_S:
                return
            last[0] = now
            try:
                anyio.from_thread.run(ctx.report_progress, done, total, message)
            except Exception:  # a vanished client must not break the tool
                log.debug("progress notification dropped", exc_info=True)

        async def aprogress(done: float, total: float | None = None, message: str | None = None) -> None:
            try:
                await ctx.report_progress(done, total, message)
            except Exception:
                log.debug("progress notification dropped", exc_info=True)

        try:
            if spec.blocking:
                run_ctx = RunContext(paths=paths, progress=progress, environ=dict(os.environ))
                result = await anyio.to_thread.run_sync(spec.run, params, run_ctx, abandon_on_cancel=True)
            else:
                run_ctx = RunContext(paths=paths, environ=dict(os.environ))
                result = spec.run(params, run_ctx)
                if inspect.isawaitable(result):
                    result = await result
        except ToolInputError as exc:
            raise ToolError(json.dumps({"error": exc.to_dict()}, ensure_ascii=False, default=str)) from None
        except Exception as exc:  # never leak a traceback to the client
            log.exception("tool %s failed", spec.name)
            raise ToolError(
                error_payload(
                    "internal_error",
                    f"{spec.name} failed unexpectedly ({type(exc).__name__}); details are in the server log",
                    "Report this with the arguments used; retrying with other arguments may work.",
                )
            ) from None
        payload = result.model_dump(mode="json")
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)

    sig, annotations = _signature_for(spec)
    handler.__signature__ = sig  # type: ignore[attr-defined]
    handler.__annotations__ = annotations
    handler.__name__ = spec.name
    handler.__qualname__ = spec.name
    handler.__doc__ = spec.description
    return handler


def register_tool(server: MCPServer, spec: ToolSpec, paths: PathPolicy) -> None:
    server.add_tool(
        _make_handler(spec, paths),
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
        structured_output=True,
    )
    _forbid_unknown_arguments(server, spec.name)


def _forbid_unknown_arguments(server: MCPServer, name: str) -> None:
    """Unknown arguments are an error, not silently dropped (a typo must not pass as a default)."""
    tool = server._tool_manager.get_tool(name)  # the SDK has no public hook for this
    if tool is None:  # pragma: no cover
        return
    base = tool.fn_metadata.arg_model

    class StrictArguments(base):  # type: ignore[valid-type, misc]
        model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    StrictArguments.__name__ = base.__name__
    tool.fn_metadata.arg_model = StrictArguments
    tool.parameters["additionalProperties"] = False


def build_server(
    paths: PathPolicy | None = None,
    specs: Sequence[ToolSpec] | None = None,
) -> MCPServer:
    """The server with every tool, resource and prompt registered."""
    paths = paths or PathPolicy.from_strings([os.getcwd()])
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="XTuner RL planner and troubleshooter",
        version=__version__,
        instructions=INSTRUCTIONS,
        website_url="https://github.com/InternLM/xtuner",
        log_level="WARNING",
    )
    for spec in specs if specs is not None else registry.load_specs():
        register_tool(server, spec, paths)
    from . import resources

    resources.register(server)
    return server
