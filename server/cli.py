"""Command line: ``serve`` (default), ``list``, ``call``, ``demo``, and the linter commands ``check-data`` and
``check-config``.

``call`` and ``list`` run through an in-memory MCP client, so a scripted call takes the same code path as a
call from an assistant. Exit codes of ``call``: 0 success, 1 the tool reported an error, 2 usage error. The linter
commands (:mod:`.lint_cli`) are handed over before anything of the MCP stack is imported: this module imports the
server's parts (``security``, ``runtime``, ``mcp``) only inside the commands that need them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .. import __version__
from ..core.policy import ALLOW_PYTHON_ENV, RAY_ADDRESSES_ENV, OperatorPolicy
from . import lint_cli

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

CALL_TIMEOUT_ENV = "XTUNER_RL_MCP_CALL_TIMEOUT"

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors exit 2 with a JSON line on stderr too, and what to do
        self.print_usage(sys.stderr)
        fix = f"Run `{self.prog} --help` for the arguments."
        sys.stderr.write(json.dumps({"error": {"code": "usage", "message": message, "fix": fix}}) + "\n")
        raise SystemExit(EXIT_USAGE)


def _add_roots(p: argparse.ArgumentParser) -> None:
    """The operator's grants, the same for every command that runs tools."""
    from .runtime import ServerLimits
    from .security import ALLOW_ROOTS_ENV

    p.add_argument(
        "--allow-root",
        action="append",
        default=None,
        metavar="DIR",
        help=f"tree that file-reading tools may read (repeatable; default ${ALLOW_ROOTS_ENV} or the cwd)",
    )
    p.add_argument(
        "--allow-python",
        action="append",
        default=[],
        metavar="PATH",
        help=f"training interpreter or venv/conda prefix the server may RUN to confirm its packages (repeatable; "
        f"also ${ALLOW_PYTHON_ENV}); without it training environments are only read",
    )
    p.add_argument(
        "--ray-address",
        action="append",
        default=[],
        metavar="ADDR",
        help=f"Ray cluster (GCS host:port or dashboard URL) that may receive this server's Ray token (repeatable; "
        f"also ${RAY_ADDRESSES_ENV} and RAY_ADDRESS); other non-loopback addresses are refused",
    )
    p.add_argument(
        "--call-timeout",
        type=float,
        default=float(os.environ.get(CALL_TIMEOUT_ENV, ServerLimits.call_timeout_s)),
        metavar="S",
        help=f"wall-clock limit of one tool call in seconds (default {ServerLimits.call_timeout_s:g}, "
        f"${CALL_TIMEOUT_ENV})",
    )
    p.add_argument(
        "--max-calls-per-session",
        type=int,
        default=ServerLimits.calls_per_session,
        metavar="N",
        help=f"tool calls one session may have in flight; more are answered 'busy' (default "
        f"{ServerLimits.calls_per_session})",
    )


def server_from_args(args: argparse.Namespace, *, lazy: bool = False) -> Any:
    """The server the operator's flags describe (roots, interpreters, Ray clusters, call bounds)."""
    from .app import build_server
    from .runtime import ServerLimits
    from .security import resolve_roots

    policy = OperatorPolicy.from_settings(pythons=args.allow_python, ray_addresses=args.ray_address)
    limits = ServerLimits(
        call_timeout_s=max(1.0, args.call_timeout), calls_per_session=max(1, args.max_calls_per_session)
    )
    return build_server(resolve_roots(args.allow_root), lazy=lazy, policy=policy, limits=limits)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="xtuner-rl-mcp", description="MCP server for planning and troubleshooting XTuner RL runs")
    parser.add_argument("--version", action="version", version=f"xtuner-rl-mcp {__version__}")
    parser.add_argument("--log-level", default=os.environ.get("XTUNER_RL_MCP_LOG_LEVEL", "WARNING"))
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    serve = sub.add_parser("serve", help="run the MCP server (default)")
    _add_serve_args(serve)

    lst = sub.add_parser("list", help="print every tool with its input and output schema as JSON")
    _add_roots(lst)

    call = sub.add_parser("call", help="run one tool and print its structured result as JSON")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="JSON object of arguments, or @file.json")
    call.add_argument("--progress", choices=["auto", "on", "off"], default="auto", help="progress bar on stderr")
    _add_roots(call)

    demo = sub.add_parser("demo", help="run the end-to-end planning scenario on built-in sample data")
    demo.add_argument("--json", action="store_true", help="print the raw results as JSON")
    _add_roots(demo)
    lint_cli.add_parsers(sub)
    return parser


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    from .security import TOKEN_ENV_DEFAULT

    p.add_argument("--transport", choices=["stdio", "streamable-http", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default loopback)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--path", default="/mcp", help="HTTP endpoint path")
    p.add_argument(
        "--token-env",
        default=TOKEN_ENV_DEFAULT,
        metavar="VAR",
        help=f"env var holding a bearer token HTTP clients must send (default {TOKEN_ENV_DEFAULT}; unset = none)",
    )
    p.add_argument("--allowed-host", action="append", default=[], help="extra Host header value to accept")
    p.add_argument("--allowed-origin", action="append", default=[], help="extra Origin header value to accept")
    _add_roots(p)


def _parse_args_json(raw: str) -> dict[str, Any]:
    text = raw
    if raw.startswith("@"):
        try:
            text = Path(raw[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {raw[1:]!r}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("--args must be a JSON object")
    return value


def parse_tool_error(text: str) -> dict[str, Any]:
    """Turn an MCP tool-error text back into the JSON error object it carries."""
    start = text.find("{")
    if start >= 0:
        try:
            obj = json.loads(text[start:])
            if isinstance(obj, dict) and "error" in obj:
                return obj
        except json.JSONDecodeError:
            pass
    return {"error": {"code": "tool_error", "message": text}}


def _progress_printer(enabled: bool) -> ProgressFnT | None:
    if not enabled:
        return None

    async def cb(progress: float, total: float | None, message: str | None) -> None:
        if total:
            frac = max(0.0, min(1.0, progress / total))
            bar = "#" * int(frac * 30)
            sys.stderr.write(f"\r[{bar:<30}] {frac * 100:5.1f}% {message or ''}"[:120])
            if frac >= 1.0:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"\r{progress:.0f} {message or ''}"[:120])
        sys.stderr.flush()

    return cb


async def _call(args: argparse.Namespace, arguments: dict[str, Any], progress: bool) -> int:
    from mcp import Client

    tool = args.tool
    async with Client(server_from_args(args)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        if tool not in names:
            sys.stderr.write(
                json.dumps(
                    {
                        "error": {
                            "code": "unknown_tool",
                            "message": f"no tool {tool!r}",
                            "fix": f"Use one of: {', '.join(sorted(names))} (`xtuner-rl-mcp list` shows them).",
                            "tools": sorted(names),
                        }
                    }
                )
                + "\n"
            )
            return EXIT_USAGE
        result = await client.call_tool(tool, arguments, progress_callback=_progress_printer(progress))
    if result.is_error:
        text = "".join(getattr(c, "text", "") for c in result.content)
        print(json.dumps(parse_tool_error(text), indent=2, ensure_ascii=False))
        return EXIT_TOOL_ERROR
    print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
    return EXIT_OK


async def _list(args: argparse.Namespace) -> int:
    from mcp import Client

    async with Client(server_from_args(args)) as client:
        tools = (await client.list_tools()).tools
    out = [
        {
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None,
            "inputSchema": t.input_schema,
            "outputSchema": t.output_schema,
        }
        for t in tools
    ]
    print(json.dumps({"tools": out}, indent=2, ensure_ascii=False))
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    import anyio

    server = server_from_args(args, lazy=True)
    if args.transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def serve_stdio() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve_stdio)
        return EXIT_OK
    import logging

    import uvicorn

    from .app import CancelOnDisconnect
    from .security import BearerTokenMiddleware, is_loopback, transport_security

    log = logging.getLogger("xtuner_rl_mcp")
    token = os.environ.get(args.token_env, "") if args.token_env else ""
    if not is_loopback(args.host) and not token:
        log.warning("serving on %s without a bearer token; set %s to require one", args.host, args.token_env)
    app = server.streamable_http_app(
        streamable_http_path=args.path,
        transport_security=transport_security(args.host, args.allowed_host, args.allowed_origin),
        host=args.host,
    )
    app = CancelOnDisconnect(app, server)
    asgi = BearerTokenMiddleware(app, token) if token else app
    uvicorn.run(asgi, host=args.host, port=args.port, log_level="warning", lifespan="on")
    return EXIT_OK


EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def main(argv: list[str] | None = None) -> int:
    """Run the command line; a reader that closes the pipe early (``| head``) ends it quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush cannot raise a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in lint_cli.COMMANDS:  # never loads the MCP stack
        return lint_cli.main(argv)
    import logging

    import anyio

    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version", "--log-level")):
        argv = ["serve", *argv]
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    command = args.command or "serve"
    if command == "serve":
        if not hasattr(args, "transport"):
            args = parser.parse_args(["serve", *argv])
        return _serve(args)
    if command == "list":
        return anyio.run(_list, args)
    if command == "call":
        try:
            arguments = _parse_args_json(args.args)
        except ValueError as exc:
            fix = 'Pass --args a JSON object, e.g. --args \'{"query": "max_staleness"}\', or @file.json.'
            sys.stderr.write(json.dumps({"error": {"code": "usage", "message": str(exc), "fix": fix}}) + "\n")
            return EXIT_USAGE
        show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
        return anyio.run(_call, args, arguments, show)
    if command == "demo":
        from .demo import run_demo  # the demo's sample scenario loads only when asked for

        return run_demo(args.allow_root, as_json=args.json)
    parser.error(f"unknown command {command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
