"""Build the MCP server: one MCP tool per ``ToolSpec``, plus resources and prompts.

Every tool goes through ``_make_handler``: arguments are validated against the tool's parameter model,
blocking work runs on a worker thread, progress is forwarded, user-fixable problems become a structured
``ToolError`` and anything unexpected is logged here and reported without a traceback.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from .. import __version__
from ..core import PathPolicy, RunContext, ToolInputError, ToolSpec
from . import registry

log = logging.getLogger("xtuner_rl_mcp")

SERVER_NAME = "xtuner-rl-mcp"

INSTRUCTIONS = """\
Plans, checks and troubleshoots XTuner V1 reinforcement-learning (GRPO) runs, true to XTuner main@b934f46.
Read-only: it never launches training and never starts or stops Ray.
Typical order: lookup_reference for questions; choose_topology to plan; check_reward_data on the JSONL;
inspect_config on the Python config; probe_environment for packages/env/Ray; build_rl_command for the launch
script; preflight for one go/no-go; diagnose_symptom for a failed or stuck run (paste the log); inspect_run
for a running or finished run's health (progress, stall, reward signal, truncation, eval; a PNG on request).
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
    known = set(spec.params.model_fields)

    async def handler(ctx: Context, **kwargs: Any) -> Any:
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ToolError(
                error_payload(
                    "invalid_arguments",
                    f"unknown argument(s): {', '.join(unknown)[:500]}",
                    f"Use only: {', '.join(sorted(known))}.",
                )
            )
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
        content: list[Any] = [TextContent(type="text", text=text)]
        media = getattr(result, "media", None)  # binary extras a result offers, e.g. inspect_run's PNG
        for mime, data in media() if callable(media) else ():
            content.append(ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime))
        return CallToolResult(content=content, structured_content=payload)

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
    _validate_in_handler(server, spec.name)


class _PassThroughArguments(ArgModelBase):
    """Accepts any arguments; the handler validates them against the tool's own model (extra="forbid")."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def compact_schema(schema: Any, key: str | None = None) -> Any:
    """The same JSON Schema with less to read: no generated ``title``s, no ``default: null``, ``X | None`` as
    ``type: [X, "null"]``.

    Every assistant session pays for the tool definitions; pydantic's titles repeat the field names and its
    nullable ``anyOf`` spells one type in three objects. Field descriptions, defaults and bounds are kept.
    """
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: compact_schema(v, k) for k, v in schema.items() if not (k == "title" and key != "properties")}
    if out.get("default", 0) is None and key != "properties":
        del out["default"]  # an optional field's null default: absent from `required` already says so
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
        (other,) = [x for x in any_of if x != {"type": "null"}]
        if isinstance(other, dict) and isinstance(other.get("type"), str) and "const" not in other:
            del out["anyOf"]
            out.update(other)
            out["type"] = [other["type"], "null"]
            if "enum" in other:
                out["enum"] = [*other["enum"], None]
    return out


def _validate_in_handler(server: MCPServer, name: str) -> None:
    """Argument errors (wrong type, missing, unknown) come back as the structured ``invalid_arguments`` error.

    The published input schema stays the one generated from the parameter model (with
    ``additionalProperties: false``); only the SDK's own pre-validation is replaced, because it answers in
    plain pydantic text and ignores unknown arguments.
    """
    tool = server._tool_manager.get_tool(name)  # the SDK has no public hook for this
    if tool is None:  # pragma: no cover
        return
    tool.fn_metadata.arg_model = _PassThroughArguments
    tool.parameters = compact_schema(tool.parameters)
    tool.parameters["additionalProperties"] = False
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema)


class XTunerRLServer(MCPServer):
    """MCPServer whose tools, resources and prompts are registered on first use, not at start.

    The first response (``initialize`` / ``server/discover``) then costs no more than a bare MCPServer; the first
    list or call pays the registration once. Everything else is the SDK's own behaviour.
    """

    def __init__(self, paths: PathPolicy, specs: Sequence[ToolSpec] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._pending: tuple[PathPolicy, Sequence[ToolSpec] | None] | None = (paths, specs)
        self._load_lock = threading.Lock()

    def ensure_loaded(self) -> None:
        if self._pending is None:
            return
        with self._load_lock:
            if self._pending is None:
                return
            paths, specs = self._pending
            for spec in specs if specs is not None else registry.load_specs():
                register_tool(self, spec, paths)
            from . import resources

            resources.register(self)
            self._pending = None

    async def list_tools(self) -> Any:
        self.ensure_loaded()
        return await super().list_tools()

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        self.ensure_loaded()
        return await super().call_tool(*args, **kwargs)

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        self.ensure_loaded()
        return super()._tool_input_schema(name)

    async def list_resources(self) -> Any:
        self.ensure_loaded()
        return await super().list_resources()

    async def list_resource_templates(self) -> Any:
        self.ensure_loaded()
        return await super().list_resource_templates()

    async def read_resource(self, *args: Any, **kwargs: Any) -> Any:
        self.ensure_loaded()
        return await super().read_resource(*args, **kwargs)

    async def list_prompts(self) -> Any:
        self.ensure_loaded()
        return await super().list_prompts()

    async def get_prompt(self, *args: Any, **kwargs: Any) -> Any:
        self.ensure_loaded()
        return await super().get_prompt(*args, **kwargs)


def build_server(
    paths: PathPolicy | None = None,
    specs: Sequence[ToolSpec] | None = None,
    *,
    lazy: bool = False,
) -> XTunerRLServer:
    """The server with every tool, resource and prompt; ``lazy`` defers registration to first use (``serve``)."""
    server = XTunerRLServer(
        paths or PathPolicy.from_strings([os.getcwd()]),
        specs,
        name=SERVER_NAME,
        title="XTuner RL planner and troubleshooter",
        version=__version__,
        instructions=INSTRUCTIONS,
        website_url="https://github.com/InternLM/xtuner",
        log_level="WARNING",
    )
    if not lazy:
        server.ensure_loaded()
    return server
