"""The checks in a repository's own CI (issue 27 item 3): ``check-data`` and ``check-config`` answer like linters
(``path:line:col: CODE message``, JSON and SARIF, exit 1 on blockers, silent on success, many files per call), never
import the MCP stack, and run as pre-commit hooks — ``pre-commit try-repo`` on a real temporary git repository
flags a bad line and a bad config at their lines and passes once they are fixed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import SAMPLES
from .xtuner_config_samples import COLOCATED_ASYNC, COLOCATED_SYNC, mutate

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXE = shutil.which("xtuner-rl-mcp", path=str(BIN)) or "xtuner-rl-mcp"
PRE_COMMIT = shutil.which("pre-commit", path=str(BIN)) or shutil.which("pre-commit")
LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<code>[a-z_]+\.[a-z0-9_.]+) (?P<msg>.+)$")
BAD_CONFIG = mutate(COLOCATED_ASYNC, ("    evaluate_step=evaluate_step,\n", "    sync_weights_interval=3,\n"))


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    for name in ("gsm8k_train_sample.jsonl", "gsm8k_train_broken.jsonl"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    return tmp_path


def test_check_data_names_each_bad_line_and_exits_1(data_dir):
    p = lint("check-data", "gsm8k_train_sample.jsonl", "gsm8k_train_broken.jsonl", cwd=data_dir)
    assert p.returncode == 1, p.stderr
    assert p.stderr == ""
    rows = [LINE.match(line) for line in p.stdout.splitlines()]
    assert rows and all(rows), p.stdout
    assert {r["path"] for r in rows} == {"gsm8k_train_broken.jsonl"}  # the clean file says nothing
    lines = (data_dir / "gsm8k_train_broken.jsonl").read_text(encoding="utf-8").splitlines()
    for r in rows:  # each reported line really has the problem its code names
        text = lines[int(r["line"]) - 1]
        if r["code"] == "data.missing_ground_truth":
            assert "ground_truth" not in text
        if r["code"] == "data.messages_instead_of_prompt":
            assert '"messages"' in text and '"prompt"' not in text
    # the same lines as the tool's own result
    from xtuner_rl_mcp import check_reward_data

    result = check_reward_data(path=str(data_dir / "gsm8k_train_broken.jsonl"), detail="full", roots=[data_dir])
    want = {(n, f"data.{ex.code}") for ex in result.examples for n in ex.lines if ex.severity == "blocker"}
    assert {(int(r["line"]), r["code"]) for r in rows} == want


def test_success_is_silent_and_exit_0(data_dir):
    p = lint("check-data", "gsm8k_train_sample.jsonl", cwd=data_dir)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    (data_dir / "rl_ok.py").write_text(COLOCATED_ASYNC, encoding="utf-8")
    p = lint("check-config", "rl_ok.py", cwd=data_dir)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_json_and_sarif(data_dir):
    p = lint("check-data", "--format", "json", "gsm8k_train_broken.jsonl", cwd=data_dir)
    body = json.loads(p.stdout)
    assert p.returncode == 1 and body["files"] == 1 and body["blockers"] == len(body["diagnostics"]) > 0
    assert {"path", "line", "col", "code", "severity", "message"} <= set(body["diagnostics"][0])
    p = lint("check-data", "--format", "sarif", "--severity", "info", "gsm8k_train_broken.jsonl", cwd=data_dir)
    sarif = json.loads(p.stdout)
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    for res in run["results"]:
        assert res["ruleId"] in rules and res["level"] in ("error", "warning", "note")
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    # a clean run is still valid JSON for machines
    p = lint("check-data", "--format", "json", "gsm8k_train_sample.jsonl", cwd=data_dir)
    assert p.returncode == 0 and json.loads(p.stdout)["diagnostics"] == []


def test_check_config_points_at_the_line_and_carries_the_patch(tmp_path):
    cfg = tmp_path / "configs" / "rl_grpo.py"
    cfg.parent.mkdir()
    cfg.write_text(BAD_CONFIG, encoding="utf-8")
    p = lint("check-config", "--diff", "configs/rl_grpo.py", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    first = p.stdout.splitlines()[0]
    m = LINE.match(first)
    assert m and m["path"] == "configs/rl_grpo.py" and m["code"] == "config.evaluate_step_not_multiple", first
    assert "sync_weights_interval=3" in BAD_CONFIG.splitlines()[int(m["line"]) - 1]  # the line the rule blames
    assert "--- a/configs/rl_grpo.py\n+++ b/configs/rl_grpo.py\n" in p.stdout
    # the diff applies from where the command ran
    body = json.loads(lint("check-config", "--format", "json", "configs/rl_grpo.py", cwd=tmp_path).stdout)
    (d,) = [d for d in body["diagnostics"] if d["code"] == "config.evaluate_step_not_multiple"]
    applied = subprocess.run(["git", "apply", "-"], input=d["patch"], cwd=tmp_path, text=True, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    p = lint("check-config", "configs/rl_grpo.py", cwd=tmp_path)
    assert (p.returncode, p.stdout) == (0, "")


def test_env_and_severity_options(tmp_path):
    (tmp_path / "rl.py").write_text(COLOCATED_ASYNC, encoding="utf-8")
    p = lint("check-config", "--env", "WORK_DIR=/w", "rl.py", cwd=tmp_path)  # MODEL_PATH etc. now missing
    assert p.returncode == 1 and "config.env_var_missing" in p.stdout
    (tmp_path / "rl_traced.py").write_text(COLOCATED_SYNC, encoding="utf-8")  # tracing on: a warning
    assert lint("check-config", "rl_traced.py", cwd=tmp_path).stdout == ""
    p = lint("check-config", "--severity", "warning", "rl_traced.py", cwd=tmp_path)
    assert p.returncode == 0 and "config.trace_needs_otel" in p.stdout  # shown on request, never failing


def test_missing_file_says_where_it_looked(tmp_path):
    p = lint("check-data", "nope.jsonl", cwd=tmp_path)
    assert p.returncode == 1
    m = LINE.match(p.stdout.strip())
    assert m and m["path"] == "nope.jsonl" and m["code"] == "input.path_not_found"
    assert str(tmp_path.resolve() / "nope.jsonl") in m["msg"] and "allowed roots" in m["msg"]


def test_usage_error_exits_2_with_a_fix(tmp_path):
    for args in (["check-data"], ["check-config", "--format", "xml", "a.py"], ["check-config", "--env", "X", "a.py"]):
        p = lint(*args, cwd=tmp_path)
        assert p.returncode == 2, args
        err = json.loads(p.stderr.strip().splitlines()[-1])["error"]
        assert err["code"] == "usage" and err["fix"], err


def test_linter_never_imports_the_mcp_stack(data_dir):
    code = (
        "import json, sys\n"
        "from xtuner_rl_mcp.server.cli import main\n"
        "main(['check-data', 'gsm8k_train_broken.jsonl'])\n"
        "main(['check-config', sys.argv[1]])\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('mcp', 'anyio', 'starlette', 'uvicorn', 'ray')]\n"
        "sys.stderr.write(json.dumps(loaded))\n"
    )
    (data_dir / "rl.py").write_text(BAD_CONFIG, encoding="utf-8")
    p = subprocess.run([sys.executable, "-c", code, "rl.py"], capture_output=True, text=True, cwd=data_dir, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stderr) == []
    # and the real console script agrees: -X importtime lists every module imported
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    p = subprocess.run(
        [EXE, "check-data", "gsm8k_train_sample.jsonl"], capture_output=True, text=True, cwd=data_dir, env=env
    )
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "xtuner_rl_mcp.server.lint_cli" in imported and "mcp" not in imported


# ---- pre-commit ---------------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def hook_repo(tmp: Path) -> Path:
    """A git repository holding this checkout's hook manifest (the installed hooks need nothing else)."""
    repo = tmp / "hooks"
    repo.mkdir()
    shutil.copy(REPO / ".pre-commit-hooks.yaml", repo / ".pre-commit-hooks.yaml")
    git("init", "-q", ".", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    return repo


def try_repo(hooks: Path, hook_id: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PRE_COMMIT_HOME=str(home))
    return subprocess.run(
        [PRE_COMMIT, "try-repo", str(hooks), hook_id, "--all-files"],  # type: ignore[list-item]
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.skipif(PRE_COMMIT is None or shutil.which("git") is None, reason="needs pre-commit and git")
def test_pre_commit_try_repo_flags_bad_files_and_passes_good_ones(tmp_path):
    manifest = subprocess.run(
        [PRE_COMMIT, "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")], capture_output=True, text=True
    )
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    hooks = hook_repo(tmp_path)
    work = tmp_path / "project"
    (work / "data").mkdir(parents=True)
    shutil.copy(SAMPLES / "gsm8k_train_sample.jsonl", work / "data" / "train.jsonl")
    good = (SAMPLES / "gsm8k_train_sample.jsonl").read_text(encoding="utf-8").splitlines()
    bad_line = json.loads(good[1])
    del bad_line["reward_model"]["ground_truth"]
    (work / "data" / "eval.jsonl").write_text("\n".join([good[0], json.dumps(bad_line), good[2]]) + "\n")
    (work / "rl_grpo.py").write_text(BAD_CONFIG, encoding="utf-8")
    (work / "helper.py").write_text("print('not an RL config')\n")  # outside the config hook's files pattern
    git("init", "-q", ".", cwd=work)
    git("add", ".", cwd=work)
    home = tmp_path / "pre-commit-home"

    t0 = time.perf_counter()
    data = try_repo(hooks, "xtuner-rl-check-data-installed", work, home)
    took = time.perf_counter() - t0
    assert data.returncode == 1, data.stdout + data.stderr
    assert "data/eval.jsonl:2:1: data.missing_ground_truth" in data.stdout
    assert "train.jsonl" not in data.stdout.split("Failed", 1)[-1]
    config = try_repo(hooks, "xtuner-rl-check-config-installed", work, home)
    assert config.returncode == 1, config.stdout + config.stderr
    assert re.search(r"rl_grpo\.py:\d+:1: config\.evaluate_step_not_multiple", config.stdout), config.stdout
    assert "helper.py" not in config.stdout

    # fixed: both hooks pass
    (work / "data" / "eval.jsonl").write_text("\n".join(good[:3]) + "\n")
    (work / "rl_grpo.py").write_text(COLOCATED_ASYNC, encoding="utf-8")
    git("add", ".", cwd=work)
    for hook in ("xtuner-rl-check-data-installed", "xtuner-rl-check-config-installed"):
        again = try_repo(hooks, hook, work, home)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "Passed" in again.stdout
    print(f"pre-commit try-repo, installed check-data hook: {took:.2f} s")
