"""What labelled reports teach the ranking: which area a report's words point to, and what a confidence is worth.

Two tables, learned from the development part of the real-report corpus by ``bench/real_reports.py --build-model``
and shipped as ``references/report_model.json`` (a test checks that the file equals a rebuild):

- **Areas.** A softmax (multinomial logistic) regression from the distinct terms of a report
  (``descriptions.report_terms``: Snowball stems, jieba words, the English of Chinese runs) to the
  catalog categories, kept as a bias per category and a weight row per term. Each catalog entry (title, phrases,
  examples, cause) is one more labelled report of its category, so the model knows the catalog's words, English and
  Chinese, that no training report used; each training report's settled cause (one English line written from its
  thread's resolution) is one more example of the report's categories, so it knows the words of causes as well as
  those of symptoms. Only terms seen in at least two of these reports enter it (a report's text and its cause count
  once): the table holds no single report's text, and scoring a report is a sum of rows and a softmax.
- **Calibration.** How often the first finding was right on held-out reports, by the kind of evidence behind it
  (an exact message of a specific entry, a generic symptom line, or wording only), whether the area model agreed,
  the report's language (the same evidence is right more often in an English report) and its raw confidence: a
  step function per cell, so that a reported 0.8 means right about four times in five.
  Only an exact message of a cause in the category the area model finds likeliest may reach 0.8 (``ranking.LEAD_CAP``),
  and only for an entry whose exact message led held-out reports to the right category before (``earned``).

Without the file the ranking runs on the catalog alone, with raw confidences.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ..core import CATEGORIES

MODEL_PATH = Path(__file__).resolve().parent.parent / "references" / "report_model.json"
#: Digits kept per number in the shipped file.
PRECISION = 4
#: The area model agrees with a finding when it gives the finding's category at least this probability.
AGREE_P = 0.25

EvidenceKind = Literal["exact", "symptom", "wording"]
Language = Literal["en", "zh"]


@dataclass(frozen=True)
class AreaModel:
    """A bias per category and a weight row per term; a report's area probabilities are a softmax of their sums."""

    categories: tuple[str, ...]
    bias: tuple[float, ...]
    weights: dict[str, tuple[float, ...]]

    def probabilities(self, terms: Iterable[str], temperature: float = 1.0) -> dict[str, float]:
        scores = list(self.bias)
        for t in set(terms):
            row = self.weights.get(t)
            if row is not None:
                for i, w in enumerate(row):
                    scores[i] += w
        scaled = [s / temperature for s in scores]
        top = max(scaled)
        exps = [math.exp(s - top) for s in scaled]
        total = sum(exps)
        return {c: e / total for c, e in zip(self.categories, exps, strict=True)}


#: An entry has earned a found failure's confidence when its exact message led held-out labelled reports no phrase was
#: written from to an accepted category at least this many times, and was right at least EARNED_MIN_SHARE of the times
#: it led. A fresh set of 200 reports showed why: exact messages led it right 8 times in 12 (the message was right, the
#: area a maintainer filed it under was often another), and answers of 0.8 or more were right 6 times in 9. Nested
#: 5-fold cross-validation on the 687 development reports: one right lead is enough -> 25 such answers, 23 right (15 of
#: 17 on reports no phrase was written from); two -> 12, all right. Without the record: see bench/real_reports.py.
EARNED_MIN_RIGHT = 2
EARNED_MIN_SHARE = 0.9


@dataclass(frozen=True)
class Calibration:
    """Monotone curves from raw confidence to the share right: per (evidence kind, area agreement) cell, per kind,
    and for all answers ("all"); each kind and cell also per language of the report ("wording@zh"), since the same
    raw confidence is right more often for an English report than for a Chinese one. Each curve is a tuple of raw
    values (the mean raw confidence of one step of an isotonic fit) and the share right at each; between them the
    curve is linear, beyond them flat.

    ``earned`` is each entry's track record as an exact-message lead on held-out reports no phrase was written from:
    (right, led). An entry without one has not shown that its message names the cause a maintainer would accept."""

    cells: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]
    earned: dict[str, tuple[int, int]] = field(default_factory=dict)

    ALL = "all"

    def has_earned(self, entry_id: str) -> bool:
        """Whether the entry's exact message was right often enough on held-out reports to be called a found cause."""
        right, led = self.earned.get(entry_id, (0, 0))
        return right >= EARNED_MIN_RIGHT and right >= EARNED_MIN_SHARE * led

    @staticmethod
    def cell(kind: EvidenceKind, agrees: bool) -> str:
        return f"{kind}/{'agrees' if agrees else 'disagrees'}"

    @staticmethod
    def in_language(cell: str, language: Language) -> str:
        return f"{cell}@{language}"

    def probability(self, kind: EvidenceKind, agrees: bool, raw: float, language: Language | None = None) -> float:
        """The calibrated confidence of a raw one, from the most specific curve that was fitted."""
        cell = self.cell(kind, agrees)
        mine = (self.in_language(cell, language), cell, self.in_language(kind, language)) if language else (cell,)
        for key in (*mine, kind, self.ALL):
            curve = self.cells.get(key)
            if curve is not None:
                return _interpolate(curve, raw)
        raise ValueError("a calibration needs its 'all' curve")


def _interpolate(curve: tuple[tuple[float, ...], tuple[float, ...]], x: float) -> float:
    xs, ys = curve
    i = bisect.bisect_left(xs, x)
    if i == 0:
        return ys[0]
    if i == len(xs):
        return ys[-1]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class ReportModel:
    areas: AreaModel
    calibration: Calibration | None
    reports: int  # labelled reports it was learned from
    method: str

    def to_json(self) -> str:
        def r(xs: Iterable[float]) -> list[float]:
            return [round(x, PRECISION) for x in xs]

        data: dict[str, Any] = {
            "version": 2,
            "method": self.method,
            "reports": self.reports,
            "categories": list(self.areas.categories),
            "bias": r(self.areas.bias),
            "weights": {t: r(row) for t, row in sorted(self.areas.weights.items())},
            "calibration": None
            if self.calibration is None
            else {k: {"raw": r(x), "right": r(y)} for k, (x, y) in sorted(self.calibration.cells.items())},
            "earned": None
            if self.calibration is None
            else {k: list(v) for k, v in sorted(self.calibration.earned.items())},
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace('],"', '],\n"') + "\n"

    @classmethod
    def from_json(cls, text: str) -> ReportModel:
        data = json.loads(text)
        categories = tuple(data["categories"])
        unknown = set(categories) - set(CATEGORIES)
        if unknown:
            raise ValueError(f"unknown categories in the report model: {sorted(unknown)}")
        weights = {str(t): tuple(float(w) for w in row) for t, row in data["weights"].items()}
        if len(data["bias"]) != len(categories) or any(len(row) != len(categories) for row in weights.values()):
            raise ValueError("every row of the report model needs one weight per category")
        areas = AreaModel(categories, tuple(float(b) for b in data["bias"]), weights)
        cal = data.get("calibration")
        calibration = (
            None
            if cal is None
            else Calibration(
                {k: (tuple(float(x) for x in v["raw"]), tuple(float(x) for x in v["right"])) for k, v in cal.items()},
                _track_record(data.get("earned")),
            )
        )
        return cls(areas, calibration, int(data["reports"]), str(data["method"]))


def _track_record(data: Any) -> dict[str, tuple[int, int]]:
    """The earned table of a model file ({} for a file written before it existed: no entry reaches 0.8)."""
    record = {str(k): (int(v[0]), int(v[1])) for k, v in (data or {}).items()}
    wrong = sorted(k for k, (right, led) in record.items() if not 0 <= right <= led)
    if wrong:
        raise ValueError(f"a track record needs 0 <= right <= led: {wrong}")
    return record


@lru_cache(maxsize=1)
def shipped_model() -> ReportModel | None:
    """The model shipped with the package (None when the file is missing: the ranking then runs without it)."""
    try:
        return ReportModel.from_json(MODEL_PATH.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


_OVERRIDE: list[ReportModel | None] = []


def active_model() -> ReportModel | None:
    """The model the ranking uses: the shipped one, or the one a cross-validation fold set (``using``)."""
    return _OVERRIDE[-1] if _OVERRIDE else shipped_model()


@contextmanager
def using(model: ReportModel | None) -> Iterator[None]:
    """Rank with ``model`` (None: the catalog alone) for the duration; cross-validation fits one per fold."""
    _OVERRIDE.append(model)
    try:
        yield
    finally:
        _OVERRIDE.pop()
