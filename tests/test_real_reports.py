"""diagnose_symptom on real public failure reports (tests/corpus/reports.jsonl).

Two parts. The development part (split="dev") is what method choices, catalog phrases and the shipped report model
were made with; its floors are on nested 5-fold cross-validated figures (ranking constants chosen, the area model
refitted and the calibration fitted without the fold that is scored), for all of it and for the reports collected
since 2026-12-03 that no phrase was written from, so they measure the method, not the fit. The test part
(split="test") is frozen and never read while tuning; its floors are set by whoever scores it (the constants
below, with the figures they were set from and the issue's acceptance). Floors sit below the measured figures (`python bench/real_reports.py --split dev
--cv`) so that noise does not flake them, and high enough that losing the area model, retrieval, the phrases or
the Chinese segmentation fails them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from .upstream import bench_module

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus" / "reports.jsonl"

#: Development part, nested 5-fold cross-validated on the reduced grid below (README: measured figures). 2026-12-05,
#: seven catalog entries for families of fine-tuning failures (bfloat16 on older GPUs, float16 overflow, adapters on
#: quantized bases, no NCCL, ZeRO-3 with a device_map, an unreachable hub, empty training data), 1,152 reports: top-1
#: 66.3%, top-3 87.3%, Chinese top-1 59.2% after their review (of the 42 reports read to write catalog entries, 35 of
#: them for these, 25 right first against 19 before; of the 893 others collected since 2026-12-03, 554 against 554: see
#: below); before the review 66.3%, 87.3%, 59.3%; twelfth round, 1,152 reports, PEFT's target-modules message under
#: config, Chinese wording leads overruled at 0.1: top-1 65.5%, top-3 87.0%, Chinese top-1 57.8%; 2026-12-04, eleventh
#: round, 1,132 reports, Chinese wording leads overruled sooner: top-1 64.7%, top-3 86.5%, Chinese top-1 56.3%; ninth
#: round, 1,089 reports: top-1 64.5%, top-3 86.4%, Chinese top-1 55.4%; eighth round, 1,069 reports, the area model
#: learning from causes: top-1 64.5%, top-3 86.4%, Chinese top-1 55.5%; seventh round, 1,046 reports, with the word
#: senses as reviewed: top-1 63.4%, top-3 86.0%, Chinese top-1 54.8%; sixth round, 1,001 reports, with the Chinese
#: dictionary: top-1 64.0%, top-3 86.1%, Chinese top-1 54.6%; fifth round, 943 reports, before the dictionary: top-1
#: 64.2%, top-3 85.7%, Chinese top-1 54.2%. (The rounds collected since are harder: on 726 reports, before the fourth
#: round's 180 (171 in Chinese, many screenshots and version mismatches), 68.3% / 87.2%, Chinese 56.7%; on the first
#: round's 487, 74.3% / 87.9%, Chinese 64.6%.)
DEV_CV_TOP1_FLOOR = 0.62
DEV_CV_TOP3_FLOOR = 0.83
DEV_CV_ZH_TOP1_FLOOR = 0.54
#: The development reports no phrase was written from (collected since 2026-12-03 and not read to write a catalog entry,
#: bench.PROMPTED_CATALOG: 893), same cross-validation: top-1 62.0%, top-3 85.2% (before the seven entries' review
#: 61.9%, 85.2%; the commit before the seven entries, on the same 893: 62.0%, 85.1%; 935 before 42 of them were set
#: apart: 61.3%, 84.9%; 915 after the eleventh round: 59.9%, 84.3%; 872 after the ninth round: 59.4%, 83.8%; 852 after
#: the eighth round and the causes: 59.3%, 84.0%; 829 before the eighth round and the causes: 58.1%, 83.6%; 784 before
#: the seventh round: 58.2%, 83.5%; 726 before the sixth: 57.4%, 82.9%).
UNSEEN_CV_MIN_REPORTS = 650
UNSEEN_CV_TOP1_FLOOR = 0.57
UNSEEN_CV_TOP3_FLOOR = 0.80
#: Frozen test part, scored once per change set. 2026-12-03 round 2: top-1 66.9%, top-3 83.8%, Chinese top-1 63.1%
#: against English 69.7%, confident answers 12 of 19 right; round 3 (catalog-taught area model, two-signal confidence):
#: top-1 68.8%, top-3 83.8%, confident 9 of 13 right; 2026-12-04 (area model from 487 reports, launch commands left out
#: of description matching): top-1 68.2%, top-3 87.7%, Chinese 63.1% against English 71.9%, confident 8 of 13 right;
#: 2026-12-04 second round (area model from 687 reports, confidence >= 0.8 only for an entry with a track record of
#: exact-message leads): top-1 70.8%, top-3 90.9%, Chinese 67.7% against English 73.0% (5.3 points), confident 2 of 2
#: right; third round (39 more Chinese development reports, nothing else changed): top-1 70.8%, top-3 89.0%, Chinese
#: 67.7% against 73.0%, confident 2 of 2 right; fourth round (180 development reports more, 171 in Chinese): top-1
#: 70.8%, top-3 89.0%, Chinese 67.7% against 73.0%; fifth round (37 reports of RL trainers more): top-1 70.8%, top-3
#: 90.3%, Chinese 66.2% against English 74.2% (8.0 points: net one Chinese report fewer and one English report more in
#: first place, of 65 and 89), confident 2 of 2 right; Chinese words' CC-CEDICT English and per-language calibration:
#: top-1 69.5%, top-3 90.9%, Chinese 64.6% against English 73.0%, confident 2 of 2 right; sixth round (58 reports more,
#: 31 in Chinese): top-1 71.4%, top-3 89.6%, Chinese 67.7% against English 74.2% (6.5 points), confident 3 of 3 right;
#: word senses for the commonest Chinese dictionary words: top-1 70.8%, top-3 90.3%, Chinese 64.6% against English
#: 75.3%, confident 3 of 3 right; seventh round (45 reports more, 33 in Chinese): top-1 71.4%, top-3 88.3%, Chinese
#: 66.2% against English 75.3% (9.1 points), confident 3 of 3 right; review of the word senses (ten senses corrected,
#: words holding a glossary term looked up): top-1 71.4%, top-3 89.0%, Chinese 66.2% against English 75.3%, confident 3
#: of 3 right; eighth round (23 reports more, 20 in Chinese): top-1 70.8%, top-3 87.7%, Chinese 64.6% against English
#: 75.3% (10.7 points); the area model learning from causes: top-1 69.5%, top-3 90.3%, Chinese 64.6% against English
#: 73.0% (8.4 points), confident 3 of 3 right; ninth round (20 reports more, 10 in Chinese): top-1 70.1%, top-3
#: 90.9%, Chinese 66.2% against English 73.0% (6.8 points), confident 3 of 3 right; Chinese wording leads overruled
#: sooner: top-1 70.8%, top-3 90.9%, Chinese 67.7% against English 73.0% (5.3 points), confident 3 of 3 right; tenth
#: round (31 reports more, all in Chinese): top-1 70.8%, top-3 90.3%, Chinese 67.7% against 73.0%, confident 2 of 2
#: right; eleventh round (12 reports more, 7 in Chinese): top-1 70.1%, top-3 90.3%, Chinese 66.2% against English
#: 73.0% (6.8 points), confident 2 of 2 right; PEFT's target-modules message under config and Chinese wording leads
#: overruled at 0.1: top-1 72.1%, top-3 90.9%, Chinese 69.2% against English 74.2% (4.9 points), confident 2 of 2
#: right; twelfth round (20 reports more, all in Chinese): top-1 72.7%, top-3 90.9%, Chinese 69.2% against English
#: 75.3% (6.1 points), confident 2 of 2 right; seven catalog entries for families of fine-tuning failures: top-1
#: 71.4%, top-3 90.9%, Chinese 70.8% against English 71.9% (1.1 points: one Chinese report more and three English
#: ones fewer in first place), confident 3 of 3 right; review of the seven entries (generic phrases dropped, newer
#: message variants, causes corrected): top-1 72.1%, top-3 90.9%, Chinese 69.2% against English 74.2% (4.9 points),
#: confident 3 of 3 right. The top-1 floor and the Chinese gap are the issue's targets: top-1 has three reports to
#: spare, the gap none (one Chinese report fewer or one English report more in first place crosses it); the top-3
#: floor sits four reports below the level.
TEST_TOP3_FLOOR = 0.88
TEST_TOP1_FLOOR = 0.70
TEST_ZH_TOP1_GAP = 0.05
TEST_CONFIDENT_RIGHT_FLOOR = 0.90
TEST_MIN_REPORTS = 100
#: Among first findings given with confidence >= 0.8, at least this share is right (any part).
CONFIDENT_RIGHT_FLOOR = 0.90


def _bench():
    return bench_module("real_reports")


def test_corpus_shape():
    rows = _bench().load("dev")
    assert len(rows) >= 150
    assert len({r["url"] for r in rows}) == len(rows)
    from xtuner_rl_mcp.core import CATEGORIES

    for r in rows:
        assert r["lang"] in ("en", "zh")
        assert r["categories"] and set(r["categories"]) <= set(CATEGORIES), r["id"]
        assert r["url"].startswith("https://github.com/") and r["text"].strip()
    assert sum(r["lang"] == "zh" for r in rows) >= 40


#: The frozen test part, as it was split on 2026-12-03 (154 reports): a digest of its rows, sorted by id.
TEST_PART_SHA256 = "a61265cb9bb76138ba492db9a7c27d463b0852ff118f96cc0a9b8c8384ce5cd1"


def _thread(url: str) -> tuple[str, str]:
    """A thread by repository name and number: a renamed repository (volcengine/verl -> verl-project/verl) keeps both."""
    parts = url.rstrip("/").lower().split("/")
    return parts[-3].replace("llama-factory", "llamafactory"), parts[-1]


def test_the_test_part_stays_frozen_and_apart():
    rows = _bench().load()
    test = sorted((r for r in rows if r["split"] == "test"), key=lambda r: r["id"])
    digest = hashlib.sha256(json.dumps(test, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
    assert digest == TEST_PART_SHA256, "the frozen test part changed: new reports join the development part"
    assert len({r["id"] for r in rows}) == len(rows)
    dev_threads = {_thread(r["url"]) for r in rows if r["split"] == "dev"}
    assert not dev_threads & {_thread(r["url"]) for r in test}, "a thread in both parts"


@pytest.fixture(scope="module")
def dev_cross_validated():
    """Nested 5-fold cross-validation over a reduced grid: the shipped constants with and without the area model
    (the bench's --cv runs the full grid)."""
    bench = _bench()
    shipped = bench.shipped_settings()
    grid = [{**shipped, "AREA_SHARE": 0.0}, shipped]
    cv = bench.cross_validate(bench.load("dev"), folds=5, grid=grid)
    return bench.summarise(cv["outcomes"]), cv


def test_dev_cross_validation_meets_the_floor(dev_cross_validated):
    scores, cv = dev_cross_validated
    assert scores["top1"] >= DEV_CV_TOP1_FLOOR, scores["misses"][:20]
    assert scores["top3"] >= DEV_CV_TOP3_FLOOR, scores["misses"][:20]
    zh = scores["per_language"]["zh"]
    assert zh["top1"] >= DEV_CV_ZH_TOP1_FLOOR
    # the area model earns its place: every fold's inner cross-validation chose it
    assert all(c["AREA_SHARE"] > 0 for c in cv["chosen"]), cv["chosen"]


def test_dev_reports_no_phrase_was_written_from_meet_the_floor(dev_cross_validated):
    scores, _ = dev_cross_validated
    unseen = scores["per_subset"][_bench().UNSEEN]
    assert unseen["n"] >= UNSEEN_CV_MIN_REPORTS
    assert unseen["top1"] >= UNSEEN_CV_TOP1_FLOOR and unseen["top3"] >= UNSEEN_CV_TOP3_FLOOR, unseen


def test_dev_confident_answers_are_right(dev_cross_validated):
    scores, _ = dev_cross_validated
    # few confident answers: only the exact message of a cause with a track record on held-out reports, in the area
    # the report's words find likeliest (27 of 1,152, 25 right)
    assert scores["confident_n"] >= 8
    assert scores["confident_right"] >= CONFIDENT_RIGHT_FLOOR
    # the calibration means what it says on reports no phrase was written from (what it is fitted on): a band's
    # held-out answers are right about as often as the band claims
    bands = [(band, r) for band, r in scores["calibration_unseen"].items() if r["n"] >= 15]
    assert bands
    for band, rates in bands:
        assert abs(rates["top1"] - rates["confidence"]) <= 0.15, (band, rates)
    # and per language: a Chinese report's confidence is not an English report's (one curve for both overstated
    # Chinese answers and understated English ones, 0.56 against 68% right on English reports no phrase was written
    # from)
    for lang in ("en", "zh"):
        rates = scores["per_subset"][f"{_bench().UNSEEN}, {lang}"]
        assert abs(rates["top1"] - rates["confidence"]) <= 0.08, (lang, rates)
    # the uncertain verdict is where the misses are: it is right less often than a clear lead
    verdicts = scores["per_verdict"]
    if "uncertain" in verdicts and "suspected_from_description" in verdicts:
        assert verdicts["uncertain"]["top1"] < verdicts["suspected_from_description"]["top1"]


def test_the_annotator_study_is_about_unseen_development_reports():
    """bench/results/annotator_study.json (README: what limits it) names 60 + 60 development reports no phrase was
    written from when the study was made (four have since prompted catalog entries: PROMPTED_CATALOG), and its answers
    are catalog categories."""
    from xtuner_rl_mcp.core import CATEGORIES

    bench = _bench()
    study = json.loads((REPO / "bench" / "results" / "annotator_study.json").read_text(encoding="utf-8"))
    dev = {r["id"]: r for r in bench.load("dev")}
    sample = [dev[i] for i in study["reports"]]
    assert all(bench.collected_since_unseen(r) for r in sample)
    assert sorted(r["lang"] for r in sample) == ["en"] * 60 + ["zh"] * 60
    for answers in (study["blind_labels"], study["text_only_guesses"]):
        assert set(answers) == set(study["reports"])
        assert all(a and set(a) <= set(CATEGORIES) for a in answers.values())


def test_reports_that_prompted_catalog_entries_are_not_counted_as_unseen():
    """A development report read to write a catalog entry leaves the unseen figures (bench.PROMPTED_CATALOG)."""
    bench = _bench()
    dev = {r["id"]: r for r in bench.load("dev")}
    assert bench.PROMPTED_CATALOG <= set(dev)
    for report_id in bench.PROMPTED_CATALOG:
        assert bench.collected_since_unseen(dev[report_id])
        assert not bench.is_unseen(dev[report_id])


def _test_rows() -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["split"] == "test"]


@pytest.fixture(scope="module")
def held_out_scores():
    rows = _test_rows()
    if len(rows) < TEST_MIN_REPORTS:
        pytest.skip(f"the frozen test part is not merged yet ({len(rows)} reports)")
    bench = _bench()
    return bench.summarise([bench.diagnose(r) for r in rows])


@pytest.mark.parametrize(
    ("measure", "floor"),
    [("top3", TEST_TOP3_FLOOR), ("top1", TEST_TOP1_FLOOR)],
)
def test_unseen_reports_meet_the_floor(held_out_scores, measure, floor):
    assert held_out_scores[measure] >= floor, held_out_scores["misses"][:20]


def test_chinese_reports_keep_up_with_english(held_out_scores):
    by_lang = held_out_scores["per_language"]
    assert by_lang["zh"]["top1"] >= by_lang["en"]["top1"] - TEST_ZH_TOP1_GAP


def test_unseen_confident_answers_are_right(held_out_scores):
    assert held_out_scores["confident_n"] >= 1  # a lost track record would leave nothing to check
    assert held_out_scores["confident_right"] >= TEST_CONFIDENT_RIGHT_FLOOR
