"""preflight: the go/no-go call, end to end through the real MCP server and directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xtuner_rl_mcp.cluster import packages
from xtuner_rl_mcp.config_analysis.view import read_view
from xtuner_rl_mcp.core import PathPolicy, RunContext
from xtuner_rl_mcp.operations import preflight

from .xtuner_config_samples import COLOCATED_ASYNC, DISAGGREGATED, ENV, mutate, write


def strip_ground_truth(src: Path, dst: Path, limit: int = 30) -> Path:
    """A copy of real GSM8K lines with reward_model.ground_truth removed (the user's broken data)."""
    with src.open(encoding="utf-8") as fin, dst.open("w", encoding="utf-8") as fout:
        for i, line in enumerate(fin):
            if i >= limit:
                break
            row = json.loads(line)
            row["reward_model"].pop("ground_truth", None)
            fout.write(json.dumps(row) + "\n")
    return dst


def backend_installed() -> bool:
    items = packages.check_packages().items
    return any(i.installed for i in items if i.name in ("lmdeploy", "sglang"))


def call(tmp_path: Path, **kw) -> preflight.Result:
    seen: list[tuple] = []
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]), progress=lambda *a: seen.append(a))
    res = preflight.run(preflight.Params(**kw), ctx)
    # one notification per check, in order, then the final one
    assert [m.split(" ", 1)[1] for _, _, m in seen[:-1]] == [c.name for c in res.checks]
    assert [p for p, _, _ in seen] == list(range(len(seen))) and seen[-1][0] == seen[-1][1]
    return res


@pytest.mark.anyio
async def test_hard_case_no_go_with_both_blockers(mcp_client, tmp_path, shared_data):
    """Async-GSM8K-style config, data without reward_model.ground_truth, no backend flag or package."""
    config = write(tmp_path, "rl_grpo_gsm8k_async_mine.py", COLOCATED_ASYNC)
    train = strip_ground_truth(shared_data / "gsm8k_train_example_data.jsonl", tmp_path / "train.jsonl")
    progress: list[tuple] = []

    async def on_progress(p, total, msg):
        progress.append((p, total, msg))

    r = await mcp_client.call_tool(
        "preflight",
        {
            "config": str(config),
            "data_path": str(train),
            "eval_data_path": str(shared_data / "gsm8k_val_example_data.jsonl"),
            "model_path": str(tmp_path),
            "work_dir": str(tmp_path / "work"),
            "probe_cluster": False,
        },
        progress_callback=on_progress,
    )
    assert not r.is_error, r.content
    sc = r.structured_content
    assert sc["verdict"] == "no_go" and sc["launch_plan"] is None
    by_id = {b["id"]: b for b in sc["blockers"]}
    gt = by_id["data.missing_ground_truth"]
    assert gt["owner"] == "data_preparation" and gt["fix"] and gt["category"] == "reward_data_missing_ground_truth"
    backend = [b for b in sc["blockers"] if b["category"].startswith("backend_")]
    assert backend and all(b["owner"] == "backend_install" and b["fix"] for b in backend)
    assert "probe.backend_flag_missing" in by_id
    if not backend_installed():
        assert "preflight.no_backend" in by_id or "preflight.no_backend" in {w["id"] for w in sc["warnings"]}
    assert sc["owners"]["data_preparation"] >= 1 and sc["owners"]["backend_install"] >= 1
    names = [c["name"] for c in sc["checks"]]
    assert names == [
        "inspect_config",
        "check_reward_data:train",
        "check_reward_data:eval",
        "probe_environment",
        "build_rl_command",
    ]
    assert {c["name"]: c["status"] for c in sc["checks"]}["build_rl_command"] == "skipped"
    # the server throttles progress to one per 0.1 s, so fast checks may coalesce; first and last always arrive
    assert progress[0][2] == "running inspect_config" and len(progress) >= 2
    assert progress[-1][0] == progress[-1][1]
    assert [p for p, _, _ in progress] == sorted(p for p, _, _ in progress)
    ids = [b["id"] for b in sc["blockers"] + sc["warnings"]]
    assert len(ids) == len(set(ids))


def test_duplicates_across_checks_are_merged(tmp_path):
    cfg = write(
        tmp_path,
        "cfg.py",
        mutate(COLOCATED_ASYNC, ("trainer = RLColocateTrainerConfig(", "run_cfg = RLColocateTrainerConfig(")),
    )
    r = call(tmp_path, config=str(cfg), backend="lmdeploy", env=ENV, probe_cluster=False)
    ids = [b.id for b in r.blockers]
    assert "config.missing_trainer" in ids and "cmd.config_missing_trainer" not in ids
    statuses = {c.name: c.status for c in r.checks}
    assert statuses["build_rl_command"] in ("findings", "ok") and statuses["inspect_config"] == "findings"
    assert r.blockers[0].owner is not None and all(b.owner for b in r.blockers)


def test_missing_model_path_is_one_blocker(tmp_path):
    """MODEL_PATH is checked by the env check and the model check: one root cause, one blocker, both evidences."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    missing = tmp_path / "no_such_model"
    r = call(tmp_path, config=str(cfg), model_path=str(missing), backend="lmdeploy", probe_cluster=False)
    about_model = [b for b in r.blockers if b.location == str(missing) or "MODEL_PATH" in b.id]
    assert len(about_model) == 1, about_model
    (f,) = about_model
    assert f.id == "probe.model_path_missing" and f.owner == "model_files"
    assert "probe.env_path_missing.MODEL_PATH" in f.evidence and f"MODEL_PATH={missing}" in f.evidence


def test_missing_data_path_is_one_blocker(tmp_path):
    """A missing DATA_PATH stops check_reward_data and fails the env check: one blocker, owned by data preparation."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    missing = tmp_path / "no_such_train.jsonl"
    r = call(tmp_path, config=str(cfg), data_path=str(missing), backend="lmdeploy", probe_cluster=False)
    about_data = [b for b in r.blockers if b.location == str(missing)]
    assert len(about_data) == 1, r.blockers
    (f,) = about_data
    assert f.id == "probe.env_path_missing.DATA_PATH" and f.owner == "data_preparation"
    assert "preflight.check_reward_data_input" in f.evidence
    assert {c.name: c.status for c in r.checks}["check_reward_data:train"] == "input_error"


def test_check_input_error_becomes_a_finding(tmp_path):
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    r = call(tmp_path, config=str(cfg), data_path="/etc/hostname", env=ENV, probe_cluster=False)
    f = next(b for b in r.blockers if b.id == "preflight.check_reward_data_input")
    assert f.owner == "data_preparation" and "outside the allowed roots" in f.title
    assert {c.name: c.status for c in r.checks}["check_reward_data:train"] == "input_error"


def test_data_paths_come_from_the_config_and_dead_cluster_is_routed(tmp_path, shared_data):
    train = strip_ground_truth(shared_data / "gsm8k_train_example_data.jsonl", tmp_path / "t.jsonl", limit=5)
    env = {**ENV, "DATA_PATH": str(train), "EVAL_DATA_PATH": str(train)}
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    r = call(tmp_path, config=str(cfg), env=env, ray_address="127.0.0.1:1", detail="full")
    statuses = {c.name: c.status for c in r.checks}
    assert statuses["check_reward_data:train"] == "findings" and statuses["check_reward_data:eval"] == "findings"
    assert r.details["probe_environment"]["fit"] is not None or any(b.owner == "cluster_setup" for b in r.blockers)
    ray = [b for b in r.blockers if b.category == "ray_not_running"]
    assert ray and all(b.owner == "cluster_setup" for b in ray)
    assert "inspect_config" in r.details and r.details["inspect_config"]["mode"] == "colocated"


def test_ray_requirements_from_a_disaggregated_config(tmp_path):
    cfg = write(tmp_path, "d.py", DISAGGREGATED)
    paths = PathPolicy.from_strings([tmp_path])
    view = read_view(str(cfg), paths, {**ENV, "ROLLOUT_NUM_WORKERS": "2"})
    req, why = view.ray_requirements(16)  # --num-workers is ignored for disaggregated configs
    assert why == "" and [(pg.name, pg.num_workers) for pg in req.placement_groups] == [("train", 4), ("rollout", 2)]
    unresolved = read_view(str(cfg), paths, {**ENV, "TRAIN_NUM_WORKERS": "x"})
    req2, why2 = unresolved.ray_requirements(None)
    assert req2 is None and "num_workers" in why2


def test_go_returns_the_launch_plan(tmp_path, monkeypatch):
    # MOCK: LMDeploy cannot be installed on this CPU-only test machine, so the package report is replaced by one
    # that says lmdeploy is installed; everything else (config, data, env, model dir, command) is real.
    real = packages.check_packages

    def with_lmdeploy():
        rep = real()
        for item in rep.items:
            if item.name in ("lmdeploy", "xtuner", "ray", "torch", "cyclopts", "transformers"):
                item.installed = True
        rep.xtuner_v1_rl_cli = True
        return rep

    monkeypatch.setattr(packages, "check_packages", with_lmdeploy)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    data = tmp_path / "train.jsonl"
    row = {
        "data_source": "openai/gsm8k",
        "prompt": [
            {
                "role": "user",
                "content": 'What is 2+3? Let\'s think step by step and output the final answer after "####".',
            }
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "5"},
        "extra_info": {"split": "train", "index": 0},
    }
    data.write_text("\n".join(json.dumps({**row, "extra_info": {"index": i}}) for i in range(8)) + "\n")
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    r = call(
        tmp_path,
        config=str(cfg),
        data_path=str(data),
        eval_data_path=str(data),
        model_path=str(model),
        work_dir=str(tmp_path / "w"),
        backend="lmdeploy",
        probe_cluster=False,
    )
    assert r.verdict == "go", r.blockers
    assert r.launch_plan is not None and "XTUNER_USE_LMDEPLOY=1" in r.launch_plan.exports
    assert "xtuner.v1.train.cli.rl" in r.launch_plan.command and r.launch_plan.script is None
    assert r.planned_env_added["XTUNER_USE_LMDEPLOY"] == "1" and r.planned_env_added["DATA_PATH"] == str(data)


@pytest.mark.ray
def test_fit_against_a_real_ray_cluster(tmp_path, ray_cluster):
    """The config's resources (8 workers x 12 CPU x 32 GiB + judger pools) tested against a live 2-node Ray cluster."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    gpus = int(ray_cluster.total("GPU"))
    fits = call(tmp_path, config=str(cfg), env=ENV, ray_address=ray_cluster.gcs_address, detail="full")
    fit = fits.details["probe_environment"]["fit"]
    assert fit is not None and fit["ok"] is (ray_cluster.total("memory") >= (32 * 8 + 10) * 1024**3), fit
    too_big = call(tmp_path, config=str(cfg), env=ENV, ray_address=ray_cluster.gcs_address, num_workers=gpus * 2)
    short = [b for b in too_big.blockers if b.category == "ray_resources_insufficient"]
    assert short and all(b.owner == "cluster_setup" for b in short)
    assert too_big.verdict == "no_go" and too_big.owners["cluster_setup"] >= 1


def test_blockers_come_in_the_order_xtuner_hits_them(tmp_path, shared_data):
    """A data problem (first judged batch) and a config problem (config load): the config one leads, with its stage."""
    train = strip_ground_truth(shared_data / "gsm8k_train_example_data.jsonl", tmp_path / "t.jsonl", limit=5)
    (tmp_path / "raytmp").mkdir()
    text = mutate(COLOCATED_ASYNC, ("    context_length=max_response_length + max_prompt_length,\n", ""))
    cfg = write(tmp_path, "cfg.py", text)
    env = {**ENV, "DATA_PATH": str(train), "EVAL_DATA_PATH": str(train), "RAY_TMPDIR": str(tmp_path / "raytmp")}
    r = call(tmp_path, config=str(cfg), env=env, backend="lmdeploy")
    ids = [b.id for b in r.blockers]
    assert ids.index("config.rollout_context_length_missing") < ids.index("data.missing_ground_truth"), ids
    first = r.blockers[0]
    assert first.stage in ("launch", "ray_connect", "config_load"), r.blockers
    assert f"first to fire (at {first.stage}): {first.title}" in r.summary
    stages = [preflight_stage_rank(b.stage) for b in r.blockers]
    assert stages == sorted(stages)
    # the plan starts Ray (no address given): no Ray blocker, and the need is stated
    assert r.cluster_mode == "plan_starts_ray" and not [b for b in r.blockers if b.category == "ray_not_running"]
    assert r.ray_need is not None and r.ray_need.cpus == 106 and r.ray_need.memory_gib == 266


def preflight_stage_rank(stage: str | None) -> int:
    from xtuner_rl_mcp.core.findings import STAGE_ORDER

    return STAGE_ORDER.get(stage or "", len(STAGE_ORDER))


def test_trace_without_a_collector_is_no_go_at_the_config_line(tmp_path, monkeypatch):
    """Tracing on in the config and no otelcol on PATH decide the run together: one blocker naming both."""
    from .xtuner_config_samples import COLOCATED_SYNC

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # a PATH with no collector (and nothing else)
    cfg = write(tmp_path, "sync.py", COLOCATED_SYNC)
    r = call(tmp_path, config=str(cfg), env=ENV, backend="lmdeploy", probe_cluster=False)
    assert r.verdict == "no_go"
    otel = next(b for b in r.blockers if b.id == "probe.otelcol_missing")
    line = COLOCATED_SYNC.splitlines().index("trace_config = TraceConfig(") + 1
    assert otel.location == f"sync.py:{line}" and "the config asks for it" in otel.evidence
    assert "config.trace_needs_otel" not in {f.id for f in r.blockers + r.warnings}  # one finding, not two
    # The same config with tracing off: the missing collector is no blocker at all.
    off = write(tmp_path, "off.py", mutate(COLOCATED_SYNC, ("enabled=enable_trace,", "enabled=False,")))
    r2 = call(tmp_path, config=str(off), env=ENV, backend="lmdeploy", probe_cluster=False)
    assert "probe.otelcol_missing" not in {b.id for b in r2.blockers}


def test_a_model_read_at_config_load_fails_at_config_load(tmp_path):
    """The samples call get_model_config_from_hf(Path(model_path)) at module level: a missing model directory
    fails while XTuner loads the config file, the first stage after Ray, not when workers start."""
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    missing = tmp_path / "no_such_model"
    r = call(tmp_path, config=str(cfg), model_path=str(missing), backend="lmdeploy", probe_cluster=False)
    (f,) = [b for b in r.blockers if b.id == "probe.model_path_missing"]
    assert f.stage == "config_load" and "get_model_config_from_hf" in f.evidence
    no_read = write(tmp_path, "plain.py", COLOCATED_ASYNC.replace("get_model_config_from_hf(Path(model_path))", "None"))
    r2 = call(tmp_path, config=str(no_read), model_path=str(missing), backend="lmdeploy", probe_cluster=False)
    (g,) = [b for b in r2.blockers if b.id == "probe.model_path_missing"]
    assert g.stage == "rollout_start"
