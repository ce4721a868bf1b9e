"""The peer of the linter's 200 MB figure (bench/bench_lint.py): a bare orjson loop doing the same line checks,
in a process that imports nothing else.

    python bench/peer_contract_loop.py FILE.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

GSM8K_GT = re.compile(r"-?[0-9.]*[0-9][0-9.]*")
GSM8K_CANONICAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?")


def orjson_contract_loop(path: Path) -> dict[str, Any]:
    """A bare loop doing the linter's line checks with orjson: the line parses to an object; prompt is a non-empty
    list of {role, content} messages; data_source is a non-empty string; reward_model is an object whose ground_truth
    is present and not empty; extra_info, when present, is an object; GSM8K lines (auto judger: by data_source) have a
    bare-number string ground truth and an answer marker in the prompt; duplicate prompts counted by hash."""
    import orjson

    lines = bad = dup = 0
    seen: set[int] = set()
    with path.open("rb") as fh:
        for raw in fh:
            lines += 1
            try:
                r = orjson.loads(raw)
            except orjson.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(r, dict):
                bad += 1
                continue
            prompt, source, rm = r.get("prompt"), r.get("data_source"), r.get("reward_model")
            ok = isinstance(prompt, list) and len(prompt) > 0
            if ok:
                for m in prompt:
                    if not (isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m):
                        ok = False
                        break
            ok = ok and isinstance(source, str) and source != ""
            gt = rm.get("ground_truth") if isinstance(rm, dict) else None
            ok = ok and gt not in (None, "")
            extra = r.get("extra_info")
            ok = ok and (extra is None or isinstance(extra, dict))
            if ok and source == "openai/gsm8k":
                ok = isinstance(gt, str) and GSM8K_GT.fullmatch(gt) is not None
                if ok and not GSM8K_CANONICAL.fullmatch(gt):
                    ok = True  # a warning, not a failure
                text = "".join(m["content"] for m in prompt if isinstance(m.get("content"), str))
                _ = "####" in text  # the answer-marker warning
            if ok:
                h = hash(orjson.dumps(prompt))
                dup += h in seen
                seen.add(h)
            bad += not ok
    return {"lines": lines, "bad": bad, "duplicates": dup}


if __name__ == "__main__":
    print(json.dumps(orjson_contract_loop(Path(sys.argv[1]))))
