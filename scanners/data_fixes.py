"""The fixes check_reward_data suggests: exact commands that convert raw Hugging Face GSM8K lines, chat 'messages'
files, number ground truths and Parquet files into the line contract's shape."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pydantic import BaseModel, Field

from ..xtuner_rules.data_contract import SRC_CONVERT, SRC_GSM8K
from .jsonl_results import FileResult


class Suggestion(BaseModel):
    title: str
    owner: str = "data_preparation"
    command: str = Field(description="Exact command to run (POSIX shell)")
    explanation: str
    source: str | None = None


def _out_path(path: str, suffix: str) -> str:
    p = Path(path)
    return str(p.with_name(p.stem + suffix + ".jsonl"))


# A converter for raw HF GSM8K JSONL lines (question/answer), reproducing convert_gsm8k.py's record shape.
_HF_GSM8K_SCRIPT = r"""import json, re, sys
INSTR = " Let\u0027s think step by step and output the final answer after \"####\"."
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for i, line in enumerate(src):
        if not line.strip():
            continue
        r = json.loads(line)
        m = re.search(r"#### (\-?[0-9\.\,]+)", r["answer"])
        if m is None:
            sys.exit(f"line {i + 1}: answer has no #### <number>")
        rec = {"data_source": "openai/gsm8k",
               "prompt": [{"role": "user", "content": r["question"] + INSTR}],
               "ability": "math",
               "reward_model": {"style": "rule", "ground_truth": m.group(1).replace(",", "")},
               "extra_info": {"index": i, "answer": r["answer"], "question": r["question"]}}
        dst.write(json.dumps(rec, ensure_ascii=False) + "\n")
"""

_MESSAGES_SCRIPT = r"""import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for line in src:
        if not line.strip():
            continue
        r = json.loads(line)
        if "prompt" not in r and "messages" in r:
            r = {"prompt": r.pop("messages"), **r}
        dst.write(json.dumps(r, ensure_ascii=False) + "\n")
"""

_GSM8K_GT_SCRIPT = r"""import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for line in src:
        if not line.strip():
            continue
        r = json.loads(line)
        rm = r.get("reward_model")
        if isinstance(rm, dict) and rm.get("ground_truth") is not None:
            g = rm["ground_truth"]
            if isinstance(g, float) and g.is_integer():
                g = int(g)
            rm["ground_truth"] = str(g).replace(",", "").replace("$", "").strip()
        dst.write(json.dumps(r, ensure_ascii=False) + "\n")
"""

# Fills a missing reward_model.ground_truth from the answer fields named in FIELDS the way convert_gsm8k.py takes
# the solution (the first '#### <n>', commas removed); other lines are copied unchanged.
_DERIVE_GT_SCRIPT = r"""import json, re, sys
FIELDS = __FIELDS__
ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for line in src:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("reward_model") is None:
            r["reward_model"] = {"style": "rule"}
        rm = r["reward_model"]
        if isinstance(rm, dict) and rm.get("ground_truth") in (None, ""):
            for keys in FIELDS:
                v = r
                for k in keys:
                    v = v.get(k) if isinstance(v, dict) else None
                m = ANSWER.search(v) if isinstance(v, str) else None
                if m:
                    rm["ground_truth"] = m.group(1).replace(",", "")
                    break
        dst.write(json.dumps(r, ensure_ascii=False) + "\n")
"""

_PARQUET_SCRIPT = r"""import sys
import pandas as pd
pd.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient="records", lines=True, force_ascii=False)
"""


def _py_command(script: str, src: str, dst: str) -> str:
    return f"python3 -c {shlex.quote(script)} {shlex.quote(src)} {shlex.quote(dst)}"


def _derivable_fields(per_file: list[FileResult]) -> list[str]:
    """The answer fields that can supply a missing ground truth, most lines first."""
    counts: dict[str, int] = {}
    for fr in per_file:
        for pointer, n in fr.derivable.items():
            counts[pointer] = counts.get(pointer, 0) + n
    return sorted(counts, key=lambda p: -counts[p])


def suggestions(per_file: list[FileResult], parquet: list[str]) -> list[Suggestion]:
    """Conversion commands for the first file showing each fixable problem (and the first Parquet file)."""
    out: list[Suggestion] = []

    def first_with(code: str) -> str | None:
        return next((fr.path for fr in per_file if fr.codes.get(code)), None)

    hf = first_with("raw_hf_gsm8k_line")
    if hf:
        out.append(
            Suggestion(
                title="Convert Hugging Face GSM8K with XTuner's converter",
                command="python xtuner/v1/utils/convert_gsm8k.py --input-dir openai/gsm8k --out-dir <out_dir>",
                explanation="Run in an XTuner checkout (needs the datasets package). --input-dir is a hub name or a "
                "local Hugging Face data-set directory (config 'main'); it writes <out_dir>/train.jsonl and "
                "<out_dir>/test.jsonl in the contract's shape.",
                source=SRC_CONVERT,
            )
        )
        out.append(
            Suggestion(
                title="Convert a local JSONL of raw GSM8K question/answer lines",
                command=_py_command(_HF_GSM8K_SCRIPT, hf, _out_path(hf, ".xtuner")),
                explanation="Same record shape as convert_gsm8k.py (instruction appended to the question, "
                "data_source openai/gsm8k, ground truth = the number after '#### ' without commas), line by line, "
                "for a file such as this one that is already JSONL.",
                source=SRC_CONVERT,
            )
        )
    msg = first_with("messages_instead_of_prompt")
    if msg:
        out.append(
            Suggestion(
                title="Rename 'messages' to 'prompt'",
                command=_py_command(_MESSAGES_SCRIPT, msg, _out_path(msg, ".prompt")),
                explanation="XTuner reads item['prompt']; this keeps every other key. Lines still lacking "
                "data_source or reward_model.ground_truth need them added from the source data (check again).",
                source="xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:52",
            )
        )
    gt = first_with("gsm8k_ground_truth_not_string") or first_with("gsm8k_ground_truth_format")
    if gt:
        out.append(
            Suggestion(
                title="Normalise GSM8K ground truths to bare number strings",
                command=_py_command(_GSM8K_GT_SCRIPT, gt, _out_path(gt, ".gt")),
                explanation="Turns 72 / 72.0 into \"72\" and strips ',' '$' and spaces, the way the judger "
                "normalises the model's answer; ground truths that are still not numbers are reported again.",
                source=SRC_GSM8K,
            )
        )
    derivable = _derivable_fields(per_file)
    if derivable:
        src = next(fr.path for fr in per_file if fr.derivable)
        keys = json.dumps([p.strip("/").split("/") for p in derivable])
        names = ", ".join(p.strip("/").replace("/", ".") for p in derivable)
        out.append(
            Suggestion(
                title=f"Derive ground_truth from {names}",
                command=_py_command(_DERIVE_GT_SCRIPT.replace("__FIELDS__", keys), src, _out_path(src, ".with_gt")),
                explanation=f"Sets reward_model.ground_truth to the number after '#### ' in {names}, commas removed, "
                "as XTuner's GSM8K converter derives it; lines that already have a ground truth are copied "
                "unchanged. Not run by this tool: run it, then check the new file again.",
                source="xtuner/v1/utils/convert_gsm8k.py:11-16,51",
            )
        )
    for pq in parquet[:1]:
        out.append(
            Suggestion(
                title="Convert Parquet to JSONL",
                command=_py_command(_PARQUET_SCRIPT, pq, _out_path(pq, "")),
                explanation="Needs pandas and pyarrow. Check the converted file again: the columns must already "
                "follow the contract (prompt, data_source, reward_model).",
            )
        )
    return out
