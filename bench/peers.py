"""What each measured child process runs: our scans and the peer loops they are compared with.

``python bench/peers.py measure -- CMD...`` runs CMD and prints ``{"wall_s", "peak_rss_mb", "rc", ...}``: wall time
and the peak RSS of CMD's whole process tree -- the larger of the biggest single process (``RUSAGE_CHILDREN`` of this
fresh wrapper, so earlier runs never leak into it) and the tree's summed RSS sampled from /proc every 50 ms (what
worker processes hold together).
The other subcommands are the workloads: ``scan`` (our scanner), ``tool`` (a tool's ``run``), ``jsonschema``,
``orjson``.
Every workload prints one JSON line with what it found, so the runner can check that peers agree.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: The part of XTuner's data contract the peers check: an object whose reward_model.ground_truth is a string
#: (judgers read reward_model["ground_truth"], xtuner/v1/rl/judger/native.py:135) and whose prompt is a message list.
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["prompt", "reward_model"],
    "properties": {
        "prompt": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object", "required": ["role", "content"]},
        },
        "reward_model": {
            "type": "object",
            "required": ["ground_truth"],
            "properties": {"ground_truth": {"type": "string"}},
        },
    },
}


PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _tree_rss_kb(root: int) -> int:
    """Summed resident memory (kB) of ``root`` and all its descendants right now, read from /proc."""
    parents: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        pid = int(entry)
        parents.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * PAGE_KB
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(parents.get(pid, ()))
    return total


def measure(cmd: list[str], sample_s: float = 0.05) -> dict[str, Any]:
    """Run ``cmd``; its wall time, the largest single process's peak RSS (rusage) and the peak of the whole
    process tree's summed RSS (sampled from /proc every ``sample_s``: what several worker processes use together).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_tree = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(sample_s):
            peak_tree[0] = max(peak_tree[0], _tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kilobytes on Linux: the largest process
    return {
        "wall_s": wall,
        "peak_rss_mb": max(rss_kb, peak_tree[0]) / 1024,
        "peak_process_rss_mb": rss_kb / 1024,
        "rc": proc.returncode,
        "stdout_tail": out.decode("utf-8", "replace")[-2000:],
        "stderr_tail": err.decode("utf-8", "replace")[-1000:],
    }


def jsonschema_loop(path: Path) -> dict[str, Any]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(RECORD_SCHEMA)
    lines = bad = 0
    with path.open("rb") as fh:
        for raw in fh:
            lines += 1
            try:
                obj = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if not validator.is_valid(obj):
                bad += 1
    return {"lines": lines, "bad": bad}


def orjson_loop(path: Path) -> dict[str, Any]:
    import orjson

    lines = bad = 0
    with path.open("rb") as fh:
        for raw in fh:
            lines += 1
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                bad += 1
                continue
            rm = obj.get("reward_model") if isinstance(obj, dict) else None
            if not (isinstance(rm, dict) and isinstance(rm.get("ground_truth"), str)):
                bad += 1
    return {"lines": lines, "bad": bad}


def _tool_run(tool: str, arguments: dict[str, Any], root: Path) -> dict[str, Any]:
    """Run a tool's own ``run`` in this process exactly as the server would, minus MCP."""
    import importlib

    from xtuner_rl_mcp.core import PathPolicy, RunContext

    module = importlib.import_module(f"xtuner_rl_mcp.tools.{tool}")
    spec = module.SPEC
    params = spec.params.model_validate(arguments)
    result = spec.run(params, RunContext(paths=PathPolicy.from_strings([root])))
    return result.model_dump(mode="json")


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "measure":
        cmd = argv[argv.index("--") + 1 :]
        print(json.dumps(measure(cmd)))
        return 0
    t0 = time.perf_counter()  # imports of the workload's modules count as work; interpreter start does not
    if mode == "jsonschema":
        out = jsonschema_loop(Path(argv[1]))
    elif mode == "orjson":
        out = orjson_loop(Path(argv[1]))
    elif mode == "scan":  # the data engineer's public scan function, single process
        from xtuner_rl_mcp.scanners.jsonl import scan_file

        res = scan_file(argv[1])
        out = {"lines": res.lines, "bad": res.invalid, "error": res.error}
    elif mode == "tool":  # tool NAME ROOT ARGS_JSON
        result = _tool_run(argv[1], json.loads(argv[3]), Path(argv[2]))
        out = {"summary": str(result.get("summary", ""))[:300]}
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    out["work_s"] = time.perf_counter() - t0
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
