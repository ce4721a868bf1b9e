"""Issue 20's troubleshooting requests replayed through the real MCP client, the way an assistant sends them.

The Chinese placement-group report on 2 × 8 GPUs, "reward stays 0", LMDeploy answering 503, data without ground
truth but with GSM8K's extra_info.answer, and 200 lines with the same error. Live probes here look at this machine's
real environment (no Ray cluster started for them); the assertions hold whatever it holds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.anyio

INSTR = ' Let\'s think step by step and output the final answer after "####".'


def _data(res) -> dict:
    assert not (res.is_error if hasattr(res, "is_error") else res.isError), res.content[0].text
    return res.structured_content if hasattr(res, "structured_content") else res.structuredContent


def _gsm8k(i: int, **over) -> dict:
    rec = {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": f"Question {i}: what is {i} + 1?{INSTR}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(i + 1)},
        "extra_info": {"split": "train", "index": i},
    }
    rec.update(over)
    return rec


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


async def test_chinese_placement_group_hang_on_2x8_gpus(mcp_client):
    text = "2 × 8 GPUs 的集群上启动 GRPO，日志停在创建 placement group，一直 pending，训练卡住不动了"
    data = _data(await mcp_client.call_tool("diagnose_symptom", {"text": text}))
    assert data["verdict"] in ("suspected_from_description", "uncertain")  # "卡住" also reads as a stalled engine
    ids = [f["failure_mode_id"] for f in data["findings"]]
    assert "placement_group_pending" in ids[:3]
    pg = data["findings"][ids.index("placement_group_pending")]
    topo = next(c for c in pg["confirm_with"] if c["tool"] == "choose_topology")
    assert topo["arguments"] == {"nodes": 2, "gpus_per_node": 8} and topo["missing"] == []


async def test_reward_stays_zero_with_data_probe(mcp_client, tmp_path):
    # the data the run used: GSM8K lines whose reward_model lost its ground truth
    rows = [_gsm8k(i, reward_model={"style": "rule"}) for i in range(5)]
    path = _write(tmp_path / "train.jsonl", rows)
    args = {"text": "训练了 50 步 reward 一直是 0 / reward stays 0", "data_path": str(path)}
    plain = _data(await mcp_client.call_tool("diagnose_symptom", args))
    assert plain["verdict"] in ("suspected_from_description", "uncertain")  # wording only, no exact message
    zero = next(f for f in plain["findings"] if f["failure_mode_id"] == "reward_always_zero")
    call = next(c for c in zero["confirm_with"] if c["tool"] == "check_reward_data")
    assert call["arguments"] == {"path": str(path)} and call["missing"] == []

    probed = _data(await mcp_client.call_tool("diagnose_symptom", {**args, "run_probes": True}))
    assert probed["verdict"] == "blocker_found_by_probe"
    top = probed["findings"][0]
    assert top["failure_mode_id"] == "reward_missing_ground_truth" and top["match"] == "probe"
    assert probed["summary"].startswith("Live check found a blocker: reward_missing_ground_truth")
    # whatever this machine's Ray looks like, a stopped cluster is never the lead of a report about rewards
    assert all(f["failure_mode_id"] != "ray_not_running" or f["severity"] != "blocker" for f in probed["findings"])


async def test_lmdeploy_503s(mcp_client):
    line = (
        "[XTuner][2026-03-02 11:04:17][WARNING] rollout request failed: httpx.HTTPStatusError: Server error "
        "'503 Service Unavailable' for url 'http://10.0.0.5:23333/v1/chat/completions'"
    )
    text = "LMDeploy rollout on 2 nodes x 8 GPUs keeps answering 503:\n" + "\n".join([line] * 20)
    data = _data(await mcp_client.call_tool("diagnose_symptom", {"text": text}))
    assert data["verdict"] == "failure_found"
    top = data["findings"][0]
    assert top["failure_mode_id"] == "rollout_server_unreachable" and top["occurrences"] >= 20
    assert data["summary"].startswith("Most likely cause: rollout_server_unreachable")
    for f in data["findings"]:
        for c in f["confirm_with"]:
            assert "nodes" not in c["missing"]


async def test_ground_truth_derivable_from_extra_info_answer(mcp_client, tmp_path):
    rows = []
    for i in range(40):
        rec = _gsm8k(i)
        del rec["reward_model"]
        rec["extra_info"]["answer"] = f"{i} + 1 = {i + 1}\n#### {i + 1}"
        rows.append(rec)
    path = _write(tmp_path / "gsm8k_no_gt.jsonl", rows)
    data = _data(await mcp_client.call_tool("check_reward_data", {"path": str(path)}))
    assert not data["ok"] and data["errors_by_code"] == {"missing_reward_model": 40}
    assert "ground_truth derivable on 40 line(s) from extra_info.answer" in data["summary"]
    assert data["derivable_ground_truth"]["fields"] == {"/extra_info/answer": 40}
    sug = next(s for s in data["suggestions"] if s["title"] == "Derive ground_truth from extra_info.answer")
    out = tmp_path / "gsm8k_no_gt.with_gt.jsonl"
    assert not out.exists()  # suggested, never run by the tool
    subprocess.run(sug["command"], shell=True, check=True)
    again = _data(await mcp_client.call_tool("check_reward_data", {"path": str(out)}))
    assert again["ok"] and again["valid"] == 40


async def test_two_hundred_identical_errors_are_one_example(mcp_client, tmp_path):
    rows = [_gsm8k(i, data_source=None) for i in range(200)]
    path = _write(tmp_path / "no_source.jsonl", rows)
    res = await mcp_client.call_tool("check_reward_data", {"path": str(path)})
    data = _data(res)
    assert data["errors_by_code"] == {"missing_data_source": 200}
    (ex,) = data["examples"]
    assert ex["count"] == 200 and ex["lines"] == list(range(1, 11)) and data["examples_omitted"] == 0
    assert len(json.dumps(data)) < 5_000
