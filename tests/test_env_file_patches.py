"""The launch env file (issue 27, the launch env lines): a launch script or .env read statically — never run, never
sourced — becomes the planned env of inspect_config, preflight and ``check-config --env-file``, and each env fix that
is derivable is a diff of that file. Every diff is used the way an agent would: ``git apply --check`` from the
allowed root, ``git apply``, inspect again — its finding is gone and every other finding is unchanged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from xtuner_rl_mcp.config_analysis.launch_env import parse_env_file
from xtuner_rl_mcp.core import Finding, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations import inspect_config, preflight

from .upstream import MIRROR
from .xtuner_config_samples import DISAGGREGATED, mutate, write

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is needed to apply the patches")
EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"

PATHS = (
    "export WORK_DIR=/runs/w MODEL_PATH=/models/qwen\n"
    "export DATA_PATH=/data/train.jsonl\n"
    'export EVAL_DATA_PATH="/data/val.jsonl"\n'
)
LAUNCH_TAIL = "ray start --head --port=6379\npython -m xtuner.v1.train.cli.rl --config configs/rl.py\n"


def launch(*lines: str) -> str:
    return "#!/bin/bash\nset -ex\n" + PATHS + "".join(f"{x}\n" for x in lines) + LAUNCH_TAIL


def inspect(root: Path, **extra: object) -> inspect_config.Result:
    params = inspect_config.Params(
        path=str(root / "configs" / "rl.py"), env_file=str(root / "launch.sh"), detail="full", **extra
    )
    return inspect_config.run(params, RunContext(paths=PathPolicy.from_strings([root])))


def key(f: Finding) -> tuple[str, str, str]:
    return (f.id, f.severity, f.title)


def git_apply(root: Path, patch: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GIT, "apply", *flags, "-"], input=patch, cwd=root, capture_output=True, text=True, timeout=30
    )  # type: ignore[list-item]


def setup(tmp: Path, config: str, env_text: str) -> Path:
    root = tmp / "root"
    (root / "configs").mkdir(parents=True)
    write(root / "configs", "rl.py", config)
    (root / "launch.sh").write_text(env_text, encoding="utf-8")
    return root


def apply_env_patch(root: Path, tmp: Path, fid: str, **extra: object) -> str:
    """The finding's patch is a diff of launch.sh that applies, removes the finding and changes nothing else;
    returns the patched launch.sh."""
    before = inspect(root, **extra)
    (f,) = [g for g in before.findings if g.id == fid]
    assert f.patch is not None, f"{fid} has no patch: {f.evidence}"
    assert f.patch.startswith("--- a/launch.sh\n+++ b/launch.sh\n"), f.patch
    copy = tmp / "copy"
    shutil.copytree(root, copy)
    check = git_apply(copy, f.patch, "--check")
    assert check.returncode == 0, check.stderr + f.patch
    assert git_apply(copy, f.patch).returncode == 0
    assert (copy / "configs" / "rl.py").read_text() == (root / "configs" / "rl.py").read_text()  # config untouched
    after = inspect(copy, **extra)
    assert Counter(key(g) for g in after.findings) == Counter(key(g) for g in before.findings) - Counter([key(f)])
    return (copy / "launch.sh").read_text(encoding="utf-8")


# ---- the reader ---------------------------------------------------------------------------------------------------


def test_parser_keeps_lines_and_never_guesses(tmp_path):
    text = (
        "#!/bin/bash\n"
        "export A=1 B='two words'  # comment\n"
        'C="${A}/x"\nexport C\n'
        "D=4\n"
        "export E=${E:-5} F=$(nproc) G=`date` H=$UNSET_IN_FILE I=$((1+2))\n"
        'if [ -n "$X" ]; then\n  export J=1\nfi\n'
        '[ -z "$K" ] && export K=1\n'
        "cat <<EOF\nexport L=1\nEOF\n"
        "export M=1\nunset M\n"
        "set -a\nN=6\nset +a\n"
        "ray start --head\n"
    )
    f = parse_env_file("launch.sh", text)
    assert f.values == {"A": "1", "B": "two words", "C": "1/x", "E": "5", "N": "6"}
    assert f.entries["E"].defaulted and f.entries["B"].line == 2 and f.entries["N"].line == 17
    assert set(f.unresolved) == {"F", "G", "H", "I", "J", "K"}
    assert "command substitution" in f.unresolved["F"] and "not set in this file" in f.unresolved["H"]
    assert "if/for/while" in f.unresolved["J"] and "if/for/while" in f.unresolved["K"]
    assert set(f.shell_only) == {"D"} and "L" not in f.entries and "M" not in f.entries
    assert text[f.insert_at :].startswith("if [")  # new exports go after the file's own, before its commands
    # a dotenv file: every assignment is exported
    d = parse_env_file(".env", 'MODEL_PATH=/m\nTP="2"\r\n')
    assert d.kind == "dotenv" and d.values == {"MODEL_PATH": "/m", "TP": "2"}


def test_upstream_run_rl_script_is_read_without_running_it(tmp_path):
    if not MIRROR.is_dir():
        pytest.skip("XTuner mirror not available")

    def show(p: str) -> str:
        return subprocess.run(
            [GIT, "-C", str(MIRROR), "show", f"HEAD:{p}"], capture_output=True, text=True, check=True
        ).stdout  # type: ignore[list-item]

    root = tmp_path / "root"
    (root / "configs").mkdir(parents=True)
    write(root / "configs", "rl.py", show("examples/v1/config/rl_disagg_single.py"))
    (root / "launch.sh").write_text(show("examples/v1/scripts/run_rl.sh"), encoding="utf-8")
    r = inspect(root)
    assert r.env_file is not None and r.env_file.variables >= 5
    assert "MODEL_PATH" in r.env_file.unresolved and "XTUNER_USE_SGLANG" in r.env_file.unresolved
    # set (to a value the script computes) is not missing, and the branch-set backend flags are not guessed
    ids = {f.id for f in r.findings}
    assert "config.env_var_missing" not in ids and "config.backend_flag_needed" not in ids
    assert any(u.startswith("backend flag:") for u in r.unchecked)


# ---- one planted fault per patch kind -------------------------------------------------------------------------------


def test_engine_size_from_the_env_file_is_patched_there(tmp_path):
    root = setup(tmp_path, DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export ROLLOUT_TP_SIZE=3"))
    out = apply_env_patch(root, tmp_path, "config.rollout_workers_not_divisible")
    assert "export ROLLOUT_TP_SIZE=2\n" in out or "export ROLLOUT_TP_SIZE=4\n" in out


def test_a_default_the_file_leaves_gets_a_new_export_line(tmp_path):
    config = mutate(DISAGGREGATED, ('"ROLLOUT_TP_SIZE", "1"', '"ROLLOUT_TP_SIZE", "3"'))
    root = setup(tmp_path, config, launch("export XTUNER_USE_LMDEPLOY=1"))
    out = apply_env_patch(root, tmp_path, "config.rollout_workers_not_divisible")
    assert out.index("export ROLLOUT_TP_SIZE=") < out.index("ray start")  # before the launch, not after it


def test_interval_and_staleness_settings_from_env(tmp_path):
    root = setup(
        tmp_path,
        DISAGGREGATED,
        launch("export XTUNER_USE_LMDEPLOY=1", "export SYNC_WEIGHTS_INTERVAL=2", "export EVALUATE_STEP=5"),
    )
    out = apply_env_patch(root, tmp_path, "config.evaluate_step_not_multiple")
    assert "export EVALUATE_STEP=4\n" in out or "export EVALUATE_STEP=6\n" in out
    root2 = setup(
        tmp_path / "b",
        DISAGGREGATED,
        launch("export XTUNER_USE_LMDEPLOY=1", "export MAX_STALENESS=2", "export PARTIAL_ROLLOUT=0"),
    )
    out = apply_env_patch(root2, tmp_path / "b", "config.staleness_without_partial_rollout")
    assert "export PARTIAL_ROLLOUT=1\n" in out


def test_backend_flags(tmp_path):
    # missing: a patch only when the installed backend is named
    root = setup(tmp_path / "a", DISAGGREGATED, launch())
    (f,) = [f for f in inspect(root).findings if f.id == "config.backend_flag_needed"]
    assert f.patch is None
    out = apply_env_patch(root, tmp_path / "a", "config.backend_flag_needed", backend="lmdeploy")
    assert "export XTUNER_USE_LMDEPLOY=1\n" in out
    # several: the extra ones are zeroed, XTuner's pick kept
    root = setup(tmp_path / "b", DISAGGREGATED, launch("export XTUNER_USE_SGLANG=1", "export XTUNER_USE_LMDEPLOY=1"))
    out = apply_env_patch(root, tmp_path / "b", "config.backend_flags_multiple")
    assert "export XTUNER_USE_LMDEPLOY=0\n" in out and "export XTUNER_USE_SGLANG=1\n" in out
    # vLLM: the named backend instead; unnamed, no patch
    root = setup(tmp_path / "c", DISAGGREGATED, launch("export XTUNER_USE_VLLM=1"))
    assert [f.patch for f in inspect(root).findings if f.id == "config.vllm_backend_unsupported"] == [None]
    out = apply_env_patch(root, tmp_path / "c", "config.vllm_backend_unsupported", backend="sglang")
    assert "export XTUNER_USE_VLLM=0\n" in out and "export XTUNER_USE_SGLANG=1\n" in out


def test_invalid_cast_is_patched_only_when_the_number_is_clear(tmp_path):
    root = setup(tmp_path / "a", DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export TRAIN_BATCH_SIZE=32.0"))
    out = apply_env_patch(root, tmp_path / "a", "config.invalid_value_cast")
    assert "export TRAIN_BATCH_SIZE=32\n" in out
    root = setup(tmp_path / "b", DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export TRAIN_BATCH_SIZE=big"))
    (f,) = [f for f in inspect(root).findings if f.id == "config.invalid_value_cast"]
    assert f.patch is None and "launch.sh:" in f.evidence


def test_missing_variable_value_is_never_invented(tmp_path):
    text = launch("export XTUNER_USE_LMDEPLOY=1").replace("export DATA_PATH=/data/train.jsonl\n", "")
    root = setup(tmp_path / "a", DISAGGREGATED, text)
    (f,) = [f for f in inspect(root).findings if f.id == "config.env_var_missing"]
    assert f.patch is None and "launch.sh" in f.fix and "export DATA_PATH=" in f.fix
    # set but never exported: the patch exports it
    text = text.replace("set -ex\n", "set -ex\nDATA_PATH=/data/train.jsonl\n")
    root = setup(tmp_path / "b", DISAGGREGATED, text)
    out = apply_env_patch(root, tmp_path / "b", "config.env_var_missing")
    assert "export DATA_PATH=/data/train.jsonl\n" in out


def test_explicit_env_overrides_the_file_and_is_not_patched(tmp_path):
    root = setup(tmp_path, DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export ROLLOUT_TP_SIZE=2"))
    assert "config.rollout_workers_not_divisible" not in {f.id for f in inspect(root).findings}
    r = inspect(root, env={"ROLLOUT_TP_SIZE": "3"})
    (f,) = [f for f in r.findings if f.id == "config.rollout_workers_not_divisible"]
    changed = [x for x in (f.patch or "").splitlines()[2:] if x[:1] in "+-"]
    assert not [x for x in changed if "ROLLOUT_TP_SIZE" in x]  # the file's line is not what the run would use


# ---- the surfaces: MCP tool, preflight, linter ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_through_mcp_and_hostile_env_files(mcp_client, tmp_path):
    root = setup(tmp_path, DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export ROLLOUT_TP_SIZE=3"))
    cfg = str(root / "configs" / "rl.py")
    r = await mcp_client.call_tool("inspect_config", {"path": cfg, "env_file": str(root / "launch.sh")})
    assert not r.is_error
    (f,) = [f for f in r.structured_content["findings"] if f["id"] == "config.rollout_workers_not_divisible"]
    assert f["patch"].startswith("--- a/root/launch.sh\n") and r.structured_content["env_file"]["variables"] == 6

    def error_of(res) -> str:  # type: ignore[no-untyped-def]
        assert res.is_error
        return json.dumps(res.structured_content or [c.text for c in res.content])

    outside = tmp_path.parent / f"{tmp_path.name}-outside.sh"
    outside.write_text("export A=1\n")
    try:
        res = await mcp_client.call_tool("inspect_config", {"path": cfg, "env_file": str(outside)})
        assert "path_outside_roots" in error_of(res)
        (root / "link.sh").symlink_to(outside)
        res = await mcp_client.call_tool("inspect_config", {"path": cfg, "env_file": str(root / "link.sh")})
        assert "path_outside_roots" in error_of(res)
    finally:
        outside.unlink()
    (root / "bin.env").write_bytes(b"export A=1\n\x00\x01")
    res = await mcp_client.call_tool("inspect_config", {"path": cfg, "env_file": str(root / "bin.env")})
    assert "env_file_binary" in error_of(res)
    (root / "huge.env").write_bytes(b"export A=1\n" * 200_000)
    res = await mcp_client.call_tool("inspect_config", {"path": cfg, "env_file": str(root / "huge.env")})
    assert "env_file_too_large" in error_of(res)


def test_command_substitution_is_never_executed(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    text = launch(
        "export XTUNER_USE_LMDEPLOY=1",
        f"export ROLLOUT_TP_SIZE=$(touch {sentinel}; echo 3)",
        f"export MAX_PROMPT_LENGTH=`touch {sentinel}`",
        'export LOSS_MODE="$(rm -rf ~)"',
    )
    root = setup(tmp_path, DISAGGREGATED, text)
    r = inspect(root)
    assert not sentinel.exists()
    assert {"ROLLOUT_TP_SIZE", "MAX_PROMPT_LENGTH", "LOSS_MODE"} <= set(r.env_file.unresolved)  # type: ignore[union-attr]
    assert "config.env_var_missing" not in {f.id for f in r.findings}
    with pytest.raises(ToolInputError):
        inspect_config.planned_env(
            None, str(tmp_path / "absent.sh"), None, RunContext(paths=PathPolicy.from_strings([root]))
        )


def test_preflight_reads_the_env_file_and_carries_its_patches(tmp_path):
    root = setup(tmp_path, DISAGGREGATED, launch("export XTUNER_USE_LMDEPLOY=1", "export ROLLOUT_TP_SIZE=3"))
    direct = {f.id: f.patch for f in inspect(root).findings if f.patch}
    p = preflight.Params(config=str(root / "configs" / "rl.py"), env_file=str(root / "launch.sh"), probe_cluster=False)
    r = preflight.run(p, RunContext(paths=PathPolicy.from_strings([root])))
    got = {f.id: f.patch for f in [*r.blockers, *r.warnings] if f.patch}
    assert got["config.rollout_workers_not_divisible"] == direct["config.rollout_workers_not_divisible"]
    assert "config.env_var_missing" not in got and "MODEL_PATH" not in r.planned_env_added


def test_linter_env_file_option(tmp_path):
    root = setup(tmp_path, DISAGGREGATED, launch("export ROLLOUT_TP_SIZE=3"))
    run = ["check-config", "--format", "json", "--env-file", "launch.sh", "--backend", "lmdeploy", "configs/rl.py"]
    p = subprocess.run([EXE, *run], capture_output=True, text=True, cwd=root, timeout=120)
    assert p.returncode == 1, p.stderr
    diags = json.loads(p.stdout)["diagnostics"]
    patches = [d["patch"] for d in diags if d["code"] == "config.rollout_workers_not_divisible"]
    assert patches and patches[0].startswith("--- a/launch.sh\n")
    assert git_apply(root, patches[0]).returncode == 0
    again = subprocess.run([EXE, *run, "--severity", "info"], capture_output=True, text=True, cwd=root, timeout=120)
    codes = {d["code"] for d in json.loads(again.stdout)["diagnostics"]}
    assert "config.rollout_workers_not_divisible" not in codes and "config.backend_flag_needed" in codes
