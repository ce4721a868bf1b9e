"""The JSONL line contract's vocabulary: every code the scanner emits and its severity, the judgers, and the
patterns their rules use (the tool adds titles, fixes, categories and sources: xtuner_rules/data_contract.py)."""

from __future__ import annotations

import re
from typing import Any, Final, Literal

BLOCKER: Final = "blocker"
WARNING: Final = "warning"
INFO: Final = "info"
#: ``core.findings.Severity``, spelled here because this module imports nothing from the package (Ray ships it).
LineSeverity = Literal["blocker", "warning", "info"]

#: Every code the scanner can emit, with its severity. A line with any blocker code is invalid.
CODE_SEVERITY: dict[str, LineSeverity] = {
    # line level (bytes)
    "invalid_utf8": BLOCKER,
    "nul_byte": BLOCKER,
    "bom": BLOCKER,
    "blank_line": BLOCKER,
    "line_too_long": BLOCKER,
    "truncated_last_line": BLOCKER,
    "invalid_json": BLOCKER,
    "not_an_object": BLOCKER,
    "missing_final_newline": INFO,
    # shape
    "raw_hf_gsm8k_line": BLOCKER,
    "messages_instead_of_prompt": BLOCKER,
    "missing_prompt": BLOCKER,
    "prompt_not_list": BLOCKER,
    "prompt_empty": BLOCKER,
    "bad_message": BLOCKER,
    "vlm_prompt_missing_key": BLOCKER,
    "prompt_vlm_object": WARNING,
    "prompt_blank": WARNING,
    "missing_data_source": BLOCKER,
    "data_source_not_string": BLOCKER,
    "empty_data_source": BLOCKER,
    "missing_reward_model": BLOCKER,
    "reward_model_not_object": BLOCKER,
    "missing_ground_truth": BLOCKER,
    "empty_ground_truth": BLOCKER,
    "extra_info_not_object": BLOCKER,
    # judger specific
    "gsm8k_ground_truth_not_string": BLOCKER,
    "gsm8k_ground_truth_format": BLOCKER,
    "gsm8k_ground_truth_noncanonical": WARNING,
    "gsm8k_prompt_no_answer_marker": WARNING,
    "dapo_ground_truth_not_string": BLOCKER,
    "dapo_prompt_no_answer_marker": WARNING,
    "geo3k_ground_truth_not_string": WARNING,
    "geo3k_prompt_no_boxed_marker": WARNING,
    "unknown_data_source": WARNING,
}
BLOCKING = frozenset(c for c, s in CODE_SEVERITY.items() if s == BLOCKER)

JUDGERS = ("gsm8k", "dapo_math", "geo3k", "generic", "auto")
#: data_source values XTuner's converters write, and the judger each one implies under ``judger="auto"``.
KNOWN_SOURCES = {"openai/gsm8k": "gsm8k", "hiyouga/geometry3k": "geo3k"}
EXPECTED_SOURCE = {"gsm8k": "openai/gsm8k", "geo3k": "hiyouga/geometry3k"}

#: A ground truth a GSM8K answer can ever equal: what '#### (-?[0-9.,]+)' yields once ',' is removed (gsm8k.py:34-39),
#: with at least one digit.
GSM8K_GT_RE = re.compile(r"-?[0-9.]*[0-9][0-9.]*")
#: The form a correct integer or decimal answer is normally written in ("72", "-3", "0.5").
GSM8K_CANONICAL_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?")
DAPO_ANSWER_RE = re.compile(r"(?i)answer\s*:")

#: The final answer in a GSM8K solution text, the way XTuner's converter takes it (convert_gsm8k.py:11-16).
GSM8K_ANSWER_RE = re.compile(r"#### (\-?[0-9\.\,]+)")


def gsm8k_label_code(ground_truth: object) -> str | None:
    """The data-contract code of a GSM8K ground truth the judger's exact string match (gsm8k.py:34-39,74) cannot
    meet, or meets only when the model writes this very form; None for a bare canonical number ("72", "-3", "0.5").
    One rule for check_reward_data (the data file) and inspect_run (the labels a run was judged against)."""
    if not isinstance(ground_truth, str):
        return "gsm8k_ground_truth_not_string"
    if not GSM8K_GT_RE.fullmatch(ground_truth):
        return "gsm8k_ground_truth_format"
    if ground_truth == "-0" or not GSM8K_CANONICAL_RE.fullmatch(ground_truth):
        return "gsm8k_ground_truth_noncanonical"
    return None


#: Codes of a line without a usable ground truth, and the fields (JSON pointer, key path) a GSM8K-style
#: ``#### <n>`` solution can be read from to derive it.
GT_MISSING_CODES = frozenset({"missing_reward_model", "missing_ground_truth", "empty_ground_truth"})
DERIVABLE_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/extra_info/answer", ("extra_info", "answer")),
    ("/answer", ("answer",)),
    ("/extra_info/solution", ("extra_info", "solution")),
    ("/solution", ("solution",)),
)


def derivable_field(obj: dict[str, Any]) -> str | None:
    """The pointer of the first field holding a ``#### <n>`` answer a GSM8K ground truth can be taken from."""
    for pointer, keys in DERIVABLE_FIELDS:
        value: Any = obj
        for k in keys:
            value = value.get(k) if isinstance(value, dict) else None
        if isinstance(value, str) and "####" in value:
            m = GSM8K_ANSWER_RE.search(value)
            if m and GSM8K_GT_RE.fullmatch(m.group(1).replace(",", "")):
                return pointer
    return None


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
