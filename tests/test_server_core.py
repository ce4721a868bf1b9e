"""The tool wrapper: schemas, annotations, structured output, errors without tracebacks, progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from pydantic import BaseModel, Field
from xtuner_rl_mcp.core import ToolInputError, ToolResult, ToolSpec

from .conftest import make_server

pytestmark = pytest.mark.anyio


class EchoParams(BaseModel):
    path: str = Field(description="a file under the allowed roots")
    mode: str = Field(default="ok", description="ok | user_error | crash")
    repeat: int = Field(default=1, ge=1, le=5)


class EchoResult(ToolResult):
    size: int
    repeated: list[str]


def _run(params: EchoParams, ctx) -> EchoResult:
    if params.mode == "crash":
        raise RuntimeError("secret internal detail /etc/shadow")
    if params.mode == "user_error":
        raise ToolInputError("bad_thing", "the thing is bad", "do the other thing")
    p = ctx.paths.check(params.path, kind="file")
    for i in range(3):
        ctx.progress(i + 1, 3, "reading")
    return EchoResult(summary="ok", size=p.stat().st_size, repeated=[p.name] * params.repeat)


ECHO = ToolSpec(
    name="echo_file",
    title="Echo a file",
    description="Test tool. Use when: testing.",
    params=EchoParams,
    result=EchoResult,
    run=_run,
)


@pytest.fixture(params=["auto", "legacy"])
async def client(request, tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    async with Client(make_server(tmp_path, specs=[ECHO]), mode=request.param, raise_exceptions=True) as c:
        yield c


async def test_schema_and_annotations(client):
    tools = (await client.list_tools()).tools
    (tool,) = tools
    assert tool.name == "echo_file"
    assert tool.input_schema["required"] == ["path"]
    assert tool.input_schema["properties"]["repeat"]["maximum"] == 5
    assert tool.input_schema["properties"]["path"]["description"].startswith("a file")
    assert tool.output_schema["properties"]["summary"]["type"] == "string"
    a = tool.annotations
    assert (a.read_only_hint, a.idempotent_hint, a.destructive_hint, a.open_world_hint) == (True, True, False, False)


async def test_structured_result_and_progress(client, tmp_path):
    seen = []

    async def cb(p, total, msg):
        seen.append((p, total, msg))

    r = await client.call_tool("echo_file", {"path": "a.txt", "repeat": 2}, progress_callback=cb)
    assert not r.is_error
    assert r.structured_content == {"summary": "ok", "size": 5, "repeated": ["a.txt", "a.txt"]}
    assert json.loads(r.content[0].text) == r.structured_content
    assert seen and seen[-1] == (3, 3, "reading")


async def test_user_error_is_structured(client):
    r = await client.call_tool("echo_file", {"path": "a.txt", "mode": "user_error"})
    assert r.is_error
    text = r.content[0].text
    err = json.loads(text[text.index("{") :])["error"]
    assert err == {"code": "bad_thing", "message": "the thing is bad", "fix": "do the other thing"}


async def test_crash_hides_traceback(client):
    r = await client.call_tool("echo_file", {"path": "a.txt", "mode": "crash"})
    assert r.is_error
    text = r.content[0].text
    assert "internal_error" in text and "RuntimeError" in text
    assert "secret" not in text and "Traceback" not in text and "/etc/shadow" not in text


@pytest.mark.parametrize(
    "path,code",
    [
        ("/etc/passwd", "path_outside_roots"),
        ("../../../../etc/passwd", "path_outside_roots"),
        ("missing.txt", "path_not_found"),
        (".", "path_not_file"),
        ("/proc/self/environ", "path_outside_roots"),
        ("a\x00b", "path_invalid"),
    ],
)
async def test_path_policy(client, path, code):
    r = await client.call_tool("echo_file", {"path": path})
    assert r.is_error
    text = r.content[0].text
    assert json.loads(text[text.index("{") :])["error"]["code"] == code


async def test_symlink_escape_refused(client, tmp_path: Path):
    (tmp_path / "link").symlink_to("/etc/hostname")
    r = await client.call_tool("echo_file", {"path": "link"})
    assert r.is_error and "path_outside_roots" in r.content[0].text


def _error(result) -> dict:
    text = result.content[0].text
    return json.loads(text[text.index("{") :])["error"]


@pytest.mark.parametrize(
    "args,needle",
    [
        ({"path": "a.txt", "repeat": 99}, "repeat"),
        ({"path": "a.txt", "repeat": "many"}, "repeat"),
        ({"path": "a.txt", "bogus": 1}, "bogus"),
        ({}, "path"),
        ({"path": ["not", "a", "string"]}, "path"),
    ],
)
async def test_bad_arguments_are_structured(client, args, needle):
    r = await client.call_tool("echo_file", args)
    assert r.is_error
    err = _error(r)
    assert err["code"] == "invalid_arguments" and needle in err["message"]
    assert "pydantic.dev" not in r.content[0].text
