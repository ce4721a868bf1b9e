"""One command for every benchmark: ``python bench/run_all.py [--quick] [--sizes 10,100,1000] [--out bench/out]``.

Writes ``report.md``, ``report.json`` and ``scaling.png`` to ``--out`` and prints a summary. Every comparison runs
side by side in the same invocation and reports medians of several runs plus the ratio to its peer:

* cold start: spawn -> first response to a raw ``initialize`` line over stdio, ours vs ``bench/minimal_server.py``,
  with a ``-X importtime`` diff of what ours imports beyond the minimal server;
* round-trip latency p50/p99 of every pure tool over stdio through the SDK's MCP client;
* check_reward_data time and peak RSS on generated GSM8K files vs jq, a json.loads+jsonschema loop and an orjson loop;
* diagnose_symptom on a large generated log vs ``grep -P`` with the catalog's patterns;
* probe_environment against a live local Ray head vs ``ray status``, and on a dead address.

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


def first_response_s(cmd: list[str], cwd: Path) -> float:
    """Spawn ``cmd``, send one raw initialize line, return the seconds until its response line arrives."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write(INIT_LINE)
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - t0
        if b'"result"' not in line:
            raise RuntimeError(f"{cmd}: unexpected first response {line[:200]!r}")
        return elapsed
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
        origin = str(Path(origin).relative_to(REPO.parent))
    return origin


def bench_cold_start(runs: int, cwd: Path) -> dict[str, Any]:
    ours_cmd = [*server_cmd(), "serve", "--allow-root", str(cwd)]
    minimal_cmd = [PY, str(BENCH / "minimal_server.py")]
    log(f"cold start: {runs} runs each, interleaved")
    first_response_s(ours_cmd, cwd)  # warm the page cache and .pyc files for both
    first_response_s(minimal_cmd, cwd)
    ours, minimal = [], []
    for _ in range(runs):
        ours.append(first_response_s(ours_cmd, cwd))
        minimal.append(first_response_s(minimal_cmd, cwd))
    ratio = median(ours) / median(minimal)
    # what ours imports beyond the minimal server, by self time (python -X importtime)
    ours_imp = _importtime([PY, "-m", "xtuner_rl_mcp", "serve", "--allow-root", str(cwd)], cwd)
    min_imp = _importtime(minimal_cmd, cwd)
    extra = {m: t for m, t in ours_imp.items() if m not in min_imp}
    top = sorted(extra.items(), key=lambda kv: kv[1][0], reverse=True)[:15]
    ours_own = sorted(
        ((m, t) for m, t in ours_imp.items() if m.startswith("xtuner_rl_mcp")), key=lambda kv: kv[1][1], reverse=True
    )[:10]
    return {
        "runs": runs,
        "ours_cmd": " ".join(ours_cmd),
        "minimal_cmd": " ".join(minimal_cmd),
        "ours_s": ours,
        "minimal_s": minimal,
        "ours_median_s": median(ours),
        "minimal_median_s": median(minimal),
        "ratio": ratio,
        "target_ratio": 1.2,
        "within_target": ratio <= 1.2,
        "extra_modules": len(extra),
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
    "lookup_reference": {"query": "ground_truth"},
    "check_reward_data": {"path": str(SAMPLES / "gsm8k_train_sample.jsonl")},
    "diagnose_symptom": {"log_path": str(SAMPLES / "failed_run.log")},
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


def _repeat(cmd: list[str], runs: int) -> dict[str, Any]:
    samples = [measured(cmd) for _ in range(runs)]
    ok = [s for s in samples if s["rc"] == 0]
    res: dict[str, Any] = {
        "runs": runs,
        "failed_runs": runs - len(ok),
        "wall_s": median([s["wall_s"] for s in ok]),
        "peak_rss_mb": median([s["peak_rss_mb"] for s in ok]),
        "all_wall_s": [s["wall_s"] for s in samples],
        "output": (ok[-1] if ok else samples[-1])["stdout_tail"].strip()[-300:],
    }
    if not ok:
        res["error"] = samples[-1]["stderr_tail"][-500:]
    return res


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
            "ours: jsonl_scan.scan_file": [*PEERS, "scan", str(path)],
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
            r["mb_per_s"] = meta["bytes"] / MB / r["wall_s"] if r["wall_s"] == r["wall_s"] else None
            row["peers"][name] = r
        log(f"data: {size} MB, end to end through `xtuner-rl-mcp call` (1 run)")
        e2e = measured([*server_cmd(), "call", "check_reward_data", "--args", args, "--allow-root", str(work)])
        row["end_to_end_cli"] = {"wall_s": e2e["wall_s"], "peak_rss_mb": e2e["peak_rss_mb"], "rc": e2e["rc"]}
        ours = row["peers"]["ours: jsonl_scan.scan_file"]["wall_s"]
        row["ratios_vs_ours"] = {
            name: r["wall_s"] / ours for name, r in row["peers"].items() if r["wall_s"] == r["wall_s"] and ours
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


def _catalog() -> list[Any]:
    from xtuner_rl_mcp.references.catalog import load_catalog

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
        res["notes"].append("grep without -P (PCRE): comparison skipped")
    else:
        res["notes"].append("grep not installed: comparison skipped")
    ours = res["peers"]["ours: diagnose_symptom run()"]["wall_s"]
    for r in res["peers"].values():
        r["mb_per_s"] = meta["bytes"] / MB / r["wall_s"] if r["wall_s"] == r["wall_s"] else None
    res["ratios_vs_ours"] = {n: r["wall_s"] / ours for n, r in res["peers"].items() if ours}
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


def bench_probe(runs: int, tools: list[str]) -> dict[str, Any]:
    if "probe_environment" not in tools:
        return {"skipped": "probe_environment is not registered"}
    arg = _probe_arg()
    if arg is None:
        return {"skipped": "probe_environment has no Ray address argument"}
    res: dict[str, Any] = {"runs": runs, "notes": []}
    call = [*server_cmd(), "call", "probe_environment", "--allow-root", str(REPO)]
    dead = f"127.0.0.1:{_free_port()}"
    log("probe: dead address")
    dead_runs = [_timed([*call, "--args", json.dumps({arg: dead})]) for _ in range(runs)]
    res["dead_address"] = {
        "address": dead,
        "cli_wall_s": median([r["wall_s"] for r in dead_runs]),
        "summary": _summary(dead_runs[-1]["stdout"]),
    }
    ray_bin = Path(PY).with_name("ray")
    if ray_bin.exists():
        dead_status = [_timed([str(ray_bin), "status", "--address", dead], timeout=120) for _ in range(1)]
        res["dead_address"]["ray_status_wall_s"] = dead_status[0]["wall_s"]
        res["dead_address"]["ray_status_rc"] = dead_status[0]["rc"]
    try:
        with ray_head() as head:
            log(f"probe: live head at {head['address']}")
            ours = [_timed([*call, "--args", json.dumps({arg: head["address"]})], env=head["env"]) for _ in range(runs)]
            peer = [
                _timed([str(ray_bin), "status", "--address", head["address"]], env=head["env"]) for _ in range(runs)
            ]
            res["live"] = {
                "probe_environment_cli_s": median([r["wall_s"] for r in ours]),
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
        ax_t.plot(xs, [row["peers"][name]["wall_s"] for row in sizes if name in row["peers"]], "o-", label=name)
        ax_m.plot(xs, [row["peers"][name]["peak_rss_mb"] for row in sizes if name in row["peers"]], "o-", label=name)
    for ax, ylabel in ((ax_t, "wall time (s, median)"), (ax_m, "peak RSS (MB, median)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("file size (MB)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_title("check_reward_data: time vs size")
    ax_m.set_title("check_reward_data: peak memory vs size")
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _f(x: Any, nd: int = 2) -> str:
    return f"{x:.{nd}f}" if isinstance(x, (int, float)) and x == x else "—"


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
            "| Server | Median (ms) | Runs |",
            "|---|---|---|",
            f"| `xtuner-rl-mcp serve` | {_f(cs['ours_median_s'] * 1000, 0)} | {cs['runs']} |",
            f"| minimal one-tool `MCPServer` (`bench/minimal_server.py`) | {_f(cs['minimal_median_s'] * 1000, 0)} | {cs['runs']} |",
            "",
            f"**Ratio ours ÷ minimal: {cs['ratio']:.2f}** (target ≤ {cs['target_ratio']}: "
            f"{'met' if cs['within_target'] else 'NOT met'}). Ours imports {cs['extra_modules']} modules the minimal "
            f"server does not ({_f(cs['extra_self_ms'], 0)} ms self time under `-X importtime`); the largest:",
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
                "peak RSS is the measured process tree's (`RUSAGE_CHILDREN` of a fresh wrapper).",
                "",
                "| Size | Lines | Peer | Time (s) | MB/s | Peak RSS (MB) | Time ÷ ours |",
                "|---|---|---|---|---|---|---|",
            ]
            for row in data["sizes"]:
                for name, r in row["peers"].items():
                    out.append(
                        f"| {row['size_mb']} MB | {row['lines']} | {name} | {_f(r['wall_s'])} | {_f(r['mb_per_s'], 0)} "
                        f"| {_f(r['peak_rss_mb'], 0)} | {_f(row['ratios_vs_ours'].get(name))} |"
                    )
                e = row["end_to_end_cli"]
                out.append(
                    f"| {row['size_mb']} MB | | `xtuner-rl-mcp call` end to end (1 run) | {_f(e['wall_s'])} | | "
                    f"{_f(e['peak_rss_mb'], 0)} | |"
                )
            out += ["", "![time and memory against size](scaling.png)", ""]
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
                "| Peer | Time (s) | MB/s | Peak RSS (MB) | Time ÷ ours |",
                "|---|---|---|---|---|",
                *[
                    f"| {n} | {_f(r['wall_s'])} | {_f(r['mb_per_s'], 0)} | {_f(r['peak_rss_mb'], 0)} "
                    f"| {_f(diag['ratios_vs_ours'].get(n))} |"
                    for n, r in diag["peers"].items()
                ],
                "",
                *[f"Note: {n}" for n in diag.get("notes", [])],
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
                    "| Against a live local head (CLI, process start included) | Median (s) |",
                    "|---|---|",
                    f"| `xtuner-rl-mcp call probe_environment` | {_f(live['probe_environment_cli_s'])} |",
                    f"| `ray status --address` | {_f(live['ray_status_cli_s'])} |",
                    "",
                    f"Ratio ours ÷ ray status: {_f(live['ratio_ours_vs_ray_status'])}. Summary: {live['summary']}",
                    "",
                ]
            d = probe["dead_address"]
            out += [
                f"Dead address `{d['address']}`: probe_environment answered in {_f(d['cli_wall_s'])} s "
                f"(CLI, median); `ray status` took {_f(d.get('ray_status_wall_s'))} s (rc {d.get('ray_status_rc')}). "
                f"Summary: {d['summary']}",
                "",
                *[f"Note: {n}" for n in probe.get("notes", [])],
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
        "--only", default="cold,latency,data,diagnose,probe", help="comma-separated sections to run (default all)"
    )
    ap.add_argument("--copy-results", action="store_true", help="also copy the report to bench/results/")
    args = ap.parse_args(argv)

    sizes = [int(s) for s in (args.sizes or ("1,10" if args.quick else "10,100,1000")).split(",") if s.strip()]
    runs = args.runs or (3 if args.quick else 5)
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
