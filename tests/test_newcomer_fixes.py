"""Small things a newcomer hit (issue 27 item 5): object arguments sent as JSON text (MCP Inspector 0.15), the data
summary's codes adding up to its invalid lines, the demo's lists and titles, usage errors with a fix, and a missing
path that says where it was looked for."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from xtuner_rl_mcp import check_reward_data, inspect_config
from xtuner_rl_mcp.core import PathPolicy, ToolInputError
from xtuner_rl_mcp.operations import probe_environment
from xtuner_rl_mcp.scanners.jsonl_contract import CODE_SEVERITY
from xtuner_rl_mcp.server import demo
from xtuner_rl_mcp.server.app import objects_from_json_strings

from .conftest import SAMPLES

EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"
CONFIG = str(SAMPLES / "rl_grpo_gsm8k_async_demo.py")


def error_of(result) -> dict:  # type: ignore[no-untyped-def]
    return json.loads("".join(c.text for c in result.content))["error"]


@pytest.mark.anyio
async def test_object_arguments_may_come_as_json_text(mcp_client):
    env = {"WORK_DIR": "/w", "MODEL_PATH": "/m"}
    as_object = await mcp_client.call_tool("inspect_config", {"path": CONFIG, "env": env})
    as_text = await mcp_client.call_tool("inspect_config", {"path": CONFIG, "env": json.dumps(env)})
    assert not as_text.is_error, as_text.content
    assert as_text.structured_content == as_object.structured_content
    # text that is no JSON object is still refused, with what to do
    bad = await mcp_client.call_tool("inspect_config", {"path": CONFIG, "env": "WORK_DIR=/w"})
    assert bad.is_error and error_of(bad)["code"] == "invalid_arguments" and error_of(bad)["fix"]
    # a text parameter keeps JSON-looking text as text
    query = await mcp_client.call_tool("lookup_reference", {"query": '{"max_staleness": 1}', "limit": 1})
    assert not query.is_error


def test_json_text_is_decoded_only_where_an_object_is_expected():
    params = probe_environment.Params
    got = objects_from_json_strings(params, {"expected": '{"num_workers": 16}', "model_path": '{"a": 1}'})
    assert got == {"expected": {"num_workers": 16}, "model_path": '{"a": 1}'}
    assert params.model_validate(got).expected.num_workers == 16  # a pydantic model field, as Inspector sends it
    assert objects_from_json_strings(params, {"expected": "[1]"}) == {"expected": "[1]"}


def test_data_summary_counts_every_invalid_line():
    r = check_reward_data(path=str(SAMPLES / "gsm8k_train_broken.jsonl"), roots=[SAMPLES])
    listed = sum(int(n) for n in re.findall(r" x(\d+)", r.summary))
    more = re.search(r"\+(\d+) more code\(s\) on (\d+) line\(s\)", r.summary)
    assert more is not None, r.summary  # five blocker codes: four named, the fifth counted
    blocker_lines = sum(n for c, n in r.errors_by_code.items() if CODE_SEVERITY[c] == "blocker")
    assert listed + int(more[2]) == blocker_lines == r.invalid  # one blocker code per line in this file


def test_demo_prints_the_question_and_what_it_leaves_out(capsys):
    findings = [{"severity": "blocker", "title": f"problem {i}"} for i in range(6)]
    record = {"step": "s", "tool": "lookup_reference", "arguments": {"query": "which flag?"}}
    demo._print_step(1, {**record, "result": {"summary": "x", "findings": findings, "findings_omitted": 3}})
    out = capsys.readouterr().out
    assert "asked: which flag?" in out and "problem 3" in out and "problem 4" not in out and "+ 5 more" in out
    preflight = next(s for s in demo.STEPS if s.tool == "preflight")
    assert "no GPUs" not in preflight.title and "data blocks it" in preflight.title


def test_usage_errors_carry_a_fix():
    for args in (["call", "lookup_reference", "--args", "not json"], ["call", "no_such_tool"], ["list", "--bogus"]):
        p = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, (args, p.stderr)
        err = json.loads(p.stderr.strip().splitlines()[-1])["error"]
        assert err["fix"], (args, err)


def test_missing_path_says_where_it_looked(tmp_path):
    with pytest.raises(ToolInputError) as e:
        PathPolicy.from_strings([tmp_path]).check("nope.jsonl", what="path")
    msg = e.value.message
    assert "'nope.jsonl' does not exist" in msg and str(tmp_path.resolve() / "nope.jsonl") in msg
    assert f"allowed roots: {tmp_path.resolve()}" in msg
    with pytest.raises(ToolInputError) as e:
        inspect_config(path="nope.py", roots=[tmp_path])
    assert str(tmp_path.resolve()) in e.value.message
