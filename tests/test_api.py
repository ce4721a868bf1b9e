"""The tools as Python functions (issue 27 item 2): ``from xtuner_rl_mcp import inspect_config`` runs the same
operation as the MCP tool with typed keyword arguments and returns the same pydantic result; importing the package
stays cheap; the signatures in ``__init__.pyi`` match the tools' parameters and a type checker enforces them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xtuner_rl_mcp
from pydantic import ValidationError
from xtuner_rl_mcp import api
from xtuner_rl_mcp.core import CallCancelled, ToolInputError
from xtuner_rl_mcp.server.registry import TOOL_MODULES

from .conftest import SAMPLES

REPO = Path(__file__).resolve().parents[1]
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))


def test_every_tool_is_a_function():
    assert tuple(api.MODULES) == TOOL_MODULES == xtuner_rl_mcp.TOOLS
    assert set(xtuner_rl_mcp.TOOLS) <= set(dir(xtuner_rl_mcp)) and set(xtuner_rl_mcp.TOOLS) <= set(
        xtuner_rl_mcp.__all__
    )
    with pytest.raises(AttributeError):
        xtuner_rl_mcp.no_such_tool  # noqa: B018


def test_import_is_cheap():
    code = (
        "import json, sys, xtuner_rl_mcp\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'mcp', 'anyio')"
        " or (m.startswith('xtuner_rl_mcp.') and m != 'xtuner_rl_mcp.operations')]\n"  # the tool names only
        "print(json.dumps(heavy))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout) == [], p.stdout + p.stderr


def test_stub_matches_the_parameters():
    """``__init__.pyi`` is what ``python -m xtuner_rl_mcp.api`` writes from the Params models today."""
    on_disk = (REPO / "__init__.pyi").read_text(encoding="utf-8")
    assert api.formatted(api.render_stub()) == on_disk, "run `python -m xtuner_rl_mcp.api` to rewrite __init__.pyi"


@pytest.mark.anyio
async def test_same_result_as_the_mcp_tool(mcp_client):
    cases = {
        "check_reward_data": {"path": str(SAMPLES / "gsm8k_train_broken.jsonl"), "judger": "gsm8k", "detail": "full"},
        "inspect_config": {"path": str(SAMPLES / "rl_grpo_gsm8k_async_demo.py"), "env": {"WORK_DIR": "/w"}},
        "lookup_reference": {"query": "max_staleness", "limit": 2},
    }
    for name, arguments in cases.items():
        via_mcp = (await mcp_client.call_tool(name, arguments)).structured_content
        direct = getattr(xtuner_rl_mcp, name)(**arguments, roots=[SAMPLES]).model_dump(mode="json")
        for volatile in ("seconds", "engine", "workers"):
            via_mcp.pop(volatile, None)
            direct.pop(volatile, None)
        assert direct == via_mcp, name


def test_roots_default_to_the_working_directory(tmp_path, monkeypatch):
    shutil.copy(SAMPLES / "gsm8k_train_sample.jsonl", tmp_path / "train.jsonl")
    monkeypatch.chdir(tmp_path)
    assert xtuner_rl_mcp.check_reward_data(path="train.jsonl").ok
    with pytest.raises(ToolInputError) as err:
        xtuner_rl_mcp.check_reward_data(path=str(SAMPLES / "gsm8k_train_sample.jsonl"))
    assert err.value.code == "path_outside_roots"


def test_bad_arguments_and_deadlines_raise():
    with pytest.raises(ValidationError):
        xtuner_rl_mcp.check_reward_data(path="x.jsonl", judger="gsm9k", roots=[SAMPLES])
    with pytest.raises(TypeError):
        xtuner_rl_mcp.lookup_reference("max_staleness")  # keywords only
    with pytest.raises(CallCancelled):
        xtuner_rl_mcp.check_reward_data(path=str(SAMPLES / "gsm8k_train_sample.jsonl"), roots=[SAMPLES], deadline_s=0)


@pytest.mark.skipif(MYPY is None, reason="mypy not installed")
def test_type_checker_sees_the_signatures(tmp_path):
    """mypy reads the signatures from the stub: a result's type is known, a misspelled keyword and a value outside
    a Literal are errors. (The editable install's import hook is invisible to mypy: a link names the package.)"""
    (tmp_path / "pkgroot").mkdir()
    os.symlink(REPO, tmp_path / "pkgroot" / "xtuner_rl_mcp")
    (tmp_path / "use.py").write_text(
        "from xtuner_rl_mcp import check_reward_data, inspect_config\n"
        'r = inspect_config(path="rl.py", env={"WORK_DIR": "/w"}, roots=["."])\n'
        "reveal_type(r)\n"
        "blockers = [f.patch for f in r.findings if f.severity == 'blocker']\n"
        'ok: bool = check_reward_data(path="d.jsonl", judger="gsm8k", deadline_s=30).ok\n'
        'check_reward_data(path="d.jsonl", judger="gsm9k")\n'
        'inspect_config(paht="rl.py")\n'
    )
    env = dict(os.environ, MYPYPATH=str(tmp_path / "pkgroot"))
    p = subprocess.run(
        [MYPY, "--follow-imports=silent", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), "use.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )  # type: ignore[list-item]
    out = p.stdout
    assert 'Revealed type is "xtuner_rl_mcp.operations.inspect_config.Result"' in out, out
    assert 'use.py:6: error: Argument "judger" to "check_reward_data" has incompatible type' in out, out
    assert 'use.py:7: error: Unexpected keyword argument "paht" for "inspect_config"' in out, out
    assert len([line for line in out.splitlines() if ": error:" in line]) == 2, out
