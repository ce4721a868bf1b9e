"""The failure-mode catalog: valid data, patterns true to their messages, docs in sync with the data."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import CATEGORIES
from xtuner_rl_mcp.knowledge import catalog as cat

from .upstream import MIRROR

REPO = Path(__file__).resolve().parents[1]

#: Lines from healthy XTuner / Ray / engine logs: no catalog entry may match any of them.
HEALTHY_LINES = [
    "[XTuner][RANK 0][2026-08-21 16:02:20][INFO] [Step 12/100] rewards/mean=0.4531 response_len/mean=233.1",
    "[XTuner][2026-08-21 16:02:21][INFO] Rollout step 12 finished: 512 samples, 0 failed, 0 aborted",
    "2026-08-21 16:02:23,441 INFO worker.py:1852 -- Connected to Ray cluster. View the dashboard at 127.0.0.1:8265",
    "2026-08-21 16:02:23,441 INFO worker.py:1777 -- Started a local Ray instance.",
    '(RolloutWorker pid=12345, ip=10.0.0.5) INFO:     10.0.0.5:43210 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-08-21 16:02:22] Prefill batch. #new-seq: 4, #new-token: 512, #cached-token: 0, token usage: 0.12",
    "[2026-08-21 16:02:22] Decode batch. #running-req: 32, #token: 9000, gen throughput (token/s): 4120.5",
    "[XTuner][2026-08-21 16:02:24][INFO] RolloutHealthManager started.",
    "[XTuner][2026-08-21 16:02:24][INFO] [SyncProduceStrategy] Started 64 initial tasks.",
    "[XTuner][2026-08-21 16:05:00][INFO] Saving checkpoint to work_dirs/qwen3_gsm8k/20260821160000/checkpoints/step-20",
    "[XTuner][2026-08-21 16:05:02][INFO] eval/accuracy=0.7412 eval/pass@8=0.9102",
    "Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:03<00:00,  1.52it/s]",
    "The server is fired up and ready to roll!",
    "Ray runtime started.",
    "Local node IP: 10.0.0.5",
    "To connect to this Ray cluster: import ray; ray.init()",
    "======== Autoscaler status: 2026-08-21 16:02:30 ========",
    "Node status",
    " 1 node_3fa2a1e6f4",
    "Pending:",
    " (no pending nodes)",
    "Recent failures:",
    " (no failures)",
    " 0.0/128.0 CPU",
    " 8.0/8.0 GPU",
    "step 12/100 loss=0.0231 grad_norm=0.8812 lr=1e-06 tgs=4120 entropy/mean=0.41",
    "timing/rollout=82.1s timing/train=40.3s timing/sync_weights=3.2s",
    "async/leftover_groups=0 async/expired_groups=0 rollout_is/mean_weight=1.0",
    "Update weights from tensor finished in 3.1 s",
    "INFO 08-21 16:02:25 [api_server.py:1880] Starting vLLM API server on http://0.0.0.0:8000",
    "[TM][INFO] Turbomind engine created with max batch size 512",
    "throughput/e2e_effective_sgs=12.4 throughput/rollout_tgs=5123.4",
    "Writing env info to work_dirs/run/logs/env.json",
]


@pytest.fixture(scope="module")
def catalog():
    return cat.load_catalog()


def test_catalog_size_and_categories(catalog):
    entries = catalog.failure_mode
    assert len(entries) >= 45
    ids = [e.id for e in entries]
    assert len(ids) == len(set(ids))
    assert {e.category for e in entries} <= set(CATEGORIES)
    # every theme of the dossier's section 10 is covered by at least one entry
    used = {e.category for e in entries}
    for theme in (
        "ray_not_running",
        "ray_resources_insufficient",
        "backend_not_installed",
        "backend_flag_missing_or_multiple",
        "backend_unsupported",
        "backend_runtime_error",
        "missing_env_var_or_path",
        "config_load_error",
        "reward_data_missing_ground_truth",
        "data_format_other",
        "resource_mismatch_num_workers",
        "staleness_or_partial_rollout",
        "eval_or_interval_config",
        "debug_trace_output",
        "model_loading",
    ):
        assert theme in used, theme


def test_every_regex_compiles_and_matches_its_examples(catalog):
    for fm in catalog.failure_mode:
        for p in fm.patterns + fm.anti_patterns:
            re.compile(p)
        for ex in fm.examples:
            assert fm.matches(ex), (fm.id, ex)
        # every single pattern matches at least one real message it is meant for
        for rx in fm.compiled:
            assert any(rx.search(ex) for ex in fm.examples), (fm.id, rx.pattern)


@pytest.mark.parametrize("line", HEALTHY_LINES)
def test_healthy_lines_match_nothing(catalog, line):
    hits = [fm.id for fm in catalog.failure_mode if fm.matches(line)]
    assert hits == []


def test_examples_do_not_cross_match_more_specific_entries(catalog):
    """An example of a specific entry is not claimed by another entry of equal or higher specificity."""
    for fm in catalog.failure_mode:
        for ex in fm.examples:
            rivals = [
                o.id
                for o in catalog.failure_mode
                if o.id != fm.id and o.matches(ex) and o.specificity >= fm.specificity
            ]
            assert rivals == [], (fm.id, ex, rivals)


def test_generic_requirements_of_the_issue_are_covered(catalog):
    def ids_for(text: str) -> set[str]:
        return {fm.id for fm in catalog.failure_mode if fm.matches(text)}

    assert "ray_not_running" in ids_for(
        "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
        "setting `--address` flag or `RAY_ADDRESS` environment variable."
    )
    assert "placement_group_pending" in ids_for("Waiting for placement group to be ready")
    assert ids_for("ModuleNotFoundError: No module named 'sglang'") == {"backend_not_installed"}
    assert "cuda_out_of_memory" in ids_for("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20 MiB")
    assert "port_in_use" in ids_for("OSError: [Errno 98] Address already in use")
    assert "ray_gcs_unreachable" in ids_for("Failed to connect to GCS at address 10.1.2.3:6379 within 60 seconds.")
    assert "reward_missing_ground_truth" in ids_for("KeyError: 'reward_model'")


def test_sources_are_xtuner_paths_with_lines(catalog):
    """XTuner path:line (a range allowed), or external:<project> for another stack's message."""
    for fm in catalog.failure_mode:
        for s in fm.source:
            assert re.match(r"^(xtuner|examples)/[\w./-]+\.(py|sh):\d+(-\d+)?$|^external:[\w.-]+$", s), (fm.id, s)


def test_entries_from_other_stacks_name_the_xtuner_equivalent(catalog):
    """An entry whose every source is external still says what to do in XTuner."""
    for fm in catalog.failure_mode:
        if all(s.startswith("external:") for s in fm.source):
            assert "XTuner" in " ".join([fm.cause, *fm.fix]), fm.id


@pytest.mark.skipif(not MIRROR.is_dir(), reason="XTuner mirror not available")
def test_sources_exist_at_the_pinned_commit(catalog):
    files: dict[str, int] = {}
    for fm in catalog.failure_mode:
        for s in fm.source:
            if s.startswith("external:"):
                continue
            path, line = s.rsplit(":", 1)
            line = line.split("-")[-1]
            if path not in files:
                out = subprocess.run(
                    ["git", "-C", str(MIRROR), "show", f"b934f46:{path}"], capture_output=True, text=True
                )
                assert out.returncode == 0, (fm.id, path)
                files[path] = out.stdout.count("\n") + 1
            assert 1 <= int(line) <= files[path], (fm.id, s)


def test_confirm_with_names_real_tools_and_placeholders(catalog):
    placeholders = {"{data_path}", "{config_path}", "{log_path}", "{backend}", "{nodes}"}
    for fm in catalog.failure_mode:
        for call in fm.confirm_with:
            for v in call.arguments.values():
                if isinstance(v, str) and v.startswith("{"):
                    assert v in placeholders, (fm.id, v)


def test_confirm_with_arguments_validate_against_the_tools(catalog, tmp_path):
    import importlib

    fill = {
        "{data_path}": str(tmp_path),
        "{config_path}": str(tmp_path / "c.py"),
        "{log_path}": str(tmp_path),
        "{backend}": "lmdeploy",
        "{nodes}": 1,
    }
    checked = 0
    for fm in catalog.failure_mode:
        for call in fm.confirm_with:
            module = importlib.import_module(f"xtuner_rl_mcp.tools.{call.tool}")  # every named tool exists
            args = {k: fill.get(v, v) if isinstance(v, str) else v for k, v in call.arguments.items()}
            module.SPEC.params(**args)  # raises if an argument name or value is wrong
            checked += 1
    assert checked > 0


def test_prefilter_needs_a_literal_per_pattern():
    bad = cat.parse_catalog(
        cat.CATALOG_PATH.read_text(encoding="utf-8")
        + '\n[[failure_mode]]\nid = "x_bad"\ncategory = "other"\ntitle = "t"\npatterns = [\'\\d+ \\w+\']\n'
        'cause = "c"\nfix = ["f"]\nsource = ["xtuner/v1/train/cli/rl.py:1"]\nexamples = ["12 ab"]\n'
    )
    with pytest.raises(ValueError, match="needs a literal"):
        cat.build_prefilter(bad.failure_mode)


def test_invalid_catalogs_are_refused():
    base = '[[failure_mode]]\nid = "{id}"\ncategory = "{cat}"\ntitle = "t"\npatterns = [\'{pat}\']\n'
    base += 'cause = "c"\nfix = ["f"]\nsource = ["xtuner/v1/train/cli/rl.py:1"]\nexamples = ["{ex}"]\n'
    ok = base.format(id="a_b", cat="other", pat="hello world", ex="say hello world")
    cat.parse_catalog(ok)
    with pytest.raises(ValueError, match="duplicate"):
        cat.parse_catalog(ok + ok)
    with pytest.raises(ValueError):
        cat.parse_catalog(base.format(id="a_b", cat="not_a_category", pat="hello", ex="hello"))
    with pytest.raises(ValueError, match="does not compile"):
        cat.parse_catalog(base.format(id="a_b", cat="other", pat="hello (", ex="hello ("))
    with pytest.raises(ValueError, match="not matched"):
        cat.parse_catalog(base.format(id="a_b", cat="other", pat="hello", ex="goodbye"))
    with pytest.raises(ValueError, match="snake_case"):
        cat.parse_catalog(base.format(id="A-B", cat="other", pat="hello", ex="hello"))


def test_troubleshooting_md_is_the_rendering_of_the_catalog(catalog):
    committed = cat.TROUBLESHOOTING_PATH.read_text(encoding="utf-8")
    assert committed == cat.render_troubleshooting(catalog), (
        "references/troubleshooting.md is stale: run python -m xtuner_rl_mcp.knowledge.catalog"
    )


def test_ids_and_doc_sections_correspond(catalog):
    text = cat.TROUBLESHOOTING_PATH.read_text(encoding="utf-8")
    sections = re.findall(r"^### (\S+)$", text, flags=re.M)
    assert sorted(sections) == sorted(fm.id for fm in catalog.failure_mode)
    anchors = re.findall(r'<a id="([^"]+)"></a>', text)
    assert anchors == sections


def test_get_failure_mode_and_uris(catalog):
    fm = cat.get_failure_mode("backend_flag_missing")
    assert fm is not None and fm.category == "backend_flag_missing_or_multiple"
    assert fm.uri == "xtuner-rl://failure-modes/backend_flag_missing"
    assert cat.get_failure_mode("no_such_entry") is None


def test_module_entry_point_rewrites_the_doc(tmp_path, monkeypatch):
    out = subprocess.run(
        [sys.executable, "-c", "import xtuner_rl_mcp.knowledge.catalog as c; print(c.render_troubleshooting()[:40])"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0 and out.stdout.startswith("# Troubleshooting")


def _git_show(path: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(MIRROR), "show", f"b934f46:{path}"], capture_output=True, text=True)
    assert out.returncode == 0, path
    return out.stdout.splitlines()


def test_tracker_texts_say_tensorboard_is_needed_even_with_jsonl(catalog):
    """rl_trainer.py imports the TensorBoard writer whatever exp_tracker says, so no entry may offer
    exp_tracker='jsonl' as a way around a missing tensorboard, and each entry that names both says so."""
    both = [
        fm
        for fm in catalog.failure_mode
        if "jsonl" in " ".join([fm.cause, *fm.fix]) and "tensorboard" in " ".join([fm.cause, *fm.fix]).lower()
    ]
    assert {fm.id for fm in both} >= {"exp_tracker_unsupported", "tracker_output_missing"}
    for fm in both:
        text = " ".join([fm.cause, *fm.fix])
        assert re.search(r"even with exp_tracker=.{0,2}jsonl", text), fm.id
        assert not re.search(r"jsonl.{0,3} needs nothing|jsonl.{0,20}(avoids|without) tensorboard", text, re.I), fm.id
        assert {"xtuner/v1/train/rl_trainer.py:21", "xtuner/v1/_writer/__init__.py:5"} <= set(fm.source), fm.id


@pytest.mark.skipif(not MIRROR.is_dir(), reason="XTuner mirror not available")
def test_the_tensorboard_import_chain_is_where_the_catalog_says():
    assert _git_show("xtuner/v1/train/rl_trainer.py")[20] == "from xtuner.v1._writer import get_writer"
    assert _git_show("xtuner/v1/_writer/__init__.py")[4] == "from .tb_writer import TensorboardWriter"
    assert _git_show("xtuner/v1/_writer/tb_writer.py")[2] == "from torch.utils.tensorboard import SummaryWriter"


def test_dapo_judger_examples_are_what_pydantic_prints(catalog):
    """The DAPO judger's checks are asserts inside a pydantic model validator: users see a ValidationError detail
    line 'Assertion failed, <message> [type=assertion_error, ...]', never a bare AssertionError."""
    fm = catalog.by_id["dapo_judger_config_incomplete"]
    assert fm.examples
    for ex in fm.examples:
        assert ex.strip().startswith("Assertion failed, ") and "[type=assertion_error," in ex, ex
        assert not ex.startswith("AssertionError")
    for bare in ("AssertionError: max_response_len is required.", "AssertionError: eos_token string must not be empty"):
        assert not fm.matches(bare), bare


@pytest.mark.skipif(not MIRROR.is_dir(), reason="XTuner mirror not available")
def test_dapo_judger_examples_cover_every_assert_of_the_validator(catalog):
    """Every assert message of DapoMathJudgerConfig._pack_extra_info (dapo_math.py:305-329) has an example."""
    lines = _git_show("xtuner/v1/rl/judger/dapo_math.py")
    block = "\n".join(lines[304:329])
    messages = re.findall(r',\s*"([^"]{5,})"\s*$|^\s+"([^"]{5,})"\s*$', block, flags=re.M)
    messages = [a or b for a, b in messages]
    assert len(messages) == 7, messages
    examples = " ".join(catalog.by_id["dapo_judger_config_incomplete"].examples)
    fm = catalog.by_id["dapo_judger_config_incomplete"]
    for msg in messages:
        assert fm.matches(f"  Assertion failed, {msg} [type=assertion_error, input_value={{}}, input_type=dict]"), msg
    assert sum(f"Assertion failed, {m}" in examples for m in messages) >= 5


def test_eval_not_run_says_the_line_is_logged_in_colocated_runs_only(catalog):
    fm = catalog.by_id["eval_not_run"]
    assert "Only colocated runs log" in fm.cause and "disaggregated run skips evaluation without a log line" in fm.cause
    assert "rl_trainer.py:1811" in fm.cause
    assert {"xtuner/v1/train/rl_trainer.py:1811", "xtuner/v1/train/rl_trainer.py:1595"} <= set(fm.source)


@pytest.mark.skipif(not MIRROR.is_dir(), reason="XTuner mirror not available")
def test_the_skipped_evaluation_line_is_in_the_colocated_trainer_only():
    lines = _git_show("xtuner/v1/train/rl_trainer.py")
    hits = [i + 1 for i, line in enumerate(lines) if "Final train step reached without scheduled evaluation" in line]
    assert hits == [1811]
    classes = [(i + 1, line) for i, line in enumerate(lines) if line.startswith("class ")]
    owner = max((n, line) for n, line in classes if n < 1811)
    assert owner == (1595, "class RLColocateTrainer(BaseRLTrainer):")
    assert any(n > 1811 and "RLDisaggregatedTrainer(" in line for n, line in classes)


#: Citations a self-audit found off (2026-12-03): each cited first line now holds the code the entry talks about.
CITED_CODE = [
    ("rl_dependency_missing", "xtuner/v1/train/cli/rl.py:6-13", "import ray"),
    ("ray_node_out_of_memory", "xtuner/v1/rl/utils/ray_cpu_worker.py:420", "requested_memory > external_memory"),
    ("placement_group_pending", "xtuner/v1/rl/utils/ray_accelerator_worker.py:280", "def build_placement_group"),
    ("disagg_same_placement_group", "xtuner/v1/train/rl_trainer.py:1917-1928", 'pg_name_prefix = f"xtuner_rl_disagg'),
    ("eval_reward_missing", "xtuner/v1/rl/evaluator.py:39", "assert isinstance(reward, Mapping)"),
]


@pytest.mark.parametrize(("entry", "cite", "code"), CITED_CODE)
def test_audited_citations_point_at_their_code(catalog, entry, cite, code):
    assert cite in catalog.by_id[entry].source
    if not MIRROR.is_dir():
        pytest.skip("XTuner mirror not available")
    path, _, lines = cite.partition(":")
    first = int(lines.split("-")[0])
    assert code in _git_show(path)[first - 1], (cite, code)


def test_audited_causes_say_what_the_code_does(catalog):
    eval_missing = catalog.by_id["eval_reward_missing"].cause
    assert "KeyError: 'score'" in eval_missing and "evaluator.py:40" in eval_missing
    same_pg = catalog.by_id["disagg_same_placement_group"]
    assert "always distinct" in same_pg.cause and not any(
        "keep the train/rollout group names" in f for f in same_pg.fix
    )
    assert "groups" in catalog.by_id["async_samples_piling_up"].cause.split(".")[0]
