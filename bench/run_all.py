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
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
PEERS = [PY, str(BENCH / "peers.py")]
SAMPLES = REPO / "references" / "samples"
SHARED = Path(os.environ.get("XTUNER_RL_SHARED", REPO.parent / "shared")) / "data" / "xtuner-gsm8k-example"
INIT_LINE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
    ).encode()
    + b"\n"
)
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


# ------------------------------------------------------------------------------------------------------------
# Cold start
# ------------------------------------------------------------------------------------------------------------


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far, from /proc (NaN where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


LIST_LINES = (
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    + b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}\n'
)


def first_response_s(cmd: list[str], cwd: Path) -> dict[str, float]:
    """Spawn ``cmd``; time the answer to a raw ``initialize`` line, then to the first ``tools/list``.

    Returns wall and server-CPU seconds from spawn to each answer. The CPU figure is the server's own user+system
    time when the answer arrived: less disturbed by other load on the machine than wall time. ``tools/list`` is
    timed too because a server may defer loading its tools until a client first asks for them.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write(INIT_LINE)
        proc.stdin.flush()
        line = proc.stdout.readline()
        init_wall, init_cpu = time.perf_counter() - t0, _cpu_s(proc.pid)
        if b'"result"' not in line:
            raise RuntimeError(f"{cmd}: unexpected first response {line[:200]!r}")
        proc.stdin.write(LIST_LINES)
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{cmd}: closed before answering tools/list")
            if b'"id":2' in line:
                break
        return {
            "init_wall": init_wall,
            "init_cpu": init_cpu,
            "list_wall": time.perf_counter() - t0,
            "list_cpu": _cpu_s(proc.pid),
        }
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _importtime(cmd: list[str], cwd: Path) -> dict[str, tuple[int, int]]:
    """module -> (self us, cumulative us) from ``-X importtime`` of a server started with stdin at EOF."""
    out = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=cwd
    )
    mods: dict[str, tuple[int, int]] = {}
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            mods[m.group(4)] = (int(m.group(1)), int(m.group(2)))
    return mods


def _origin(module: str) -> str:
    """The file a module comes from, without importing it (top-level packages only outside our package)."""
    import importlib.util

    name = module if module.startswith("xtuner_rl_mcp") else module.split(".")[0]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return "?"
    origin = spec.origin if spec and spec.origin else "?"
    with contextlib.suppress(ValueError):
        origin = str(Path(origin).relative_to(REPO))
    return origin


#: Packages that must never be imported at start (see tests/test_startup.py).
HEAVY_MODULES = {"ray", "torch", "lmdeploy", "sglang", "vllm", "transformers", "xtuner", "jsonschema", "numpy"}


def startup_breakdown(runs: int) -> dict[str, Any]:
    """Median milliseconds per start-up phase (bench/startup_breakdown.py, one fresh process per run)."""
    samples = []
    for _ in range(runs):
        out = subprocess.run([PY, str(BENCH / "startup_breakdown.py")], capture_output=True, text=True, cwd=REPO)
        if out.returncode == 0:
            samples.append(json.loads(out.stdout))
    if not samples:
        return {}
    res: dict[str, Any] = {}
    for key, value in samples[0].items():
        if isinstance(value, dict):
            res[key] = {k: median([s[key][k] for s in samples]) for k in value}
            res[key + "_total"] = median([sum(s[key].values()) for s in samples])
        else:
            res[key] = median([s[key] for s in samples])
    return res


def bench_cold_start(runs: int, cwd: Path) -> dict[str, Any]:
    ours_cmd = [*server_cmd(), "serve", "--allow-root", str(cwd)]
    minimal_cmd = [PY, str(BENCH / "minimal_server.py")]
    log(f"cold start: {runs} runs each, interleaved")
    first_response_s(ours_cmd, cwd)  # warm the page cache and .pyc files for both
    first_response_s(minimal_cmd, cwd)
    ours_runs, minimal_runs = [], []
    for _ in range(runs):
        ours_runs.append(first_response_s(ours_cmd, cwd))
        minimal_runs.append(first_response_s(minimal_cmd, cwd))

    def med(rs: list[dict[str, float]], key: str) -> float:
        return median([r[key] for r in rs])

    ours, minimal = [r["init_wall"] for r in ours_runs], [r["init_wall"] for r in minimal_runs]
    ours_cpu, minimal_cpu = [r["init_cpu"] for r in ours_runs], [r["init_cpu"] for r in minimal_runs]
    ratio = median(ours) / median(minimal)
    list_ratio = med(ours_runs, "list_wall") / med(minimal_runs, "list_wall")
    # what ours imports beyond the minimal server, by self time (python -X importtime)
    ours_imp = _importtime([PY, "-m", "xtuner_rl_mcp", "serve", "--allow-root", str(cwd)], cwd)
    min_imp = _importtime(minimal_cmd, cwd)
    extra = {m: t for m, t in ours_imp.items() if m not in min_imp}
    top = sorted(extra.items(), key=lambda kv: kv[1][0], reverse=True)[:15]
    ours_own = sorted(
        ((m, t) for m, t in ours_imp.items() if m.startswith("xtuner_rl_mcp")), key=lambda kv: kv[1][1], reverse=True
    )[:10]
    breakdown = startup_breakdown(5)
    return {
        "runs": runs,
        "breakdown_ms": breakdown,
        "ours_cmd": " ".join(ours_cmd),
        "minimal_cmd": " ".join(minimal_cmd),
        "ours_s": ours,
        "minimal_s": minimal,
        "ours_median_s": median(ours),
        "minimal_median_s": median(minimal),
        "ratio": ratio,
        "ours_cpu_s": ours_cpu,
        "minimal_cpu_s": minimal_cpu,
        "ours_cpu_median_s": median(ours_cpu),
        "minimal_cpu_median_s": median(minimal_cpu),
        "cpu_ratio": median(ours_cpu) / median(minimal_cpu),
        "ours_list_median_s": med(ours_runs, "list_wall"),
        "minimal_list_median_s": med(minimal_runs, "list_wall"),
        "ours_list_cpu_median_s": med(ours_runs, "list_cpu"),
        "minimal_list_cpu_median_s": med(minimal_runs, "list_cpu"),
        "list_ratio": list_ratio,
        "list_cpu_ratio": med(ours_runs, "list_cpu") / med(minimal_runs, "list_cpu"),
        "target_ratio": 1.2,
        "within_target": ratio <= 1.2,
        "list_within_target": list_ratio <= 1.2,
        "extra_modules": len(extra),
        "heavy_imported": sorted(m for m in extra if m.split(".")[0] in HEAVY_MODULES),
        "extra_self_ms": sum(t[0] for t in extra.values()) / 1000,
        "top_extra_imports": [
            {"module": m, "self_ms": s / 1000, "cumulative_ms": c / 1000, "origin": _origin(m)} for m, (s, c) in top
        ],
        "our_modules_by_cumulative": [{"module": m, "cumulative_ms": c / 1000} for m, (_, c) in ours_own],
    }


# ------------------------------------------------------------------------------------------------------------
# Round-trip latency of the pure tools over stdio
# ------------------------------------------------------------------------------------------------------------

#: Reasonable arguments per tool; tools not listed get their required arguments from the schema (paths -> samples).
BENCH_ARGS: dict[str, dict[str, Any]] = {
    "lookup_reference": {"query": "what does max_staleness do"},
    "check_reward_data": {"path": str(SAMPLES / "gsm8k_train_sample.jsonl")},
    "diagnose_symptom": {"log_path": str(SAMPLES / "failed_run.log")},
    "inspect_config": {"path": str(SAMPLES / "rl_grpo_gsm8k_async_demo.py")},
    "build_rl_command": {"config": str(SAMPLES / "rl_grpo_gsm8k_async_demo.py"), "backend": "lmdeploy"},
    "choose_topology": {"nodes": 1, "gpus_per_node": 8, "params_b": 7},
}


def _args_from_schema(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if name in BENCH_ARGS and set(BENCH_ARGS[name]) <= set(schema.get("properties", {})):
        return dict(BENCH_ARGS[name])
    sys.path.insert(0, str(REPO))
    from tests.hostile_support import minimal_arguments, path_arguments

    args = minimal_arguments(schema)
    for arg, is_list in path_arguments(schema):
        if arg in args:
            sample = SAMPLES / ("failed_run.log" if "log" in arg else "gsm8k_train_sample.jsonl")
            args[arg] = [str(sample)] if is_list else str(sample)
    return args


async def _latency(calls: int, warmup: int, mode: str) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=server_cmd()[0],
        args=[*server_cmd()[1:], "serve", "--allow-root", str(REPO), "--allow-root", str(SHARED.parent)],
        cwd=str(REPO),
    )
    out: dict[str, Any] = {}
    async with Client(params, mode=mode) as client:
        tools = (await client.list_tools()).tools
        for tool in tools:
            if tool.annotations and tool.annotations.open_world_hint:
                out[tool.name] = {"skipped": "live probe (open world), not a pure tool"}
                continue
            args = _args_from_schema(tool.name, tool.input_schema)
            first = await client.call_tool(tool.name, args)
            times = []
            for i in range(warmup + calls):
                t0 = time.perf_counter()
                await client.call_tool(tool.name, args)
                if i >= warmup:
                    times.append((time.perf_counter() - t0) * 1000)
            out[tool.name] = {
                "args": args,
                "is_error": bool(first.is_error),
                "calls": calls,
                "p50_ms": percentile(times, 50),
                "p99_ms": percentile(times, 99),
                "mean_ms": statistics.fmean(times),
            }
    return out


def bench_latency(calls: int) -> dict[str, Any]:
    import anyio

    res: dict[str, Any] = {}
    for mode in ("auto", "legacy"):
        log(f"latency over stdio, mode={mode}: {calls} calls per tool")
        res[mode] = anyio.run(_latency, calls, 10, mode)
    return res


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


def measured(cmd: list[str]) -> dict[str, Any]:
    out = subprocess.run([*PEERS, "measure", "--", *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)


def _work_s(stdout: str) -> float | None:
    """The in-process seconds a workload reports on its last output line (``work_s``), if it does."""
    lines = stdout.strip().splitlines()
    with contextlib.suppress(ValueError, IndexError, TypeError, KeyError):
        return float(json.loads(lines[-1])["work_s"])
    return None


#: A measurement whose first run takes longer than this is not repeated (the jsonschema loop on 1 GB takes minutes).
SLOW_RUN_S = 90.0


def _repeat(cmd: list[str], runs: int) -> dict[str, Any]:
    samples = [measured(cmd)]
    while len(samples) < runs and samples[0]["wall_s"] < SLOW_RUN_S:
        samples.append(measured(cmd))
    runs = len(samples)
    ok = [s for s in samples if s["rc"] == 0]
    for s in ok:
        s["work_s"] = _work_s(s["stdout_tail"])
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


#: The row the data ratios are taken against: the tool's own ``run`` (both cores: byte ranges over worker processes).
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
            r = _repeat(cmd, runs)
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


# ------------------------------------------------------------------------------------------------------------
# diagnose_symptom vs grep
# ------------------------------------------------------------------------------------------------------------

HEALTHY_TEMPLATES = [
    "[XTuner][{ts}][INFO] [RLTrainer] step {step}/5000: producing batch (train_batch_size=64, prompt_repeat_k=5)",
    "(RolloutController pid={pid}) [XTuner][{ts}][INFO] rollout {rid}: 320 responses, mean length {n} tokens",
    "[XTuner][{ts}][INFO] [RLTrainer] step {step}: reward/mean={r:.3f} reward/std=0.412 kl=0.0031 entropy=0.84",
    "(TrainingWorker pid={pid}) [XTuner][{ts}][INFO] grad_norm={r:.4f} lr=1e-06 tokens/s={n}",
    "[XTuner][{ts}][INFO] Saving checkpoint to /ckpt/work_dirs/grpo_gsm8k/step_{step}",
    "(JudgerActor pid={pid}) [XTuner][{ts}][INFO] judged {n} samples, accuracy {r:.3f}",
    "(raylet) [{ts}] Resource usage: CPU 48/64, GPU 8/8, memory 412GiB/1TiB",
    "[XTuner][{ts}][DEBUG] weight sync to rollout servers finished in {r:.2f}s",
]


def build_log(path: Path, size_mb: int, error_lines: list[str]) -> dict[str, Any]:
    """Healthy training-log lines up to ``size_mb`` with the given error lines scattered through it."""
    target = size_mb * MB
    if path.exists() and abs(path.stat().st_size - target) < 256 * 1024:
        return {"bytes": path.stat().st_size, "errors_injected": len(error_lines)}
    rnd = random.Random(1234)
    # a fixed pool of rendered lines keeps generation fast; the scan still sees every byte
    pool = [
        t.format(
            ts=f"2026-11-28 {rnd.randrange(24):02d}:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}",
            step=rnd.randrange(5000),
            pid=rnd.randrange(10_000, 99_999),
            rid=rnd.randrange(1_000_000),
            n=rnd.randrange(100, 4000),
            r=rnd.random(),
        )
        + "\n"
        for t in HEALTHY_TEMPLATES
        for _ in range(500)
    ]
    rnd.shuffle(pool)
    chunk = "".join(pool).encode()
    n_chunks = max(1, target // len(chunk))
    at = {rnd.randrange(n_chunks): line for line in error_lines}
    with path.open("wb") as fh:
        for i in range(n_chunks):
            fh.write(chunk)
            if i in at:
                fh.write(at[i].encode() + b"\n")
    return {"bytes": path.stat().st_size, "errors_injected": len(at)}


_ERE_SUBST = [
    (r"(?:", "("),
    (r"\d", "[0-9]"),
    (r"\D", "[^0-9]"),
    (r"\s", "[[:space:]]"),
    (r"\S", "[^[:space:]]"),
    (r"\w", "[[:alnum:]_]"),
    (r"\x27", "'"),
    (r"\x22", '"'),
    ("*?", "*"),
    ("+?", "+"),
    ("??", "?"),
]


def to_ere(pattern: str) -> str | None:
    """A Python regex as POSIX ERE for GNU grep -E, or None where ERE has no equivalent (lookaround, backrefs...)."""
    if re.search(r"\(\?[=!<P]|\\[1-9]|\(\?[aiLmsux]", pattern):
        return None
    out = pattern
    for a, b in _ERE_SUBST:
        out = out.replace(a, b)
    # a character class with \d or \s inside ([\d.]) becomes a nested bracket; rewrite it as a POSIX class inside
    out = out.replace("[[0-9]", "[0-9").replace("[[[:space:]]", "[[:space:]")
    return None if "\\d" in out or "\\s" in out or "\\w" in out else out


def _catalog() -> list[Any]:
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    return list(load_catalog().entries)


def bench_diagnose(size_mb: int, runs: int, work: Path, tools: list[str]) -> dict[str, Any]:
    if "diagnose_symptom" not in tools:
        return {"skipped": "diagnose_symptom is not registered"}
    try:
        entries = _catalog()
    except Exception as exc:  # the catalog is another engineer's file; report, do not crash the bench
        return {"skipped": f"failure-mode catalog did not load: {type(exc).__name__}: {exc}"}
    patterns = [p for e in entries for p in e.patterns]
    errors = [e.examples[0] for e in entries[:: max(1, len(entries) // 6)]][:6]
    path = work / f"train_{size_mb}mb.log"
    log(f"diagnose: building {size_mb} MB log")
    meta = build_log(path, size_mb, errors)
    res: dict[str, Any] = {"size_mb": size_mb, **meta, "patterns": len(patterns), "peers": {}, "notes": []}
    from xtuner_rl_mcp.tools.diagnose_symptom import Params

    fields = Params.model_fields
    arg = next((a for a in ("log_path", "path", "log_file") if a in fields), None)
    if arg is None:
        return {"skipped": f"diagnose_symptom has no log path argument (fields: {sorted(fields)})"}
    args = json.dumps({arg: str(path)})
    res["peers"]["ours: diagnose_symptom run()"] = _repeat([*PEERS, "tool", "diagnose_symptom", str(work), args], runs)
    grep = shutil.which("grep")
    if grep and subprocess.run([grep, "-P", "x"], input=b"x", capture_output=True).returncode == 0:
        combined = "|".join(f"(?:{p})" for p in patterns)
        res["peers"]["grep -P (same patterns)"] = _repeat([grep, "-c", "-P", combined, str(path)], runs)
        res["grep_note"] = "one grep -P process with the catalog's regexes joined by |; counts matching lines"
    elif grep:
        res["notes"].append("grep without -P (PCRE): grep -P comparison skipped")
    if grep:
        ere = [e for e in (to_ere(p) for p in patterns) if e is not None]
        check = [e for e in ere if subprocess.run([grep, "-E", "-e", e], input=b"", capture_output=True).returncode < 2]
        pat_file = work / "patterns.ere"
        pat_file.write_text("\n".join(check) + "\n")
        res["peers"]["grep -E (ERE translation)"] = _repeat([grep, "-c", "-E", "-f", str(pat_file), str(path)], runs)
        res["grep_ere_note"] = (
            f"{len(check)} of {len(patterns)} catalog regexes translated to POSIX ERE (\\d -> [0-9], \\s -> "
            "[[:space:]], (?: -> (, lazy quantifiers made greedy); the rest (lookaround, backreferences) dropped"
        )
    else:
        res["notes"].append("grep not installed: comparison skipped")
    ours = res["peers"]["ours: diagnose_symptom run()"]["time_s"]
    for r in res["peers"].values():
        r["mb_per_s"] = meta["bytes"] / MB / r["time_s"] if r["time_s"] == r["time_s"] else None
    res["ratios_vs_ours"] = {n: r["time_s"] / ours for n, r in res["peers"].items() if ours}
    return res


# ------------------------------------------------------------------------------------------------------------
# probe_environment vs ray status
# ------------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def ray_head() -> Iterator[dict[str, Any]]:
    """A CPU-only local Ray head with 8 fake GPUs in its own temp dir and session; stopped by pid group."""
    ray_bin = Path(PY).with_name("ray")
    if not ray_bin.exists():
        raise FileNotFoundError("ray CLI not installed")
    tmp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_TMPDIR=tmp, TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0", RAY_prestart_worker_first_driver="0")
    gcs = _free_port()
    logf = Path(tmp) / "head.log"
    args = [
        str(ray_bin), "start", "--head", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.2",
        f"--port={gcs}", f"--ray-client-server-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.2", f"--dashboard-port={_free_port()}",
        "--num-cpus=2", "--num-gpus=8", "--memory=8000000000", "--object-store-memory=80000000", f"--temp-dir={tmp}/ray",
    ]  # fmt: skip
    with logf.open("w") as fh:
        proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 90
        while "Ray runtime started" not in logf.read_text():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("ray head did not start: " + logf.read_text()[-1500:])
            time.sleep(0.2)
        time.sleep(2)  # let the node register before the first probe
        yield {"address": f"127.0.0.2:{gcs}", "env": env}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _probe_arg() -> str | None:
    from xtuner_rl_mcp.tools.probe_environment import Params

    return next((a for a in ("ray_address", "address") if a in Params.model_fields), None)


def _timed(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, text = out.returncode, out.stdout
    except subprocess.TimeoutExpired:
        rc, text = None, ""
    return {"wall_s": time.perf_counter() - t0, "rc": rc, "stdout": text}


def _probe_args(address: str) -> dict[str, Any]:
    """Arguments that make probe_environment do what ``ray status`` does: the Ray check only."""
    from xtuner_rl_mcp.tools.probe_environment import Params

    args: dict[str, Any] = {"ray_address": address}
    if "checks" in Params.model_fields:
        args["checks"] = ["ray"]
    return args


def bench_probe(runs: int, tools: list[str]) -> dict[str, Any]:
    if "probe_environment" not in tools:
        return {"skipped": "probe_environment is not registered"}
    if _probe_arg() != "ray_address":
        return {"skipped": "probe_environment has no ray_address argument"}
    res: dict[str, Any] = {"runs": runs, "notes": []}
    call = [*server_cmd(), "call", "probe_environment", "--allow-root", str(REPO)]
    ray_bin = Path(PY).with_name("ray")

    def ours_cli(address: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return [_timed([*call, "--args", json.dumps(_probe_args(address))], env=env) for _ in range(runs)]

    def ours_inproc(address: str) -> list[dict[str, Any]]:
        cmd = [*PEERS, "tool", "probe_environment", str(REPO), json.dumps(_probe_args(address))]
        return [measured(cmd) for _ in range(runs)]

    dead = f"127.0.0.1:{_free_port()}"
    log("probe: dead address")
    dead_cli, dead_in = ours_cli(dead), ours_inproc(dead)
    res["dead_address"] = {
        "address": dead,
        "cli_wall_s": median([r["wall_s"] for r in dead_cli]),
        "run_s": median([w for r in dead_in if (w := _work_s(r["stdout_tail"])) is not None]),
        "summary": _summary(dead_cli[-1]["stdout"]),
    }
    if ray_bin.exists():
        status = _timed([str(ray_bin), "status", "--address", dead], timeout=120)
        res["dead_address"]["ray_status_wall_s"] = status["wall_s"]
        res["dead_address"]["ray_status_rc"] = status["rc"]
    else:
        res["notes"].append("ray CLI not installed: ray status comparison skipped")
        return res
    try:
        with ray_head() as head:
            log(f"probe: live head at {head['address']}")
            os.environ.update(head["env"])  # the measured children see the head's RAY_TMPDIR
            ours, inproc = ours_cli(head["address"], head["env"]), ours_inproc(head["address"])
            peer = [
                _timed([str(ray_bin), "status", "--address", head["address"]], env=head["env"]) for _ in range(runs)
            ]
            res["live"] = {
                "probe_environment_cli_s": median([r["wall_s"] for r in ours]),
                "probe_environment_run_s": median([w for r in inproc if (w := _work_s(r["stdout_tail"])) is not None]),
                "ray_status_cli_s": median([r["wall_s"] for r in peer]),
                "ray_status_rc": peer[-1]["rc"],
                "summary": _summary(ours[-1]["stdout"]),
            }
            res["live"]["ratio_ours_vs_ray_status"] = (
                res["live"]["probe_environment_cli_s"] / res["live"]["ray_status_cli_s"]
            )
    except (FileNotFoundError, RuntimeError) as exc:
        res["notes"].append(f"live Ray comparison skipped: {exc}")
    return res


def _summary(stdout: str) -> str:
    with contextlib.suppress(ValueError):
        obj = json.loads(stdout)
        return str(obj.get("summary") or obj.get("error", {}).get("message", ""))[:200]
    return stdout[:200]


# ------------------------------------------------------------------------------------------------------------
# Reliability: the hostile-input suite, run and counted
# ------------------------------------------------------------------------------------------------------------


def bench_reliability(fuzz_examples: int, out: Path) -> dict[str, Any]:
    """Run tests/test_hostile_*.py once and report what it covered and how it went."""
    import xml.etree.ElementTree as ET

    sys.path.insert(0, str(REPO))
    from tests.test_hostile_corpus import build_corpus
    from tests.test_hostile_jsonrpc import hostile_frames

    with tempfile.TemporaryDirectory(prefix="hostile-count-") as tmp:
        corpus = build_corpus(Path(tmp))
        corpus_names = sorted(corpus)
        for p in (corpus["permission_000"], corpus["file_in_unreadable_dir"].parent):
            p.chmod(0o700)
    frames = list(hostile_frames())
    junit = out / "hostile-junit.xml"
    env = dict(os.environ, XTUNER_RL_FUZZ_EXAMPLES=str(fuzz_examples))
    log(f"reliability: hostile suite, {fuzz_examples} fuzz examples per tool")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:randomly", f"--junitxml={junit}", *sorted(
            str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_hostile_*.py")
        )],
        cwd=REPO, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    per_file: dict[str, dict[str, int]] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname", "").split(".")[-1]
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "xfailed" if "xfail" in (child.get("type", "") + child.get("message", "")) else "skipped"
            per_file.setdefault(name, {}).setdefault(outcome, 0)
            per_file[name][outcome] += 1
    return {
        "command": f"XTUNER_RL_FUZZ_EXAMPLES={fuzz_examples} python -m pytest tests/test_hostile_*.py",
        "wall_s": wall,
        "returncode": proc.returncode,
        "summary_line": (proc.stdout.strip().splitlines() or [""])[-1],
        "per_file": per_file,
        "jsonrpc_frames": len(frames),
        "corpus_files": len(corpus_names),
        "corpus_members": corpus_names,
        "fuzz_examples_per_tool": fuzz_examples,
    }


# ------------------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------------------


def plot(data: dict[str, Any], path: Path) -> str | None:
    sizes = data.get("sizes") or []
    if not sizes:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no plot"
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(sizes[0]["peers"])
    for name in names:
        xs = [row["size_mb"] for row in sizes if name in row["peers"]]
        ax_t.plot(xs, [row["peers"][name]["time_s"] for row in sizes if name in row["peers"]], "o-", label=name)
        ax_m.plot(xs, [row["peers"][name]["peak_rss_mb"] for row in sizes if name in row["peers"]], "o-", label=name)
    for ax, ylabel in ((ax_t, "work time (s, median, log)"), (ax_m, "peak RSS (MB, median, linear from 0)")):
        ax.set_xscale("log")
        ax.set_xlabel("file size (MB)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")  # linear growth shows as a straight line of slope 1
    ax_m.set_ylim(bottom=0)  # a linear axis from 0, so that flat memory looks flat and growth is not exaggerated
    ax_t.set_title("check_reward_data: time vs size")
    ax_m.set_title("check_reward_data: peak memory vs size")
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _f(x: Any, nd: int = 2) -> str:
    return f"{x:.{nd}f}" if isinstance(x, (int, float)) and x == x else "—"


def _scaling_notes(sizes: list[dict[str, Any]]) -> list[str]:
    """How time and peak memory grow from the smallest to the largest file, per peer (computed, not asserted)."""
    if len(sizes) < 2:
        return []
    first, last = sizes[0], sizes[-1]
    notes = [
        f"From {first['size_mb']} MB to {last['size_mb']} MB ({last['size_mb'] / first['size_mb']:.0f}x the data):"
    ]
    for name in first["peers"]:
        a, b = first["peers"][name], last["peers"].get(name)
        if not b or a["time_s"] != a["time_s"] or b["time_s"] != b["time_s"]:
            continue
        per_m_lines = (b["peak_rss_mb"] - a["peak_rss_mb"]) / max(1, (last["lines"] - first["lines"]) / 1e6)
        notes.append(
            f"- {name}: time x{b['time_s'] / a['time_s']:.0f}, peak RSS {a['peak_rss_mb']:.0f} → "
            f"{b['peak_rss_mb']:.0f} MB ({per_m_lines:+.1f} MB per million lines)"
        )
    return [*notes, ""]


#: The issue's targets for check_reward_data: (peer row, minimum peer ÷ ours work-time ratio).
DATA_TARGETS = [
    ("jq (ground-truth check only)", 3.0),
    ("json.loads + jsonschema loop", 15.0),
    ("orjson.loads loop", 1.0),
]
DATA_RSS_TARGET_MB = 100.0


def _data_targets(row: dict[str, Any]) -> list[str]:
    """The targets against the largest file's measured ratios, stated as met or not (computed, not asserted)."""
    parts = []
    for name, target in DATA_TARGETS:
        ratio = row["ratios_vs_ours"].get(name)
        if ratio is None:
            parts.append(f"{name}: not measured")
        else:
            parts.append(f"{name} {ratio:.2f}× (target ≥ {target:g}×: {'met' if ratio >= target else 'NOT met'})")
    rss = row["peers"][OURS_DATA]["peak_rss_mb"]
    parts.append(
        f"peak RSS {rss:.0f} MB (target < {DATA_RSS_TARGET_MB:g} MB: {'met' if rss < DATA_RSS_TARGET_MB else 'NOT met'})"
    )
    return [f"**Targets at {row['size_mb']} MB, {OURS_DATA}:** " + "; ".join(parts) + "."]


def render_markdown(rep: dict[str, Any]) -> str:
    m = rep["machine"]
    out = [
        "# xtuner-rl-mcp benchmark report",
        "",
        f"Reproduce: `{rep['command']}` (from the repository root, in the project venv).",
        "",
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['ram_gb']} GB RAM, {m['os']}, Python {m['python']}; "
        f"load average at start {m['load_avg_at_start']}. Date {m['date_utc']}, commit {m['git_commit']}.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v) + f"; {m['jq']}; {m['grep']}.",
        "",
        "All figures are medians of several runs in one invocation; ratios are peer ÷ ours unless stated.",
        "",
    ]
    cs = rep.get("cold_start")
    if cs:
        out += [
            "## Cold start (spawn → first response to `initialize` over stdio)",
            "",
            "Median of interleaved runs; wall = spawn to the answer line, CPU = the server's user+system time then.",
            "",
            "| Server | `initialize` wall (ms) | `initialize` CPU (ms) | first `tools/list` wall (ms) "
            "| first `tools/list` CPU (ms) | Runs |",
            "|---|---|---|---|---|---|",
            f"| `xtuner-rl-mcp serve` | {_f(cs['ours_median_s'] * 1000, 0)} | {_f(cs['ours_cpu_median_s'] * 1000, 0)} "
            f"| {_f(cs['ours_list_median_s'] * 1000, 0)} | {_f(cs['ours_list_cpu_median_s'] * 1000, 0)} "
            f"| {cs['runs']} |",
            f"| minimal one-tool `MCPServer` (`bench/minimal_server.py`) | {_f(cs['minimal_median_s'] * 1000, 0)} "
            f"| {_f(cs['minimal_cpu_median_s'] * 1000, 0)} | {_f(cs['minimal_list_median_s'] * 1000, 0)} "
            f"| {_f(cs['minimal_list_cpu_median_s'] * 1000, 0)} | {cs['runs']} |",
            "",
            f"**Ratio ours ÷ minimal, spawn → `initialize` answered: {cs['ratio']:.2f} wall, {cs['cpu_ratio']:.2f} CPU** "
            f"(target ≤ {cs['target_ratio']}: {'met' if cs['within_target'] else 'NOT met'}). "
            f"Spawn → first `tools/list` answered: {cs['list_ratio']:.2f} wall, {cs['list_cpu_ratio']:.2f} CPU "
            f"({'within' if cs['list_within_target'] else 'above'} {cs['target_ratio']}): `serve` registers its tools "
            "on the first request that needs them, so that cost moves from start-up to the first `tools/list`.",
            "",
        ]
        b = cs.get("breakdown_ms") or {}
        if b:
            tools_i = b.get("import_tool_modules_ms", {})
            tools_r = b.get("register_tool_ms", {})
            out += [
                "Where the start-up goes (`bench/startup_breakdown.py`, median of 5 fresh processes, ms):",
                "",
                "| Phase | ms |",
                "|---|---|",
                f"| import the MCP SDK (`MCPServer`; the minimal server pays this too) | {_f(b.get('import_sdk_ms'), 0)} |",
                f"| import our server modules (cli, app, registry, security, common) "
                f"| {_f(b.get('import_server_modules_ms'), 0)} |",
                f"| import the {len(tools_i)} tool modules (pydantic models built at class definition) "
                f"| {_f(b.get('import_tool_modules_ms_total'), 0)} |",
                f"| register the tools (the SDK generates input/output JSON Schemas) "
                f"| {_f(b.get('register_tool_ms_total'), 0)} |",
                f"| register resources and prompts | {_f(b.get('register_resources_prompts_ms'), 0)} |",
                "",
                "Per tool, import + register (ms): "
                + ", ".join(
                    f"`{n}` {_f(tools_i[n], 0)} + {_f(tools_r.get(n), 0)}"
                    for n in sorted(tools_i, key=lambda n: -(tools_i[n] + tools_r.get(n, 0)))
                )
                + ".",
                "",
            ]
        out += [
            f"`-X importtime` sees {cs['extra_modules']} modules ours imports beyond the minimal server "
            f"({_f(cs['extra_self_ms'], 0)} ms self); it does not time the tool modules themselves, which the "
            "registry loads with `importlib.import_module`. Heavy packages among them: "
            + (", ".join(f"`{m}`" for m in cs["heavy_imported"]) or "none")
            + ". The largest:",
            "",
            "| Module | Self (ms) | Cumulative (ms) | From |",
            "|---|---|---|---|",
            *[
                f"| `{t['module']}` | {_f(t['self_ms'], 1)} | {_f(t['cumulative_ms'], 1)} | `{t['origin']}` |"
                for t in cs["top_extra_imports"][:10]
            ],
            "",
        ]
    lat = rep.get("latency")
    if lat:
        out += [
            "## Tool round trip over stdio (real MCP client, after 10 warm-up calls)",
            "",
            "| Tool | p50 auto (ms) | p99 auto (ms) | p50 legacy (ms) | p99 legacy (ms) | Answer |",
            "|---|---|---|---|---|---|",
        ]
        for name, a in lat.get("auto", {}).items():
            b = lat.get("legacy", {}).get(name, {})
            if "skipped" in a:
                out.append(f"| `{name}` | — | — | — | — | skipped: {a['skipped']} |")
                continue
            out.append(
                f"| `{name}` | {_f(a['p50_ms'])} | {_f(a['p99_ms'])} | {_f(b.get('p50_ms'))} | {_f(b.get('p99_ms'))} "
                f"| {'tool error' if a['is_error'] else 'result'} |"
            )
        out += [f"\n{next(iter(lat['auto'].values()), {}).get('calls', '?')} timed calls per tool and mode.", ""]
    data = rep.get("data")
    if data:
        out += ["## check_reward_data: throughput and peak memory", ""]
        if "skipped" in data:
            out += [f"Skipped: {data['skipped']}", ""]
        else:
            out += [
                "Files built by repeating the real XTuner GSM8K example lines. Each measurement is a fresh process;",
                "peak RSS is the whole process tree's (worker processes summed, sampled every 50 ms). Work = the time the",
                "workload itself reports (imports included, interpreter start excluded; jq: whole process).",
                "",
                "| Size | Lines | Peer | Work (s) | Process (s) | MB/s | Peak RSS (MB) | Work ÷ ours | Runs |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for row in data["sizes"]:
                for name, r in row["peers"].items():
                    out.append(
                        f"| {row['size_mb']} MB | {row['lines']} | {name} | {_f(r['time_s'])} | {_f(r['wall_s'])} "
                        f"| {_f(r['mb_per_s'], 0)} "
                        f"| {_f(r['peak_rss_mb'], 0)} | {_f(row['ratios_vs_ours'].get(name))} | {r['runs']} |"
                    )
                e = row["end_to_end_cli"]
                out.append(
                    f"| {row['size_mb']} MB | | `xtuner-rl-mcp call` end to end (1 run) | | {_f(e['wall_s'])} | | "
                    f"{_f(e['peak_rss_mb'], 0)} | | 1 |"
                )
            out += ["", *_data_targets(data["sizes"][-1]), "", "![time and memory against size](scaling.png)", ""]
            out += _scaling_notes(data["sizes"])
            out += [f"Note: {n}" for n in data.get("notes", [])] + [""]
    diag = rep.get("diagnose")
    if diag:
        out += ["## diagnose_symptom on a large log vs grep", ""]
        if "skipped" in diag:
            out += [f"Skipped: {diag['skipped']}", ""]
        else:
            out += [
                f"A {_f(diag['bytes'] / MB, 0)} MB generated log (healthy trainer, rollout, judger and raylet lines) with "
                f"{diag['errors_injected']} catalog example errors; {diag['patterns']} catalog patterns.",
                "",
                "| Peer | Work (s) | Process (s) | MB/s | Peak RSS (MB) | Work ÷ ours |",
                "|---|---|---|---|---|---|",
                *[
                    f"| {n} | {_f(r['time_s'])} | {_f(r['wall_s'])} | {_f(r['mb_per_s'], 0)} | {_f(r['peak_rss_mb'], 0)} "
                    f"| {_f(diag['ratios_vs_ours'].get(n))} |"
                    for n, r in diag["peers"].items()
                ],
                "",
                *[f"Note: {n}" for n in diag.get("notes", [])],
                *[f"Note: {diag[k]}." for k in ("grep_note", "grep_ere_note") if diag.get(k)],
                "",
            ]
    probe = rep.get("probe")
    if probe:
        out += ["## probe_environment vs `ray status`", ""]
        if "skipped" in probe:
            out += [f"Skipped: {probe['skipped']}", ""]
        else:
            live = probe.get("live")
            if live:
                out += [
                    'Against a live local Ray head (1 node, 8 fake GPUs); probe_environment with `checks=["ray"]`.',
                    "",
                    "| Command | Median (s) |",
                    "|---|---|",
                    f"| `xtuner-rl-mcp call probe_environment` (process start included) "
                    f"| {_f(live['probe_environment_cli_s'])} |",
                    f"| `ray status --address` (process start included) | {_f(live['ray_status_cli_s'])} |",
                    f"| probe_environment `run()` in process (no interpreter start) "
                    f"| {_f(live['probe_environment_run_s'])} |",
                    "",
                    f"Ratio ours ÷ ray status (CLI vs CLI): {_f(live['ratio_ours_vs_ray_status'])}. "
                    f"Summary: {live['summary']}",
                    "",
                ]
            d = probe["dead_address"]
            out += [
                f"Dead address `{d['address']}`: probe_environment answered in {_f(d['cli_wall_s'])} s "
                f"(CLI, median; {_f(d['run_s'])} s in process); `ray status` took {_f(d.get('ray_status_wall_s'))} s "
                f"(rc {d.get('ray_status_rc')}). "
                f"Summary: {d['summary']}",
                "",
                *[f"Note: {n}" for n in probe.get("notes", [])],
                "",
            ]
    rel = rep.get("reliability")
    if rel:
        out += [
            "## Reliability: the hostile-input suite",
            "",
            f"`{rel['command']}` → **{rel['summary_line']}** in {_f(rel['wall_s'], 0)} s (exit {rel['returncode']}).",
            "",
            "| Test file | Passed | Failed | Skipped | Xfailed |",
            "|---|---|---|---|---|",
            *[
                f"| `{name}` | {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('skipped', 0)} | {c.get('xfailed', 0)} |"
                for name, c in sorted(rel["per_file"].items())
            ],
            "",
            f"Covered: {rel['jsonrpc_frames']} malformed JSON-RPC frames sent to one live `serve` process over stdio "
            f"(each followed by a valid request that must be answered); {rel['corpus_files']} corrupted or adversarial "
            f"files fed to every file-reading tool; {rel['fuzz_examples_per_tool']} property-based argument sets per "
            "registered tool through a real MCP client; every path argument of every tool against traversal, symlink "
            "escapes, /proc and devices; the HTTP transport's Host (421), Origin (403) and bearer-token (401) checks "
            "over a real socket.",
            "",
        ]
    for note in rep.get("notes", []):
        out.append(f"Note: {note}")
    return "\n".join(out).rstrip() + "\n"


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
