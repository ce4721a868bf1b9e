"""Issue 20's planning requests, replayed the way an assistant asks them: through the real MCP client.

Each test is one request from the issue (async GSM8K launch on 8 GPUs; 70B on 2x8 A100; the divisibility error's fix;
eval/sync intervals; vLLM) and asserts the answer leads with the decision and its deciding numbers. The configs are
the test samples shaped like XTuner's examples (tests/xtuner_config_samples.py), written into tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .xtuner_config_samples import COLOCATED_ASYNC

pytestmark = pytest.mark.anyio


def _write(tmp_path: Path, text: str = COLOCATED_ASYNC, name: str = "rl_grpo_gsm8k_async.py", **swap: str) -> str:
    for old, new in swap.items():
        assert old in text, old
        text = text.replace(old, new)
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


async def _call(client, tool: str, args: dict) -> dict:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content
    return r.structured_content


async def test_async_gsm8k_launch_on_8_gpus(mcp_client, tmp_path):
    """'Give me the launch for the async GSM8K example on 8 GPUs with LMDeploy': the Ray need is in the summary."""
    out = await _call(
        mcp_client,
        "build_rl_command",
        {
            "config": _write(tmp_path),
            "backend": "lmdeploy",
            "model_path": "/models/qwen3-8b",
            "data_path": "/data/gsm8k/train.jsonl",
            "eval_data_path": "/data/gsm8k/test.jsonl",
            "work_dir": "/runs/gsm8k-async",
        },
    )
    # 32 GiB per worker: 8 x 12 + 10 = 106 CPUs, 8 x 32 + 10 = 266 GiB (ray_accelerator_worker.py:115-122)
    assert "Ray must offer 8 GPUs, 106 CPUs, 266 GiB" in out["summary"]
    assert out["summary"].index("106 CPUs") < out["summary"].index("blocker")
    need = out["ray_need"]
    assert (need["cpus"], need["memory_gib"], need["memory_bytes"]) == (106, 266, 266 * 1024**3)
    script = out["script"]
    assert script.index("\nulimit -n 65536") < script.index("\nray start --head")
    assert "-v need_cpus=106 -v need_gib=266" in script
    assert script.index("# 3b.") < script.index("python -m xtuner.v1.train.cli.rl")
    assert 'tee -a -- "$xtuner_rl_log"' in script and out["log_file"].startswith("/runs/gsm8k-async/training_log_")
    assert any("ray_num_cpus=106 and ray_memory_gib=266" in n for n in out["notes"])


async def test_70b_on_2x8_a100(mcp_client, tmp_path):
    """'Plan GRPO for a 70B model on 2 x 8 A100 80GB': topology, TP and the Ray need lead the answer."""
    out = await _call(
        mcp_client, "choose_topology", {"nodes": 2, "gpus_per_node": 8, "params_b": 70, "gpu_memory_gib": 80}
    )
    s = out["summary"]
    assert s.startswith(out["topology"])
    assert f"tp={out['rollout']['tensor_parallel_size']}" in s
    assert "Ray needs 16 GPUs, 202 CPUs, 266 GiB" in s  # 16 x 12 + 10 CPUs, 16 x 16 GiB + 10 GiB
    assert out["rollout"]["tensor_parallel_size"] * out["rollout"]["num_engines"] == 16
    launch = await _call(
        mcp_client,
        "build_rl_command",
        {
            "config": _write(tmp_path, **{"cpu_memory_per_worker=32 * 1024**3": "cpu_memory_per_worker=16 * 1024**3"}),
            "backend": "sglang",
            "nodes": 2,
            "head_address": "10.0.0.1",
        },
    )
    assert (
        "Ray must offer 16 GPUs, 202 CPUs, 266 GiB (each node holds 96 CPUs, 128 GiB of worker bundles; the same ray start on every node needs 101 CPUs, 133 GiB)"
        in launch["summary"]
    )


async def test_divisibility_error_gets_a_fix_with_numbers(mcp_client, tmp_path):
    """'num_rollout_workers=6 must be divisible by num_gpus_per_engine=4': plan from the user's config."""
    cfg = _write(
        tmp_path, **{"num_workers=8 * NNODE": "num_workers=6", "tensor_parallel_size=1,": "tensor_parallel_size=4,"}
    )
    out = await _call(mcp_client, "choose_topology", {"config": cfg, "nodes": 1, "params_b": 8})
    f = next(f for f in out["findings"] if f["id"] == "topo.config_layout_rejected")
    assert f["fix"].startswith("use 4 or 8 rollout GPUs with TP 4, or TP 1/2/3/6 on 6")
    assert "num_rollout_workers=6 must be divisible by num_gpus_per_engine=4" in out["summary"]
    (edit,) = out["from_config"]["changed"]
    assert (edit["field"], edit["old_value"], edit["new_value"]) == ("trainer.resources.num_workers", "6", "4")
    assert edit["why"].startswith("XTuner's rollout divisibility rule") and edit["location"].endswith(":48")
    changed_lines = [line for line in edit["patch"].splitlines()[2:] if line[:1] in "+-"]
    assert changed_lines == ["-    num_workers=6,", "+    num_workers=4,"]


async def test_eval_and_sync_intervals(mcp_client, tmp_path):
    """'Evaluate every 5 steps, sync weights every 2': the fix names the multiples and the divisors."""
    cfg = _write(
        tmp_path,
        **{
            "evaluate_step = 45": "evaluate_step = 5",
            "    debug_rollout=False,\n)": "    debug_rollout=False,\n    sync_weights_interval=2,\n)",
        },
    )
    out = await _call(mcp_client, "choose_topology", {"config": cfg, "nodes": 1, "params_b": 8})
    f = next(f for f in out["findings"] if f["id"] == "topo.interval_rounded")
    assert f["fix"].startswith(
        "Use evaluate_step 4 or 6 (multiples of sync_weights_interval=2), or sync_weights_interval 1/5"
    )
    assert out["training"]["evaluate_step"] == 6 and out["training"]["sync_weights_interval"] == 2
    st = out["from_config"]["staleness"]
    assert st["steps"] == 2 and "(max_staleness 0 + 1) × sync_weights_interval 2 = 2" in st["formula"]


async def test_vllm_is_a_blocker_named_first(mcp_client, tmp_path):
    """'Use vLLM for rollout': both planning tools lead with the blocker instead of a plan that cannot start."""
    out = await _call(mcp_client, "choose_topology", {"nodes": 1, "params_b": 8, "backend": "vllm"})
    assert "first: vLLM rollout cannot start at this XTuner commit" in out["summary"]
    launch = await _call(mcp_client, "build_rl_command", {"config": _write(tmp_path), "backend": "vllm"})
    assert "do not launch yet: 1 blocker(s), first: vLLM rollout cannot start at XTuner b934f46" in launch["summary"]
    assert launch["env"]["XTUNER_USE_VLLM"] == "1"
