"""Third-party client smoke test: the MCP Inspector CLI (npm) lists the tools and calls one over stdio.

The Inspector is installed by .ci/run (``@modelcontextprotocol/inspector``, the newest release that runs on the
machine's Node). Locally the test skips without it, unless XTUNER_RL_REQUIRE_INSPECTOR=1 (as CI sets).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"


def _inspector() -> str | None:
    candidates = [
        os.environ.get("XTUNER_RL_INSPECTOR", ""),
        str(REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"),
    ]
    for c in candidates:
        if c and Path(c).is_file():
            return c
    return shutil.which("mcp-inspector")


@pytest.fixture(scope="module")
def inspector() -> str:
    path = _inspector()
    if path is None:
        if os.environ.get("XTUNER_RL_REQUIRE_INSPECTOR") == "1":
            pytest.fail("MCP Inspector CLI required but not installed")
        pytest.skip("MCP Inspector CLI not installed (npm i @modelcontextprotocol/inspector)")
    return path


def run(inspector: str, *args: str) -> dict:
    p = subprocess.run([inspector, "--cli", EXE, "serve", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


def test_inspector_lists_tools(inspector):
    out = run(inspector, "--method", "tools/list")
    names = {t["name"] for t in out["tools"]}
    assert {"lookup_reference", "check_reward_data", "diagnose_symptom", "build_rl_command"} <= names
    assert all("outputSchema" in t and "annotations" in t for t in out["tools"])


def test_inspector_calls_a_tool(inspector):
    out = run(
        inspector,
        "--method",
        "tools/call",
        "--tool-name",
        "lookup_reference",
        "--tool-arg",
        "query=what does max_staleness do",
        "--tool-arg",
        "limit=2",
    )
    assert out.get("isError") is False
    assert out["structuredContent"]["summary"]
