"""Accuracy of diagnose_symptom on real public failure reports (tests/corpus/reports.jsonl).

Each report carries the categories a maintainer would accept; a report counts as a top-k hit when one of its
categories is among the categories of the first k findings. Prints top-1 and top-3 per language, category and
project, the calibration table (how often the first finding is right, by its confidence and by verdict) and the
time to rank one report.

The development part is scored by K-fold cross-validation (``--cv``): the ranking constants of
``diagnosis/descriptions.py`` are chosen on K-1 folds (split by thread URL) from a small grid and scored on the fold
left out, so the figure says how the method generalises, not how well it was fitted. The test part is scored once
with the shipped constants and is never used to choose anything.

    python bench/real_reports.py [--split dev|test|all] [--cv] [--folds 5] [--misses] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "reports.jsonl"

#: The constants cross-validation chooses from (the shipped values are among them).
GRID: dict[str, tuple[float, ...]] = {
    "RETRIEVAL_WEIGHT": (0.0, 0.15, 0.25, 0.4),
    "CATEGORY_SHARE": (0.0, 0.05, 0.1, 0.2),
    "BM25_K1": (1.2, 2.0),
}
#: Confidence bins of the calibration table (lower bounds).
BINS = (0.0, 0.2, 0.4, 0.6, 0.8)


def load(split: str = "all") -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


@dataclass(frozen=True)
class Outcome:
    """What diagnose_symptom answered for one report, and whether it was right."""

    report: dict
    categories: tuple[str, ...]
    ids: tuple[str, ...]
    confidence: float  # of the first finding (0 when none)
    verdict: str
    seconds: float

    @property
    def top1(self) -> bool:
        return bool(self.categories) and self.categories[0] in self.report["categories"]

    @property
    def top3(self) -> bool:
        return bool(set(self.report["categories"]) & set(self.categories[:3]))


def diagnose(report: dict) -> Outcome:
    from xtuner_rl_mcp.core import RunContext
    from xtuner_rl_mcp.tools.diagnose_symptom import Params, run

    t0 = time.perf_counter()
    res = run(Params(text=report["text"], max_findings=5, detail="summary"), RunContext())
    seconds = time.perf_counter() - t0
    return Outcome(
        report,
        tuple(f.category for f in res.findings),
        tuple(f.failure_mode_id for f in res.findings),
        res.findings[0].confidence if res.findings else 0.0,
        res.verdict,
        seconds,
    )


@contextmanager
def constants(settings: dict[str, float]) -> Iterator[None]:
    """The ranking constants set to ``settings`` for the duration (the retrieval index is rebuilt for them)."""
    from xtuner_rl_mcp.diagnosis import descriptions

    saved = {k: getattr(descriptions, k) for k in settings}
    for k, v in settings.items():
        setattr(descriptions, k, v)
    descriptions._RETRIEVAL.clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(descriptions, k, v)
        descriptions._RETRIEVAL.clear()


def fold_of(report: dict, folds: int) -> int:
    """A report's fold, fixed by its thread URL (reports of one thread never straddle folds)."""
    return int(hashlib.sha256(report["url"].encode()).hexdigest(), 16) % folds


def grid_settings() -> list[dict[str, float]]:
    keys = list(GRID)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(GRID[k] for k in keys))]


def cross_validate(rows: list[dict], folds: int = 5, grid: list[dict[str, float]] | None = None) -> dict:
    """Nested K-fold: per fold, the settings with the most top-1 + top-3 hits on the other folds, scored on it."""
    grid = grid or grid_settings()
    by_setting: list[list[Outcome]] = []
    for settings in grid:
        with constants(settings):
            by_setting.append([diagnose(r) for r in rows])
    fold = [fold_of(r, folds) for r in rows]
    chosen: list[dict[str, float]] = []
    held_out: list[Outcome | None] = [None] * len(rows)
    for k in range(folds):

        def train_hits(outcomes: list[Outcome], k: int = k) -> int:
            return sum(o.top1 + o.top3 for o, f in zip(outcomes, fold, strict=True) if f != k)

        best = max(range(len(grid)), key=lambda i: train_hits(by_setting[i]))
        chosen.append(grid[best])
        for i, f in enumerate(fold):
            if f == k:
                held_out[i] = by_setting[best][i]
    per_setting = [{"settings": s, **_rates([o for o in outs])} for s, outs in zip(grid, by_setting, strict=True)]
    return {"chosen": chosen, "outcomes": [o for o in held_out if o is not None], "per_setting": per_setting}


def _rates(outcomes: list[Outcome]) -> dict:
    n = len(outcomes)
    return {
        "n": n,
        "top1": sum(o.top1 for o in outcomes) / n if n else 0.0,
        "top3": sum(o.top3 for o in outcomes) / n if n else 0.0,
    }


def summarise(outcomes: list[Outcome]) -> dict:
    """Top-1/top-3 overall and per language, category and project; calibration; timing; misses."""
    groups: dict[str, dict[str, list[Outcome]]] = {"language": {}, "category": {}, "project": {}}
    for o in outcomes:
        groups["language"].setdefault(o.report["lang"], []).append(o)
        groups["project"].setdefault(o.report["project"], []).append(o)
        for c in o.report["categories"]:
            groups["category"].setdefault(c, []).append(o)
    calibration: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        low = max(b for b in BINS if o.confidence >= b)
        calibration[f">= {low:.1f}"].append(o)
    verdicts: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        verdicts[o.verdict].append(o)
    confident = [o for o in outcomes if o.confidence >= 0.8]
    times = [o.seconds for o in outcomes]
    return {
        **_rates(outcomes),
        **{f"per_{g}": {k: _rates(v) for k, v in sorted(m.items())} for g, m in groups.items()},
        "calibration": {k: _rates(v) for k, v in sorted(calibration.items())},
        "per_verdict": {k: _rates(v) for k, v in sorted(verdicts.items())},
        "confident_right": _rates(confident)["top1"] if confident else None,
        "confident_n": len(confident),
        "ms_median": 1000 * statistics.median(times) if times else 0.0,
        "ms_max": 1000 * max(times) if times else 0.0,
        "misses": [
            {"id": o.report["id"], "want": o.report["categories"], "got": list(o.ids[:3])}
            for o in outcomes
            if not o.top3
        ],
    }


def score(rows: list[dict]) -> dict:
    """The shipped constants on these reports."""
    return summarise([diagnose(r) for r in rows])


def _table(title: str, rows: dict[str, dict]) -> None:
    print(f"| {title} | reports | top-1 | top-3 |")
    print("|---|---|---|---|")
    for k, v in rows.items():
        print(f"| {k} | {v['n']} | {v['top1']:.1%} | {v['top3']:.1%} |")
    print()


def _print(name: str, s: dict, show_misses: bool) -> None:
    print(
        f"## {name}: {s['n']} reports — top-1 {s['top1']:.1%}, top-3 {s['top3']:.1%} "
        f"(ranking: median {s['ms_median']:.1f} ms, max {s['ms_max']:.1f} ms per report)\n"
    )
    _table("language", s["per_language"])
    _table("category", s["per_category"])
    _table("project", s["per_project"])
    _table("first finding's confidence", s["calibration"])
    _table("verdict", s["per_verdict"])
    if s["confident_right"] is not None:
        print(f"Answers with confidence >= 0.8: {s['confident_n']}, right {s['confident_right']:.1%}\n")
    if show_misses:
        for m in s["misses"]:
            print(f"miss {m['id']}: want {m['want']} got {m['got']}")
        print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "test", "all"], default="all")
    ap.add_argument("--cv", action="store_true", help="score the development part by nested K-fold cross-validation")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--misses", action="store_true", help="list the reports whose categories were not in the top 3")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    diagnose({"text": "warm-up", "categories": []})  # load the catalog and the retrieval index before timing
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    results: dict[str, dict] = {}
    for sp in splits:
        rows = load(sp)
        if sp == "dev" and args.cv:
            cv = cross_validate(rows, args.folds)
            results["dev_cv"] = {**summarise(cv["outcomes"]), "chosen": cv["chosen"], "per_setting": cv["per_setting"]}
        else:
            results[sp] = score(rows)
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        print()
        return 0
    names = {
        "dev": "development part (shipped constants, fitted on it)",
        "dev_cv": f"development part, {args.folds}-fold cross-validated",
        "test": "test part (frozen, never tuned on)",
    }
    for key, s in results.items():
        _print(names[key], s, args.misses)
        if key == "dev_cv":
            print("Settings chosen per fold: " + "; ".join(json.dumps(c) for c in s["chosen"]) + "\n")
            _table(
                "settings (in-sample on all of dev)",
                {json.dumps(p["settings"]): p for p in sorted(s["per_setting"], key=lambda p: -p["top1"] - p["top3"])},
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
