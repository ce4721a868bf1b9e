"""check_reward_data throughput and peak memory on generated GSM8K files, against jq, a json.loads+jsonschema
loop and an orjson loop (each a measured child process), plus one end-to-end ``xtuner-rl-mcp call`` per size."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench_common import MB, PEERS, SHARED, log, measured, repeat_runs, server_cmd

# ------------------------------------------------------------------------------------------------------------
# check_reward_data throughput and memory
# ------------------------------------------------------------------------------------------------------------


def build_data_file(path: Path, size_mb: int) -> dict[str, Any]:
    """Repeat the real GSM8K lines until the file reaches ``size_mb``; reuse an existing file of that size."""
    sources = sorted(SHARED.glob("*.jsonl"))
    # the sample files end without a newline: re-terminate every line so that repeats never fuse two records
    lines = [ln.rstrip(b"\r\n") + b"\n" for src in sources for ln in src.read_bytes().splitlines() if ln.strip()]
    if not lines:
        raise FileNotFoundError(f"no GSM8K sample lines under {SHARED}")
    target = size_mb * MB
    if not (path.exists() and abs(path.stat().st_size - target) < 64 * 1024):
        block = b"".join(lines)
        with path.open("wb") as fh:
            written = 0
            while written + len(block) <= target:
                fh.write(block)
                written += len(block)
            for ln in lines:
                if written + len(ln) > target:
                    break
                fh.write(ln)
                written += len(ln)
    with path.open("rb") as fh:
        count = sum(1 for _ in fh)
    return {"bytes": path.stat().st_size, "lines": count}


OURS_DATA = "ours: check_reward_data run (all cores)"


def bench_data(sizes_mb: list[int], runs: int, work: Path, tools: list[str]) -> dict[str, Any]:
    if "check_reward_data" not in tools:
        return {"skipped": "check_reward_data is not registered"}
    if not SHARED.is_dir():
        return {"skipped": f"real GSM8K samples not found under {SHARED}"}
    jq = shutil.which("jq")
    jq_filter = (
        'reduce inputs as $r (0; if ($r | type) == "object" and ($r.reward_model | type) == "object" '
        'and ($r.reward_model.ground_truth | type) == "string" then . else . + 1 end)'
    )
    peers: dict[str, list[str] | None] = {}
    results: dict[str, Any] = {"sizes": [], "notes": []}
    if not jq:
        results["notes"].append("jq not installed: jq comparison skipped (apt-get install jq)")
    for size in sizes_mb:
        path = work / f"gsm8k_{size}mb.jsonl"
        log(f"data: building {size} MB file")
        meta = build_data_file(path, size)
        args = json.dumps({"path": str(path)})
        peers = {
            OURS_DATA: [*PEERS, "tool", "check_reward_data", str(work), args],
            "ours, one core: jsonl_scan.scan_file": [*PEERS, "scan", str(path)],
            "json.loads + jsonschema loop": [*PEERS, "jsonschema", str(path)],
            "orjson.loads loop": [*PEERS, "orjson", str(path)],
            "jq (ground-truth check only)": [jq, "-n", jq_filter, str(path)] if jq else None,
        }
        row: dict[str, Any] = {"size_mb": size, **meta, "peers": {}}
        for name, cmd in peers.items():
            if cmd is None:
                continue
            log(f"data: {size} MB, {name}, {runs} runs")
            r = repeat_runs(cmd, runs)
            r["mb_per_s"] = meta["bytes"] / MB / r["time_s"] if r["time_s"] == r["time_s"] else None
            row["peers"][name] = r
        log(f"data: {size} MB, end to end through `xtuner-rl-mcp call` (1 run)")
        e2e = measured([*server_cmd(), "call", "check_reward_data", "--args", args, "--allow-root", str(work)])
        row["end_to_end_cli"] = {"wall_s": e2e["wall_s"], "peak_rss_mb": e2e["peak_rss_mb"], "rc": e2e["rc"]}
        ours = row["peers"][OURS_DATA]["time_s"]
        row["ratios_vs_ours"] = {
            name: r["time_s"] / ours for name, r in row["peers"].items() if r["time_s"] == r["time_s"] and ours
        }
        results["sizes"].append(row)
    return results
