"""Patches an agent can apply (issue 27 item 1): every inspect_config finding whose fix is an exact edit carries a
unified diff against the file as it is on disk. Each diff is checked the way an agent would use it: ``git apply
--check`` from the allowed root, ``git apply``, inspect the config again — the finding is gone and every other
finding is still there, unchanged. On our own sample configs (always) and on every upstream RL example of the XTuner
mirror with planted faults (skipped when the mirror is absent).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from xtuner_rl_mcp.config_analysis.patches import SourcePatcher, patch_label, unified_diff, value_patch
from xtuner_rl_mcp.config_analysis.view import view_of_source
from xtuner_rl_mcp.core import Finding, PathPolicy, RunContext
from xtuner_rl_mcp.operations import inspect_config

from .upstream import MIRROR
from .xtuner_config_samples import COLOCATED_ASYNC, COLOCATED_SYNC, DISAGGREGATED, ENV, mutate, write

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is needed to apply the patches")


def inspect(root: Path, name: str, env: dict[str, str] | None = ENV, **extra: object) -> inspect_config.Result:
    params = inspect_config.Params(path=str(root / name), env=env, detail="full", **extra)
    return inspect_config.run(params, RunContext(paths=PathPolicy.from_strings([root])))


def key(f: Finding) -> tuple[str, str, str]:
    """What must not change when another finding is fixed (locations and diffs move when lines are added)."""
    return (f.id, f.severity, f.title)


def follows_from(fixed: Finding, other: tuple[str, str, str]) -> bool:
    """A finding that only restated ``fixed`` one level down: renaming a manager to its trainer mode's class also
    ends the mismatch of the tasks inside it ("AgentLoopManagerConfig.tasks gets a DisaggTaskSpecConfig")."""
    renamed = fixed.title.split(" gets a ", 1)[-1].split(",", 1)[0]
    return fixed.id == other[0] == "config.class_mismatch" and other[2].startswith(f"{renamed}.")


def git_apply(root: Path, patch: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GIT, "apply", *flags, "-"], input=patch, cwd=root, capture_output=True, text=True, timeout=30
    )  # type: ignore[list-item]


def apply_each(root: Path, name: str, tmp: Path, env: dict[str, str] | None = ENV, **extra: object) -> dict[str, str]:
    """Apply every patch of the file's findings, one at a time, to a fresh copy of ``root``; each must apply, and
    remove its finding and nothing else. Returns {finding id: patch} for the caller's own checks."""
    before = inspect(root, name, env, **extra)
    assert before.findings_omitted == 0
    patched = [f for f in before.findings if f.patch]
    for i, f in enumerate(patched):
        copy = tmp / f"apply{i}"
        shutil.copytree(root, copy)
        assert f.patch.startswith(f"--- a/{name}\n+++ b/{name}\n"), f.patch
        check = git_apply(copy, f.patch, "--check")
        assert check.returncode == 0, f"{f.id}: {check.stderr}\n{f.patch}"
        assert git_apply(copy, f.patch).returncode == 0
        ast.parse((copy / name).read_text(encoding="utf-8"))  # still Python
        after = inspect(copy, name, env, **extra)
        expected = Counter(key(g) for g in before.findings) - Counter([key(f)])
        got = Counter(key(g) for g in after.findings)
        assert not got - expected, f"{f.id} at {f.location} added findings:\n{f.patch}"
        also_fixed = list((expected - got).elements())
        assert all(follows_from(f, g) for g in also_fixed), f"{f.id} also removed {also_fixed}:\n{f.patch}"
        assert after.findings_omitted == 0
    return {f.id: f.patch for f in patched}


# ---- the engine on its own ----------------------------------------------------------------------------------------


def view_of(text: str):  # type: ignore[no-untyped-def]
    return view_of_source("rl.py", text, ENV)


def call_of(view, cls: str):  # type: ignore[no-untyped-def]
    (obj,) = [o for o in view.evaluation.objects if o.cls == cls]
    return obj


def applied(text: str, patch: str | None, tmp: Path) -> str:
    assert patch is not None
    (tmp / "rl.py").write_text(text, encoding="utf-8")
    out = git_apply(tmp, patch)
    assert out.returncode == 0, out.stderr + patch
    return (tmp / "rl.py").read_text(encoding="utf-8")


def test_keyword_edits_keep_the_layout(tmp_path):
    text = (
        "from x import GSM8KJudgerConfig, RolloutConfig\n"
        "tp = 2  # engine size\n"
        'judger = GSM8KJudgerConfig(judger_name="openai/gsm8k", bogus=1, extra_field="é")\n'
        "rollout = RolloutConfig(\n"
        "    tensor_parallel_size=tp,\n"
        "    gpu_memory_utilization=0.8,  # of each GPU\n"
        ")"  # no newline at the end of the file
    )
    view = view_of(text)
    p = SourcePatcher.of(view)
    judger, rollout = call_of(view, "GSM8KJudgerConfig"), call_of(view, "RolloutConfig")
    # a name the keyword alone reads is changed where it is bound
    assert "tp = 4  # engine size\n" in applied(
        text, p.diff([p.set_keyword(rollout, "tensor_parallel_size", 4)]), tmp_path
    )
    # a keyword on its own line goes with its line, comment included; an inline one with its comma
    out = applied(text, p.diff([p.remove_keyword(rollout, "gpu_memory_utilization")]), tmp_path)
    assert out.endswith("    tensor_parallel_size=tp,\n)")
    out = applied(text, p.diff([p.remove_keyword(judger, "bogus")]), tmp_path)
    assert 'GSM8KJudgerConfig(judger_name="openai/gsm8k", extra_field="é")\n' in out
    out = applied(text, p.diff([p.remove_keyword(judger, "extra_field")]), tmp_path)
    assert 'GSM8KJudgerConfig(judger_name="openai/gsm8k", bogus=1)\n' in out
    # inserted: on a line of its own in a one-per-line call, inline otherwise
    out = applied(text, p.diff(p.insert_keyword(rollout, "context_length", 4096)), tmp_path)
    assert out.endswith("    gpu_memory_utilization=0.8,  # of each GPU\n    context_length=4096,\n)")
    out = applied(text, p.diff(p.insert_keyword(judger, "judger_name2", "a")), tmp_path)
    assert 'extra_field="é", judger_name2="a")\n' in out


def test_env_values_and_overridden_keywords_get_no_patch():
    text = (
        "import os\nfrom x import RolloutConfig\n"
        'r = RolloutConfig(tensor_parallel_size=int(os.environ.get("TP", "2")), context_length=1)\n'
        "r.context_length = 2\n"
    )
    view = view_of(text)
    p = SourcePatcher.of(view)
    r = call_of(view, "RolloutConfig")
    assert p.set_keyword(r, "tensor_parallel_size", 1) is None  # the launch env sets it
    assert p.set_keyword(r, "context_length", 8) is None  # the call's keyword is not what XTuner sees


def test_diff_marks_a_missing_final_newline_and_labels_paths_from_the_root(tmp_path):
    d = unified_diff("cfg/rl.py", "a = 1\nb = 2", "a = 1\nb = 3")
    assert d is not None and d.endswith("+b = 3\n\\ No newline at end of file\n")
    assert patch_label(str(tmp_path / "cfg" / "rl.py"), [tmp_path], "rl.py") == "cfg/rl.py"
    assert patch_label("/elsewhere/rl.py", [tmp_path], "rl.py") == "rl.py"


def test_value_patch_is_one_call_for_a_planner(tmp_path):
    view = view_of_source("rl.py", COLOCATED_ASYNC, ENV)
    patch = value_patch(
        view, {"strategy.max_staleness": 1, "trainer.sync_weights_interval": 5, "resources.num_cpus_per_worker": 8}
    )
    out = applied(COLOCATED_ASYNC, patch, tmp_path)
    after = view_of_source("rl.py", out, ENV)
    assert after.get("strategy.max_staleness") == 1 and after.get("trainer.sync_weights_interval") == 5
    assert after.groups[0].num_cpus_per_worker.value == 8
    kept = {
        k: g.value
        for k, g in view.values.items()
        if k not in ("strategy.max_staleness", "trainer.sync_weights_interval")
    }
    assert kept == {k: g.value for k, g in after.values.items() if k in kept}
    # a value from the environment is not patched: the whole change is refused rather than half made
    disagg = view_of_source("rl.py", DISAGGREGATED, ENV)
    assert value_patch(disagg, {"trainer.sync_weights_interval": 2}) is None


# ---- our sample configs, one planted fault each ---------------------------------------------------------------------

TRAINER_TAIL = "    debug_rollout=False,\n    trace_config=trace_config,\n)"
ASYNC_TAIL = "    seed=123,\n    debug_rollout=False,\n)"

SAMPLE_FAULTS: dict[str, tuple[str, str, tuple[tuple[str, str], ...], str]] = {
    # name: (base, expected finding id, text changes, a line the fixed file contains)
    "evaluate_step": (
        COLOCATED_SYNC,
        "config.evaluate_step_not_multiple",
        ((TRAINER_TAIL, TRAINER_TAIL.replace(")", "    sync_weights_interval=2,\n)")),),
        "evaluate_step = 44\n",
    ),
    "evaluate_step_default": (
        COLOCATED_ASYNC,
        "config.evaluate_step_not_multiple",
        (("    evaluate_step=evaluate_step,\n", "    sync_weights_interval=3,\n"),),
        "    evaluate_step=3,\n",
    ),
    "checkpoint_interval": (
        COLOCATED_ASYNC,
        "config.interval_not_multiple",
        ((ASYNC_TAIL, ASYNC_TAIL.replace(")", "    sync_weights_interval=5,\n    checkpoint_interval=12,\n)")),),
        "    checkpoint_interval=10,\n",
    ),
    "hf_interval_zero": (
        COLOCATED_ASYNC,
        "config.interval_not_positive",
        ((ASYNC_TAIL, ASYNC_TAIL.replace(")", "    hf_interval=0,\n)")),),
        "    hf_interval=-1,\n",
    ),
    "sync_interval_zero": (
        COLOCATED_ASYNC,
        "config.sync_interval_not_positive",
        ((ASYNC_TAIL, ASYNC_TAIL.replace(")", "    sync_weights_interval=0,\n)")),),
        "    sync_weights_interval=1,\n",
    ),
    "engine_layout": (
        COLOCATED_ASYNC,
        "config.rollout_workers_not_divisible",
        (("    tensor_parallel_size=1,\n", "    tensor_parallel_size=3,\n"),),
        "    tensor_parallel_size=2,\n",
    ),
    "engine_layout_disagg": (
        DISAGGREGATED,
        "config.rollout_workers_not_divisible",
        (('    tensor_parallel_size=int(os.environ.get("ROLLOUT_TP_SIZE", "1")),\n', "    expert_parallel_size=3,\n"),),
        "    expert_parallel_size=2,\n",
    ),
    "unknown_field": (
        COLOCATED_ASYNC,
        "config.unknown_field",
        (('    weight_transport_type="ipc",\n', '    weight_transport_type="ipc",\n    backend="lmdeploy",\n'),),
        '    weight_transport_type="ipc",\n)',
    ),
    "unknown_field_inline": (
        COLOCATED_SYNC,
        "config.unknown_field",
        (("CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1)", "CPUResourcesConfig(num_workers=1, gpus=0)"),),
        "CPUResourcesConfig(num_workers=1)",
    ),
    "strategy_in_colocated_task": (
        COLOCATED_ASYNC,
        "config.class_mismatch",
        (
            (
                "produce_strategy_config = AsyncProduceStrategyConfig(",
                "produce_strategy_config = DisaggAsyncProduceStrategyConfig(",
            ),
        ),
        "produce_strategy_config = AsyncProduceStrategyConfig(",
    ),
    "manager_in_disagg_trainer": (
        DISAGGREGATED,
        "config.class_mismatch",
        (
            (
                "agent_loop_manager_cfg = DisaggAgentLoopManagerConfig(",
                "agent_loop_manager_cfg = AgentLoopManagerConfig(",
            ),
        ),
        "agent_loop_manager_cfg = DisaggAgentLoopManagerConfig(",
    ),
    "transport_unknown": (
        COLOCATED_ASYNC,
        "config.weight_transport_invalid",
        (('    weight_transport_type="ipc",\n', '    weight_transport_type="shm",\n'),),
        '    weight_transport_type="ipc",\n',
    ),
    "checkpoint_engine_with_lmdeploy": (
        COLOCATED_ASYNC,
        "config.checkpoint_engine_backend",
        (('    weight_transport_type="ipc",\n', '    weight_transport_type="checkpoint_engine",\n'),),
        '    weight_transport_type="ipc",\n',
    ),
    "vllm_only_field": (
        COLOCATED_ASYNC,
        "config.vllm_only_field",
        (('    weight_transport_type="ipc",\n', '    weight_transport_type="ipc",\n    data_parallel_size=2,\n'),),
        '    weight_transport_type="ipc",\n)',
    ),
    "staleness_bound": (
        COLOCATED_ASYNC,
        "config.strategy_bound",
        (("    max_staleness=0,\n", "    max_staleness=-1,\n"),),
        "    max_staleness=0,\n",
    ),
    "staleness_without_partial": (
        COLOCATED_ASYNC,
        "config.staleness_without_partial_rollout",
        (
            (
                "    enable_partial_rollout=True,\n    max_staleness=0,\n",
                "    enable_partial_rollout=False,\n    max_staleness=2,\n",
            ),
        ),
        "    enable_partial_rollout=True,\n",
    ),
    "batch_judge": (
        COLOCATED_ASYNC,
        "config.batch_judge_unsupported",
        (
            (
                "train_loop = SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=train_params)",
                "train_loop = SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=train_params, enable_batch_judge=True)",
            ),
        ),
        "train_loop = SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=train_params)\n",
    ),
    "pg_strategy": (
        COLOCATED_ASYNC,
        "config.pg_strategy_invalid",
        (
            (
                "    cpu_memory_per_worker=32 * 1024**3,\n",
                '    cpu_memory_per_worker=32 * 1024**3,\n    pg_pack_strategy="SPREADX",\n',
            ),
        ),
        "    cpu_memory_per_worker=32 * 1024**3,\n)",
    ),
    "debug_rollout": (
        COLOCATED_ASYNC,
        "config.debug_rollout_on",
        (("    debug_rollout=False,\n", '    debug_rollout=True,\n    debug_rollout_dir="/tmp/rollouts",\n'),),
        "    debug_rollout=False,\n",
    ),
}


@pytest.mark.parametrize("case", sorted(SAMPLE_FAULTS))
def test_sample_fault_patch_applies_and_removes_only_its_finding(case, tmp_path):
    base, fid, changes, fixed_line = SAMPLE_FAULTS[case]
    root = tmp_path / "root"
    (root / "configs").mkdir(parents=True)
    write(root / "configs", "rl.py", mutate(base, *changes))
    env = {**ENV, "XTUNER_USE_LMDEPLOY": "1"}
    patches = apply_each(root, "configs/rl.py", tmp_path, env)
    assert fid in patches, f"no patch for {fid}: {sorted(patches)}"
    # the patch writes the fix the finding names
    copy = tmp_path / "final"
    shutil.copytree(root, copy)
    assert git_apply(copy, patches[fid]).returncode == 0
    assert fixed_line in (copy / "configs" / "rl.py").read_text(encoding="utf-8")


def test_renamed_class_is_imported_when_the_file_lacks_it(tmp_path):
    text = mutate(
        COLOCATED_ASYNC,
        ("    AsyncProduceStrategyConfig,\n", ""),
        (
            "produce_strategy_config = AsyncProduceStrategyConfig(",
            "produce_strategy_config = DisaggAsyncProduceStrategyConfig(",
        ),
    )
    write(tmp_path, "rl.py", text)
    patches = apply_each(tmp_path, "rl.py", tmp_path / "copies", ENV)
    out = applied(text, patches["config.class_mismatch"], tmp_path / "copies")
    imported = {a.name for n in ast.walk(ast.parse(out)) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "AsyncProduceStrategyConfig" in imported


def test_field_the_installed_xtuner_lacks_is_removed(tmp_path):
    from .test_user_environment import REMOVED, xtuner_tree

    checkout = tmp_path / "xtuner-src"
    xtuner_tree(checkout)
    root = tmp_path / "root"
    root.mkdir()
    write(
        root,
        "rl.py",
        mutate(
            COLOCATED_ASYNC,
            ('    weight_transport_type="ipc",\n', f'    weight_transport_type="ipc",\n    {REMOVED[1]}=2,\n'),
        ),
    )
    # the file is fine for b934f46, so it is the installed XTuner's table that asks for the patch
    assert not [f for f in inspect(root, "rl.py").findings if f.id == "config.unknown_field"]
    ctx_roots = [root, checkout]
    params = inspect_config.Params(path=str(root / "rl.py"), env=ENV, training_env=str(checkout), detail="full")
    r = inspect_config.run(params, RunContext(paths=PathPolicy.from_strings(ctx_roots)))
    (f,) = [f for f in r.findings if f.id == "config.unknown_field"]
    assert f.patch is not None and f"-    {REMOVED[1]}=2,\n" in f.patch
    assert git_apply(root, f.patch).returncode == 0
    again = inspect_config.run(params, RunContext(paths=PathPolicy.from_strings(ctx_roots)))
    assert Counter(key(g) for g in again.findings) == Counter(key(g) for g in r.findings) - Counter([key(f)])


def test_preflight_carries_the_same_patches(tmp_path):
    from xtuner_rl_mcp.operations import preflight

    write(
        tmp_path, "rl.py", mutate(COLOCATED_ASYNC, ("    tensor_parallel_size=1,\n", "    tensor_parallel_size=3,\n"))
    )
    direct = inspect(tmp_path, "rl.py")
    p = preflight.Params(config=str(tmp_path / "rl.py"), env=ENV, probe_cluster=False)
    r = preflight.run(p, RunContext(paths=PathPolicy.from_strings([tmp_path])))
    want = {f.id: f.patch for f in direct.findings if f.patch}
    got = {f.id: f.patch for f in [*r.blockers, *r.warnings] if f.patch}
    assert want and want.items() <= got.items()


# ---- every upstream example, with planted faults ------------------------------------------------------------------

UPSTREAM = (
    sorted(
        p
        for p in subprocess.run(
            [GIT or "git", "-C", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD", "examples/v1/config"],
            capture_output=True,
            text=True,
        ).stdout.split()
        if "rl" in Path(p).name and p.endswith(".py")
    )
    if MIRROR.is_dir() and GIT
    else []
)


def plant(text: str) -> str:
    """Faults written into the example's own calls (found with ast, independently of the patch engine): an unknown
    RolloutConfig field, a TP the workers do not divide by, an unknown transport and placement strategy, and interval
    settings the validator rejects."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    inserts: dict[int, list[str]] = {}  # line index of a call's closing parenthesis -> lines to put before it
    replace: dict[int, str] = {}

    def calls(name: str) -> list[ast.Call]:
        """The module-level ``x = name(...)`` calls."""
        values = [st.value for st in tree.body if isinstance(st, ast.Assign)]
        return [v for v in values if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == name]

    def add(call: ast.Call, kw: str, value: str) -> None:
        own = next((k for k in call.keywords if k.arg == kw), None)
        if own is not None:
            assert own.lineno == own.end_lineno, "a planted value replaces a one-line keyword"
            indent = lines[own.lineno - 1][: own.col_offset]
            replace[own.lineno - 1] = f"{indent}{kw}={value},\n"
        else:
            assert call.end_lineno != call.lineno, "calls are written one keyword per line"
            inserts.setdefault(call.end_lineno - 1, []).append(f"    {kw}={value},\n")
            last = call.keywords[-1]
            if last.end_lineno - 1 not in replace and not lines[last.end_lineno - 1][last.end_col_offset :].strip():
                replace[last.end_lineno - 1] = lines[last.end_lineno - 1].rstrip("\n") + ",\n"  # no trailing comma

    (rollout,) = calls("RolloutConfig")
    add(rollout, "planted_unknown_field", "1")
    add(rollout, "tensor_parallel_size", "3")
    add(rollout, "expert_parallel_size", "1")
    add(rollout, "weight_transport_type", '"shm"')
    groups = calls("AcceleratorResourcesConfig")
    add(groups[-1], "pg_pack_strategy", '"SPREADX"')
    (trainer,) = [c for name in ("RLColocateTrainerConfig", "RLDisaggregatedTrainerConfig") for c in calls(name)]
    if any(k.arg == "sync_weights_interval" for k in trainer.keywords):
        add(trainer, "checkpoint_interval", "0")
    else:
        add(trainer, "sync_weights_interval", "2")
        add(trainer, "hf_interval", "5")
    out = []
    for i, line in enumerate(lines):
        out.extend(inserts.get(i, []))
        out.append(replace.get(i, line))
    return "".join(out)


@pytest.mark.skipif(not UPSTREAM, reason="XTuner mirror not available")
@pytest.mark.parametrize("example", UPSTREAM or ["none"])
def test_upstream_example_with_planted_faults(example, tmp_path):
    text = subprocess.run(
        [GIT, "-C", str(MIRROR), "show", f"HEAD:{example}"], capture_output=True, text=True, check=True
    ).stdout
    root = tmp_path / "root"
    root.mkdir()
    name = Path(example).name
    write(root, name, plant(text))
    patches = apply_each(root, name, tmp_path, env=None)
    planted = {
        "config.unknown_field",
        "config.rollout_workers_not_divisible",
        "config.weight_transport_invalid",
        "config.pg_strategy_invalid",
    }
    planted.add(
        "config.interval_not_positive" if "checkpoint_interval=0," in plant(text) else "config.interval_not_multiple"
    )
    assert planted <= set(patches), f"planted faults without a patch: {sorted(planted - set(patches))}"
