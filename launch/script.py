"""The bash launch scripts of a plan: exports before ``ray start``, the head's wait until Ray shows every GPU, then
the RL command; and the script each other node runs to join the head."""

from __future__ import annotations

import math

from .plan import LaunchRequest
from .shell import join_command

WAIT_INTERVAL_S = 2


def _wait_block(expected: int, timeout_s: int) -> list[str]:
    tries = max(1, math.ceil(timeout_s / WAIT_INTERVAL_S))
    return [
        f"# 3. Wait until Ray reports {expected} GPUs: at most {tries} checks, {WAIT_INTERVAL_S} s apart.",
        f"xtuner_rl_expected_gpus={expected}",
        f"xtuner_rl_max_checks={tries}",
        "xtuner_rl_check=0",
        "while true; do",
        "  xtuner_rl_check=$((xtuner_rl_check + 1))",
        "  xtuner_rl_seen=$(ray status 2>/dev/null"
        ' | awk \'$2 == "GPU" && !found { found = 1; split($1, p, "/"); print int(p[2]) }\')'
        ' || xtuner_rl_seen=""',
        '  if [ -n "$xtuner_rl_seen" ] && [ "$xtuner_rl_seen" -ge "$xtuner_rl_expected_gpus" ]; then',
        '    echo "Ray cluster shows $xtuner_rl_seen GPUs (need $xtuner_rl_expected_gpus)."',
        "    break",
        "  fi",
        '  if [ "$xtuner_rl_check" -ge "$xtuner_rl_max_checks" ]; then',
        '    echo "ERROR: Ray shows ${xtuner_rl_seen:-no} GPUs after $xtuner_rl_check checks;'
        ' need $xtuner_rl_expected_gpus. Start the other nodes or check ray status." >&2',
        "    exit 1",
        "  fi",
        f"  sleep {WAIT_INTERVAL_S}",
        "done",
    ]


def _header(title: str, params: LaunchRequest, total: int) -> list[str]:
    return [
        "#!/usr/bin/env bash",
        f"# {title} — written by xtuner-rl-mcp build_rl_command for XTuner main@b934f46. Review before running.",
        f"# Backend {params.backend}; {params.nodes} node(s) × {params.gpus_per_node} GPUs = {total} GPUs.",
        "set -euo pipefail",
        "",
        "# 1. Environment, exported before `ray start` so that Ray workers on this node inherit it.",
    ]


def build_script(params: LaunchRequest, exports: list[str], head_argv: list[str], argv: list[str], total: int) -> str:
    lines = _header("XTuner RL launch, head node", params, total)
    lines += exports
    lines += [
        "",
        "# 2. Start the Ray head on this node (fails if a Ray head is already running here).",
        join_command(head_argv),
        "",
    ]
    lines += _wait_block(total, params.wait_timeout_s)
    lines += [
        "",
        "# 4. The RL run. When it exits, XTuner's exit handler runs `ray stop --force` on this node.",
        join_command(argv),
        "",
    ]
    return "\n".join(lines)


def build_worker_script(params: LaunchRequest, exports: list[str], worker_argv: list[str], total: int) -> str:
    lines = _header("XTuner RL launch, other nodes (run on each non-head node)", params, total)
    lines += exports
    lines += ["", "# 2. Join the Ray head (start the head first).", join_command(worker_argv), ""]
    return "\n".join(lines)
