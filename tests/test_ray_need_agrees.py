"""One Ray need: build_rl_command (and the script it writes), preflight, probe_environment's fit and choose_topology
give the same numbers for the same config, because they all take them from the one config view.

Configs: the realistic samples of tests/xtuner_config_samples.py (always), with per-group CPU/memory overrides, and
every upstream RL example of the XTuner mirror when it is present (skipped otherwise).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from xtuner_rl_mcp.config_analysis.view import read_view
from xtuner_rl_mcp.core import PathPolicy, RunContext
from xtuner_rl_mcp.launch.plan import OWNED_ENV
from xtuner_rl_mcp.operations import build_rl_command, choose_topology, preflight, probe_environment
from xtuner_rl_mcp.xtuner_rules.ray_need import RayNeed

from .upstream import MIRROR, rl_example_configs
from .xtuner_config_samples import COLOCATED_ASYNC, COLOCATED_SYNC, DISAGGREGATED, ENV, MULTI_TASK, write

SAMPLES = {
    "colocated_sync": (COLOCATED_SYNC, {}),
    "colocated_async": (COLOCATED_ASYNC, {}),
    "multi_task": (MULTI_TASK, {}),
    "disaggregated": (DISAGGREGATED, {}),
    # The case that disagreed before: the train group's CPUs differ from the rollout group's (74 CPUs, not 42).
    "disaggregated_train_cpus_4": (DISAGGREGATED, {"TRAIN_CPUS_PER_WORKER": "4"}),
    "disaggregated_rollout_2": (DISAGGREGATED, {"ROLLOUT_NUM_WORKERS": "2", "TRAIN_CPUS_PER_WORKER": "6"}),
}


def _upstream() -> list[str]:
    return [p for p in rl_example_configs() if p.rsplit("/", 1)[-1].startswith("rl_")]


def _answers(cfg: Path, env: dict[str, str], root: Path) -> dict[str, tuple[float, float] | None]:
    """(CPUs, memory GiB) each answer gives; None where it says the need is unknown."""
    ctx = RunContext(paths=PathPolicy.from_strings([root]))
    owned = set(OWNED_ENV)
    view = read_view(str(cfg), ctx.paths, {**env, "XTUNER_USE_LMDEPLOY": "1"})
    # the launch passes --num-workers; preflight passes the config's own count, so the standalone call does too
    shared = next((g for g in view.groups if g.role == "shared" and g.num_workers is not None), None)
    b = build_rl_command.run(
        build_rl_command.Params(
            config=str(cfg),
            backend="lmdeploy",
            model_path=env.get("MODEL_PATH"),
            data_path=env.get("DATA_PATH"),
            eval_data_path=env.get("EVAL_DATA_PATH"),
            work_dir=env.get("WORK_DIR"),
            extra_env={k: v for k, v in env.items() if k not in owned},
            num_workers=shared.num_workers.value if shared is not None else None,
        ),
        ctx,
    )
    out: dict[str, tuple[float, float] | None] = {}
    out["build_rl_command"] = (b.ray_need.cpus, b.ray_need.memory_gib) if b.ray_need.known else None
    if b.ray_need.known:
        assert f"need_cpus={b.ray_need.cpus} " in b.script and f"need_gib={b.ray_need.memory_gib:g} " in b.script
        out["script"] = out["build_rl_command"]
    p = preflight.run(
        preflight.Params(config=str(cfg), env=env, backend="lmdeploy", probe_cluster=False, detail="full"), ctx
    )
    out["preflight"] = (p.ray_need.cpus, p.ray_need.memory_gib) if p.ray_need is not None else None
    if p.launch_plan is not None or "build_rl_command" in p.details:
        built = p.details["build_rl_command"]["ray_need"]
        out["preflight.build_rl_command"] = (built["cpus"], built["memory_gib"]) if built["known"] else None
    req, _ = view.ray_requirements(None)
    probe = probe_environment.run(
        probe_environment.Params(checks=["ray"], ray_address="127.0.0.1:1", timeout_s=1),
        ctx,
        needs=probe_environment.RunNeeds(req, tracing=False),
    )
    out["probe_environment.fit"] = (
        (probe.fit.min_cluster_cpus, probe.fit.min_cluster_memory_gib) if probe.fit is not None else None
    )
    return out


def _assert_agree(answers: dict[str, tuple[float, float] | None]) -> None:
    known = {k: v for k, v in answers.items() if v is not None}
    assert len(set(known.values())) <= 1, answers
    assert answers["build_rl_command"] == answers["preflight"] == answers["probe_environment.fit"], answers


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_answer_gives_the_same_ray_need(tmp_path: Path, name: str) -> None:
    text, overrides = SAMPLES[name]
    env = {**ENV, **overrides, "WORK_DIR": str(tmp_path / "work")}
    cfg = write(tmp_path, f"{name}.py", text)
    answers = _answers(cfg, env, tmp_path)
    _assert_agree(answers)
    assert answers["build_rl_command"] is not None


def test_the_disaggregated_case_is_74_cpus_everywhere(tmp_path: Path) -> None:
    """Train 4 x 4 + 10 = 26; rollout 4 x 12 + 10 = 58 on top of the 16 the train group holds: 74."""
    env = {**ENV, "TRAIN_CPUS_PER_WORKER": "4", "WORK_DIR": str(tmp_path / "work")}
    cfg = write(tmp_path, "d.py", DISAGGREGATED)
    answers = _answers(cfg, env, tmp_path)
    assert answers["preflight"] is not None and answers["preflight"][0] == 74
    _assert_agree(answers)


def test_choose_topology_from_a_config_says_the_same(tmp_path: Path) -> None:
    cfg = write(tmp_path, "a.py", COLOCATED_ASYNC)
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]))
    plan = choose_topology.run(choose_topology.Params(config=str(cfg), nodes=1, gpus_per_node=8, params_b=8), ctx)
    view = read_view(str(cfg), ctx.paths, {"WORLD_SIZE": "1"})
    need = view.ray_need(None, 1, 8)
    req = plan.ray_requirements
    assert (req.min_cluster_cpus, req.min_cluster_memory_gib) == (need.cpus, need.memory_gib)
    assert isinstance(need, RayNeed)


@pytest.mark.parametrize("example", _upstream() or ["(no mirror)"])
def test_upstream_examples_agree(tmp_path: Path, example: str) -> None:
    if example == "(no mirror)":
        pytest.skip("the XTuner mirror is not on this machine")
    text = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"HEAD:{example}"], capture_output=True, text=True, check=True
    ).stdout
    cfg = tmp_path / example.rsplit("/", 1)[-1]
    cfg.write_text(text)
    env = {**ENV, "WORK_DIR": str(tmp_path / "work")}
    _assert_agree(_answers(cfg, env, tmp_path))


def test_preflight_reads_and_evaluates_the_config_once(tmp_path: Path, monkeypatch) -> None:
    """The one reader is the one place a config is parsed and evaluated: a preflight call does it once."""
    from xtuner_rl_mcp.config_analysis import view as view_module

    calls: list[str] = []
    real = view_module.view_of_source

    def counting(name, source, env, classes=None, path=None, **kw):  # the real reader, counted (nothing replaced)
        calls.append(name)
        return real(name, source, env, classes, path, **kw)

    monkeypatch.setattr(view_module, "view_of_source", counting)
    env = {**ENV, "WORK_DIR": str(tmp_path / "work")}
    cfg = write(tmp_path, "d.py", DISAGGREGATED)
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]))
    res = preflight.run(preflight.Params(config=str(cfg), env=env, backend="lmdeploy", probe_cluster=False), ctx)
    assert calls == ["d.py"], calls
    assert {c.name for c in res.checks} >= {"inspect_config", "build_rl_command"}
