"""One command for every benchmark: ``python bench/run_all.py [--quick] [--sizes 10,100,1000] [--out bench/out]``.

Writes ``report.md``, ``report.json`` and ``scaling.png`` to ``--out`` and prints a summary. Every comparison runs
side by side in the same invocation and reports medians of several runs plus the ratio to its peer:

* cold start: spawn -> answer to a raw ``initialize`` line (and to the first ``tools/list``) over stdio, ours vs
  ``bench/minimal_server.py``, with a per-phase breakdown and a ``-X importtime`` diff of what ours imports beyond it;
* round-trip latency p50/p99 of every pure tool over stdio through the SDK's MCP client, both protocol eras;
* check_reward_data time and peak RSS (whole process tree) on generated GSM8K files: the tool's ``run`` on all
  cores and the single-process ``jsonl_scan.scan_file``, vs jq, a json.loads+jsonschema loop and an orjson loop,
  plus one end-to-end ``xtuner-rl-mcp call`` per size; a PNG plot;
* diagnose_symptom on a large generated log vs ``grep -P`` and ``grep -E`` with the catalog's patterns;
* probe_environment against a live local Ray head vs ``ray status``, and on a dead address;
* reliability: runs the hostile-input suite (tests/test_hostile_*.py) and counts what it covered.

A comparison whose peer (or tool) is missing is skipped with a note. ``--copy-results`` also copies the report to
``bench/results/`` (the committed copy quoted by the README).

Each section lives in its own module next to this script: ``bench_startup`` (cold start, latency), ``bench_data``
(check_reward_data), ``bench_diagnose`` (diagnose_symptom vs grep), ``bench_probe`` (probe_environment vs ray
status), ``bench_reliability`` (hostile-input suite), ``bench_report`` (report.md and the plot); ``bench_common``
holds what they share.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import BENCH, log, machine_facts, registered_tools
from bench_data import bench_data
from bench_diagnose import bench_diagnose
from bench_probe import bench_probe
from bench_reliability import bench_reliability
from bench_report import plot, render_markdown
from bench_startup import bench_cold_start, bench_latency


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and few runs (about a minute or two)")
    ap.add_argument("--sizes", default=None, help="check_reward_data file sizes in MB, comma-separated")
    ap.add_argument("--log-mb", type=int, default=None, help="size of the generated diagnose log in MB")
    ap.add_argument("--runs", type=int, default=None, help="runs per measurement (median)")
    ap.add_argument("--out", default=str(BENCH / "out"), help="output directory (generated data lives here too)")
    ap.add_argument(
        "--only",
        default="cold,latency,data,diagnose,probe,reliability",
        help="comma-separated sections to run (default all)",
    )
    ap.add_argument("--fuzz-examples", type=int, default=None, help="hypothesis examples per tool (reliability)")
    ap.add_argument("--copy-results", action="store_true", help="also copy the report to bench/results/")
    args = ap.parse_args(argv)

    sizes = [int(s) for s in (args.sizes or ("1,10" if args.quick else "10,100,1000")).split(",") if s.strip()]
    runs = args.runs or 3
    log_mb = args.log_mb or (20 if args.quick else 200)
    out = Path(args.out).resolve()
    work = out / "data"
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    command = "python bench/run_all.py " + " ".join(argv if argv is not None else sys.argv[1:])
    rep: dict[str, Any] = {"command": command.strip(), "machine": machine_facts(), "notes": []}
    tools = registered_tools()
    rep["tools"] = tools
    started = time.perf_counter()

    if "cold" in only:
        rep["cold_start"] = bench_cold_start(7 if args.quick else 15, work)
    if "latency" in only:
        rep["latency"] = bench_latency(50 if args.quick else 200)
    if "data" in only:
        rep["data"] = bench_data(sizes, runs, work, tools)
        if rep["data"].get("sizes"):
            note = plot(rep["data"], out / "scaling.png")
            if note:
                rep["notes"].append(note)
    if "diagnose" in only:
        rep["diagnose"] = bench_diagnose(log_mb, runs, work, tools)
    if "probe" in only:
        rep["probe"] = bench_probe(3 if args.quick else 5, tools)
    if "reliability" in only:
        rep["reliability"] = bench_reliability(args.fuzz_examples or (25 if args.quick else 200), out)
    rep["elapsed_s"] = time.perf_counter() - started

    (out / "report.json").write_text(json.dumps(rep, indent=2, default=str))
    md = render_markdown(rep)
    (out / "report.md").write_text(md)
    if args.copy_results:
        dest = BENCH / "results"
        dest.mkdir(exist_ok=True)
        for name in ("report.md", "report.json", "scaling.png"):
            if (out / name).exists():
                shutil.copy2(out / name, dest / name)
    print(md)
    log(f"done in {rep['elapsed_s']:.0f}s; report in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
