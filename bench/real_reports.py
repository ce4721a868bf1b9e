"""Accuracy of diagnose_symptom on real public failure reports (tests/corpus/reports.jsonl).

Each report carries the categories a maintainer would accept; a report counts as a top-k hit when one of its
categories is among the categories of the first k findings. Prints top-1 and top-3 for the development part and the
test part (never tuned on), per category and per language, and the time to rank one report.

    python bench/real_reports.py [--split dev|test|all] [--misses] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "reports.jsonl"


def load(split: str = "all") -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def ranked_categories(text: str) -> tuple[list[str], list[str]]:
    """Categories and ids of diagnose_symptom's findings for one pasted report, best first."""
    from xtuner_rl_mcp.core import RunContext
    from xtuner_rl_mcp.tools.diagnose_symptom import Params, run

    res = run(Params(text=text, max_findings=5, detail="summary"), RunContext())
    return [f.category for f in res.findings], [f.failure_mode_id for f in res.findings]


def score(rows: list[dict]) -> dict:
    per_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # n, top1, top3
    per_lang: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    n = top1 = top3 = 0
    times: list[float] = []
    misses = []
    for r in rows:
        t0 = time.perf_counter()
        cats, ids = ranked_categories(r["text"])
        times.append(time.perf_counter() - t0)
        ok = set(r["categories"])
        h1 = bool(cats[:1]) and cats[0] in ok
        h3 = bool(ok & set(cats[:3]))
        n += 1
        top1 += h1
        top3 += h3
        for c in r["categories"]:
            per_cat[c][0] += 1
            per_cat[c][1] += h1
            per_cat[c][2] += h3
        per_lang[r["lang"]][0] += 1
        per_lang[r["lang"]][1] += h1
        per_lang[r["lang"]][2] += h3
        if not h3:
            misses.append({"id": r["id"], "want": r["categories"], "got": ids[:3]})
    return {
        "n": n,
        "top1": top1 / n if n else 0.0,
        "top3": top3 / n if n else 0.0,
        "per_category": {k: {"n": v[0], "top1": v[1], "top3": v[2]} for k, v in sorted(per_cat.items())},
        "per_language": {k: {"n": v[0], "top1": v[1], "top3": v[2]} for k, v in sorted(per_lang.items())},
        "ms_median": 1000 * statistics.median(times) if times else 0.0,
        "ms_max": 1000 * max(times) if times else 0.0,
        "misses": misses,
    }


def _print(name: str, s: dict, show_misses: bool) -> None:
    print(
        f"## {name}: {s['n']} reports — top-1 {s['top1']:.1%}, top-3 {s['top3']:.1%} "
        f"(ranking: median {s['ms_median']:.1f} ms, max {s['ms_max']:.1f} ms per report)"
    )
    print("| category | reports | top-1 | top-3 |")
    print("|---|---|---|---|")
    for cat, v in s["per_category"].items():
        print(f"| {cat} | {v['n']} | {v['top1']} | {v['top3']} |")
    for lang, v in s["per_language"].items():
        print(f"| language {lang} | {v['n']} | {v['top1']} | {v['top3']} |")
    if show_misses:
        for m in s["misses"]:
            print(f"miss {m['id']}: want {m['want']} got {m['got']}")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "test", "all"], default="all")
    ap.add_argument("--misses", action="store_true", help="list the reports whose categories were not in the top 3")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ranked_categories("warm-up")  # load the catalog once before timing
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    results = {sp: score(load(sp)) for sp in splits}
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    else:
        for sp, s in results.items():
            _print("development part" if sp == "dev" else "test part (not tuned on)", s, args.misses)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
