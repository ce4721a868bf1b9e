"""``xtuner-rl-mcp demo``: the planning scenario end to end, through a real MCP client over stdio.

Scenario: "launch GRPO on GSM8K on 8 GPUs with LMDeploy" — look up a fact, choose the topology, check the data
(a clean file and a broken one), inspect the config, write the launch script, run preflight, diagnose a failed
run's log and a report written in words, and inspect a finished run whose reward stays at 0. All inputs are the sample files shipped in ``references/samples``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

Args = dict[str, Any]


def samples_dir() -> Path:
    return Path(str(resources.files("xtuner_rl_mcp.references") / "samples"))


@dataclass(frozen=True)
class Step:
    title: str
    tool: str
    arguments: Callable[[Path], Args]


PLANNED_ENV = {
    "WORK_DIR": "/tmp/xtuner-rl-demo/work_dirs/qwen3-8b-gsm8k",
    "MODEL_PATH": "/models/Qwen3-8B",
    "DATA_PATH": "{samples}/gsm8k_train_sample.jsonl",
    "EVAL_DATA_PATH": "{samples}/gsm8k_eval_sample.jsonl",
}


def _env(s: Path) -> dict[str, str]:
    return {k: v.format(samples=s) for k, v in PLANNED_ENV.items()}


STEPS: tuple[Step, ...] = (
    Step(
        "Ask the knowledge base",
        "lookup_reference",
        lambda s: {"query": "which environment variable selects the LMDeploy rollout backend", "limit": 3},
    ),
    Step(
        "Choose the topology for 1 node x 8 GPUs, 8B model, long-tail responses",
        "choose_topology",
        lambda s: {
            "nodes": 1,
            "gpus_per_node": 8,
            "cpus_per_node": 128,
            "memory_gib_per_node": 1024,
            "params_b": 8,
            "max_prompt_len": 512,
            "max_response_len": 1024,
            "prompt_repeat_k": 5,
            "train_batch_size": 64,
            "priority": "throughput",
            "long_tail_responses": True,
            "backend": "lmdeploy",
        },
    ),
    Step(
        "Check the training data",
        "check_reward_data",
        lambda s: {"path": str(s / "gsm8k_train_sample.jsonl"), "role": "train", "judger": "gsm8k"},
    ),
    Step(
        "Check a broken copy of the data",
        "check_reward_data",
        lambda s: {"path": str(s / "gsm8k_train_broken.jsonl"), "role": "train", "judger": "gsm8k"},
    ),
    Step(
        "Inspect the RL config statically",
        "inspect_config",
        lambda s: {"path": str(s / "rl_grpo_gsm8k_async_demo.py"), "env": _env(s)},
    ),
    Step(
        "Write the launch script",
        "build_rl_command",
        lambda s: {
            "config": str(s / "rl_grpo_gsm8k_async_demo.py"),
            "backend": "lmdeploy",
            "model_path": _env(s)["MODEL_PATH"],
            "data_path": _env(s)["DATA_PATH"],
            "eval_data_path": _env(s)["EVAL_DATA_PATH"],
            "work_dir": _env(s)["WORK_DIR"],
            "nodes": 1,
            "gpus_per_node": 8,
        },
    ),
    Step(
        "Preflight with the broken data (expect no_go: the data blocks it; no backend here is only a warning)",
        "preflight",
        lambda s: {
            "config": str(s / "rl_grpo_gsm8k_async_demo.py"),
            "data_path": str(s / "gsm8k_train_broken.jsonl"),
            "eval_data_path": _env(s)["EVAL_DATA_PATH"],
            "backend": "lmdeploy",
            "model_path": _env(s)["MODEL_PATH"],
            "work_dir": _env(s)["WORK_DIR"],
        },
    ),
    Step(
        "Diagnose a failed run's log",
        "diagnose_symptom",
        lambda s: {"log_path": str(s / "failed_run.log")},
    ),
    Step(
        "Diagnose a report written in words",
        "diagnose_symptom",
        lambda s: {"text": "Rollout with LMDeploy hangs once expert_parallel_size is 2; with 1 it runs. 2 x 8 GPUs."},
    ),
    Step(
        "Inspect a finished run whose reward stays at 0",
        "inspect_run",
        lambda s: {"path": str(s / "run_reward_zero")},
    ),
)


async def _run(roots: list[str], as_json: bool) -> tuple[list[dict[str, Any]], int]:
    from mcp import Client, StdioServerParameters

    args = ["-m", "xtuner_rl_mcp", "serve", "--transport", "stdio"]
    for r in roots:
        args += ["--allow-root", r]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    s = samples_dir()
    out: list[dict[str, Any]] = []
    failures = 0
    async with Client(params) as client:
        available = {t.name for t in (await client.list_tools()).tools}
        for step in STEPS:
            record: dict[str, Any] = {"step": step.title, "tool": step.tool}
            if step.tool not in available:
                record["skipped"] = "tool not available in this build"
                out.append(record)
                continue
            record["arguments"] = step.arguments(s)
            result = await client.call_tool(step.tool, record["arguments"])
            if result.is_error:
                failures += 1
                record["error"] = "".join(getattr(c, "text", "") for c in result.content)
            else:
                record["result"] = result.structured_content
            out.append(record)
            if not as_json:
                _print_step(len(out), record)
    return out, failures


#: Findings printed per step; the rest are counted.
SHOWN_FINDINGS = 4


def _print_step(n: int, record: dict[str, Any]) -> None:
    print(f"\n[{n}] {record['step']}  ->  {record['tool']}")
    asked = record.get("arguments", {}).get("query") or record.get("arguments", {}).get("text")
    if asked:
        print(f"    asked: {asked}")
    if "skipped" in record:
        print(f"    skipped: {record['skipped']}")
        return
    if "error" in record:
        print(f"    ERROR: {record['error'][:400]}")
        return
    res = record["result"]
    print(f"    {res.get('summary', '')}")
    findings = res.get("findings") or [*(res.get("blockers") or []), *(res.get("warnings") or [])]
    for f in findings[:SHOWN_FINDINGS]:
        sev = f.get("severity", "")
        title = f.get("title", "")
        print(f"      - [{sev}] {title}" if sev else f"      - {title}")
    omitted = sum(res.get(k, 0) for k in ("findings_omitted", "blockers_omitted", "warnings_omitted"))
    more = max(0, len(findings) - SHOWN_FINDINGS) + omitted
    if more > 0:
        print(f"      + {more} more")
    if record["tool"] == "build_rl_command" and res.get("command"):
        print(f"    command: {res['command'][:300]}")


def run_demo(allow_roots: list[str] | None, as_json: bool = False) -> int:
    """Run the scenario; exit 0 when every available step answered (findings are expected, errors are not)."""
    from .security import resolve_roots

    roots = [str(samples_dir()), *resolve_roots(allow_roots).describe()]
    if not as_json:
        print("xtuner-rl-mcp demo: plan and check a GRPO run on GSM8K, 1 node x 8 GPUs, LMDeploy")
        print(f"(server spawned over stdio; sample data in {roots[0]})")
    records, failures = anyio.run(_run, roots, as_json)
    if as_json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    else:
        ran = sum(1 for r in records if "result" in r)
        print(f"\n{ran} of {len(records)} steps answered, {failures} errors.")
    return 1 if failures else 0
