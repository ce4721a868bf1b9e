"""Helpers shared by the hostile-input suite: a raw stdio server process, tool-schema introspection, checks.

Everything here drives the real server: a real ``xtuner-rl-mcp serve`` subprocess spoken to in raw JSON-RPC lines,
or the in-memory MCP client over the full server. Nothing is mocked.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PYTHON = sys.executable
SERVER_CMD = [PYTHON, "-m", "xtuner_rl_mcp"]

#: Text that must never reach a client: Python tracebacks and raw exception reprs.
TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages/")

#: Per-call bound for one tool call in the fuzz and corpus tests (seconds); a hang shows as a failure.
CALL_TIMEOUT_S = float(os.environ.get("XTUNER_RL_HOSTILE_CALL_TIMEOUT", "20"))

INIT_REQUEST = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "hostile-suite", "version": "0"},
    },
}


class RawStdioServer:
    """A real server subprocess spoken to line by line, with a reader thread so that reads can time out."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*SERVER_CMD, "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr_text(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def send(self, frame: bytes, newline: bytes = b"\n") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame + newline)
        self.proc.stdin.flush()

    def read_line(self, timeout: float) -> bytes:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no output from the server within {timeout:.0f}s") from None
        if line is None:
            raise EOFError(f"server closed stdout (exit {self.proc.poll()}); stderr tail: {self.stderr_text[-2000:]}")
        return line

    def request(self, obj: dict[str, Any], timeout: float = 15.0) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and return its response plus every other line seen before it."""
        self.send(json.dumps(obj).encode())
        return self.wait_for(obj["id"], timeout)

    def wait_for(self, rid: Any, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        deadline = time.monotonic() + timeout
        others: list[bytes] = []
        while True:
            line = self.read_line(max(0.01, deadline - time.monotonic()))
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg, others
            others.append(line)

    def initialize(self) -> dict[str, Any]:
        resp, _ = self.request(INIT_REQUEST, timeout=60)
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return resp

    def close(self) -> int | None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None


@contextlib.contextmanager
def raw_server(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> Iterator[RawStdioServer]:
    srv = RawStdioServer(args, cwd, env)
    try:
        yield srv
    finally:
        srv.close()


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------------------
# Tool-schema introspection: which arguments take paths, which tools read files
# ------------------------------------------------------------------------------------------------------------

#: Argument names that take a filesystem path (``path``, ``data_path``, ``log_file``, ``model_dir``, ``paths`` ...).
_PATH_NAME = re.compile(r"(path|paths|(^|_)(file|files|dir|dirs|directory))$")
#: Descriptions of arguments that take a path ("Path of the RL config", "Training JSONL (file, dir or glob)").
_PATH_DESC = re.compile(r"\b(path|file|directory|jsonl)\b", re.IGNORECASE)


def _types(schema: dict[str, Any]) -> set[str]:
    """Every JSON type a (possibly anyOf) property schema admits, looking one level into arrays."""
    out: set[str] = set()
    t = schema.get("type")
    if isinstance(t, str):
        out.add(t)
    elif isinstance(t, list):
        out.update(x for x in t if isinstance(x, str))
    for alt in schema.get("anyOf", []) + schema.get("oneOf", []):
        out |= _types(alt)
    if "array" in out and isinstance(schema.get("items"), dict):
        out |= {f"array<{x}>" for x in _types(schema["items"])}
    return out


def path_arguments(tool_schema: dict[str, Any]) -> list[tuple[str, bool]]:
    """(argument name, is_list) for every argument that may take a filesystem path, judged from name and description.

    Generous on purpose: :func:`reads_path` then tells the arguments a tool opens from those it only mentions.
    """
    props: dict[str, Any] = tool_schema.get("properties", {})
    out: list[tuple[str, bool]] = []
    for name, prop in props.items():
        types = _types(prop)
        takes_str = "string" in types
        takes_str_list = "array<string>" in types
        desc = str(prop.get("description", ""))
        if (takes_str or takes_str_list) and (_PATH_NAME.search(name) or _PATH_DESC.search(desc)):
            out.append((name, takes_str_list and not takes_str))
    return out


_NOT_FOUND = re.compile(r"path_not_found|does not exist|not found", re.IGNORECASE)


async def reads_path(
    client: Any, tool: str, schema: dict[str, Any], arg: str, is_list: bool, root: Path, *, enable_checks: bool = False
) -> bool:
    """Whether ``tool`` opens the path given as ``arg`` (rather than only echoing it into a plan).

    Differential: the same call once with a missing file and once with an existing file inside the root. A tool
    that runs the path policy on the argument reports the missing one (``path_not_found``), so the first answer
    says "not found" more often; other arguments' complaints are the same in both and cancel out.
    """
    existing = root / "hostile-suite-existing.jsonl"
    if not existing.exists():
        existing.write_text(
            '{"prompt": [{"role": "user", "content": "1+1?"}], "reward_model": {"ground_truth": "2"}}\n'
        )
    counts = []
    for target in (root / "hostile-suite-missing.jsonl", existing):
        value = [str(target)] if is_list else str(target)
        result = await client.call_tool(tool, minimal_arguments(schema, arg, value, enable_checks=enable_checks))
        counts.append(len(_NOT_FOUND.findall(result_text(result))))
    return counts[0] > counts[1]


#: Boolean arguments that switch extra checks on (``check_paths``, ``run_probes``): on, so more paths get opened.
_ENABLE_CHECKS = re.compile(r"^(check|run|verify)_")


def minimal_arguments(
    tool_schema: dict[str, Any], path_arg: str | None = None, path_value: Any = None, *, enable_checks: bool = False
) -> dict[str, Any]:
    """The required arguments with simple valid-looking values, with ``path_arg`` set to ``path_value``.

    ``enable_checks`` also turns on every boolean that enables extra checks, so that path arguments a tool opens
    only on request (``build_rl_command(check_paths=True)``) are exercised too.
    """
    props: dict[str, Any] = tool_schema.get("properties", {})
    args: dict[str, Any] = {}
    for name in tool_schema.get("required", []):
        args[name] = _example_value(props.get(name, {}))
    if enable_checks:
        for name, prop in props.items():
            if _ENABLE_CHECKS.match(name) and "boolean" in _types(prop):
                args[name] = True
    if path_arg is not None:
        args[path_arg] = path_value
    return args


def with_full_detail(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` plus ``detail="full"`` where the tool has that level: a refused path may show only there."""
    if "full" in str(schema.get("properties", {}).get("detail", {})):
        return {**args, "detail": "full"}
    return args


def _example_value(prop: dict[str, Any]) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    if "const" in prop:
        return prop["const"]
    if "default" in prop:
        return prop["default"]
    for alt in prop.get("anyOf", []):
        if alt.get("type") != "null":
            return _example_value(alt)
    t = prop.get("type")
    if t == "integer":
        return int(prop.get("minimum", 1))
    if t == "number":
        return float(prop.get("minimum", 1.0))
    if t == "boolean":
        return False
    if t == "array":
        return []
    if t == "object":
        return {}
    return "x"


# ------------------------------------------------------------------------------------------------------------
# Result checks
# ------------------------------------------------------------------------------------------------------------


def result_text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def structured_error(result: Any) -> dict[str, Any] | None:
    """The ``{"code", "message", ...}`` object of a structured tool error, or None if the text carries none."""
    text = result_text(result)
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj = json.loads(text[start:])
    except json.JSONDecodeError:
        return None
    err = obj.get("error") if isinstance(obj, dict) else None
    return err if isinstance(err, dict) and isinstance(err.get("code"), str) else None


def assert_well_formed(tool: str, args: Any, result: Any, echoed: bytes = b"") -> None:
    """A structured result, or a structured error that is not a crash; no traceback text either way.

    ``echoed``: the input's own bytes; traceback-like text that is in the input may be quoted back (a log excerpt).
    """
    text = result_text(result)
    for marker in TRACEBACK_MARKERS:
        if marker.encode() in echoed:
            continue
        assert marker not in text, f"{tool}({_short(args)}) leaked traceback text: {text[:500]}"
    if result.is_error:
        err = structured_error(result)
        assert err is not None, f"{tool}({_short(args)}) unstructured error: {text[:500]}"
        assert err["code"] != "internal_error", f"{tool} crashed on {_short(args)}: {err}"
        assert err.get("message"), f"{tool}({_short(args)}) error without message: {err}"
    else:
        sc = result.structured_content
        assert isinstance(sc, dict) and isinstance(sc.get("summary"), str), f"{tool}: unstructured result {text[:300]}"


#: How a tool may say it refused a path in its own words instead of the policy's code.
REFUSAL_PHRASES: dict[str, re.Pattern[str]] = {
    "path_outside_roots": re.compile(r"outside (of )?(the )?(server's )?allowed roots", re.IGNORECASE),
    "path_invalid": re.compile(r"NUL byte|longer than \d+ characters|cannot be resolved", re.IGNORECASE),
    "path_not_found": re.compile(r"does not exist|not found", re.IGNORECASE),
    "path_special_file": re.compile(r"not a regular file|FIFO", re.IGNORECASE),
}


def refused_with(result: Any, codes: set[str]) -> bool:
    """Whether the answer refuses the path with one of ``codes``: as the error code, or named in a result."""
    if result.is_error:
        err = structured_error(result)
        if err is not None and (err["code"] in codes or ("*" in codes and err["code"] != "internal_error")):
            return True  # "*": any structured refusal will do
        return False
    body = json.dumps(result.structured_content, ensure_ascii=False)
    return any(c in body or (c in REFUSAL_PHRASES and REFUSAL_PHRASES[c].search(body)) for c in codes)


def _short(obj: Any, limit: int = 300) -> str:
    text = json.dumps(obj, ensure_ascii=True, default=str)
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit} chars)"


def reproducer(tool: str, args: Any) -> str:
    return f"xtuner-rl-mcp call {tool} --args '{_short(args, 2000)}'"
