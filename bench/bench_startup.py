"""Server start-up and round trips over stdio: spawn -> first answer to ``initialize`` and ``tools/list`` vs a
minimal one-tool server (with a per-phase breakdown and an importtime diff), and p50/p99 latency per pure tool."""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import BENCH, PY, REPO, SAMPLES, SHARED, log, median, percentile, server_cmd

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
