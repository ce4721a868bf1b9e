"""Values a user names in a report -- "2 × 8 GPUs", "2 nodes", "两台 8 卡", a backend, "70B", "Qwen3-8B" -- read so
that the confirm_with calls of a diagnosis carry them instead of marking them missing."""

from __future__ import annotations

import re
from typing import Any

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
    """nodes, gpus_per_node, params_b and backend as the text states them (absent keys: not stated)."""
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
    lowered = text.lower()
    named = [b for word, b in _BACKENDS if word in lowered]
    if len(named) == 1:
        out["backend"] = named[0]
    return {k: v for k, v in out.items() if v}
