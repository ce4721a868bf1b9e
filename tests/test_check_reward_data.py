"""check_reward_data: every code on small files, real XTuner samples, suggestions that run, paths, progress, chunking."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import CATEGORIES, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations.check_reward_data import Params, check_path, run
from xtuner_rl_mcp.scanners import jsonl as jsonl_scan
from xtuner_rl_mcp.scanners.jsonl_contract import CODE_SEVERITY, GSM8K_GT_RE
from xtuner_rl_mcp.scanners.jsonl_duplicates import count_duplicates
from xtuner_rl_mcp.scanners.jsonl_results import RangeResult, ScanOptions
from xtuner_rl_mcp.xtuner_rules.data_contract import CODES, FILE_CODES

GSM8K_INSTR = ' Let\'s think step by step and output the final answer after "####".'


def good(**over) -> dict:
    """A line in the shape XTuner's convert_gsm8k.py writes."""
    rec = {
        "data_source": "openai/gsm8k",
        "prompt": [
            {"role": "user", "content": "Natalia sold 48 clips in April and half as many in May." + GSM8K_INSTR}
        ],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {"split": "train", "index": 0},
    }
    for key, value in over.items():
        if value is DROP:
            rec.pop(key, None)
        else:
            rec[key] = value
    return rec


DROP = object()


def line(obj) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()


GOOD = line(good())


def check(tmp_path: Path, data: bytes, name: str = "data.jsonl", **params):
    p = tmp_path / name
    p.write_bytes(data)
    return run(Params(path=str(p), **params), RunContext(paths=PathPolicy.from_strings([tmp_path])))


def gt(value) -> dict:
    return good(reward_model={"style": "rule", "ground_truth": value})


# code -> (file bytes, extra params). Each case holds one good line around the broken one.
CASES: dict[str, tuple[bytes, dict]] = {
    "invalid_utf8": (GOOD + GOOD.replace(b"Natalia", b"Nat\xff\xfelia") + GOOD, {}),
    "nul_byte": (GOOD + GOOD[:40] + b"\x00" + GOOD[40:] + GOOD, {}),
    "bom": (b"\xef\xbb\xbf" + GOOD + GOOD, {}),
    "blank_line": (GOOD + b"  \n" + GOOD, {}),
    "line_too_long": (
        GOOD + line(good(prompt=[{"role": "user", "content": "x" * 5000 + "####"}])) + GOOD,
        {"max_line_bytes": 1024},
    ),
    "truncated_last_line": (GOOD + GOOD[:60], {}),
    "invalid_json": (GOOD + b'{"prompt": [}\n' + GOOD, {}),
    "not_an_object": (GOOD + b"[1, 2, 3]\n", {}),
    "missing_final_newline": (GOOD + GOOD.rstrip(b"\n"), {}),
    "raw_hf_gsm8k_line": (line({"question": "How many?", "answer": "Half of 8.\n#### 4"}), {}),
    "messages_instead_of_prompt": (line({**good(prompt=DROP), "messages": good()["prompt"]}), {}),
    "missing_prompt": (line(good(prompt=DROP)), {}),
    "prompt_not_list": (line(good(prompt="What is 2+2? ####")), {}),
    "prompt_empty": (line(good(prompt=[])), {}),
    "bad_message": (line(good(prompt=[{"content": "no role ####"}])), {}),
    "vlm_prompt_missing_key": (line(good(prompt={"messages": good()["prompt"]})), {}),
    "prompt_vlm_object": (line(good(prompt={"messages": good()["prompt"], "tools": None})), {}),
    "prompt_blank": (line(good(prompt=[{"role": "user", "content": "  "}])), {"judger": "generic"}),
    "missing_data_source": (line(good(data_source=DROP)), {}),
    "data_source_not_string": (line(good(data_source=["a", "b"])), {}),
    "empty_data_source": (line(good(data_source="")), {}),
    "missing_reward_model": (line(good(reward_model=DROP)), {}),
    "reward_model_not_object": (line(good(reward_model="72")), {}),
    "missing_ground_truth": (line(good(reward_model={"style": "rule"})), {}),
    "empty_ground_truth": (line(gt("")), {}),
    "extra_info_not_object": (line(good(extra_info=None)), {}),
    "gsm8k_ground_truth_not_string": (line(gt(72)), {}),
    "gsm8k_ground_truth_format": (line(gt("1,000")), {}),
    "gsm8k_ground_truth_noncanonical": (line(gt("72.0")), {}),
    "gsm8k_prompt_no_answer_marker": (line(good(prompt=[{"role": "user", "content": "What is 6*12?"}])), {}),
    "dapo_ground_truth_not_string": (
        line(
            good(
                data_source="math_dapo",
                prompt=[{"role": "user", "content": "6*12? Answer: $Answer"}],
                reward_model={"ground_truth": 72},
            )
        ),
        {"judger": "dapo_math"},
    ),
    "dapo_prompt_no_answer_marker": (line(good(data_source="math_dapo")), {"judger": "dapo_math"}),
    "geo3k_ground_truth_not_string": (
        line(
            good(
                data_source="hiyouga/geometry3k",
                prompt=[{"role": "user", "content": "Find x. Put it in \\boxed{}."}],
                reward_model={"ground_truth": 3},
            )
        ),
        {},
    ),
    "geo3k_prompt_no_boxed_marker": (
        line(good(data_source="hiyouga/geometry3k", reward_model={"ground_truth": "3"})),
        {},
    ),
    "unknown_data_source": (line(good(data_source="my/gsm8k-copy")), {"judger": "gsm8k"}),
}


def test_every_code_has_a_case_and_catalog_entry():
    assert set(CASES) == set(CODE_SEVERITY) == set(CODES)
    for table in (CODES, FILE_CODES):
        for code, (title, category, anchor, source, fix) in table.items():
            assert title and fix and anchor, code
            assert category in CATEGORIES, code
            assert source is None or re.fullmatch(r"(xtuner|examples)/[\w/.]+\.py:[\d,\-]+", source), source


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_code_is_reported(tmp_path, code):
    data, params = CASES[code]
    r = check(tmp_path, data, **params)
    severity = CODE_SEVERITY[code]
    assert code in r.errors_by_code, (code, r.errors_by_code)
    (finding,) = [f for f in r.findings if f.id == f"data.{code}"]
    assert finding.severity == severity
    assert finding.reference.startswith("xtuner-rl://references/data-contract#")
    assert finding.owner == "data_preparation" and finding.location and ":" in finding.location
    example = next(e for e in r.examples if e.code == code)
    assert example.line >= 1 and example.file.endswith("data.jsonl")
    # the example's line number points at the line that carries the problem
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert example.line <= n_lines
    assert set(r.errors_by_code) == {code}, r.errors_by_code  # each case breaks exactly one rule
    assert r.ok is (severity != "blocker")
    if severity == "blocker":
        assert r.invalid >= 1 and not r.ok
        assert r.valid + r.invalid == r.lines
    if code in ("missing_ground_truth", "missing_reward_model", "empty_ground_truth"):
        assert finding.category == "reward_data_missing_ground_truth"


def test_line_numbers_are_exact(tmp_path):
    lines = [GOOD] * 7
    lines[2] = line(good(reward_model={"style": "rule"}))
    lines[5] = b"not json\n"
    r = check(tmp_path, b"".join(lines))
    assert (r.lines, r.valid, r.invalid) == (7, 5, 2)
    by_code = {e.code: e for e in r.examples}
    assert by_code["missing_ground_truth"].line == 3
    assert by_code["missing_ground_truth"].pointer == "/reward_model/ground_truth"
    assert "ground_truth" in by_code["missing_ground_truth"].schema_error
    assert by_code["invalid_json"].line == 6 and by_code["invalid_json"].excerpt == "not json"


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"\n",  # json.loads: RecursionError
        b'{"prompt": [], "reward_model": {"ground_truth": ' + b"9" * 100_000 + b"}}\n",  # over the int digit limit
        b"[" * 50_000 + b"]" * 50_000 + b"\n",
    ],
)
def test_hostile_lines_are_reported_not_crashing(tmp_path, data):
    r = check(tmp_path, data)
    assert r.errors_by_code == {"invalid_json": 1} and r.invalid == 1


def test_examples_are_capped_and_spread_over_codes(tmp_path):
    distinct = b"".join(line(gt(f"bad {chr(97 + i // 26)}{chr(97 + i % 26)}")) for i in range(60))
    data = distinct + b"{bad\n" * 3 + line(gt("72.0"))
    r = check(tmp_path, data, max_examples_per_code=100)
    assert len(r.examples) == 50 and r.examples_omitted == 62 - 50
    assert [e.code for e in r.examples[:3]] == [
        "gsm8k_ground_truth_format",
        "invalid_json",
        "gsm8k_ground_truth_noncanonical",
    ]
    bad_json = [e for e in r.examples if e.code == "invalid_json"]
    assert len(bad_json) == 1 and bad_json[0].count == 3 and bad_json[0].lines == [61, 62, 63]
    full = check(tmp_path, data, max_examples_per_code=100, detail="full")
    assert len(full.examples) == 62 and full.examples_omitted == 0
    assert check(tmp_path, data, detail="summary").examples == []


def test_identical_errors_collapse_into_one_example_with_a_count(tmp_path):
    no_gt = line(good(reward_model={"style": "rule"}))
    r = check(tmp_path, no_gt * 200 + GOOD)
    assert r.errors_by_code == {"missing_ground_truth": 200}
    (ex,) = r.examples
    assert (ex.code, ex.count, ex.line) == ("missing_ground_truth", 200, 1)
    assert ex.lines == list(range(1, 11))
    assert r.examples_omitted == 0 and len(r.model_dump_json()) < 5_000
    # numbers in the message do not make an issue distinct; other values do
    r = check(tmp_path, line(gt(72)) + line(gt(18)) + line(gt(True)))
    counts = sorted((e.message.split("(")[0], e.count) for e in r.examples)
    assert counts == [("ground_truth is a JSON boolean ", 1), ("ground_truth is a JSON integer ", 2)]


def test_collapsing_holds_across_ranges(tmp_path):
    no_gt = line(good(reward_model={"style": "rule"}))
    p = tmp_path / "d.jsonl"
    p.write_bytes(no_gt * 50)
    opts = ScanOptions()
    parts = [jsonl_scan.scan_range(str(p), s, e, opts) for s, e in jsonl_scan.plan_ranges(p.stat().st_size, 997)]
    merged = jsonl_scan.merge_ranges(str(p), parts, opts)
    (ex,) = merged.examples["missing_ground_truth"]
    assert ex.count == 50 and ex.lines == list(range(1, 11))
    plain = jsonl_scan.scan_file(str(p), ScanOptions(collapse=False))
    assert len(plain.examples["missing_ground_truth"]) == 20


def _gsm8k_without_gt(i: int, where: str) -> dict:
    rec = good(reward_model=DROP) if i % 2 else good(reward_model={"style": "rule"})
    solution = f"She sold 48/2 = 24 clips in May.\n#### {1000 + i:,}"
    if where == "extra_info":
        rec["extra_info"] = {"split": "train", "index": i, "answer": solution}
    else:
        rec["answer"] = solution
    return rec


def test_derivable_ground_truth_is_reported_with_a_command_that_works(tmp_path):
    rows = [_gsm8k_without_gt(i, "extra_info") for i in range(30)] + [_gsm8k_without_gt(30, "top")]
    rows.append(good(reward_model={"style": "rule"}, extra_info={"answer": "no final number"}))
    r = check(tmp_path, b"".join(line(x) for x in rows) + GOOD)
    assert not r.ok and r.invalid == 32
    d = r.derivable_ground_truth
    assert d is not None and d.lines == 31 and d.fields == {"/extra_info/answer": 30, "/answer": 1}
    assert d.first_lines[0].endswith("data.jsonl:1")
    assert "ground_truth derivable on 31 line(s) from extra_info.answer, answer" in r.summary
    finding = next(f for f in r.findings if f.id == "data.missing_ground_truth")
    assert "extra_info.answer" in finding.evidence and "Derive reward_model.ground_truth" in finding.fix
    sug = next(s for s in r.suggestions if s.title.startswith("Derive ground_truth"))
    assert sug.source and sug.source.startswith("xtuner/v1/utils/convert_gsm8k.py")
    out = tmp_path / "data.with_gt.jsonl"
    assert not out.exists()  # the tool never runs it
    subprocess.run(sug.command, shell=True, check=True, cwd=tmp_path)
    fixed = check(tmp_path, out.read_bytes(), name="fixed.jsonl")
    assert fixed.errors_by_code == {"missing_ground_truth": 1} and fixed.invalid == 1
    first = json.loads(out.read_text().splitlines()[0])
    assert first["reward_model"]["ground_truth"] == "1000"


def test_ground_truth_is_not_called_derivable_without_a_final_answer(tmp_path):
    rows = [good(reward_model={"style": "rule"}, extra_info={"answer": a}) for a in ("#### x", "42", "#### ,")]
    r = check(tmp_path, b"".join(line(x) for x in rows))
    assert r.derivable_ground_truth is None and "derivable" not in r.summary
    assert not any(s.title.startswith("Derive") for s in r.suggestions)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("72", None),
        ("-3", None),
        ("0.5", None),
        ("1200", None),
        ("1,000", "gsm8k_ground_truth_format"),
        ("$5", "gsm8k_ground_truth_format"),
        ("+3", "gsm8k_ground_truth_format"),
        (" 72", "gsm8k_ground_truth_format"),
        ("3/4", "gsm8k_ground_truth_format"),
        ("72 apples", "gsm8k_ground_truth_format"),
        (".", "gsm8k_ground_truth_format"),
        ("72.0", "gsm8k_ground_truth_noncanonical"),
        ("072", "gsm8k_ground_truth_noncanonical"),
        ("72.", "gsm8k_ground_truth_noncanonical"),
        ("-0", "gsm8k_ground_truth_noncanonical"),
        (72, "gsm8k_ground_truth_not_string"),
        (72.5, "gsm8k_ground_truth_not_string"),
        (True, "gsm8k_ground_truth_not_string"),
    ],
)
def test_gsm8k_ground_truths(tmp_path, value, code):
    r = check(tmp_path, line(gt(value)))
    assert sorted(r.errors_by_code) == ([code] if code else [])


def _gsm8k_extract(response: str) -> str | None:
    """The judger's rule as documented in the facts dossier §6.3 (last 300 chars, last '#### <num>', drop , and $)."""
    found = re.findall(r"#### (\-?[0-9\.\,]+)", response[-300:])
    return found[-1].replace(",", "").replace("$", "") if found else None


@pytest.mark.parametrize("value", ["1,000", "$5", "+3", " 72", "3/4", "72 apples", "1e3"])
def test_format_blockers_never_score(value):
    """A ground truth flagged gsm8k_ground_truth_format cannot equal the answer extracted from any response."""
    assert not GSM8K_GT_RE.fullmatch(value)
    for response in (f"#### {value}", f"so #### {value}", f"#### {value.replace(',', '')}", f"#### {value.strip()}"):
        assert _gsm8k_extract(response) != value


def test_real_xtuner_gsm8k_samples_are_valid(shared_data):
    for name, n in (("gsm8k_train_example_data.jsonl", 200), ("gsm8k_val_example_data.jsonl", 100)):
        for judger in ("auto", "gsm8k", "generic"):
            r = check_path(str(shared_data / name), judger=judger)
            assert r.ok, r.summary
            assert (r.lines, r.valid, r.invalid) == (n, n, 0), r.errors_by_code
            assert set(r.errors_by_code) <= {"missing_final_newline"}
            assert r.stats.data_sources == {"openai/gsm8k": n}
            assert r.stats.ground_truth_types == {"string": n}
            assert r.stats.prompt_roles == {"user": n}
            assert r.stats.prompt_length.count == n and r.stats.prompt_length.min > 50


def test_directory_of_real_samples(shared_data):
    r = check_path(str(shared_data))
    assert r.ok and r.files_scanned == 2 and r.lines == 300


def test_stats(tmp_path):
    data = (
        GOOD
        + GOOD
        + line(good(prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2? ####"}]))
        + line(good(prompt=[{"role": "user", "content": " "}]))
    )
    r = check(tmp_path, data, role="eval")
    st = r.stats
    assert st.duplicate_prompts == 1 and st.duplicate_prompts_checked == 4
    assert st.prompt_roles == {"user": 4, "system": 1}
    assert st.empty_prompts == 1
    assert st.prompt_length.count == 4 and st.prompt_length.min == 1
    dup = next(f for f in r.findings if f.id == "data.duplicate_prompts")
    assert dup.severity == "warning"  # eval role
    assert check(tmp_path, GOOD + GOOD, "t.jsonl").findings[0].severity == "info"


def test_file_level_findings(tmp_path):
    r = check(tmp_path, b"", "empty.jsonl")
    assert not r.ok and [f.id for f in r.findings] == ["data.empty_file"]
    r = check(tmp_path, b"PAR1\x00\x01binary", "x.parquet")
    assert not r.ok and r.findings[0].id == "data.parquet_file"
    assert "read_parquet" in r.suggestions[0].command


def _run_suggestion(command: str, tmp_path: Path) -> None:
    subprocess.run(
        ["bash", "-c", command.replace("python3 ", f"{sys.executable} ", 1)], check=True, cwd=tmp_path, timeout=60
    )


def test_hf_gsm8k_suggestion_converts_to_valid_data(tmp_path):
    raw = b"".join(
        line({"question": f"Tom has {i} apples, buys 1,000 more. How many?", "answer": f"{i}+1000\n#### {i + 1000:,}"})
        for i in range(5)
    )
    r = check(tmp_path, raw, "hf.jsonl")
    assert r.errors_by_code == {"raw_hf_gsm8k_line": 5}
    xtuner, local = r.suggestions
    assert xtuner.owner == local.owner == "data_preparation"
    assert xtuner.command.startswith("python xtuner/v1/utils/convert_gsm8k.py --input-dir")
    _run_suggestion(local.command, tmp_path)
    out = check_path(str(tmp_path / "hf.xtuner.jsonl"), judger="gsm8k")
    assert out.ok and out.valid == 5 and not out.errors_by_code, out.errors_by_code
    first = json.loads((tmp_path / "hf.xtuner.jsonl").read_text().splitlines()[0])
    assert first["reward_model"]["ground_truth"] == "1000" and first["prompt"][0]["content"].endswith(GSM8K_INSTR)


def test_messages_and_ground_truth_suggestions_run(tmp_path):
    msgs = line({**good(prompt=DROP), "messages": good()["prompt"]})
    r = check(tmp_path, msgs + line(gt(72)) + line(gt("1,200")), "chat.jsonl")
    titles = [s.title for s in r.suggestions]
    assert any("messages" in t for t in titles) and any("GSM8K ground truths" in t for t in titles)
    _run_suggestion(r.suggestions[0].command, tmp_path)
    fixed = check_path(str(tmp_path / "chat.prompt.jsonl"))
    assert "messages_instead_of_prompt" not in fixed.errors_by_code
    _run_suggestion(fixed.suggestions[0].command, tmp_path)
    final = check_path(str(tmp_path / "chat.prompt.gt.jsonl"))
    assert final.ok and final.valid == 3, final.errors_by_code


def test_directory_and_glob_inputs(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.jsonl").write_bytes(GOOD)
    (tmp_path / "sub" / "b.jsonl").write_bytes(GOOD + b"oops\n")
    (tmp_path / "notes.txt").write_text("not data")
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]))
    r = run(Params(path=str(tmp_path)), ctx)
    assert r.files_scanned == 2 and (r.lines, r.invalid) == (3, 1)
    assert next(e for e in r.examples if e.code == "invalid_json").file.endswith("sub/b.jsonl")
    r = run(Params(path="*.jsonl"), ctx)  # relative: from the first root
    assert r.files_scanned == 1 and r.ok
    r = run(Params(path=str(tmp_path / "**" / "*.jsonl")), ctx)
    assert r.files_scanned == 2 and r.stats.duplicate_prompts == 1  # the same prompt in two files
    with pytest.raises(ToolInputError) as e:
        run(Params(path=str(tmp_path / "*.parquet")), ctx)
    assert e.value.code == "no_files_matched"


def test_path_policy_refusals(tmp_path):
    inside = tmp_path / "root"
    inside.mkdir()
    outside = tmp_path / "secret.jsonl"
    outside.write_bytes(GOOD)
    (inside / "link.jsonl").symlink_to(outside)
    os.mkfifo(inside / "fifo.jsonl")
    ctx = RunContext(paths=PathPolicy.from_strings([inside]))
    for path, code in (
        (str(outside), "path_outside_roots"),
        (str(inside / "link.jsonl"), "path_outside_roots"),
        (str(inside / "fifo.jsonl"), "path_special_file"),
        (str(inside / "missing.jsonl"), "path_not_found"),
        (str(inside / ".." / "*.jsonl"), "path_outside_roots"),
    ):
        with pytest.raises(ToolInputError) as e:
            run(Params(path=path), ctx)
        assert e.value.code == code, path


# --------------------------------------------------------------------------------------------------------
# Chunked / multi-process path agrees exactly with one pass
# --------------------------------------------------------------------------------------------------------


def _corpus_lines(n: int) -> list[bytes]:
    """Mixed valid and broken lines (every kind of code), deterministic."""
    specials = [
        data for data, params in CASES.values() if not params and data.endswith(b"\n") and not data.startswith(b"\xef")
    ]
    out = []
    for i in range(n):
        if i % 97 == 13:
            out.append(specials[(i // 97) % len(specials)])
        else:
            rec = good(prompt=[{"role": "user", "content": f"Question {i % 5000}: what is {i} + 1?" + GSM8K_INSTR}])
            rec["reward_model"]["ground_truth"] = str(i + 1)
            out.append(line(rec))
    return out


def _signature(fr) -> tuple:
    examples = sorted((c, e.line, e.pointer, e.message, e.excerpt) for c, exs in fr.examples.items() for e in exs)
    st = fr.stats
    return (
        fr.lines,
        fr.valid,
        fr.invalid,
        fr.bytes,
        fr.codes,
        examples,
        st.data_sources,
        st.ground_truth_types,
        st.prompt_roles,
        st.empty_prompts,
        st.length_hist,
        fr.duplicate_prompts,
        fr.duplicate_checked,
    )


def test_ranges_cut_anywhere_merge_to_the_single_pass(tmp_path):
    p = tmp_path / "mixed.jsonl"
    data = b"".join(_corpus_lines(3000)) + GOOD[:50]  # ends with a truncated line
    p.write_bytes(data)
    opts = ScanOptions(max_examples_per_code=10_000)
    single = jsonl_scan.merge_ranges(str(p), [jsonl_scan.scan_range(str(p), 0, None, opts)], opts)
    size = p.stat().st_size
    for chunk in (997, 4096, 65_536, size // 3 + 1):
        parts = [jsonl_scan.scan_range(str(p), s, e, opts) for s, e in jsonl_scan.plan_ranges(size, chunk)]
        parts.reverse()  # merge order must not matter
        assert _signature(jsonl_scan.merge_ranges(str(p), parts, opts)) == _signature(single), chunk
    assert single.codes["truncated_last_line"] == 1 and single.lines == data.count(b"\n") + 1


def test_ray_task_runs_the_shipped_scanner_without_this_package(tmp_path):
    """What a Ray worker receives (the task and the scanner modules' source) scans exactly like the package, in an
    interpreter that cannot import xtuner_rl_mcp (no site: the editable install is invisible; msgspec added by hand)."""
    import pickle

    import msgspec
    from xtuner_rl_mcp.scanners.jsonl_precise import load_schema
    from xtuner_rl_mcp.scanners.jsonl_results import range_from_dict
    from xtuner_rl_mcp.scanners.ray_scan import _RAY_TASK_SOURCE, scanner_sources

    p = tmp_path / "mixed.jsonl"
    p.write_bytes(b"".join(_corpus_lines(3000)) + GOOD[:50])
    opts = ScanOptions(max_examples_per_code=10_000)
    size = p.stat().st_size
    ranges = jsonl_scan.plan_ranges(size, size // 3 + 1)
    sources, digest = scanner_sources()
    args = (
        sources,
        digest,
        load_schema(),
        str(p),
        ranges,
        {"judger": "auto", "max_line_bytes": 1 << 20, "max_examples_per_code": 10_000},
    )
    site = str(Path(msgspec.__file__).resolve().parents[1])
    script = (
        f"import sys\nsys.path.append({site!r})\n{_RAY_TASK_SOURCE}\nimport pickle\n"
        "out = scan_ranges_remote(*pickle.load(sys.stdin.buffer))\n"
        "assert not [m for m in sys.modules if m.startswith('xtuner_rl_mcp')]\n"
        "sys.stdout.buffer.write(pickle.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", script],
        input=pickle.dumps(args),
        capture_output=True,
        cwd=tmp_path,
        env={"PYTHONHASHSEED": "0"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    remote = jsonl_scan.merge_ranges(str(p), [range_from_dict(d) for d in pickle.loads(proc.stdout)], opts)
    local = jsonl_scan.merge_ranges(str(p), [jsonl_scan.scan_range(str(p), s, e, opts) for s, e in ranges], opts)
    assert _signature(remote) == _signature(local) and remote.invalid > 0
    schema_errors = {(c, e.line, e.schema_error) for c, exs in local.examples.items() for e in exs}
    assert {(c, e.line, e.schema_error) for c, exs in remote.examples.items() for e in exs} == schema_errors
    assert any(err for _, _, err in schema_errors)  # jsonschema explained some lines on the worker side too


def _tricky_lines() -> list[bytes]:
    """Lines aimed at the block decode (lines joined into one JSON array): each must be judged as on its own."""
    a, b = GOOD.rstrip(b"\n"), line(gt("73")).rstrip(b"\n")
    multi = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6*12? ####"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "6*12? ####"}]}]
    dapo = good(data_source="math_dapo", prompt=[{"role": "user", "content": "6*12? Answer: $Answer"}])
    geo = good(data_source="hiyouga/geometry3k", prompt=[{"role": "user", "content": "x? \\boxed{}"}])
    return [
        a + b"," + b,  # two records on one line: one comma-separated element too many
        a + b" " + b,
        a + b",",
        b"," + a,
        b",",
        b"[",
        b"]",
        b"",
        b"   ",
        a + b"\r",  # CRLF: whitespace to JSON, a valid line
        b"\xef\xbb\xbf" + a,
        a[:-1] + b', "n": ' + b"7" * 4301 + b"}",  # over json.loads' digit limit, inside a member msgspec skips
        a[:-1] + b', "s": "\xff\xfe"}',  # invalid UTF-8 inside a skipped member
        a[:-1] + b', "s": "ok\x00"}',
        line(good(prompt=multi)).rstrip(b"\n"),
        line(good(prompt=parts)).rstrip(b"\n"),
        line(dapo).rstrip(b"\n"),
        line(geo).rstrip(b"\n"),
        line(good(data_source="my/own")).rstrip(b"\n"),
        line(gt("0")).rstrip(b"\n"),
        line(gt("-0")).rstrip(b"\n"),
        line(gt("007")).rstrip(b"\n"),
        line(gt("-12.50")).rstrip(b"\n"),
        line(gt(7)).rstrip(b"\n"),
        line(gt(None)).rstrip(b"\n"),
        b'{"data_source": "", "data_source": "openai/gsm8k"' + a[a.index(b",") :],  # duplicate key, last wins
    ]


def _line_by_line(path: Path, opts) -> tuple:
    """The reference: every line through the single-line path, never the block decode."""
    res = RangeResult(str(path), 0, path.stat().st_size)
    scan = jsonl_scan._RangeScan(res, opts)
    data = path.read_bytes()
    *whole, last = data.split(b"\n")
    for raw in whole:
        scan.line(raw + b"\n")
    if last:
        scan.line(last)
    return _signature(jsonl_scan.merge_ranges(str(path), [scan.finish()], opts))


@pytest.mark.parametrize("judger", ["auto", "gsm8k", "dapo_math", "geo3k", "generic"])
def test_block_decode_agrees_with_line_by_line(tmp_path, monkeypatch, judger):
    """Each tricky line alone among clean ones (so its block is otherwise clean), then all of them in one file."""
    tricky = _tricky_lines()
    clean = [line(gt(str(i))) for i in range(40)]
    files = []
    for i, t in enumerate(tricky):
        files.append(b"".join([*clean[i % 7 : i % 7 + 9], t + b"\n", *clean[:20]]))
    files.append(b"".join(files))
    opts = ScanOptions(judger=judger, max_examples_per_code=10_000)
    p = tmp_path / "tricky.jsonl"
    flagged = 0
    for data in files:
        p.write_bytes(data)
        expected = _line_by_line(p, opts)
        flagged += expected[2] > 0
        for block in (1 << 20, 8192, 1500, 300):
            monkeypatch.setattr(jsonl_scan, "BLOCK_BYTES", block)
            got = jsonl_scan.merge_ranges(str(p), [jsonl_scan.scan_range(str(p), 0, None, opts)], opts)
            assert _signature(got) == expected, (judger, block, data[-300:])
    assert flagged >= len(tricky) // 2  # the reference does see the broken lines


def test_clean_blocks_take_the_block_path(tmp_path, monkeypatch):
    """A file of clean lines is judged a block at a time; the per-line path is not entered."""
    p = tmp_path / "clean.jsonl"
    p.write_bytes(b"".join(line(gt(str(i))) for i in range(5000)))
    calls = []
    original = jsonl_scan._RangeScan.verdict

    def counted(self, o, raw):
        calls.append(raw)
        original(self, o, raw)

    monkeypatch.setattr(jsonl_scan._RangeScan, "verdict", counted)
    fr = jsonl_scan.scan_file(str(p), ScanOptions())
    assert fr.valid == fr.lines == 5000 and fr.invalid == 0
    assert len(calls) <= 2  # at most the line straddling each block end (file is under two blocks)


def test_count_duplicates_across_signed_buckets():
    from array import array

    vals = [-(2**63), -(2**63) + 1, -5, -1, 0, 1, 7, 2**62, 2**63 - 1]
    a = array("q", sorted(vals))
    b = array("q", sorted([-5, 0, 2**63 - 1, 42]))
    c = array("q", sorted([-(2**63), 42, 3]))
    assert count_duplicates([a, b, c]) == 5  # -5, 0, 2**63-1, 42, -(2**63)
    assert count_duplicates([a]) == 0
    assert count_duplicates([]) == 0


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> Path:
    """About 9 MB: over the in-process limit, so the tool splits it over processes."""
    p = tmp_path_factory.mktemp("big") / "big.jsonl"
    body = b"".join(_corpus_lines(30_000))
    with open(p, "wb") as fh:
        while fh.tell() < 9 << 20:
            fh.write(body)
    return p


def _worker_children() -> list[str]:
    me = str(os.getpid())
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[1] == me and b"worker_main" in cmd:
            out.append(pid)
    return out


def test_process_pool_agrees_with_single_process(big_file):
    r = check_path(str(big_file), max_examples_per_code=50, detail="full")
    assert _worker_children() == []  # every worker process was reaped
    assert (r.engine == "processes" and r.workers >= 2) or (os.cpu_count() or 1) < 2
    opts = ScanOptions(max_examples_per_code=50)
    single = jsonl_scan.scan_file(str(big_file), opts)
    assert (r.lines, r.valid, r.invalid, r.bytes) == (single.lines, single.valid, single.invalid, single.bytes)
    assert r.errors_by_code == single.codes
    assert sorted((e.code, e.line) for e in r.examples) == sorted(
        (c, e.line) for c, exs in single.examples.items() for e in exs
    )
    assert r.stats.duplicate_prompts == single.duplicate_prompts > 0
    assert r.stats.data_sources == single.stats.data_sources


# --------------------------------------------------------------------------------------------------------
# Through MCP
# --------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_call_with_progress(mcp_client, tmp_path, big_file):
    (tmp_path / "big.jsonl").write_bytes(big_file.read_bytes())
    events: list[tuple[float, float | None, str | None]] = []

    async def cb(progress, total, message):
        events.append((progress, total, message))

    r = await mcp_client.call_tool(
        "check_reward_data", {"path": "big.jsonl", "detail": "summary"}, progress_callback=cb
    )
    assert not r.is_error, r.content[0].text
    out = r.structured_content
    assert out["summary"].startswith("NOT OK") and out["examples"] == [] and out["examples_omitted"] > 0
    assert out["errors_by_code"]["missing_ground_truth"] > 0 and out["engine"] in ("processes", "in_process")
    size = big_file.stat().st_size
    assert len(events) >= 3
    assert all(t == size for _, t, _ in events)
    assert [p for p, _, _ in events] == sorted(p for p, _, _ in events)
    assert events[-1][0] == size


@pytest.mark.anyio
async def test_mcp_errors_are_structured(mcp_client, tmp_path):
    (tmp_path / "d.jsonl").write_bytes(GOOD)
    r = await mcp_client.call_tool("check_reward_data", {"path": "d.jsonl", "judger": "nope"})
    assert r.is_error and "judger" in r.content[0].text
    r = await mcp_client.call_tool("check_reward_data", {"path": "d.jsonl", "bogus": 1})
    assert r.is_error
    r = await mcp_client.call_tool("check_reward_data", {"path": "/etc/passwd"})
    assert r.is_error and "path_outside_roots" in r.content[0].text
    r = await mcp_client.call_tool(
        "check_reward_data", {"path": "d.jsonl", "engine": "ray", "ray_address": "http://127.0.0.2:8265"}
    )
    assert r.is_error and "ray_address_invalid" in r.content[0].text and "Traceback" not in r.content[0].text
    r = await mcp_client.call_tool("check_reward_data", {"path": "d.jsonl"})
    assert not r.is_error and r.structured_content["ok"] is True


def test_works_from_an_unguarded_script(big_file, tmp_path):
    """Worker processes must not re-run the caller's __main__ (a 'spawn' pool would, and crash this script)."""
    script = tmp_path / "bench_like.py"
    script.write_text(
        "from xtuner_rl_mcp.operations.check_reward_data import check_path\n"
        f"r = check_path({str(big_file)!r}, detail='summary')\n"
        "print(r.engine, r.lines, r.invalid)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    engine, lines, invalid = out.stdout.split()
    assert engine == "processes" and int(lines) > 0 and int(invalid) > 0
