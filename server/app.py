"""The MCP server on the SDK's public low-level API: this project's registry answers list-tools and call-tool.

Tools are loaded from ``server/registry.py`` on first use (``initialize`` / ``server/discover`` pay for none of
them). Every call goes through :func:`ToolHost.call`: arguments are validated against the tool's parameter model
(unknown ones refused), the call is admitted by the session's in-flight limit, blocking work runs on the server's
own bounded pool within a wall-clock deadline (:mod:`.runtime`), progress is forwarded, user-fixable problems
become a structured error and anything unexpected is logged here and reported without a traceback.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import typing
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import UnionType
from typing import Any

import anyio
import anyio.from_thread
import mcp.types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from pydantic import BaseModel, ValidationError

from .. import __version__
from ..core import CallCancelled, CallLimits, OperatorPolicy, PathPolicy, RunContext, ToolInputError, ToolSpec
from . import registry, resources
from .runtime import Busy, CallGate, DeadlineExceeded, ServerLimits
from .schemas import schema_of

#: The tool host of each server built here, for transports that must reach its calls (see cancel_on_disconnect).
_HOSTS: weakref.WeakKeyDictionary[Server[Any], ToolHost] = weakref.WeakKeyDictionary()

log = logging.getLogger("xtuner_rl_mcp")

SERVER_NAME = "xtuner-rl-mcp"

INSTRUCTIONS = """\
Plans, checks and troubleshoots XTuner V1 reinforcement-learning (GRPO) runs, true to XTuner main@b934f46.
Read-only: it never launches training and never starts or stops Ray.
Typical order: lookup_reference for questions; choose_topology to plan; check_reward_data on the JSONL;
inspect_config on the Python config; probe_environment for packages/env/Ray; build_rl_command for the launch
script; preflight for one go/no-go; diagnose_symptom for a failed or stuck run (paste the log or describe it, in
English or Chinese); inspect_run for a running or finished run's health (progress, stall, reward signal,
truncation, eval; a PNG on request).
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


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _accepts_object_not_string(annotation: Any) -> bool:
    """Whether a parameter takes a JSON object (a dict or a model) and never a plain string."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, UnionType) else ()
    kinds = options or (annotation,)
    if any(k is str for k in kinds):
        return False
    return any(
        typing.get_origin(k) is dict or k is dict or (isinstance(k, type) and issubclass(k, BaseModel)) for k in kinds
    )


def objects_from_json_strings(params: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments with a JSON-object string decoded where the parameter takes an object: some clients (MCP
    Inspector 0.15) send ``{"expected": "{\"num_workers\": 16}"}`` for an object field."""
    out = dict(arguments)
    for name, value in arguments.items():
        field = params.model_fields.get(name)
        if field is None or not isinstance(value, str) or not value.lstrip().startswith("{"):
            continue
        if not _accepts_object_not_string(field.annotation):
            continue
        try:
            decoded = json.loads(value)
        except ValueError:
            continue
        if isinstance(decoded, dict):
            out[name] = decoded
    return out


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False)[:10]:
        loc = ".".join(str(x) for x in e.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {e.get('msg')}")
    return "; ".join(parts)


def session_key(ctx: ServerRequestContext[Any, Any]) -> str:
    """Whose call this is: the connection (stdio, in-memory), else the HTTP session, else the HTTP client."""
    request = ctx.request
    if request is None:
        return "connection"
    headers = getattr(request, "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    if sid:
        return f"session:{sid[:200]}"
    client = getattr(request, "client", None)
    return f"client:{getattr(client, 'host', '?')}"


class ToolHost:
    """The tools of one server: their definitions (built once, on first use) and how a call runs."""

    def __init__(
        self,
        paths: PathPolicy,
        specs: Sequence[ToolSpec] | None,
        policy: OperatorPolicy,
        limits: ServerLimits,
    ) -> None:
        self.paths = paths
        self.policy = policy
        self.gate = CallGate(limits)
        self._given = specs
        self._specs: dict[str, ToolSpec] | None = None
        self._tools: list[types.Tool] = []
        self._load_lock = threading.Lock()
        #: Calls in flight by (session key, JSON-RPC id), so a transport that sees its client leave can cancel one.
        self._running: dict[tuple[str, str], anyio.CancelScope] = {}

    def cancel(self, session: str, request_id: str) -> bool:
        """Cancel the call ``request_id`` of ``session`` if it is still running (its client went away)."""
        scope = self._running.get((session, request_id))
        if scope is None:
            return False
        scope.cancel()
        return True

    def specs(self) -> dict[str, ToolSpec]:
        if self._specs is None:
            with self._load_lock:
                if self._specs is None:
                    loaded = list(self._given) if self._given is not None else registry.load_specs()
                    self._tools = [self._definition(s) for s in loaded]
                    self._specs = {s.name: s for s in loaded}
        return self._specs

    def tools(self) -> list[types.Tool]:
        self.specs()
        return self._tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        tool = next((t for t in self.tools() if t.name == name), None)
        return tool.input_schema if tool is not None else None

    @staticmethod
    def _definition(spec: ToolSpec) -> types.Tool:
        return types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=schema_of(spec.params),
            output_schema=schema_of(spec.result, "serialization"),
            annotations=types.ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=False,
                idempotent_hint=spec.idempotent,
                open_world_hint=spec.open_world,
            ),
        )

    async def call(
        self, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        spec = self.specs().get(name)
        if spec is None:
            return _error_result(
                error_payload(
                    "unknown_tool", f"no tool named {name[:100]!r}", f"Use one of: {', '.join(self._specs or {})}."
                )
            )
        known = set(spec.params.model_fields)
        unknown = sorted(set(arguments or {}) - known)
        if unknown:
            return _error_result(
                error_payload(
                    "invalid_arguments",
                    f"unknown argument(s): {', '.join(unknown)[:500]}",
                    f"Use only: {', '.join(sorted(known))}.",
                )
            )
        try:
            params = spec.params.model_validate(objects_from_json_strings(spec.params, arguments or {}))
        except ValidationError as exc:
            return _error_result(error_payload("invalid_arguments", _validation_message(exc), "Correct the arguments."))
        in_flight: Counter[str] = ctx.lifespan_context["in_flight"]
        limits = CallLimits.within(self.gate.limits.call_timeout_s)
        key = (session_key(ctx), str(ctx.request_id))
        result: Any = None
        try:
            with self.gate.admit(in_flight, key[0]), anyio.CancelScope() as scope:
                self._running[key] = scope
                result = await self._run(spec, params, ctx, limits)
            if scope.cancelled_caught:  # cancel(): the transport saw the client leave
                log.info("%s call cancelled: its client went away; its work was told to stop", spec.name)
                return _error_result(error_payload("cancelled", "the client went away; the call was stopped"))
        except anyio.get_cancelled_exc_class():
            log.info("%s call cancelled: its client cancelled it or went away; its work was told to stop", spec.name)
            raise
        except Busy as exc:
            return _error_result(error_payload("busy", exc.message, "Retry in a few seconds."))
        except (DeadlineExceeded, CallCancelled):
            return _error_result(
                error_payload(
                    "deadline_exceeded",
                    f"{spec.name} did not finish within {self.gate.limits.call_timeout_s:g} s and was stopped",
                    "Narrow the input (a smaller file, fewer checks, a shorter timeout_s), or ask the operator to "
                    "raise the server's --call-timeout.",
                )
            )
        except ToolInputError as exc:
            return _error_result(json.dumps({"error": exc.to_dict()}, ensure_ascii=False, default=str))
        except Exception as exc:  # never leak a traceback to the client
            log.exception("tool %s failed", spec.name)
            return _error_result(
                error_payload(
                    "internal_error",
                    f"{spec.name} failed unexpectedly ({type(exc).__name__}); details are in the server log",
                    "Report this with the arguments used; retrying with other arguments may work.",
                )
            )
        finally:
            self._running.pop(key, None)
        payload = result.model_dump(mode="json")
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        content: list[Any] = [types.TextContent(type="text", text=text)]
        media = getattr(result, "media", None)  # binary extras a result offers, e.g. inspect_run's PNG
        for mime, data in media() if callable(media) else ():
            content.append(
                types.ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime)
            )
        return types.CallToolResult(content=content, structured_content=payload)

    async def _run(self, spec: ToolSpec, params: Any, ctx: ServerRequestContext[Any, Any], limits: CallLimits) -> Any:
        session = ctx.session
        if not spec.blocking:
            return spec.run(params, self._context(limits))
        last = [0.0]

        def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            now = time.monotonic()
            final = total is not None and done >= total
            if limits.expired() or (not final and now - last[0] < _PROGRESS_MIN_INTERVAL_S):
                return
            last[0] = now
            try:
                anyio.from_thread.run(session.report_progress, done, total, message)
            except Exception:  # a vanished client must not break the tool
                log.debug("progress notification dropped", exc_info=True)

        run_ctx = self._context(limits, progress)
        return await self.gate.run_blocking(lambda: spec.run(params, run_ctx), limits)

    def _context(self, limits: CallLimits, progress: Any = None) -> RunContext:
        ctx = RunContext(paths=self.paths, environ=dict(os.environ), policy=self.policy, limits=limits)
        if progress is not None:
            ctx.progress = progress
        return ctx


def build_server(
    paths: PathPolicy | None = None,
    specs: Sequence[ToolSpec] | None = None,
    *,
    lazy: bool = False,
    policy: OperatorPolicy | None = None,
    limits: ServerLimits | None = None,
) -> Server[dict[str, Any]]:
    """The server with every tool, resource and prompt; ``lazy`` defers loading the tools to first use."""
    host = ToolHost(
        paths or PathPolicy.from_strings([os.getcwd()]),
        specs,
        policy if policy is not None else OperatorPolicy.from_settings(),
        limits or ServerLimits(),
    )

    @asynccontextmanager
    async def lifespan(_: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        # Entered once per stdio or in-memory connection, once for all HTTP sessions (keyed by session_key).
        yield {"in_flight": Counter()}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=host.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await host.call(ctx, params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type)
                for r in resources.static_resources()
            ]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=t.uri_template,
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    mime_type=t.mime_type,
                )
                for t in resources.TEMPLATES
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            text, mime = resources.read_resource(params.uri)
        except resources.ResourceNotFound as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data={"uri": params.uri[:500]}) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type=mime, text=text)]
        )

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=[types.PromptArgument(name=a, description=d, required=False) for a, d in p.arguments],
                )
                for p in resources.PROMPTS
            ]
        )

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        try:
            spec, text = resources.render_prompt(params.name, params.arguments)
        except resources.ResourceNotFound as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return types.GetPromptResult(
            description=spec.description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )

    server: Server[dict[str, Any]] = Server(
        SERVER_NAME,
        version=__version__,
        title="XTuner RL planner and troubleshooter",
        instructions=INSTRUCTIONS,
        website_url="https://github.com/InternLM/xtuner",
        lifespan=lifespan,
        get_tool_input_schema=host.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    _HOSTS[server] = host
    if not lazy:
        host.specs()
    return server


class CancelOnDisconnect:
    """ASGI middleware for streamable HTTP: a POSTed tool call whose client disconnects before the answer is sent
    is cancelled, so its work stops. (Session-based HTTP keeps a request running after its stream closes, for
    resumption; this server's answers are cheap to ask again, its work is not.)"""

    def __init__(self, app: Any, server: Server[Any]) -> None:
        self.app = app
        self.host = _HOSTS[server]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return await self.app(scope, receive, send)
        body: list[bytes] = []
        answered = False

        async def watch_receive() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                body.append(message.get("body", b""))
            elif message.get("type") == "http.disconnect" and not answered:
                self._cancel(scope, b"".join(body))
            return message

        async def watch_send(message: Any) -> None:
            nonlocal answered
            if message.get("type") == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        await self.app(scope, watch_receive, watch_send)

    def _cancel(self, scope: Any, raw: bytes) -> None:
        try:
            message = json.loads(raw[: 4 << 20])
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        sid = headers.get("mcp-session-id")
        client = scope.get("client") or ("?", 0)
        session = f"session:{sid[:200]}" if sid else f"client:{client[0]}"
        self.host.cancel(session, str(message["id"]))
