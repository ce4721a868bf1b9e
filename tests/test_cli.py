"""The command line as scripts and CI use it: ``list`` schemas, ``call`` exit codes and JSON, usage errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from .conftest import SAMPLES

EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def test_list_prints_valid_schemas():
    p = cli("list")
    assert p.returncode == 0, p.stderr
    tools = json.loads(p.stdout)["tools"]
    assert tools, "no tools registered"
    for t in tools:
        Draft202012Validator.check_schema(t["inputSchema"])
        Draft202012Validator.check_schema(t["outputSchema"])
        assert "summary" in t["outputSchema"]["required"]
        assert next(iter(t["outputSchema"]["properties"])) == "summary"
        a = t["annotations"]
        assert {"readOnlyHint", "idempotentHint", "destructiveHint", "openWorldHint"} <= set(a), t["name"]
        assert a["destructiveHint"] is False and a["readOnlyHint"] is True
        assert "Use when" in t["description"], t["name"]


def test_call_success_prints_structured_json():
    p = cli("call", "lookup_reference", "--args", json.dumps({"query": "max_staleness", "limit": 2}))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["summary"]


def test_stderr_stays_quiet_at_the_default_log_level():
    """A library that pins its own logger at DEBUG (bm25s does) follows the operator's --log-level instead."""
    args = json.dumps({"text": "rollout hangs with expert_parallel_size=2"})
    quiet = cli("call", "diagnose_symptom", "--args", args)
    assert quiet.returncode == 0 and "DEBUG" not in quiet.stderr, quiet.stderr[-2000:]
    loud = cli("--log-level", "DEBUG", "call", "diagnose_symptom", "--args", args)
    assert loud.returncode == 0 and "DEBUG bm25s" in loud.stderr, loud.stderr[-2000:]


def test_call_args_from_file(tmp_path):
    f = tmp_path / "args.json"
    f.write_text(json.dumps({"path": str(SAMPLES / "gsm8k_train_sample.jsonl")}))
    p = cli("call", "check_reward_data", "--args", f"@{f}", "--allow-root", str(SAMPLES))
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["ok"] is True


def test_call_tool_error_exit_1(tmp_path):
    p = cli("call", "check_reward_data", "--args", json.dumps({"path": "/etc/passwd"}), "--allow-root", str(tmp_path))
    assert p.returncode == 1
    err = json.loads(p.stdout)["error"]
    assert err["code"] == "path_outside_roots"
    assert "Traceback" not in p.stdout + p.stderr


def test_allow_roots_from_env(tmp_path):
    import os

    env = dict(os.environ, XTUNER_RL_MCP_ALLOW_ROOTS=str(SAMPLES))
    args = json.dumps({"path": str(SAMPLES / "gsm8k_train_sample.jsonl")})
    p = subprocess.run(
        [EXE, "call", "check_reward_data", "--args", args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("call", "no_such_tool"),
        ("call", "lookup_reference", "--args", "{not json"),
        ("call", "lookup_reference", "--args", "[1, 2]"),
        ("call", "lookup_reference", "--args", "@/nonexistent/args.json"),
        ("frobnicate",),
        ("serve", "--transport", "carrier-pigeon"),
    ],
)
def test_usage_errors_exit_2(args):
    p = cli(*args)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr


def test_version():
    p = cli("--version")
    assert p.returncode == 0 and "xtuner-rl-mcp" in p.stdout


def test_closed_pipe_ends_quietly():
    """`xtuner-rl-mcp list | head` : the reader leaves early; no BrokenPipeError traceback, the SIGPIPE exit code."""
    proc = subprocess.Popen([EXE, "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(64)
    proc.stdout.close()  # what `head` does after its first lines
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b"{")
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
