"""inspect_run on a run with ~1 GB of train trajectories, against check_reward_data on the same number of bytes.

Each figure is one whole ``xtuner-rl-mcp call`` process (interpreter start and MCP stack included), measured by
``peers.py measure`` (wall time, peak RSS of the process tree); medians of ``--runs``. Compared:

* ``inspect_run`` on a generated run dir (tests/run_dir_generator.py, XTuner's writer layout) whose
  ``train_rollout_<step>.jsonl`` files hold ``--mb`` MiB;
* ``check_reward_data`` on ``--mb`` MiB of real GSM8K data lines (its home ground, the README's figure);
* ``check_reward_data`` on the trajectory directory itself (the literal same bytes: every line lacks
  ``reward_model``, so every line takes its precise path -- shown for completeness, not as the target).

Usage: python bench/bench_inspect_run.py [--mb 1024] [--runs 3] [--work /tmp/bench_inspect_run] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench_common import MB, REPO, SHARED, fmt, log, repeat_runs, server_cmd
from bench_data import build_data_file

sys.path.insert(0, str(REPO / "tests"))
from run_dir_generator import RunSpec, append_steps_like, generate


def build_run(work: Path, mb: int) -> tuple[Path, dict[str, Any]]:
    """A run dir whose train trajectories add up to ``mb`` MiB (reused when already there)."""
    root = work / f"run_{mb}mb"
    exps = sorted(root.glob("[0-9]*")) if root.is_dir() else []
    if not exps:
        exp = generate(root, RunSpec(steps=20, total_steps=2000, groups=64, k=8, response_chars=1500, evaluate_step=10))
    else:
        exp = exps[-1]
    total = append_steps_like(exp, mb * MB)
    files = len(list((exp / "train_rollout").glob("*.jsonl")))
    return root, {"bytes": total, "files": files}


def call(tool: str, args: dict[str, Any], roots: list[Path]) -> list[str]:
    cmd = [*server_cmd(), "call", tool, "--args", json.dumps(args)]
    for r in roots:
        cmd += ["--allow-root", str(r)]
    return cmd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_inspect_run"))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    log(f"building a run with {a.mb} MiB of trajectories under {a.work}")
    run_dir, facts = build_run(a.work, a.mb)
    out: dict[str, Any] = {"trajectories": facts, "mb": a.mb}
    args = {"path": str(run_dir), "max_trajectory_files": 10_000, "max_trajectory_mb": 4 * a.mb, "detail": "summary"}
    log("inspect_run ...")
    out["inspect_run"] = repeat_runs(call("inspect_run", args, [a.work]), a.runs)
    if SHARED.is_dir():
        data = a.work / f"gsm8k_{a.mb}mb.jsonl"
        out["gsm8k_data"] = build_data_file(data, a.mb)
        log("check_reward_data on GSM8K data ...")
        out["check_reward_data"] = repeat_runs(
            call("check_reward_data", {"path": str(data), "detail": "summary"}, [a.work]), a.runs
        )
    else:
        out["check_reward_data"] = {"skipped": f"real GSM8K samples not found under {SHARED}"}
    exp = sorted(run_dir.glob("[0-9]*"))[-1]
    log("check_reward_data on the trajectory files (same bytes, 1 run) ...")
    out["check_reward_data_same_bytes"] = repeat_runs(
        call("check_reward_data", {"path": str(exp / "train_rollout"), "detail": "summary"}, [a.work]), 1
    )
    ours, peer = out["inspect_run"], out["check_reward_data"]
    if "wall_s" in peer:
        out["ratio_inspect_over_check"] = ours["wall_s"] / peer["wall_s"]
    print(json.dumps(out, indent=2))
    print(report(out))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


def report(out: dict[str, Any]) -> str:
    ours, peer, same = out["inspect_run"], out["check_reward_data"], out["check_reward_data_same_bytes"]
    gb = out["trajectories"]["bytes"] / (1 << 30)
    rows = [
        "| What | Wall (median) | Peak RSS (tree) |",
        "|---|---|---|",
        f"| inspect_run, {gb:.2f} GiB in {out['trajectories']['files']} trajectory files | {fmt(ours['wall_s'])} s "
        f"| {fmt(ours['peak_rss_mb'], 0)} MB |",
    ]
    if "wall_s" in peer:
        rows.append(
            f"| check_reward_data, same size of GSM8K data | {fmt(peer['wall_s'])} s | "
            f"{fmt(peer['peak_rss_mb'], 0)} MB |"
        )
        rows.append(
            f"| ratio inspect_run / check_reward_data | **{fmt(out['ratio_inspect_over_check'])}×** (target ≤ 2) | |"
        )
    if "wall_s" in same:
        rows.append(
            f"| check_reward_data on the trajectory files themselves | {fmt(same['wall_s'])} s | "
            f"{fmt(same['peak_rss_mb'], 0)} MB |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
