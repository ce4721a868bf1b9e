"""Values a report carries, read so that a diagnosis uses them instead of speaking in general terms.

- What a user names -- "2 × 8 GPUs", "2 nodes", "两台 8 卡", a backend, "70B", "Qwen3-8B": the confirm_with calls
  carry them instead of marking them missing.
- The numbers of XTuner's divisibility, interval and resource messages: the fix names the layout or value to use,
  from the same helpers choose_topology and inspect_config use (``xtuner_rules``).
- Lines that say a failure was recovered from ("Successfully restarted ...", 重启成功): the finding before them is
  no longer a blocker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..xtuner_rules import resources as rr
from ..xtuner_rules.intervals import interval_fix

_CN_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_NUM = r"(\d{1,3}|[一二两三四五六七八九十])"
_GPU = r"(?:gpus?|cards?|卡|张卡?|块卡?|a100s?|h100s?|h800s?|a800s?|h20s?|npus?|910b)"
_NODE = r"(?:nodes?|machines?|hosts?|servers?|台(?:机器|服务器|节点)?|个?节点|机器|机)"

#: "2 x 8 GPUs", "2×8 卡", "2 nodes x 8 GPUs", "2 nodes with 8 GPUs each"
_NODES_BY_GPUS = re.compile(
    rf"{_NUM}\s*(?:{_NODE}\s*)?(?:[x×*]|with|，?每(?:台|个节点|机)?)\s*{_NUM}\s*(?:x\s*)?{_GPU}", re.IGNORECASE
)
#: "2机16卡", "2 nodes, 16 GPUs" (total GPUs)
_NODES_TOTAL = re.compile(rf"{_NUM}\s*{_NODE}\s*[,，、]?\s*(?:共\s*)?{_NUM}\s*{_GPU}", re.IGNORECASE)
_NODES = re.compile(rf"{_NUM}\s*{_NODE}(?![a-z])", re.IGNORECASE)
_PER_NODE = re.compile(
    rf"{_NUM}\s*{_GPU}\s*(?:per|each|/|every)\s*(?:node|machine|host)|每(?:台|个节点|机)\s*{_NUM}\s*{_GPU}",
    re.IGNORECASE,
)
#: "单机8卡", "single node", "one machine"
_SINGLE = re.compile(rf"(?:单机|单节点|single[- ]node|one (?:node|machine))\s*(?:{_NUM}\s*{_GPU})?", re.IGNORECASE)
#: "Qwen3-8B", "Qwen2.5-7B-Instruct", "70B", "30B-A3B" (the first size is the total)
_PARAMS = re.compile(r"(?<![\w.])(?:[a-z][\w.]*-)?(\d{1,4}(?:\.\d+)?)\s?b(?![a-z0-9])", re.IGNORECASE)
_BACKENDS = (("lmdeploy", "lmdeploy"), ("sglang", "sglang"), ("vllm", "vllm"))


def _num(token: str | None) -> int | None:
    if not token:
        return None
    return int(token) if token.isdigit() else _CN_DIGITS.get(token)


def report_values(text: str | None) -> dict[str, Any]:
    """nodes, gpus_per_node, params_b, backend (and the engine size of a divisibility message) as the text states
    them (absent keys: not stated)."""
    if not text:
        return {}
    out: dict[str, Any] = {}
    if m := _NODES_BY_GPUS.search(text):
        out["nodes"], out["gpus_per_node"] = _num(m.group(1)), _num(m.group(2))
    elif m := _NODES_TOTAL.search(text):
        # "2机16卡" counts all GPUs, "两台 8 卡机器" the GPUs of each node: nodes rarely hold more than 8
        nodes, count = _num(m.group(1)), _num(m.group(2))
        out["nodes"] = nodes
        if nodes and count and count > 8 and count % nodes == 0:
            out["gpus_per_node"] = count // nodes
        elif count and count <= 8:
            out["gpus_per_node"] = count
    elif m := _NODES.search(text):
        out["nodes"] = _num(m.group(1))
    elif _SINGLE.search(text):
        out["nodes"] = 1
    if m := _PER_NODE.search(text):
        out["gpus_per_node"] = _num(m.group(1) or m.group(2))
    elif "gpus_per_node" not in out and out.get("nodes") == 1 and (m := _SINGLE.search(text)) and m.group(1):
        out["gpus_per_node"] = _num(m.group(1))
    if m := _PARAMS.search(text):
        size = float(m.group(1))
        if 0.1 <= size <= 2000:
            out["params_b"] = int(size) if size.is_integer() else size
    if m := _WORKERS_DIVISIBLE.search(text):  # the engine size the run asked for, for choose_topology to check
        engine_field = "expert_parallel_size" if m.group(2) == "expert_parallel_size" else "tensor_parallel_size"
        out[engine_field] = int(m.group(3))
    lowered = text.lower()
    named = [b for word, b in _BACKENDS if word in lowered]
    if len(named) == 1:
        out["backend"] = named[0]
    return {k: v for k, v in out.items() if v}


# --------------------------------------------------------------------------------------------------------
# Numbers of XTuner's messages -> the fix with those numbers
# --------------------------------------------------------------------------------------------------------

#: lmdeploy.py:163-166, sglang.py:132-134
_WORKERS_DIVISIBLE = re.compile(
    r"num_rollout_workers=(\d+) must be divisible by (num_gpus_per_engine|expert_parallel_size)=(\d+)"
)
#: ray_accelerator_worker.py:107-121
_NOT_ENOUGH = re.compile(r"Not enough available (GPUS|NPUS|CPUs|memory) in Ray cluster, ([\d.]+) less than ([\d.]+)")
#: rl_trainer.py:313-326
_INTERVAL = re.compile(
    r"(evaluate_step|checkpoint_interval|hf_interval)=(\d+) must be a multiple of sync_weights_interval=(\d+)"
)
#: rl/trainer/worker.py:428-432
_SP = re.compile(r"Found sp_size (\d+), world_size (\d+)")
#: vLLM / SGLang model config check (external): the rollout TP must divide the attention heads
_HEADS = re.compile(r"attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)")


def _divisors(n: int, at_most: int | None = None) -> str:
    return "/".join(str(d) for d in range(1, n + 1) if n % d == 0 and (at_most is None or d <= at_most))


def _resource_fix(kind: str, have: float, need: float) -> str:
    if kind in ("GPUS", "NPUS"):
        unit = kind[:-1] + "s"
        return (
            f"The run asks Ray for {need:g} {unit} and {have:g} are free: add nodes (ray start --address=<head>:6379) "
            f"or stop what holds {need - have:g} of them until `ray status` shows {need:g} free, or lower the "
            f"trainer's resources.num_workers to {have:g}."
        )
    if kind == "CPUs":
        return (
            f"The placement group asks for {need:g} CPUs (num_cpus_per_worker x num_workers + "
            f"{rr.PG_CPU_HEADROOM}) and {have:g} are free: lower num_cpus_per_worker on the trainer's resources by "
            f"{need - have:g} CPUs in total, or give Ray more CPUs (ray start --num-cpus)."
        )
    return (
        f"The placement group asks for {rr.bytes_to_gib(need):.1f} GiB of host memory (cpu_memory_per_worker x "
        f"num_workers + {rr.PG_MEMORY_HEADROOM_BYTES // rr.GIB} GiB) and {rr.bytes_to_gib(have):.1f} GiB are free: "
        "lower cpu_memory_per_worker on the trainer's resources, or give Ray more memory."
    )


def message_fixes(lines: Iterable[str], gpus_per_node: int | None = None) -> list[str]:
    """Fix steps with the numbers of the divisibility, interval and resource messages among ``lines`` (in order,
    each once)."""
    per_node = gpus_per_node or 8
    out: list[str] = []
    for line in lines:
        if m := _WORKERS_DIVISIBLE.search(line):
            kind = "EP" if m.group(2) == "expert_parallel_size" else "TP"
            out.append(rr.engine_layout_fix(int(m.group(1)), int(m.group(3)), kind, per_node) + ".")
        elif m := _NOT_ENOUGH.search(line):
            out.append(_resource_fix(m.group(1), float(m.group(2)), float(m.group(3))))
        elif m := _INTERVAL.search(line):
            out.append(interval_fix(m.group(1), int(m.group(2)), int(m.group(3))))
        elif m := _SP.search(line):
            sp, world = int(m.group(1)), int(m.group(2))
            out.append(f"Use sp_size {_divisors(world)} (the divisors of the training world size {world}), not {sp}.")
        elif m := _HEADS.search(line):
            heads, tp = int(m.group(1)), int(m.group(2))
            out.append(
                f"Use rollout tensor_parallel_size {_divisors(heads, per_node)} (divisors of the {heads} attention "
                f"heads that fit one node), not {tp}."
            )
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------------------
# Recovery
# --------------------------------------------------------------------------------------------------------

#: A line saying that what failed came back: XTuner's health manager (health_manager.py:517) and how people say it.
RECOVERED = re.compile(
    r"(?i)successfully restarted|\brestart(?:ed)? successfully|\brecovered\b|back to normal|重启成功|已恢复|恢复正常"
)


def recovery_lines(lines: Iterable[tuple[int, str]]) -> list[int]:
    """Numbers of the lines that report a recovery."""
    return [n for n, text in lines if RECOVERED.search(text)]
