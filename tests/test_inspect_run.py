"""inspect_run on run directories laid out like XTuner's writers (tests/run_dir_generator.py): healthy runs in both
tracker formats, planted problems of every kind, bounds and bad input, and the real MCP client (image content)."""

from __future__ import annotations

import ast
import base64
import json
import os
import struct
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.knowledge.catalog import load_catalog, tomllib
from xtuner_rl_mcp.operations import inspect_run as tool
from xtuner_rl_mcp.runs import findings, tensorboard, trajectories

from .run_dir_generator import RunSpec, generate

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.33 GiB of which 1.06 GiB is free."
)


def inspect(root: Path, **kw):
    ctx = RunContext(paths=PathPolicy.from_strings([root]))
    return tool.run(tool.Params(path=str(kw.pop("path", root)), **kw), ctx)


def ids(res) -> set[str]:
    return {f.id for f in res.findings}


def by_id(res, fid: str):
    return next(f for f in res.findings if f.id == fid)


# ---------------------------------------------------------------------------------------------------------------
# Healthy runs, both tracker formats
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "tensorboard"])
def test_healthy_run_has_no_warnings(tmp_path, fmt):
    if fmt == "tensorboard":
        pytest.importorskip("tensorboardX")
    generate(tmp_path, RunSpec(tracker=fmt))
    res = inspect(tmp_path)
    assert [f for f in res.findings if f.severity != "info"] == [], res.findings
    assert res.state == "finished" and res.progress.last_step == 12 and res.progress.total_steps == 12
    assert res.outputs.tracker == fmt and res.outputs.tracker_records > 0
    assert res.progress.step_time_s == 60.0 and res.progress.step_time_trend == "steady"
    assert res.progress.checkpoints == [4, 8, 12]
    assert res.learning.reward_trend == "rising" and res.learning.group_size == 4
    assert res.learning.samples == 12 * 8 * 4 and res.learning.unreadable_lines == 0
    assert res.learning.eval_steps == [4, 8, 12]
    assert res.series["step"] == [float(s) for s in range(1, 13)]
    assert len(res.series["entropy_rollout"]) == 12 and res.series["entropy_rollout"][0] == pytest.approx(0.5875)
    assert res.eval_series["step"] == [4.0, 8.0, 12.0]
    assert res.summary.startswith("step 12/12 finished (60 s/step, steady); reward mean")
    assert "0 blocker(s), 0 warning(s)" in res.summary


def test_both_tracker_formats_give_the_same_series(tmp_path):
    pytest.importorskip("tensorboardX")
    generate(tmp_path / "a", RunSpec(tracker="jsonl", entropy_collapse=True))
    generate(tmp_path / "b", RunSpec(tracker="tensorboard", entropy_collapse=True))
    a, b = inspect(tmp_path / "a"), inspect(tmp_path / "b")
    for col in ("entropy_rollout", "step_time_s", "async_expired", "reward_mean"):
        assert a.series[col] == pytest.approx(b.series[col], abs=1e-4), col
    assert a.eval_series == b.eval_series
    assert ids(a) == ids(b) == {"learn.entropy_collapse"}


def test_running_run_reports_eta(tmp_path):
    generate(tmp_path, RunSpec(steps=5, total_steps=20, idle_s=30))
    res = inspect(tmp_path)
    assert res.state == "running" and res.progress.last_step == 5 and res.progress.percent_done == 25.0
    assert res.progress.eta_s == 15 * 60
    assert res.summary.startswith("step 5/20 running")


# ---------------------------------------------------------------------------------------------------------------
# Planted problems
# ---------------------------------------------------------------------------------------------------------------


def test_answer_format_is_the_named_cause_and_quotes_two_responses(tmp_path):
    generate(tmp_path, RunSpec(judger_format=True))
    res = inspect(tmp_path)
    f = res.findings[0]
    assert f.id == "learn.reward_zero_answer_format" and f.severity == "blocker"
    assert f.reference.endswith("/reward_always_zero") and f.owner == "data_preparation"
    assert f.evidence.count("boxed") == 2 and f.title.startswith("Answer format: 384/384 responses end without")
    assert res.learning.judge_check.verdicts == {"no_answer": 384} and res.learning.reward_mean_last == 0.0


def test_groups_without_signal(tmp_path):
    generate(tmp_path, RunSpec(equal_groups=True))
    res = inspect(tmp_path)
    f = by_id(res, "learn.groups_no_signal")
    assert res.learning.no_signal_groups_pct_last == 100.0
    assert "prompt_repeat_k) = 4" in f.evidence and "Raise prompt_repeat_k (now 4)" in f.fix
    assert f.reference.endswith("/grpo_groups_no_signal")


def test_truncation_zeroing_some_rewards_is_named_as_their_cause(tmp_path):
    generate(tmp_path, RunSpec(truncate_share=0.15, max_tokens=512))
    res = inspect(tmp_path)
    f = res.findings[0]
    n = res.learning.judge_check.verdicts["no_answer_truncated"]
    assert f.id == "learn.reward_zero_truncation" and f.severity == "warning"  # other samples still score
    assert f"{n}/384 responses were cut at the length limit (512 tokens)" in f.title
    assert f"so {n} of 384 samples score 0 for it" in f.title and "above 512" in f.fix
    assert "learn.responses_truncated" not in ids(res)  # said once, as the cause


def test_the_larger_judge_failure_is_the_cause_the_other_stays_a_warning(tmp_path):
    generate(tmp_path, RunSpec(label_suffix=".0", truncate_share=0.15, max_tokens=512))
    res = inspect(tmp_path)
    verdicts = res.learning.judge_check.verdicts
    assert verdicts["label_format"] > verdicts["no_answer_truncated"] > 0
    assert res.findings[0].id == "learn.reward_zero_label_format"
    f = by_id(res, "learn.responses_truncated")
    assert 10 <= res.learning.truncated_pct_last <= 30 and "above 512" in f.fix


def test_entropy_collapse(tmp_path):
    generate(tmp_path, RunSpec(entropy_collapse=True))
    res = inspect(tmp_path)
    f = by_id(res, "learn.entropy_collapse")
    assert f"{res.learning.entropy_first}" in f.evidence and res.learning.entropy_last < 0.02 and f.category == "other"


def test_eval_never_ran(tmp_path):
    generate(tmp_path, RunSpec(evaluate_step=None))
    res = inspect(tmp_path)
    f = by_id(res, "eval.never_ran")
    assert "Final train step reached without scheduled evaluation" in f.evidence
    assert res.learning.eval_steps == [] and res.eval_series == {}


def test_eval_accuracy_drop(tmp_path):
    generate(tmp_path, RunSpec(accuracy_drop=True, evaluate_step=2))
    res = inspect(tmp_path)
    f = by_id(res, "eval.accuracy_dropped")
    assert (
        f"to {res.learning.eval_latest['accuracy']} (step 12)" in f.title
        and res.learning.eval_latest["accuracy"] <= 0.25
    )


def test_async_samples_pile_up(tmp_path):
    generate(tmp_path, RunSpec(async_pile=3))
    res = inspect(tmp_path)
    assert {"async.expired_samples", "async.aborted_samples"} <= ids(res)
    assert res.learning.async_last["expired"] == 30.0  # mean of 3*step over steps 8..12
    assert res.series["async_expired"][-1] == 36.0


def test_failed_eval_samples_and_missing_labels(tmp_path):
    generate(tmp_path, RunSpec(eval_failed_share=0.5, missing_labels=2))
    res = inspect(tmp_path)
    f = by_id(res, "learn.samples_failed")
    assert "Rollout request N failed: N" in f.evidence
    assert res.learning.top_errors[0].message == "Rollout request N failed: N"
    assert res.learning.missing_labels == 24 and "learn.missing_labels" in ids(res)


def test_tracker_and_trace_output_missing(tmp_path):
    generate(tmp_path / "a", RunSpec(tracker="none", trace_enabled=True, trace_written=False, idle_s=600))
    res = inspect(tmp_path / "a")
    assert {"output.tracker_missing", "output.trace_missing"} <= ids(res)
    assert "XTUNER_OTEL_ENABLED=1" in by_id(res, "output.trace_missing").evidence
    # a recent run has not flushed yet: no tracker warning within the grace period; written traces are fine
    generate(tmp_path / "b", RunSpec(steps=3, tracker="none", trace_enabled=True, idle_s=5))
    res = inspect(tmp_path / "b")
    assert not {"output.tracker_missing", "output.trace_missing"} & ids(res)
    assert res.outputs.trace_enabled and res.outputs.otel_trace_bytes > 0


def test_stalled_run(tmp_path):
    generate(tmp_path, RunSpec(steps=6, total_steps=12, idle_s=4000))
    res = inspect(tmp_path)
    assert res.state == "stalled" and "run.stalled" in ids(res)
    assert res.progress.stall_threshold_s == 600 and res.progress.idle_s >= 4000
    assert "idle 4" in res.summary


def test_failed_run_error_goes_through_the_diagnosis_engine(tmp_path):
    generate(tmp_path, RunSpec(steps=6, total_steps=12, log_error=OOM, idle_s=60))
    res = inspect(tmp_path)
    assert res.state == "failed" and res.logs.verdict == "failure_found"
    f = by_id(res, "logs.cuda_out_of_memory")
    assert f.severity == "blocker" and f.location.endswith("rank_0.log:" + f.location.rsplit(":", 1)[1])
    assert res.log_diagnoses[0].failure_mode_id == "cuda_out_of_memory"


# ---------------------------------------------------------------------------------------------------------------
# Directory resolution, bounds, bad input
# ---------------------------------------------------------------------------------------------------------------


def test_newest_experiment_by_default_and_by_name(tmp_path):
    old = generate(tmp_path, RunSpec(steps=3, total_steps=3), now=1_700_000_000)
    new = generate(tmp_path, RunSpec(steps=5, total_steps=5))
    assert inspect(tmp_path).outputs.exp_dir == str(new)
    assert inspect(tmp_path, experiment=old.name).progress.last_step == 3
    assert inspect(tmp_path, path=old).outputs.exp_dir == str(old)  # an experiment dir itself
    assert inspect(tmp_path).outputs.experiments == sorted([old.name, new.name])


def test_long_run_series_are_downsampled_and_files_capped(tmp_path):
    generate(tmp_path, RunSpec(steps=150, total_steps=150, groups=2, k=2, response_chars=40, evaluate_step=50))
    res = inspect(tmp_path, detail="summary", max_trajectory_files=30)
    assert res.series_steps == 150 and len(res.series["step"]) == 20
    assert res.series["step"][0] == 1.0 and res.series["step"][-1] == 150.0
    assert res.learning.steps_scanned == 30 and res.learning.trajectory_files_omitted == 120
    assert res.series["reward_mean"][0] is not None  # the tracker fills steps whose files were not read


def test_bad_input_is_structured(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ToolInputError) as e:
        inspect(tmp_path, path=tmp_path / "empty")
    assert e.value.code == "not_a_run_dir"
    with pytest.raises(ToolInputError) as e:
        inspect(tmp_path / "empty", path="/etc")
    assert e.value.code == "path_outside_roots"
    generate(tmp_path / "w", RunSpec(steps=2, total_steps=2))
    with pytest.raises(ToolInputError) as e:
        inspect(tmp_path, path=tmp_path / "w", experiment="../../etc")
    assert e.value.code == "invalid_arguments"


def test_torn_and_overlong_trajectory_lines_are_counted_not_fatal(tmp_path):
    p = tmp_path / "train_rollout_1.jsonl"
    good = json.dumps(
        {
            "group_id": 1,
            "status": "completed",
            "finish_reason": "stop",
            "reward": 1.0,
            "response": "x #### 3",
            "label": "3",
            "response_len": 5,
            "data_source": "openai/gsm8k",
        }
    )
    p.write_text('{"reward_mean":1.0,"total_len":2}\n' + good + "\n" + good + "\n\n{not json}\n" + good[:30])
    st = trajectories.scan_file(p, 1, paths=PathPolicy.from_strings([tmp_path]))
    assert st.samples == 2 and st.unreadable == 2 and st.groups_no_signal == 1 and st.gsm8k_verdicts == {"rewarded": 2}


def test_tensorboard_reader_reads_both_value_forms_and_drops_a_torn_frame(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.proto.tensor_pb2 import TensorProto

    w = tbx.SummaryWriter(logdir=str(tmp_path))
    w.add_scalar("time/step", 12.5, 3)
    fw = w._get_file_writer()
    fw.add_summary(Summary(value=[Summary.Value(tag="eval/accuracy", tensor=TensorProto(dtype=1, float_val=[0.5]))]), 4)
    fw.add_summary(
        Summary(
            value=[Summary.Value(tag="eval/f64", tensor=TensorProto(dtype=2, tensor_content=struct.pack("<d", 0.25)))]
        ),
        5,
    )
    w.close()
    (f,) = tmp_path.glob("events.out.tfevents*")
    with open(f, "ab") as fh:  # a frame whose data was not written yet
        fh.write(struct.pack("<Q", 100) + b"\0\0\0\0" + b"\x08")
    with open(f, "rb") as fh:
        got = [(s, t, v) for s, _w, t, v in tensorboard.read_scalars(fh, lambda t: True)]
    assert got == [(3, "time/step", 12.5), (4, "eval/accuracy", 0.5), (5, "eval/f64", 0.25)]


# ---------------------------------------------------------------------------------------------------------------
# Through the real MCP client
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_through_mcp_client_with_picture(mcp_client, tmp_path):
    pytest.importorskip("matplotlib")
    generate(tmp_path, RunSpec(truncate_share=0.3))
    r = await mcp_client.call_tool("inspect_run", {"path": str(tmp_path), "picture": True, "detail": "summary"})
    assert not r.is_error
    sc = r.structured_content
    assert sc["state"] == "finished" and sc["findings"][0]["id"] == "learn.reward_zero_truncation"
    assert sc["picture"]["bytes"] > 1000 and "reward mean" in sc["picture"]["curves"]
    images = [c for c in r.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    png = base64.b64decode(images[0].data)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) == sc["picture"]["bytes"]
    assert struct.unpack(">II", png[16:24]) == (sc["picture"]["width_px"], sc["picture"]["height_px"])


@pytest.mark.anyio
async def test_mcp_client_without_picture_sends_no_image(mcp_client, tmp_path):
    generate(tmp_path, RunSpec(steps=2, total_steps=2))
    r = await mcp_client.call_tool("inspect_run", {"path": str(tmp_path)})
    assert [c.type for c in r.content] == ["text"] and r.structured_content["picture"] is None
    bad = await mcp_client.call_tool("inspect_run", {"path": str(tmp_path / "nope")})
    assert bad.is_error and json.loads(bad.content[0].text)["error"]["code"] == "path_not_found"


def test_catalog_references_exist_once_merged():
    """Every catalog id a finding points at is in the catalog or in this issue's new entries."""
    known = set(load_catalog().by_id)
    extra = Path(os.environ.get("XTUNER_RL_CATALOG_EXTRA", "/tmp/catalog_issue18.toml"))
    if extra.is_file():
        known |= {e["id"] for e in tomllib.loads(extra.read_text())["failure_mode"]}
    tree = ast.parse(Path(findings.__file__).read_text())
    used = {
        n.args[1].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_f" and isinstance(n.args[1], ast.Constant)
    }
    assert len(used) >= 8 and used <= known, used - known


@pytest.mark.anyio
async def test_annotations_say_read_only_and_open_world(mcp_client):
    """It reads files and, with a Ray address, other nodes' logs: read-only, idempotent, open-world."""
    tool = next(t for t in (await mcp_client.list_tools()).tools if t.name == "inspect_run")
    a = tool.annotations
    assert (a.read_only_hint, a.idempotent_hint, a.destructive_hint, a.open_world_hint) == (True, True, False, True)
