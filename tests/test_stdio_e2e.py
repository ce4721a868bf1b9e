"""End to end over stdio: the installed console script spawned by real MCP clients, both protocol eras."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from .conftest import SAMPLES

pytestmark = pytest.mark.anyio

EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"
PARAMS = StdioServerParameters(command=EXE, args=["serve", "--allow-root", str(SAMPLES)])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_console_script_over_stdio(mode):
    async with Client(PARAMS, mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"check_reward_data", "lookup_reference"} <= tools
        r = await client.call_tool("check_reward_data", {"path": str(SAMPLES / "gsm8k_train_sample.jsonl")})
        assert not r.is_error, r.content
        assert r.structured_content["ok"] is True
        r = await client.call_tool("check_reward_data", {"path": "/etc/shadow"})
        assert r.is_error and "path_outside_roots" in r.content[0].text


async def test_low_level_session_initialize():
    async with stdio_client(PARAMS) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "xtuner-rl-mcp"
        assert init.instructions and "read-only" in init.instructions.lower()
        listed = await session.list_tools()
        assert all(t.output_schema for t in listed.tools)
