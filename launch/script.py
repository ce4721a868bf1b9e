"""The bash launch scripts of a plan: exports before ``ray start``, the head's wait until Ray shows every GPU, then
the RL command; and the script each other node runs to join the head."""

from __future__ import annotations

import math

from ..xtuner_rules.ray_need import RayNeed
from .plan import LaunchRequest
from .shell import join_command, quote

WAIT_INTERVAL_S = 2
#: Open-file limit XTuner's launch script sets before `ray start` (examples/v1/scripts/run_rl.sh:40).
OPEN_FILES = 65536
SRC_ULIMIT = "examples/v1/scripts/run_rl.sh:40"
SRC_LOG = "examples/v1/scripts/run_rl.sh:148-153"

#: Reads `ray status` (lines like ` 3.0/128.0 CPU` and ` 0B/320.00GiB memory`) and compares what is free with
#: the need; exit 1 with both numbers when short, 2 when the lines are missing.
_RESOURCE_AWK = (
    "function gib(s, n) { n = s + 0; if (s ~ /TiB$/) return n * 1024; if (s ~ /GiB$/) return n;"
    " if (s ~ /MiB$/) return n / 1024; if (s ~ /KiB$/) return n / 1048576; return n / 1073741824 }"
    ' $2 == "CPU" && !c { split($1, p, "/"); cpu = p[2] - p[1]; c = 1 }'
    ' $2 == "memory" && !m { split($1, p, "/"); mem = gib(p[2]) - gib(p[1]); m = 1 }'
    " END {"
    ' if (!c || !m) { print "ERROR: could not read CPU and memory from ray status" > "/dev/stderr"; exit 2 }'
    ' printf "Ray offers %g CPUs and %.2f GiB free (need %g CPUs, %g GiB).\\n", cpu, mem, need_cpus, need_gib;'
    " if (cpu < need_cpus || mem + 0.01 < need_gib) {"
    ' printf "ERROR: XTuner needs %g CPUs and %g GiB of Ray memory (%s); Ray offers %g CPUs and %.2f GiB. '
    'Restart Ray with more --num-cpus/--memory, add nodes, or lower the per-worker values in the config.\\n",'
    ' need_cpus, need_gib, why, cpu, mem > "/dev/stderr"; exit 1 } }'
)


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


def _resource_block(need: RayNeed) -> list[str]:
    """Fail before the run when Ray offers fewer CPUs or less memory than XTuner's placement-group check needs."""
    return [
        f"# 3b. Check Ray's free CPUs and memory against XTuner's need: {need.cpus} CPUs, {need.memory_gib:g} GiB.",
        "ray status 2>/dev/null | awk"
        f" -v need_cpus={need.cpus} -v need_gib={need.memory_gib:g} -v why={quote(need.arithmetic)}"
        f" {quote(_RESOURCE_AWK)}",
    ]


def _header(title: str, params: LaunchRequest, total: int) -> list[str]:
    return [
        "#!/usr/bin/env bash",
        f"# {title} — written by xtuner-rl-mcp build_rl_command for XTuner main@b934f46. Review before running.",
        f"# Backend {params.backend}; {params.nodes} node(s) × {params.gpus_per_node} GPUs = {total} GPUs.",
        "set -euo pipefail",
        "",
        f"# 0. Raise the open-file limit before `ray start`, so Ray and the engines inherit it ({SRC_ULIMIT}).",
        f'ulimit -n {OPEN_FILES} 2>/dev/null || echo "WARNING: could not raise the open-file limit to {OPEN_FILES}'
        ' (hard limit: $(ulimit -Hn)); expect OSError: [Errno 24] Too many open files" >&2',
        "",
        "# 1. Environment, exported before `ray start` so that Ray workers on this node inherit it.",
    ]


def log_dir(params: LaunchRequest) -> str:
    """Where the run's log goes: the work dir (as upstream's script does), else the current directory."""
    return params.work_dir if params.work_dir is not None else "."


def log_file_pattern(params: LaunchRequest) -> str:
    return f"{log_dir(params).rstrip('/') or '/'}/training_log_<YYYYmmdd_HHMMSS>.txt"


def build_script(
    params: LaunchRequest,
    exports: list[str],
    head_argv: list[str],
    argv: list[str],
    total: int,
    need: RayNeed | None = None,
) -> str:
    lines = _header("XTuner RL launch, head node", params, total)
    lines += exports
    lines += [
        "",
        "# 2. Start the Ray head on this node (fails if a Ray head is already running here).",
        join_command(head_argv),
        "",
    ]
    lines += _wait_block(total, params.wait_timeout_s)
    if need is not None and need.known:
        lines += _resource_block(need)
    directory = quote(log_dir(params))
    lines += [
        "",
        f"# 4. The RL run, its output appended to a log file ({SRC_LOG}). When it exits, XTuner's exit handler",
        "#    runs `ray stop --force` on this node.",
        f"mkdir -p -- {directory}",
        f'xtuner_rl_log={directory}/training_log_"$(date +%Y%m%d_%H%M%S)".txt',
        'echo "Logging to $xtuner_rl_log"',
        join_command(argv) + ' 2>&1 | tee -a -- "$xtuner_rl_log"',
        "",
    ]
    return "\n".join(lines)


def build_worker_script(params: LaunchRequest, exports: list[str], worker_argv: list[str], total: int) -> str:
    lines = _header("XTuner RL launch, other nodes (run on each non-head node)", params, total)
    lines += exports
    lines += ["", "# 2. Join the Ray head (start the head first).", join_command(worker_argv), ""]
    return "\n".join(lines)
