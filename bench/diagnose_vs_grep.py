"""Side-by-side throughput: diagnose_symptom on a large log vs `grep -E` with the catalog's patterns.

    python bench/diagnose_vs_grep.py [--mb 200] [--warn-every 13] [--dir /tmp/bench]

Writes a log of healthy XTuner/Ray/engine lines (one WARNING line every N lines, as real runs have) with a
failure traceback near the end, then times both on the same file (best of 3, warm page cache) and prints MB/s and
the ratio. grep gets the catalog's regexes translated to POSIX ERE (\\d -> [0-9], \\x27 -> ').
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HEALTHY = [
    "[XTuner][RANK 0][2026-08-21 16:04:12][INFO] [Step 1/45] loss=0.0231 grad_norm=0.8812 lr=1e-06 "
    "response/rewards/mean=0.4531 response/response_len/mean=233.1",
    '(RolloutWorker pid=81231, ip=10.130.2.17) INFO:     10.130.2.17:43210 - "POST /generate HTTP/1.1" 200 OK',
    "(RolloutWorker pid=81231, ip=10.130.2.17) [2026-08-21 16:10:02 TP0] Prefill batch. #new-seq: 16, "
    "#new-token: 4096, #cached-token: 0, token usage: 0.81, #running-req: 112, #queue-req: 0",
    "(RolloutWorker pid=81231, ip=10.130.2.17) [2026-08-21 16:10:03 TP0] Decode batch. #running-req: 128, "
    "#token: 60211, token usage: 0.93, gen throughput (token/s): 5012.12, #queue-req: 0",
    "[XTuner][RANK 0][2026-08-21 16:04:12][INFO] timing/rollout=82.1 timing/train=40.3 timing/sync_weights=3.2 "
    "throughput/rollout_tgs=5123.4",
    "2026-08-21 16:02:23,502\tINFO worker.py:2003 -- Connected to Ray cluster. View the dashboard at 127.0.0.1:8265",
]
WARNING = "[XTuner][2026-08-21 16:04:13][WARNING] rollout_config.allow_over_concurrency_ratio is deprecated."
FAILURE = """Traceback (most recent call last):
  File "/mnt/xtuner/xtuner/v1/train/cli/rl.py", line 62, in main
    trainer = cfg.trainer.build()
  File "/mnt/xtuner/xtuner/v1/rl/utils/ray_accelerator_worker.py", line 106, in validate_available_resources
    assert available_gpus >= self.num_workers, (
AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.
"""


def write_log(path: Path, mb: int, warn_every: int) -> None:
    block_lines = [HEALTHY[i % len(HEALTHY)] for i in range(max(1, warn_every - 1))] + [WARNING]
    block = ("\n".join(block_lines) + "\n").encode()
    reps = (mb << 20) // len(block) + 1
    with open(path, "wb") as f:
        for _ in range(reps):
            f.write(block)
        f.write(FAILURE.encode())
        f.write(block)


def ere_patterns() -> list[str]:
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    out = []
    for fm in load_catalog().failure_mode:
        for p in fm.patterns:
            out.append(p.replace(r"\x27", "'").replace(r"\d", "[0-9]"))
    return out


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--warn-every", type=int, default=13)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    from xtuner_rl_mcp.core import PathPolicy, RunContext
    from xtuner_rl_mcp.operations.diagnose_symptom import Params, run

    grep = shutil.which("grep")
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        log = Path(d) / "big.log"
        pats = Path(d) / "patterns.ere"
        write_log(log, args.mb, args.warn_every)
        pats.write_text("\n".join(ere_patterns()) + "\n")
        size_mb = log.stat().st_size / (1 << 20)
        ctx = RunContext(paths=PathPolicy.from_strings([d]))
        found: list[str] = []

        def diag() -> None:
            res = run(Params(log_path=str(log)), ctx)
            found[:] = [f.failure_mode_id for f in res.findings]

        t_diag = best_of(3, diag)
        print(f"file: {size_mb:.0f} MiB; diagnose_symptom top finding: {found[:1]}")
        print(f"diagnose_symptom: {t_diag:.2f} s  ({size_mb / t_diag:.0f} MiB/s)")
        if grep:
            cmd = [grep, "-a", "-c", "-E", "-f", str(pats), str(log)]
            t_grep = best_of(3, lambda: subprocess.run(cmd, capture_output=True, check=False))
            print(f"grep -E -f catalog: {t_grep:.2f} s  ({size_mb / t_grep:.0f} MiB/s)")
            print(f"ratio diagnose/grep: {t_diag / t_grep:.2f}x")


if __name__ == "__main__":
    main()
