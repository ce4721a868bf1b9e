"""What each measured child process runs: our scans and the peer loops they are compared with.

``python bench/peers.py measure -- CMD...`` runs CMD and prints ``{"wall_s", "peak_rss_mb", "rc"}``: wall time and
the peak RSS of CMD's process tree (``RUSAGE_CHILDREN`` of this fresh wrapper, so earlier runs never leak into it).
The other subcommands are the workloads: ``scan`` (our scanner), ``tool`` (a tool's ``run``), ``jsonschema``,
``orjson``.
Every workload prints one JSON line with what it found, so the runner can check that peers agree.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
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


def measure(cmd: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - t0
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kilobytes on Linux
    return {
        "wall_s": wall,
        "peak_rss_mb": rss_kb / 1024,
        "rc": proc.returncode,
        "stdout_tail": proc.stdout.decode("utf-8", "replace")[-2000:],
        "stderr_tail": proc.stderr.decode("utf-8", "replace")[-1000:],
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

    from xtuner_rl_mcp.tools.common import PathPolicy, RunContext

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
        from xtuner_rl_mcp.tools.jsonl_scan import scan_file

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
