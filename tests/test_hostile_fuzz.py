"""Property-based fuzzing of every registered tool's arguments through a real MCP client.

Arguments are generated from each tool's published ``inputSchema`` (valid values, boundary values, values of the
wrong type, unknown keys) mixed with hostile strings and hostile paths. Every call must come back within a per-call
timeout as a structured result or a structured error that is not ``internal_error``, with no traceback text.

CI runs a small number of examples per tool; set ``XTUNER_RL_FUZZ_EXAMPLES`` (e.g. 500) for a larger run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import SAMPLES, SHARED_DATA, make_server
from .hostile_support import (
    CALL_TIMEOUT_S,
    assert_well_formed,
    path_arguments,
    reproducer,
    result_text,
    structured_error,
)

EXAMPLES = int(os.environ.get("XTUNER_RL_FUZZ_EXAMPLES", "25"))

HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\n" * 1000,
    "\r\n\r\n",
    "A" * 100_000,
    "😀" * 2_000,
    "\u202e\u200b\ufeff",
    "\udcff",
    "../../../../etc/passwd",
    "/proc/self/environ",
    "/dev/zero",
    "~root/.ssh/id_rsa",
    "%s%s%n%x",
    "{{7*7}}${7*7}",
    "$(touch /tmp/pwned)",
    "; rm -rf / #",
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "NaN",
    "-1",
    "1e309",
    "9" * 5_000,
    "null",
    "{}",
    "[]",
    "file:///etc/passwd",
    "http://169.254.169.254/latest/meta-data/",
    "127.0.0.1:0",
    "256.256.256.256:99999",
    "ray://nowhere:10001",
]

HOSTILE_VALUES: list[Any] = [None, True, 0, -1, 2**63, -(2**63), 1e308, -0.0, [], [None], {}, {"a": {"b": []}}]


def _hostile_paths(root: Path) -> list[str]:
    files = sorted(str(p) for p in SAMPLES.glob("*") if p.is_file())
    if SHARED_DATA.is_dir():
        files += sorted(str(p) for p in SHARED_DATA.glob("*.jsonl"))
    return [*files, str(root), str(root / "missing.jsonl"), "/etc/passwd", "/proc/self/mem", "/dev/zero", "..", "."]


def strategy_for(schema: dict[str, Any], *, paths: list[str], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that fit ``schema``, mixed with hostile strings and values of the wrong type."""
    hostile = st.sampled_from(HOSTILE_STRINGS) | st.sampled_from(HOSTILE_VALUES) | st.text(max_size=50)
    return st.one_of(_valid_for(schema, paths=paths, depth=depth), hostile)


def _valid_for(schema: dict[str, Any], *, paths: list[str], depth: int) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    alts = schema.get("anyOf") or schema.get("oneOf")
    if alts:
        return st.one_of(*[_valid_for(a, paths=paths, depth=depth) for a in alts])
    t = schema.get("type")
    if t == "string":
        return st.text(max_size=200) | st.sampled_from(paths)
    if t == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        edge = [v for v in (lo, hi) if v is not None]
        ints = st.integers(min_value=lo, max_value=hi)
        return ints | st.sampled_from([v + d for v in edge for d in (-1, 0, 1)]) if edge else ints
    if t == "number":
        return st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**6), 10**6)
    if t == "boolean":
        return st.booleans()
    if t == "null":
        return st.none()
    if t == "array":
        items = schema.get("items") or {}
        inner = _valid_for(items, paths=paths, depth=depth + 1) if depth < 3 else st.none()
        return st.lists(inner, max_size=6)
    if t == "object" and depth < 3:
        props = schema.get("properties") or {}
        if props:
            return st.fixed_dictionaries(
                {}, optional={k: _valid_for(v, paths=paths, depth=depth + 1) for k, v in props.items()}
            )
        return st.dictionaries(st.text(max_size=10), st.text(max_size=20) | st.integers(), max_size=4)
    return st.none() | st.text(max_size=20)


def arguments_for(tool_schema: dict[str, Any], paths: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A full argument object: required keys usually present, optional keys sometimes, unknown keys rarely."""
    props: dict[str, Any] = tool_schema.get("properties", {})
    required = set(tool_schema.get("required", []))
    path_args = {name for name, _ in path_arguments(tool_schema)}

    def field(name: str) -> st.SearchStrategy[Any]:
        base = strategy_for(props[name], paths=paths)
        if name in path_args:
            path_strategy = st.sampled_from(paths) | st.sampled_from(HOSTILE_STRINGS)
            if "array<string>" in str(props[name]) or props[name].get("type") == "array":
                return st.lists(path_strategy, max_size=4) | base
            return path_strategy | base
        return base

    req = {k: field(k) for k in props if k in required}
    opt = {k: field(k) for k in props if k not in required}
    args = st.fixed_dictionaries(req, optional=opt)
    extra = st.dictionaries(st.sampled_from(["bogus", "__proto__", "", "path\x00"]), st.integers(), max_size=1)
    dropped = st.sampled_from(sorted(required)) if required else st.none()
    return st.tuples(args, extra, st.booleans(), dropped).map(_combine)


def _combine(parts: tuple[dict[str, Any], dict[str, Any], bool, str | None]) -> dict[str, Any]:
    args, extra, drop, dropped = parts
    out = {**args, **extra}
    if drop and dropped is not None:
        out.pop(dropped, None)
    return out


def _echoable(value: Any) -> bytes:
    """The first bytes of every readable file named in the arguments: a tool may quote those back."""
    if isinstance(value, dict):
        return b"".join(_echoable(v) for v in value.values())
    if isinstance(value, list):
        return b"".join(_echoable(v) for v in value)
    if isinstance(value, str) and 0 < len(value) < 4096 and "\x00" not in value:
        try:
            p = Path(value)
            if p.is_file():
                with p.open("rb") as fh:
                    return fh.read(1 << 20)
        except (OSError, ValueError):
            return b""
    return b""


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "data.jsonl").write_text('{"prompt": [], "reward_model": {"ground_truth": "1"}}\n')
    (root / "run.log").write_text("ERROR something failed\n")
    return root


@pytest.fixture(scope="module", params=["auto", "legacy"])
def portal_client(request, fuzz_root: Path):
    """One in-memory MCP client over the full server (each protocol era), driven from sync tests through a portal."""
    from mcp import Client

    roots = [fuzz_root, SAMPLES] + ([SHARED_DATA] if SHARED_DATA.is_dir() else [])
    with start_blocking_portal(backend="asyncio") as portal:
        client = Client(make_server(*roots), mode=request.param, raise_exceptions=True)
        with portal.wrap_async_context_manager(client) as c:
            tools = portal.call(c.list_tools).tools
            yield portal, c, {t.name: t.input_schema for t in tools}


def _tool_names() -> list[str]:
    from xtuner_rl_mcp.server.registry import TOOL_MODULES

    return list(TOOL_MODULES) or ["(no tools registered)"]


def call_with_timeout(portal, client, tool: str, args: Any):
    async def go():
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await client.call_tool(tool, args)

    try:
        return portal.call(go)
    except TimeoutError:
        raise AssertionError(f"{tool} did not answer within {CALL_TIMEOUT_S}s: {reproducer(tool, args)}") from None


@pytest.mark.parametrize("tool", _tool_names())
def test_fuzz_tool_arguments(portal_client, fuzz_root: Path, tool: str) -> None:
    portal, client, schemas = portal_client
    if tool not in schemas:
        pytest.skip("no tools are registered yet")
    schema = schemas[tool]
    paths = _hostile_paths(fuzz_root)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(args=arguments_for(schema, paths))
    def check(args: dict[str, Any]) -> None:
        result = call_with_timeout(portal, client, tool, args)
        try:
            assert_well_formed(tool, args, result, echoed=_echoable(args))
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nreproduce: {reproducer(tool, args)}") from None

    check()


@pytest.mark.parametrize("tool", _tool_names())
def test_arguments_that_are_not_an_object(portal_client, tool: str) -> None:
    """Whole-argument garbage: each comes back as an error, never a crash."""
    portal, client, schemas = portal_client
    if tool not in schemas:
        pytest.skip("no tools are registered yet")
    for args in [{}, {"": None}, {k: None for k in schemas[tool].get("properties", {})}, {"x" * 10_000: 1}]:
        result = call_with_timeout(portal, client, tool, args)
        assert_well_formed(tool, args, result)
    # every argument at once set to every hostile value of one kind
    for value in HOSTILE_VALUES + HOSTILE_STRINGS[:12]:
        args = {k: value for k in schemas[tool].get("properties", {})}
        result = call_with_timeout(portal, client, tool, args)
        assert_well_formed(tool, args, result)


def test_generator_covers_schema_shapes() -> None:
    """The argument generator itself yields values of every shape the schemas use (guards the fuzzer)."""
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a file"},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opt": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
        "required": ["path"],
    }
    seen: dict[str, set[str]] = {}

    @settings(max_examples=300, database=None, deadline=None)
    @given(args=arguments_for(schema, ["/x/a.jsonl"]))
    def collect(args: dict[str, Any]) -> None:
        for k, v in args.items():
            seen.setdefault(k, set()).add(type(v).__name__)

    collect()
    assert "str" in seen["path"] and len(seen["path"]) >= 3 and "int" in seen["n"] and "list" in seen["tags"]
    assert any(k not in schema["properties"] for k in seen), "unknown keys are never generated"
    assert json.dumps(sorted(seen))


@pytest.mark.parametrize("tool", _tool_names())
def test_argument_errors_are_structured(portal_client, tool: str) -> None:
    """Wrong types and unknown arguments come back as the structured invalid_arguments error (not SDK text)."""
    portal, client, schemas = portal_client
    if tool not in schemas:
        pytest.skip("no tools are registered yet")
    props = schemas[tool].get("properties", {})
    bad = {name: [["not", "this", "type"]] for name in list(props)[:1]}  # a nested list fits no scalar field
    result = call_with_timeout(portal, client, tool, {**bad, "bogus_argument": 1})
    assert result.is_error
    err = structured_error(result)
    assert err is not None and err["code"] == "invalid_arguments", result_text(result)[:300]
