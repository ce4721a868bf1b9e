"""What every benchmark section shares: paths, logging, medians, the server command, measured child processes
(``peers.py measure``) repeated into medians, number formatting, and the machine facts a report opens with."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
PEERS = [PY, str(BENCH / "peers.py")]
SAMPLES = REPO / "references" / "samples"
SHARED = Path(os.environ.get("XTUNER_RL_SHARED", REPO.parent / "shared")) / "data" / "xtuner-gsm8k-example"
MB = 1 << 20


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def server_cmd() -> list[str]:
    script = Path(PY).with_name("xtuner-rl-mcp")
    return [str(script)] if script.exists() else [PY, "-m", "xtuner_rl_mcp"]


def registered_tools() -> list[str]:
    from xtuner_rl_mcp.server.registry import TOOL_MODULES

    return list(TOOL_MODULES)


def measured(cmd: list[str]) -> dict[str, Any]:
    out = subprocess.run([*PEERS, "measure", "--", *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)


def work_s(stdout: str) -> float | None:
    """The in-process seconds a workload reports on its last output line (``work_s``), if it does."""
    lines = stdout.strip().splitlines()
    with contextlib.suppress(ValueError, IndexError, TypeError, KeyError):
        return float(json.loads(lines[-1])["work_s"])
    return None


#: A measurement whose first run takes longer than this is not repeated (the jsonschema loop on 1 GB takes minutes).
SLOW_RUN_S = 90.0


def repeat_runs(cmd: list[str], runs: int) -> dict[str, Any]:
    samples = [measured(cmd)]
    while len(samples) < runs and samples[0]["wall_s"] < SLOW_RUN_S:
        samples.append(measured(cmd))
    runs = len(samples)
    ok = [s for s in samples if s["rc"] == 0]
    for s in ok:
        s["work_s"] = work_s(s["stdout_tail"])
    res: dict[str, Any] = {
        "runs": runs,
        "failed_runs": runs - len(ok),
        "wall_s": median([s["wall_s"] for s in ok]),
        "work_s": median([s["work_s"] for s in ok if s["work_s"] is not None]),
        # work time where the workload reports it (no interpreter start), else the process time (jq, grep)
        "time_s": median([s["work_s"] if s["work_s"] is not None else s["wall_s"] for s in ok]),
        "peak_rss_mb": median([s["peak_rss_mb"] for s in ok]),
        "all_wall_s": [s["wall_s"] for s in samples],
        "output": (ok[-1] if ok else samples[-1])["stdout_tail"].strip()[-300:],
    }
    if not ok:
        res["error"] = samples[-1]["stderr_tail"][-500:]
    return res


def fmt(x: Any, nd: int = 2) -> str:
    return f"{x:.{nd}f}" if isinstance(x, (int, float)) and x == x else "—"


# ------------------------------------------------------------------------------------------------------------
# Machine facts
# ------------------------------------------------------------------------------------------------------------


def _version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def machine_facts() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    mem_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    pkgs = {}
    for name in ("xtuner-rl-mcp", "mcp", "pydantic", "orjson", "msgspec", "jsonschema", "ray", "matplotlib"):
        try:
            pkgs[name] = version(name)
        except PackageNotFoundError:
            pkgs[name] = None
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    commit = _version(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gb": mem_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": pkgs,
        "jq": _version(["jq", "--version"]) if shutil.which("jq") else None,
        "grep": _version(["grep", "--version"]) if shutil.which("grep") else None,
        "load_avg_at_start": [round(x, 2) for x in load] if load else None,
        "git_commit": commit,
    }
