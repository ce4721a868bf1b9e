"""The linter path side by side with what it replaces (issue 27 item 3): start-up of ``xtuner-rl-mcp check-data`` /
``check-config`` on the demo data against ``python -c 'import mcp'`` and ``xtuner-rl-mcp call``, and a 200 MB data
check against a bare ``orjson`` loop doing the contract's core check (each a whole child process, wall time, runs
alternating so load hits both alike; medians).

    python bench/bench_lint.py [--runs 7] [--mb 200] [--work DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_common import PEERS, PY, SAMPLES, SHARED, log, machine_facts, measured, server_cmd
from bench_data import build_data_file

CONTRACT_LOOP = Path(__file__).resolve().with_name("peer_contract_loop.py")


def alternate(commands: dict[str, list[str]], runs: int, cwd: Path) -> dict[str, dict[str, Any]]:
    """Each command ``runs`` times, interleaved (A B C A B C ...); medians of wall time and peak RSS."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    here = os.getcwd()
    os.chdir(cwd)
    try:
        for _ in range(runs):
            for name, cmd in commands.items():
                samples[name].append(measured(cmd))
    finally:
        os.chdir(here)
    out = {}
    for name, runs_of in samples.items():
        walls = [s["wall_s"] for s in runs_of]
        out[name] = {
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "peak_rss_mb": statistics.median(s["peak_rss_mb"] for s in runs_of),
            "rc": sorted({s["rc"] for s in runs_of}),
        }
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--big-runs", type=int, default=3)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "xtuner-rl-bench")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    exe = server_cmd()
    args.work.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()

    log(f"start-up on the demo data, {args.runs} runs each, alternating")
    train = str(SAMPLES / "gsm8k_train_sample.jsonl")
    config = str(SAMPLES / "rl_grpo_gsm8k_async_demo.py")
    call_args = json.dumps({"path": train})
    start = alternate(
        {
            "xtuner-rl-mcp check-data (demo JSONL)": [*exe, "check-data", train],
            "xtuner-rl-mcp check-config (demo config)": [*exe, "check-config", config],
            "python -c 'import mcp'": [PY, "-c", "import mcp"],
            "xtuner-rl-mcp call check_reward_data (MCP client)": [
                *exe,
                "call",
                "check_reward_data",
                "--args",
                call_args,
                "--allow-root",
                str(SAMPLES),
            ],
        },
        args.runs,
        SAMPLES,
    )

    big_path = args.work / f"gsm8k_{args.mb}mb.jsonl"
    log(f"building {args.mb} MB of GSM8K lines from {SHARED}")
    meta = build_data_file(big_path, args.mb)
    log(f"{args.mb} MB check, {args.big_runs} runs each, alternating")
    big = alternate(
        {
            f"xtuner-rl-mcp check-data ({args.mb} MB)": [*exe, "check-data", str(big_path)],
            f"orjson loop doing the same line checks ({args.mb} MB)": [PY, str(CONTRACT_LOOP), str(big_path)],
            f"bare orjson loop, ground-truth check only ({args.mb} MB)": [*PEERS, "orjson", str(big_path)],
        },
        args.big_runs,
        args.work,
    )
    ours, same, bare = (v["median_s"] for v in big.values())
    report = {
        "machine": {k: facts.get(k) for k in ("date_utc", "cores", "cpu", "load_avg_at_start")},
        "start_up": start,
        "big": {"file": meta, "runs": big, "same_checks_over_ours": same / ours, "bare_over_ours": bare / ours},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"# Linter path — {facts.get('date_utc')}, {facts.get('cores')} cores, load {facts.get('load_avg_at_start')}")
    print("\n| Start-up (demo data) | median | min | max | peak RSS |\n|---|---|---|---|---|")
    for name, r in start.items():
        print(
            f"| {name} | {r['median_s']:.2f} s | {r['min_s']:.2f} s | {r['max_s']:.2f} s | {r['peak_rss_mb']:.0f} MB |"
        )
    print(f"\n| {args.mb} MB check ({meta['lines']:,} lines) | median | peak RSS |\n|---|---|---|")
    for name, r in big.items():
        print(f"| {name} | {r['median_s']:.2f} s | {r['peak_rss_mb']:.0f} MB |")
    print(f"\norjson loop with the same checks ÷ check-data = {same / ours:.2f}× (≥ 1: the linter is at least as fast)")
    print(f"bare orjson loop (ground truth only) ÷ check-data = {bare / ours:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
