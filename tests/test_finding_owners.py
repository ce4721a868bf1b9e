"""One owner per finding id, everywhere (issue 20 item 3): every tool that reports a finding names the same owner
for it, and preflight's routing never changes an owner a single tool reported.

The findings are collected by running the real tools on inputs that make them speak: the shipped sample configs
and broken variants, real GSM8K-shaped data with defects, planned environments with missing and conflicting backend
flags, a dead Ray address, and a stand-in finding per failure-mode catalog category.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import Finding, PathPolicy, RunContext
from xtuner_rl_mcp.core.findings import FORCED_OWNER
from xtuner_rl_mcp.knowledge.catalog import load_catalog
from xtuner_rl_mcp.launch import readiness
from xtuner_rl_mcp.operations import check_reward_data, inspect_config, preflight, probe_environment

from .xtuner_config_samples import COLOCATED_ASYNC, COLOCATED_SYNC, DISAGGREGATED, ENV, MULTI_ENV, MULTI_TASK, write

BROKEN = (
    ("trainer = RLColocateTrainerConfig(", "trainer_cfg = RLColocateTrainerConfig("),
    ("    context_length=max_response_length + max_prompt_length,\n", "    bogus_field=1,\n"),
    ("sync_weights_interval", "sync_weights_intervall"),
)


def data_file(tmp_path: Path) -> Path:
    good = {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": 'What is 2+3? output the final answer after "####".'}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "5"},
    }
    rows = [good, {**good, "reward_model": {"style": "rule"}}, {"prompt": "x"}, "not json"]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def collect(tmp_path: Path) -> dict[str, list[tuple[str, Finding]]]:
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]))
    seen: dict[str, list[tuple[str, Finding]]] = defaultdict(list)

    def add(tool: str, findings) -> None:
        for f in findings:
            seen[f.id].append((tool, f))

    configs = []
    for i, text in enumerate((COLOCATED_ASYNC, COLOCATED_SYNC, DISAGGREGATED, MULTI_TASK)):
        configs.append(write(tmp_path, f"c{i}.py", text))
        for j, (old, new) in enumerate(BROKEN):
            if text.count(old) == 1:
                configs.append(write(tmp_path, f"c{i}_{j}.py", text.replace(old, new)))
    data = data_file(tmp_path)
    for cfg in configs:
        for env in (ENV, MULTI_ENV, {}, {**ENV, "XTUNER_USE_LMDEPLOY": "1", "XTUNER_USE_SGLANG": "1"}):
            add("inspect_config", inspect_config.run(inspect_config.Params(path=str(cfg), env=env), ctx).findings)
    for cfg in configs[:3]:
        r = preflight.run(
            preflight.Params(config=str(cfg), data_path=str(data), env=ENV, ray_address="127.0.0.1:1"), ctx
        )
        add("preflight", r.blockers + r.warnings)
    for env in ({}, {"XTUNER_USE_VLLM": "1"}, {"XTUNER_USE_LMDEPLOY": "1", "XTUNER_USE_FA3": "1"}):
        p = probe_environment.Params(env={**env, "MODEL_PATH": str(tmp_path / "m")}, ray_address="127.0.0.1:1")
        add("probe_environment", probe_environment.run(p.model_copy(update={"timeout_s": 1.0}), ctx).findings)
    add("check_reward_data", check_reward_data.run(check_reward_data.Params(path=str(data)), ctx).findings)
    # diagnose_symptom ranks catalog entries (Diagnosis, no owner field); with run_probes it embeds these tools'
    # findings, which are collected above. Its catalog examples still go through preflight's routing below.
    for entry in load_catalog().failure_mode:
        stand_in = Finding(id=f"catalog.{entry.id}", severity="warning", category=entry.category, title=entry.title)
        add("catalog", [stand_in])
    return seen


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, list[tuple[str, Finding]]]:
    return collect(tmp_path_factory.mktemp("owners"))


def test_each_finding_id_has_one_owner_in_every_tool(collected):
    assert len(collected) > 40, sorted(collected)  # the inputs really made the tools speak
    tools = {t for rows in collected.values() for t, _ in rows}
    assert tools == {"inspect_config", "preflight", "probe_environment", "check_reward_data", "catalog"}
    split = {
        fid: sorted({f"{t}:{f.owner}" for t, f in rows})
        for fid, rows in collected.items()
        if len({f.owner for _, f in rows}) > 1
    }
    assert split == {}


def test_forced_categories_always_carry_their_owner(collected):
    wrong = [
        (fid, t, f.owner)
        for fid, rows in collected.items()
        for t, f in rows
        if f.category in FORCED_OWNER and f.owner != FORCED_OWNER[f.category]
    ]
    assert wrong == []


def test_an_emitter_cannot_route_a_forced_category_elsewhere():
    f = Finding(id="x.y", severity="blocker", category="ray_not_running", title="t", owner="config_edit")
    assert f.owner == "cluster_setup"
    g = Finding(id="x.z", severity="warning", category="config_load_error", title="t")
    assert g.owner == "config_edit"
    h = Finding(id="x.w", severity="warning", category="missing_env_var_or_path", title="t", owner="data_preparation")
    assert h.owner == "data_preparation"  # a non-forced category keeps the emitter's owner


def test_preflight_merge_never_changes_an_owner(collected):
    """What preflight reports for an id is what the single tool reported: routing is the Finding's, not the merge's."""
    for fid, rows in collected.items():
        for _, f in rows:
            (merged,) = readiness.merge([("x", f)], set())
            assert merged.owner == f.owner, fid
