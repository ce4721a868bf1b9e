"""What limits diagnosis on real reports: a second annotator beside the corpus labels and beside the tool.

``bench/results/annotator_study.json`` holds, for 120 development reports no phrase was written from (60 per
language), a second annotator's blind labels (from the report and its settled cause) and its three guesses from the
report text alone. This prints, per language: how often the annotator's first label is one the corpus accepts (are
the labels the limit?), how often its text-only guesses are right (does the text carry the cause?), and the tool's
held-out answers on the same reports (5-fold, as ``real_reports.py`` cross-validates with the shipped settings).

    python bench/annotator_study.py
"""

from __future__ import annotations

import json
from pathlib import Path

import real_reports

STUDY = Path(__file__).resolve().parent / "results" / "annotator_study.json"


def _share(hits: list[bool]) -> str:
    return f"{sum(hits) / len(hits):.0%}" if hits else "-"


def main() -> int:
    study = json.loads(STUDY.read_text(encoding="utf-8"))
    rows = real_reports.load("dev")
    by_id = {r["id"]: r for r in rows}
    sample = [by_id[i] for i in study["reports"]]
    cv = real_reports.cross_validate(rows, 5, [real_reports.shipped_settings()])
    tool = {o.report["id"]: o for o in cv["outcomes"]}
    print(
        "| reports | n | blind label's first accepted | text-only top-1 | text-only top-3 | tool top-1 | tool top-3 |"
    )
    print("|---|---|---|---|---|---|---|")
    for lang in ("en", "zh", "all"):
        part = [r for r in sample if lang in ("all", r["lang"])]
        accepted = [set(r["categories"]) for r in part]
        first = [study["blind_labels"][r["id"]][0] in ok for r, ok in zip(part, accepted, strict=True)]
        guess = [study["text_only_guesses"][r["id"]] for r in part]
        g1 = [g[0] in ok for g, ok in zip(guess, accepted, strict=True)]
        g3 = [bool(set(g[:3]) & ok) for g, ok in zip(guess, accepted, strict=True)]
        t1 = [tool[r["id"]].top1 for r in part]
        t3 = [tool[r["id"]].top3 for r in part]
        print(f"| {lang} | {len(part)} | {_share(first)} | {_share(g1)} | {_share(g3)} | {_share(t1)} | {_share(t3)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
