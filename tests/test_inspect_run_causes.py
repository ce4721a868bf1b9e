"""inspect_run names the cause, not the symptom (issue 25 item 1 and two audit items), on run directories written
like XTuner's (tests/run_dir_generator.py):

* a run whose labels are '72.0' while the model answers '#### 72', and one whose every response is cut at 1,024
  tokens before '####' -- 40 steps of 64 prompts x 5 samples (12,800 samples each), a ``config.py`` copy in the work
  dir saying evaluate_step=45: the first finding is the cause, with a quoted label and answer, suggestions follow from
  it, and neither eval nor stall raises a false alarm;
* the judge scoring correct answers 0; eval due by the config but missing, or switched off;
* stall judged against the run's own step times, with a first-step grace;
* async/* tracker values are groups left in the replay buffer; every tracker tag read is one XTuner writes;
* the ``config`` argument is a guarded read; the demo sample is what the generator writes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations import inspect_run as tool
from xtuner_rl_mcp.runs import analysis, tracker, trajectories

from .run_dir_generator import DEMO_DIR, DEMO_NOW, DEMO_SPEC, RunSpec, generate

REPO = Path(__file__).resolve().parents[1]
#: The two runs of the issue: step 40 of 100, 64 prompts x 5 samples per step, the config copy says evaluate_step=45.
ISSUE_RUN = {"steps": 40, "total_steps": 100, "groups": 64, "k": 5, "evaluate_step": 45, "config_copy": True}


def inspect(root: Path, **kw):
    ctx = RunContext(paths=PathPolicy.from_strings([root]))
    return tool.run(tool.Params(path=str(kw.pop("path", root)), **kw), ctx)


def ids(res) -> set[str]:
    return {f.id for f in res.findings}


def by_id(res, fid: str):
    return next(f for f in res.findings if f.id == fid)


def texts(res) -> str:
    return " ".join(f"{f.title} {f.evidence} {f.fix}" for f in res.findings)


@pytest.fixture(scope="module")
def label_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("labels")
    generate(root, RunSpec(**ISSUE_RUN, label_suffix=".0", idle_s=30))
    return root


@pytest.fixture(scope="module")
def truncated_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("truncated")
    generate(root, RunSpec(**ISSUE_RUN, truncate_share=1.0, max_tokens=1024, idle_s=30))
    return root


# ---------------------------------------------------------------------------------------------------------------
# The two runs of the issue
# ---------------------------------------------------------------------------------------------------------------


def test_label_format_run_names_the_label_format_first_and_quotes_label_and_answer(label_run):
    res = inspect(label_run)
    assert res.learning.samples == 12_800 and res.learning.reward_mean_last == 0.0
    check = res.learning.judge_check
    assert check.cause == "label_format" and check.samples == 12_800
    assert set(check.verdicts) == {"label_format", "wrong"} and check.cause_samples == check.verdicts["label_format"]
    first = res.findings[0]
    assert first.id == "learn.reward_zero_label_format" and first.severity == "blocker"
    # a quoted label and the answer the judger took from the response: the same number, another string
    m = re.search(r"labels like '(\d+)\.0' never equal the judged answer '(\d+)'", first.title)
    assert m and m.group(1) == m.group(2), first.title
    assert "every reward is 0 over 40 step(s)" in first.title
    assert re.search(r"label '\d+\.0' vs response '…[^']*#### \d+' -> judged answer '\d+'", first.evidence)
    assert "('72', not '72.0'" in first.fix and "gsm8k_ground_truth_noncanonical" in first.fix  # the data rule's fix
    assert f"{check.cause_samples} answers were right" in first.fix
    assert first.owner == "data_preparation" and first.source.startswith("xtuner/v1/rl/judger/gsm8k.py:")
    # the groups without signal follow from the cause: no "too hard", no more samples per prompt
    groups = by_id(res, "learn.groups_no_signal")
    assert "label format" in groups.fix and "learn.reward_zero_label_format" in groups.fix
    assert "Raise prompt_repeat_k" not in texts(res) and "too hard" not in texts(res)


def test_truncated_run_names_truncation_first_not_the_missing_marker(truncated_run):
    res = inspect(truncated_run)
    first = res.findings[0]
    assert first.id == "learn.reward_zero_truncation" and first.severity == "blocker"
    assert first.title.startswith("Truncation: 12800/12800 responses were cut at the length limit (1024 tokens")
    assert "SampleParams.max_tokens = 1024 at config.py:" in first.title  # read from the run's own config
    assert "Raise SampleParams.max_tokens" in first.fix and first.owner == "config_edit"
    assert res.learning.judge_check.verdicts == {"no_answer_truncated": 12_800}
    # the missing '####' is not the headline, and truncation is not repeated as a trailing warning
    assert not {"learn.reward_zero_answer_format", "learn.responses_truncated"} & ids(res)
    assert "truncation" in by_id(res, "learn.groups_no_signal").fix and "too hard" not in texts(res)


@pytest.mark.parametrize("run", ["label_run", "truncated_run"])
def test_config_copy_sets_eval_schedule_and_no_stall_or_eval_false_alarm(run, request):
    root = request.getfixturevalue(run)
    res = inspect(root)
    assert res.state == "running" and res.progress.last_step == 40 and res.progress.total_steps == 100
    assert not {"eval.never_ran", "run.stalled"} & ids(res)
    assert res.config.path == str(root / "config.py")
    assert res.config.values["evaluate_step"].value == 45
    where = res.config.values["evaluate_step"].where  # the line that writes the value
    lines = (root / "config.py").read_text().splitlines()
    assert lines[int(where.removeprefix("config.py:")) - 1] == "evaluate_step = 45"
    assert res.learning.eval_next_step == 45 and res.learning.eval_steps == []


# ---------------------------------------------------------------------------------------------------------------
# The judger's rule, sample by sample; the other causes; eval against the config
# ---------------------------------------------------------------------------------------------------------------

FAR = " and then some more words" * 13  # 325 characters: pushes an answer out of the 300 the judger reads


@pytest.mark.parametrize(
    ("response", "label", "reward", "truncated", "verdict"),
    [
        ("so #### 72", "72", 1.0, False, "rewarded"),
        ("#### 70 then #### 1,000", "1000", 1.0, False, "rewarded"),  # the last one, commas dropped
        ("so #### 72", "72", 0.0, False, "judge_zero"),
        ("so #### 73", "72", 0.0, False, "wrong"),
        ("so #### 72", "72.0", 0.0, False, "label_format"),
        ("so #### 72", 72, 0.0, False, "label_format"),  # a JSON number never equals a string
        ("so #### 1000", "1,000", 0.0, False, "label_format"),
        ("so #### 72.00", "72", 0.0, False, "answer_form"),
        ("the answer is \\boxed{72}", "72", 0.0, False, "no_answer"),
        ("#### 72" + FAR, "72", 0.0, False, "no_answer"),
        ("I keep thinking", "72", 0.0, True, "no_answer_truncated"),
        ("the answer is 72", "72", 1.0, False, "rewarded_unmatched"),
    ],
)
def test_gsm8k_verdict_follows_the_judgers_rule(response, label, reward, truncated, verdict):
    assert trajectories.gsm8k_verdict(response, label, reward, truncated) == verdict


def test_a_judge_scoring_correct_answers_zero_is_the_named_cause(tmp_path):
    generate(tmp_path, RunSpec(judge_zero=True))
    res = inspect(tmp_path)
    first = res.findings[0]
    n = res.learning.judge_check.verdicts["judge_zero"]
    assert first.id == "learn.reward_zero_judge" and n > 100
    assert (
        first.title
        == f"Judge: {n} responses whose '#### <number>' equals the label scored 0, so every reward is 0 over 12 step(s)"
    )
    assert "extra_info" in first.fix and first.owner == "config_edit"
    assert "too hard" not in texts(res)


def test_wrong_answers_are_not_blamed_on_the_judge(tmp_path):
    """Every reward 0 because the model answers another number: no judge cause; then the prompts may be too hard."""
    generate(tmp_path, RunSpec(correct_share=0.0))
    res = inspect(tmp_path)
    assert res.learning.judge_check.cause is None and res.learning.judge_check.verdicts == {"wrong": 384}
    first = res.findings[0]
    assert first.id == "learn.reward_all_zero" and "the answers are read and differ from the labels" in first.evidence
    assert "Raise prompt_repeat_k" in by_id(res, "learn.groups_no_signal").fix


def test_eval_due_by_the_config_but_missing_is_a_warning_citing_the_config(tmp_path):
    generate(tmp_path, RunSpec(steps=50, total_steps=100, evaluate_step=None, config_copy=True))
    cfg = tmp_path / "config.py"  # evaluation on, every 45 steps; the run wrote none
    text = cfg.read_text().replace("evaluate_step = 1\n", "evaluate_step = 45\n")
    cfg.write_text(text.replace("enable_evaluate=False,", "enable_evaluate=True,"))
    res = inspect(tmp_path)
    f = by_id(res, "eval.never_ran")
    assert "the config evaluates every 45 step(s) (evaluate_step at config.py:" in f.evidence
    assert "1 evaluation(s) due by step 50" in f.evidence and "Evaluation was due but did not run" in f.fix
    assert res.learning.eval_next_step == 90


def test_eval_switched_off_in_the_config_is_a_note_not_a_warning(tmp_path):
    generate(tmp_path, RunSpec(steps=30, total_steps=30, evaluate_step=None, config_copy=True))
    res = inspect(tmp_path)
    assert "eval.never_ran" not in ids(res)
    f = by_id(res, "eval.disabled")
    assert f.severity == "info" and "enable_evaluate=False at config.py:" in f.title


# ---------------------------------------------------------------------------------------------------------------
# Stall against the run's own step times
# ---------------------------------------------------------------------------------------------------------------


def test_a_long_first_step_is_not_called_stalled(tmp_path):
    generate(tmp_path, RunSpec(steps=0, total_steps=100, step_in_progress=True, idle_s=2700))
    res = inspect(tmp_path)
    assert res.state == "running" and "run.stalled" not in ids(res)
    assert res.progress.stall_threshold_s == analysis.FIRST_STEP_GRACE_S == 7200
    assert res.progress.evidence[0] == "step 1 started, none finished yet"
    assert "under the stall threshold the first-step grace 7200s" in res.progress.evidence[1]


def test_the_first_step_grace_ends_and_is_configurable(tmp_path):
    generate(tmp_path / "a", RunSpec(steps=0, total_steps=100, step_in_progress=True, idle_s=8000))
    res = inspect(tmp_path / "a")
    assert res.state == "stalled" and "first-step grace 7200s" in by_id(res, "run.stalled").evidence
    generate(tmp_path / "b", RunSpec(steps=0, total_steps=100, step_in_progress=True, idle_s=2700))
    res = inspect(tmp_path / "b", first_step_grace_s=1800)
    assert res.state == "stalled" and res.progress.stall_threshold_s == 1800


def test_stall_threshold_comes_from_the_runs_step_times():
    assert analysis.stall_threshold([], 7200.0)[0] == 7200.0
    assert analysis.stall_threshold([900.0] * 10, 7200.0)[0] == 4500.0  # 5 x median
    threshold, basis = analysis.stall_threshold([60.0] * 9 + [1500.0], 7200.0)  # an eval step took 25 min once
    assert threshold == 1500.0 and "longest step 1500s" in basis and "median step 60s" in basis


# ---------------------------------------------------------------------------------------------------------------
# Audit items: async/* are groups in the buffer; only tags XTuner writes are read
# ---------------------------------------------------------------------------------------------------------------


def test_async_counts_are_groups_in_the_buffer_compared_with_groups_per_step(tmp_path):
    """8 prompts x 16 samples per step, expired groups in the buffer grow by one per step (mean 10 over the last
    five): more than half a step's groups wait expired. Compared with the 128 samples per step they looked small."""
    generate(tmp_path, RunSpec(groups=8, k=16, async_pile=1))
    res = inspect(tmp_path)
    f = by_id(res, "async.expired_samples")
    assert f.title == (
        "Expired groups pile up in the replay buffer: 10 left after each step, against 8 groups trained per step"
    )
    assert "not samples per step" in f.evidence and "8 groups per step from the trajectory files" in f.evidence


def test_every_tracker_tag_read_is_one_xtuner_writes(tmp_path):
    """The generator writes _log_step's scalars (rl_trainer.py:1340-1429); training_samples is not among them."""
    exp = generate(tmp_path, RunSpec(steps=4, total_steps=4, evaluate_step=2, async_pile=1))
    written: set[str] = set()
    for line in (exp / "logs" / "exp_tracking" / "tracker.jsonl").read_text().splitlines():
        written |= set(json.loads(line)) - {"step"}
    assert set(tracker.TAGS) <= written, set(tracker.TAGS) - written


# ---------------------------------------------------------------------------------------------------------------
# The config argument and the work dir's copy are guarded reads
# ---------------------------------------------------------------------------------------------------------------


def test_config_argument_overrides_the_copy_and_is_checked(tmp_path):
    work = tmp_path / "work"
    generate(work, RunSpec(steps=3, total_steps=100, evaluate_step=45, config_copy=True))
    other = tmp_path / "launched.py"
    other.write_text((work / "config.py").read_text().replace("evaluate_step = 45", "evaluate_step = 2"))
    res = inspect(tmp_path, path=work, config=str(other))
    assert res.config.path == str(other) and res.config.values["evaluate_step"].value == 2
    assert "1 evaluation(s) due by step 3" in by_id(res, "eval.never_ran").evidence
    for bad, code in (
        (tmp_path / "launched.txt", "config_not_python"),
        ("/etc/passwd.py", "path_outside_roots"),
        (tmp_path / "missing.py", "path_not_found"),
    ):
        with pytest.raises(ToolInputError) as e:
            inspect(tmp_path, path=work, config=str(bad))
        assert e.value.code == code
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    with pytest.raises(ToolInputError) as e:
        inspect(tmp_path, path=work, config=str(fifo))  # refused at once, never blocks
    assert e.value.code == "path_special_file"


def test_the_copy_read_for_an_older_experiment_says_it_may_be_a_later_launchs(tmp_path):
    old = generate(tmp_path, RunSpec(steps=3, total_steps=3, config_copy=True), now=1_700_000_000)
    generate(tmp_path, RunSpec(steps=5, total_steps=5, config_copy=True))  # the relaunch overwrites config.py
    res = inspect(tmp_path, experiment=old.name)
    assert res.config.values["total_train_steps"].value == 5 and "started after this one" in res.config.note
    assert any("the config copy may belong to another launch" in e for e in res.progress.evidence)
    assert inspect(tmp_path).config.note == ""


def test_a_config_copy_linking_out_of_the_roots_is_a_note(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("trainer = None\n")
    work = tmp_path / "root" / "work"
    generate(work, RunSpec(steps=3, total_steps=3))
    (work / "config.py").symlink_to(outside / "secret.py")
    res = inspect(tmp_path / "root", path=work)
    assert res.config.path is None and res.config.values == {}
    assert res.config.note == "config.py in the work dir links outside the allowed roots: not read"
    # an experiment dir given alone: its work dir is not within the roots, nothing there is probed
    exp = next(p for p in work.iterdir() if p.is_dir())
    res = inspect(exp)
    assert res.config.path is None and "outside the allowed roots" in res.config.note


# ---------------------------------------------------------------------------------------------------------------
# The demo sample and the real MCP client
# ---------------------------------------------------------------------------------------------------------------


def test_demo_sample_is_what_the_generator_writes_and_names_its_cause(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the sample holds paths relative to the repository root
    generate(DEMO_DIR, DEMO_SPEC, DEMO_NOW)
    shipped = REPO / DEMO_DIR
    made = {p.relative_to(tmp_path / DEMO_DIR): p.read_bytes() for p in (tmp_path / DEMO_DIR).rglob("*") if p.is_file()}
    have = {p.relative_to(shipped): p.read_bytes() for p in shipped.rglob("*") if p.is_file()}
    assert made.keys() == have.keys() and all(made[k] == have[k] for k in made), (
        "run: python tests/run_dir_generator.py"
    )
    res = inspect(shipped)
    assert res.findings[0].id == "learn.reward_zero_answer_format" and res.findings[0].severity == "blocker"


@pytest.mark.anyio
async def test_through_the_mcp_client_with_a_config_argument(mcp_client, tmp_path):
    work = tmp_path / "run"
    generate(work, RunSpec(**ISSUE_RUN, truncate_share=1.0, max_tokens=1024, idle_s=30))
    launched = tmp_path / "launched_config.py"
    launched.write_bytes((work / "config.py").read_bytes())
    (work / "config.py").unlink()
    r = await mcp_client.call_tool("inspect_run", {"path": str(work), "config": str(launched), "detail": "summary"})
    assert not r.is_error, r.content
    sc = r.structured_content
    assert sc["findings"][0]["id"] == "learn.reward_zero_truncation" and sc["findings"][0]["severity"] == "blocker"
    assert sc["config"]["path"] == str(launched) and sc["config"]["values"]["evaluate_step"]["value"] == 45
    assert sc["learning"]["eval_next_step"] == 45 and sc["state"] == "running"
    assert not {"eval.never_ran", "run.stalled"} & {f["id"] for f in sc["findings"]}
    assert "1 blocker(s), 1 warning(s): learn.reward_zero_truncation" in sc["summary"]
