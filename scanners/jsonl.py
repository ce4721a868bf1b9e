"""Streaming, line-accurate scanner for XTuner RL JSONL data: the engine behind ``check_reward_data``.

Self-contained on purpose (stdlib + msgspec; jsonschema only for failing lines): Ray ships this module to its
workers by value, so it must not import anything else from this package.

How a line is judged:

* hot path, a block (about 1 MiB of whole lines) at a time: the block is checked as bytes (UTF-8, digit runs), its
  lines are decoded by one typed ``msgspec`` call as the elements of a JSON array (the contract of
  ``references/schemas/rl-sample.schema.json`` as msgspec types), and the contract's remaining rules and the
  statistics run column-wise over the decoded block in C-level ``map`` calls. A block only passes when every line in
  it has no issue of any severity.
* a block that does not pass is judged line by line: the same typed decode and quick checks per line, and a line
  that still fails takes the precise path.
* anything else takes the precise path: the bytes are decoded the way XTuner's dataset does (strict UTF-8, stdlib
  ``json``), every rule below gives a stable code, and ``jsonschema`` explains the first failing lines per code.

The unit of work is a byte range of one file: a range owns every line whose first byte lies inside it, so ranges
cut anywhere can be scanned independently (processes, Ray tasks) and merged into exactly the single-pass result.
Memory stays bounded whatever the file size: the file is read a block at a time (an over-long line is skipped in
1 MiB pieces, never held), counters keep at most ``MAX_COUNTER_KEYS`` keys, prompt lengths go into a bucket
histogram and duplicate detection keeps 8 bytes per distinct prompt of a range (capped at ``DUP_HASH_CAP``), merged
in buckets of the hash's top bits.

Entry points: ``scan_file`` (one file, this process), ``scan_range`` + ``merge_ranges`` (parallel use),
``worker_main`` (a local worker process, driven by check_reward_data over stdin/stdout).
"""

from __future__ import annotations

import json
import os
import re
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

# --------------------------------------------------------------------------------------------------------
# Codes and their severity (the tool adds titles, fixes, categories and sources)
# --------------------------------------------------------------------------------------------------------

BLOCKER, WARNING, INFO = "blocker", "warning", "info"

#: Every code the scanner can emit, with its severity. A line with any blocker code is invalid.
CODE_SEVERITY: dict[str, str] = {
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

DEFAULT_MAX_LINE_BYTES = 1 << 20
EXCERPT_CHARS = 160
#: Distinct keys kept per counter (data_source, roles); the rest are summed under OTHER.
MAX_COUNTER_KEYS = 200
OTHER = "<other>"
#: Prompt hashes kept for duplicate detection (8 bytes each): beyond this, duplicates are checked on a prefix.
DUP_HASH_CAP = 4_000_000
#: Prompts are told apart by Python's 64-bit ``hash()`` of their text (SipHash, a third of the cost of crc32 plus a
#: copy). It is salted per process unless PYTHONHASHSEED is fixed, so each range records this token: hashes are only
#: compared between ranges scanned under the same salt (the worker processes and Ray tasks get PYTHONHASHSEED=0).
HASH_DOMAIN = hash("xtuner-rl-mcp duplicate prompts")
#: Duplicates are counted bucket by bucket on the hash's top bits, so the transient set is 1/16 of the hashes.
DUP_BUCKET_BITS = 4
#: Bytes read per block; a line inside a block is never longer than a block, so blocks never exceed the line limit.
BLOCK_BYTES = 1 << 20

BOM = b"\xef\xbb\xbf"
NUL = b"\x00"
#: A ground truth a GSM8K answer can ever equal: what '#### (-?[0-9.,]+)' yields once ',' is removed (gsm8k.py:34-39),
#: with at least one digit.
GSM8K_GT_RE = re.compile(r"-?[0-9.]*[0-9][0-9.]*")
#: The form a correct integer or decimal answer is normally written in ("72", "-3", "0.5").
GSM8K_CANONICAL_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?")
DAPO_ANSWER_RE = re.compile(r"(?i)answer\s*:")
#: json.loads (like int()) refuses integers with more digits than this (sys.get_int_max_str_digits() default).
INT_DIGITS_LIMIT = 4300
LONG_DIGITS_RE = re.compile(rb"[0-9]{4301}")
#: A run of 4301 digits covers at least 4 consecutive multiples of 1024: four digits in a row of ``block[::1024]``.
LONG_DIGITS_HINT_RE = re.compile(rb"[0-9]{4}")

# --------------------------------------------------------------------------------------------------------
# The contract as msgspec types (hot path). Stricter than or equal to the JSON Schema: a line that decodes here
# and passes the quick checks is valid under the schema; anything else goes to the precise path.
# --------------------------------------------------------------------------------------------------------


class _Part(Struct, gc=False):
    type: str
    text: str | UnsetType = UNSET


class _Message(Struct, gc=False):
    role: Annotated[str, Meta(min_length=1)]
    content: str | list[_Part]


class _Object(Struct, gc=False):
    """Any JSON object; its members are skipped."""


class _RewardModel(Struct, gc=False):
    ground_truth: Any


class _Line(Struct, gc=False):
    prompt: Annotated[list[_Message], Meta(min_length=1)]
    data_source: Annotated[str, Meta(min_length=1)]
    reward_model: _RewardModel
    extra_info: _Object | UnsetType = UNSET


_DECODER = msgspec.json.Decoder(_Line)
#: A block's lines are decoded as one JSON array; a valid record closes it, so the array never ends in a comma.
_BLOCK_DECODER = msgspec.json.Decoder(list[_Line])
_BLOCK_SENTINEL = b'{"prompt":[{"role":"-","content":"-"}],"data_source":"-","reward_model":{"ground_truth":"-"}}'

# --------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanOptions:
    judger: str = "auto"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_examples_per_code: int = 20


@dataclass
class Example:
    line: int  # 1-based once merged; 0-based index inside its range before
    code: str
    pointer: str
    message: str
    excerpt: str
    schema_error: str | None = None


@dataclass
class Stats:
    data_sources: dict[str, int] = field(default_factory=dict)
    ground_truth_types: dict[str, int] = field(default_factory=dict)
    prompt_roles: dict[str, int] = field(default_factory=dict)
    empty_prompts: int = 0
    #: prompt length in characters -> count; exact below 1024, 7 significant bits above
    length_hist: dict[int, int] = field(default_factory=dict)
    #: ``hash()`` of each prompt text, while scanning a range
    hashes: array = field(default_factory=lambda: array("q"))


@dataclass
class RangeResult:
    """What one byte range of one file holds. ``examples[i].line`` are 0-based indexes inside the range."""

    path: str
    start: int
    end: int
    lines: int = 0
    valid: int = 0
    invalid: int = 0
    bytes: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Example]] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    #: the distinct prompt hashes of the range, sorted (array "q" bytes), and the salt they were made with
    hashes_sorted: bytes = b""
    hash_domain: int = 0
    #: prompts hashed in the range, and how many of them repeat an earlier prompt of the same range
    hashed: int = 0
    duplicates_within: int = 0
    error: str | None = None  # the range could not be read (e.g. a Ray worker without the file)


@dataclass
class FileResult:
    path: str
    lines: int = 0
    valid: int = 0
    invalid: int = 0
    bytes: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[Example]] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    duplicate_prompts: int = 0
    duplicate_checked: int = 0
    #: the kept ranges' distinct hashes, their salt, and the duplicates found inside those ranges (cross-file counts)
    hash_arrays: list[array] = field(default_factory=list, repr=False)
    hash_domain: int = 0
    duplicates_within: int = 0
    error: str | None = None


# --------------------------------------------------------------------------------------------------------
# Helpers shared by both paths
# --------------------------------------------------------------------------------------------------------


def _bump(counter: dict, key: Any, n: int = 1) -> None:
    if key in counter or len(counter) < MAX_COUNTER_KEYS:
        counter[key] = counter.get(key, 0) + n
    else:
        counter[OTHER] = counter.get(OTHER, 0) + n


def _length_bucket(n: int) -> int:
    """Exact below 1024, else rounded down to 7 significant bits (< 1% error); bounded number of buckets."""
    if n < 1024:
        return n
    shift = n.bit_length() - 7
    return (n >> shift) << shift


def _type_name(value: Any) -> str:
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


def _record_prompt(st: Stats, roles: Iterable[str], text: str) -> None:
    """Feed one well-formed prompt (its message texts joined by newlines) into the statistics; both paths use it."""
    counter = st.prompt_roles
    for r in roles:
        if r in counter:
            counter[r] += 1
        else:
            _bump(counter, r)
    total = len(text)
    b = total if total < 1024 else _length_bucket(total)
    hist = st.length_hist
    hist[b] = hist.get(b, 0) + 1
    if not text or text.isspace():
        st.empty_prompts += 1
    if len(st.hashes) < DUP_HASH_CAP:
        st.hashes.append(hash(text))


def _line_judger(judger: str, data_source: Any) -> str:
    if judger != "auto":
        return judger
    return KNOWN_SOURCES.get(data_source, "generic") if isinstance(data_source, str) else "generic"


def _excerpt(raw: bytes) -> str:
    text = raw[: EXCERPT_CHARS * 4].decode("utf-8", "replace").rstrip("\r\n")
    if len(text) > EXCERPT_CHARS:
        text = text[:EXCERPT_CHARS] + "…"
    return text.replace("\x00", "\\u0000")


# --------------------------------------------------------------------------------------------------------
# Precise path
# --------------------------------------------------------------------------------------------------------

Issue = tuple[str, str, str]  # code, JSON pointer, message
NO_FINAL_NEWLINE: Issue = ("missing_final_newline", "", "the last line has no trailing newline (harmless)")


def _message_texts(msg: dict) -> list[str]:
    c = msg.get("content")
    if isinstance(c, str):
        return [c]
    out = []
    for part in c:
        t = part.get("text")
        if part.get("type") == "text" and isinstance(t, str):
            out.append(t)
    return out


def _prompt_text(messages: list) -> str:
    """All message texts joined by newlines: what the marker checks and the length statistics look at."""
    return "\n".join(t for m in messages for t in _message_texts(m))


def _check_messages(messages: Any, base: str, issues: list[Issue]) -> list | None:
    """Check a message list; return it when well formed."""
    if not isinstance(messages, list):
        issues.append(
            ("prompt_not_list", base, f"must be a list of {{role, content}} messages, got {_type_name(messages)}")
        )
        return None
    if not messages:
        issues.append(("prompt_empty", base, "the message list is empty"))
        return None
    ok = True
    for i, m in enumerate(messages):
        p = f"{base}/{i}"
        if not isinstance(m, dict):
            issues.append(("bad_message", p, f"a message must be an object, got {_type_name(m)}"))
            ok = False
            continue
        role, content = m.get("role"), m.get("content", UNSET)
        if not isinstance(role, str) or not role:
            what = "missing" if "role" not in m else f"{_type_name(role)} {role!r}"[:60]
            issues.append(("bad_message", f"{p}/role", f"role must be a non-empty string, got {what}"))
            ok = False
        if content is UNSET:
            issues.append(("bad_message", f"{p}/content", "content is missing"))
            ok = False
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    issues.append(
                        ("bad_message", f"{p}/content/{j}", "a content part must be an object with a string 'type'")
                    )
                    ok = False
                    break
        elif not isinstance(content, str):
            issues.append(
                (
                    "bad_message",
                    f"{p}/content",
                    f"content must be a string or a list of parts, got {_type_name(content)}",
                )
            )
            ok = False
    return messages if ok else None


def check_object(obj: dict, judger: str) -> tuple[list[Issue], list | None]:
    """Every issue of one decoded line, and its messages when the prompt is well formed."""
    issues: list[Issue] = []
    if "prompt" not in obj and "question" in obj and "answer" in obj:
        issues.append(("raw_hf_gsm8k_line", "", "raw Hugging Face GSM8K record (question/answer), not converted"))
        return issues, None
    messages = None
    if "prompt" not in obj:
        if "messages" in obj:
            issues.append(
                ("messages_instead_of_prompt", "/messages", "XTuner reads 'prompt'; a 'messages' key is ignored")
            )
        else:
            issues.append(("missing_prompt", "/prompt", "no 'prompt' key"))
    else:
        prompt = obj["prompt"]
        if isinstance(prompt, dict):
            missing = [k for k in ("messages", "tools") if k not in prompt]
            if missing:
                issues.append(("vlm_prompt_missing_key", "/prompt", f"a prompt object needs {' and '.join(missing)!s}"))
            if "messages" in prompt:
                messages = _check_messages(prompt["messages"], "/prompt/messages", issues)
            if not missing:
                issues.append(
                    ("prompt_vlm_object", "/prompt", "object prompt {messages, tools}: VLM tokenize function only")
                )
        else:
            messages = _check_messages(prompt, "/prompt", issues)
        if messages is not None:
            text = _prompt_text(messages)
            if not text or text.isspace():
                issues.append(("prompt_blank", "/prompt", "every message content is empty or whitespace"))

    ds = obj.get("data_source")
    if ds is None:
        issues.append(("missing_data_source", "/data_source", "no 'data_source' (or null)"))
    elif not isinstance(ds, str):
        issues.append(("data_source_not_string", "/data_source", f"must be a string, got {_type_name(ds)}"))
    elif not ds:
        issues.append(("empty_data_source", "/data_source", "data_source is an empty string"))

    line_judger = _line_judger(judger, ds)
    has_gt, gt = False, None
    if "reward_model" not in obj or obj["reward_model"] is None:
        issues.append(("missing_reward_model", "/reward_model", "no 'reward_model' (or null)"))
    elif not isinstance(obj["reward_model"], dict):
        issues.append(
            ("reward_model_not_object", "/reward_model", f"must be an object, got {_type_name(obj['reward_model'])}")
        )
    else:
        rm = obj["reward_model"]
        gt = rm.get("ground_truth")
        if gt is None:
            what = "missing" if "ground_truth" not in rm else "null"
            issues.append(("missing_ground_truth", "/reward_model/ground_truth", f"ground_truth is {what}"))
        elif gt == "":
            issues.append(("empty_ground_truth", "/reward_model/ground_truth", "ground_truth is an empty string"))
        else:
            has_gt = True

    if "extra_info" in obj and not isinstance(obj["extra_info"], dict):
        issues.append(
            ("extra_info_not_object", "/extra_info", f"must be an object, got {_type_name(obj['extra_info'])}")
        )

    prompt_text = _prompt_text(messages) if messages is not None else None
    _judger_rules(line_judger, judger, ds, has_gt, gt, prompt_text, issues)
    return issues, messages


def _judger_rules(
    line_judger: str, judger: str, ds: Any, has_gt: bool, gt: Any, prompt_text: str | None, issues: list[Issue]
) -> None:
    p = "/reward_model/ground_truth"
    expected = EXPECTED_SOURCE.get(line_judger)
    if judger != "auto" and expected and isinstance(ds, str) and ds and ds != expected:
        issues.append(
            (
                "unknown_data_source",
                "/data_source",
                f"{ds!r} is not {expected!r}, the source the {judger} judger is built for",
            )
        )
    if line_judger == "gsm8k":
        if has_gt and not isinstance(gt, str):
            issues.append(
                ("gsm8k_ground_truth_not_string", p, f"ground_truth is a JSON {_type_name(gt)} ({gt!r})"[:120])
            )
        elif has_gt and not GSM8K_GT_RE.fullmatch(gt):
            issues.append(
                ("gsm8k_ground_truth_format", p, f"{gt!r} can never equal the number taken from '#### <n>'"[:160])
            )
        elif has_gt and (not GSM8K_CANONICAL_RE.fullmatch(gt) or gt == "-0"):
            issues.append(
                (
                    "gsm8k_ground_truth_noncanonical",
                    p,
                    f"{gt!r} scores only if the model writes exactly this form"[:160],
                )
            )
        if prompt_text is not None and "####" not in prompt_text:
            issues.append(
                ("gsm8k_prompt_no_answer_marker", "/prompt", "no message asks for the final answer after '####'")
            )
    elif line_judger == "dapo_math":
        if has_gt and not isinstance(gt, str):
            issues.append(
                ("dapo_ground_truth_not_string", p, f"ground_truth is a JSON {_type_name(gt)} ({gt!r})"[:120])
            )
        if prompt_text is not None and not DAPO_ANSWER_RE.search(prompt_text):
            issues.append(("dapo_prompt_no_answer_marker", "/prompt", "no message asks for a final 'Answer: ...' line"))
    elif line_judger == "geo3k":
        if has_gt and not isinstance(gt, str):
            issues.append(
                ("geo3k_ground_truth_not_string", p, f"ground_truth is a JSON {_type_name(gt)} ({gt!r})"[:120])
            )
        if prompt_text is not None and "boxed" not in prompt_text:
            issues.append(("geo3k_prompt_no_boxed_marker", "/prompt", "no message asks for the answer in \\boxed{}"))


def _struct_prompt(msgs: list[_Message]) -> tuple[str, list[str]]:
    """The prompt text (message texts joined by newlines) and roles of a typed decode, as ``_prompt_text`` reads them."""
    texts = []
    for m in msgs:
        c = m.content
        if type(c) is str:
            texts.append(c)
        else:
            for part in c:
                if part.type == "text" and type(part.text) is str:
                    texts.append(part.text)
    return "\n".join(texts), [m.role for m in msgs]


def _quick_ok(o: _Line, judger: str, st: Stats) -> bool:
    """Hot-path checks on one typed decode; True (and statistics recorded) only when the line has no issue at all."""
    gt = o.reward_model.ground_truth
    if gt is None or gt == "":
        return False
    ds = o.data_source
    msgs = o.prompt
    first = msgs[0].content
    if len(msgs) == 1 and type(first) is str:
        text = first
        roles: Iterable[str] = (msgs[0].role,)
    else:
        text, roles = _struct_prompt(msgs)
    if not text or text.isspace():
        return False
    lj = judger if judger != "auto" else KNOWN_SOURCES.get(ds, "generic")
    if lj != "generic":
        if type(gt) is not str:
            return False
        if judger != "auto" and lj in EXPECTED_SOURCE and ds != EXPECTED_SOURCE[lj]:
            return False
        if lj == "gsm8k":
            if "####" not in text:
                return False
            if not (gt.isdigit() and gt.isascii() and (gt[0] != "0" or len(gt) == 1)):  # plain integers: no regex
                if gt == "-0" or not GSM8K_CANONICAL_RE.fullmatch(gt):
                    return False
        elif lj == "dapo_math":
            if not DAPO_ANSWER_RE.search(text):
                return False
        elif lj == "geo3k" and "boxed" not in text:
            return False
    # statistics, inlined (this runs for every clean line of a block that did not pass whole); as _record_prompt
    counter = st.data_sources
    if ds in counter:
        counter[ds] += 1
    else:
        _bump(counter, ds)
    _bump(st.ground_truth_types, "string" if type(gt) is str else _type_name(gt))
    counter = st.prompt_roles
    for r in roles:
        if r in counter:
            counter[r] += 1
        else:
            _bump(counter, r)
    total = len(text)
    b = total if total < 1024 else _length_bucket(total)
    hist = st.length_hist
    hist[b] = hist.get(b, 0) + 1
    hashes = st.hashes
    if len(hashes) < DUP_HASH_CAP:
        hashes.append(hash(text))
    return True


_get_prompt = attrgetter("prompt")
_get_source = attrgetter("data_source")
_get_truth = attrgetter("reward_model.ground_truth")
_get_content = attrgetter("content")
_get_role = attrgetter("role")
_first = itemgetter(0)
_is_one = (1).__eq__
_JSON_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _tally(values: list) -> dict:
    """Counts in first-seen order; one C-level ``list.count`` when every value is the first (the usual block)."""
    if values and values.count(values[0]) == len(values):
        return {values[0]: len(values)}
    return Counter(values)


def _block_ok(objs: list[_Line], judger: str, st: Stats) -> bool:
    """Column-wise ``_quick_ok`` over a decoded block: True, with every line's statistics recorded, only when every
    line of the block is clean; False (nothing recorded) sends the block to the line-by-line path.

    Every test is a C-level ``map``/``all``/``Counter`` over a column, so a clean block costs little Python per line.
    """
    sources = _tally(list(map(_get_source, objs)))
    if judger == "auto":
        kinds = {KNOWN_SOURCES.get(s, "generic") for s in sources}
        if len(kinds) != 1:
            return False
        lj = kinds.pop()
    else:
        lj = judger
        expected = EXPECTED_SOURCE.get(lj)
        if expected is not None and (len(sources) != 1 or expected not in sources):
            return False
    truths = list(map(_get_truth, objs))
    if lj == "generic":
        if None in truths or "" in truths:
            return False
    else:
        if not all(map(isinstance, truths, repeat(str))) or "" in truths:
            return False
        if lj == "gsm8k" and not (
            all(map(str.isdigit, truths)) and all(map(str.isascii, truths)) and "0" not in map(_first, truths)
        ):  # not all plain integers: the regex decides
            if "-0" in truths or not all(map(GSM8K_CANONICAL_RE.fullmatch, truths)):
                return False
    prompts = list(map(_get_prompt, objs))
    texts: list[str] | None = None
    if all(map(_is_one, map(len, prompts))):
        firsts = list(map(_first, prompts))
        texts = list(map(_get_content, firsts))
        if all(map(isinstance, texts, repeat(str))):
            roles = _tally(list(map(_get_role, firsts)))
        else:
            texts = None
    if texts is None:  # several messages or content parts
        texts, roles = [], Counter()
        for msgs in prompts:
            text, rs = _struct_prompt(msgs)
            texts.append(text)
            roles.update(rs)
    if not all(texts) or any(map(str.isspace, texts)):
        return False
    if lj == "gsm8k":
        if -1 in map(str.rfind, texts, repeat("####")):
            return False
    elif lj == "dapo_math":
        if not all(map(DAPO_ANSWER_RE.search, texts)):
            return False
    elif lj == "geo3k" and -1 in map(str.find, texts, repeat("boxed")):
        return False
    # every line is clean: record the block's statistics in first-seen order, as line-by-line recording would
    for key, n in sources.items():
        _bump(st.data_sources, key, n)
    if lj == "generic":
        for t, n in Counter(map(type, truths)).items():
            _bump(st.ground_truth_types, _JSON_TYPE_NAMES.get(t, t.__name__), n)
    else:
        _bump(st.ground_truth_types, "string", len(truths))
    for key, n in roles.items():
        _bump(st.prompt_roles, key, n)
    lengths = list(map(len, texts))
    hist = st.length_hist
    for k, n in Counter(lengths).items():
        b = k if k < 1024 else _length_bucket(k)
        hist[b] = hist.get(b, 0) + n
    room = DUP_HASH_CAP - len(st.hashes)
    if room > 0:
        st.hashes.extend(map(hash, texts[:room] if room < len(texts) else texts))
    return True


_SCHEMA: dict | None = None


def load_schema() -> dict:
    """The contract (references/schemas/rl-sample.schema.json), read once."""
    global _SCHEMA
    if _SCHEMA is None:
        here = Path(__file__).resolve().parent.parent / "references" / "schemas" / "rl-sample.schema.json"
        _SCHEMA = json.loads(here.read_text(encoding="utf-8"))
    return _SCHEMA


def set_schema(schema: dict) -> None:
    """Use this schema instead of the packaged file (Ray workers receive it with the task)."""
    global _SCHEMA
    if schema != _SCHEMA:
        _SCHEMA = schema
        schema_validator.cache_clear()


@lru_cache(maxsize=8)
def schema_validator(judger: str):  # type: ignore[no-untyped-def]
    """The jsonschema validator of the contract for a judger (lazy: jsonschema is imported on first failure)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = load_schema()
    registry = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    ref = {"gsm8k": "#/$defs/gsm8k_line", "dapo_math": "#/$defs/dapo_math_line"}.get(judger, "#")
    return Draft202012Validator({"$ref": schema["$id"] + ref}, registry=registry)


def _schema_error(obj: Any, judger: str) -> str | None:
    from jsonschema.exceptions import best_match

    line_judger = _line_judger(judger, obj.get("data_source") if isinstance(obj, dict) else None)
    try:
        err = best_match(schema_validator(line_judger).iter_errors(obj))
    except Exception:  # no schema available (e.g. a worker without the file): explanations are optional
        return None
    if err is None:
        return None
    return f"{err.json_path}: {err.message}"[:300]


# --------------------------------------------------------------------------------------------------------
# Range scanning
# --------------------------------------------------------------------------------------------------------


class _Acc:
    """Accumulates one range's counts and examples."""

    def __init__(self, res: RangeResult, opts: ScanOptions) -> None:
        self.res = res
        self.opts = opts

    def add(self, idx: int, raw: bytes, issues: list[Issue], obj: Any = None, schema: bool = False) -> None:
        res = self.res
        blocked = False
        for code, pointer, message in issues:
            res.codes[code] = res.codes.get(code, 0) + 1
            blocked = blocked or code in BLOCKING
            bucket = res.examples.setdefault(code, [])
            if len(bucket) < self.opts.max_examples_per_code:
                schema_error = None
                if schema and code in BLOCKING:
                    schema_error = _schema_error(obj, self.opts.judger)
                bucket.append(Example(idx, code, pointer, message, _excerpt(raw), schema_error))
        if blocked:
            res.invalid += 1
        else:
            res.valid += 1


def _skip_line(f: Any, chunk: int = 1 << 20) -> int:
    """Consume the rest of the current line (through its newline); return the bytes consumed."""
    n = 0
    while True:
        piece = f.readline(chunk)
        n += len(piece)
        if not piece or piece.endswith(b"\n"):
            return n


def analyze_line(raw: bytes, *, last_unterminated: bool, judger: str) -> tuple[list[Issue], Any]:
    """The precise verdict on one line's bytes (newline included), as XTuner's reader would see it."""
    if raw.startswith(BOM):
        return [("bom", "", "line starts with a UTF-8 byte-order mark; json.loads refuses it")], None
    if b"\x00" in raw:
        return [("nul_byte", "", f"NUL byte at offset {raw.index(NUL)}")], None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [("invalid_utf8", "", f"invalid UTF-8 at byte {exc.start}: {exc.reason}")], None
    if not text.strip():
        return [("blank_line", "", "empty or whitespace-only line")], None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):  # an integer over Python's str->int digit limit
            return [("invalid_json", "", f"json.loads refuses it: {str(exc)[:120]}")], None
        code = "truncated_last_line" if last_unterminated else "invalid_json"
        msg = f"{exc.msg} at column {exc.colno}"
        if code == "truncated_last_line":
            msg = f"last line has no newline and does not parse ({msg}): the file was probably cut off"
        return [(code, "", msg)], None
    except RecursionError:
        return [("invalid_json", "", "nested too deeply for json.loads (RecursionError)")], None
    if not isinstance(obj, dict):
        return [("not_an_object", "", f"the line is a JSON {_type_name(obj)}, not an object")], obj
    issues, _ = check_object(obj, judger)
    return issues, obj


def _slow_stats(obj: Any, judger: str, st: Stats) -> None:
    if not isinstance(obj, dict):
        return
    ds = obj.get("data_source")
    _bump(st.data_sources, ds if isinstance(ds, str) else f"<{_type_name(ds) if 'data_source' in obj else 'missing'}>")
    rm = obj.get("reward_model")
    if isinstance(rm, dict):
        _bump(st.ground_truth_types, _type_name(rm["ground_truth"]) if "ground_truth" in rm else "<missing>")
    else:
        _bump(st.ground_truth_types, "<no reward_model>")
    issues: list[Issue] = []
    prompt = obj.get("prompt")
    if isinstance(prompt, dict):
        prompt = prompt.get("messages")
    if prompt is None:
        return
    messages = _check_messages(prompt, "", issues)
    if messages is not None:
        _record_prompt(st, [m["role"] for m in messages], _prompt_text(messages))


class _RangeScan:
    """The verdicts of one range's lines, fed a block or a line at a time; results accumulate in ``res``."""

    def __init__(self, res: RangeResult, opts: ScanOptions) -> None:
        self.res = res
        self.acc = _Acc(res, opts)
        self.st = res.stats
        self.judger = opts.judger
        self.limit = max(1, opts.max_line_bytes)
        self.idx = 0  # 0-based index of the next line inside the range

    def block(self, body: bytes) -> None:
        """Whole lines, each ending in a newline and no longer than a block."""
        objs = _decode_block(body)
        if objs is None:  # something in the bytes needs a closer look: every line on its own
            for raw in body.split(b"\n")[:-1]:
                self.line(raw + b"\n")
            return
        if _block_ok(objs, self.judger, self.st):
            n = len(objs)
            res = self.res
            res.lines += n
            res.valid += n
            res.bytes += len(body)
            self.idx += n
            return
        for o, raw in zip(objs, body.split(b"\n")[:-1], strict=True):  # i-th element = i-th line (_decode_block)
            self.verdict(o, raw + b"\n")

    def line(self, raw: bytes) -> None:
        """One line (newline included unless it is the file's last), at most the line limit long."""
        try:
            o = None if _needs_precise(raw) else _DECODER.decode(raw)
        except Exception:  # DecodeError/ValidationError, RecursionError: the precise path decides
            o = None
        self.verdict(o, raw)

    def verdict(self, o: _Line | None, raw: bytes) -> None:
        """Judge one line given its typed decode (None: it did not decode or its bytes need the precise path)."""
        res = self.res
        res.lines += 1
        res.bytes += len(raw)
        terminated = raw.endswith(b"\n")
        if o is not None and _quick_ok(o, self.judger, self.st):
            if terminated:
                res.valid += 1
            else:
                self.acc.add(self.idx, raw, [NO_FINAL_NEWLINE])
        else:
            issues, obj = analyze_line(raw, last_unterminated=not terminated, judger=self.judger)
            if not terminated and not any(c in BLOCKING for c, _, _ in issues):
                issues.append(NO_FINAL_NEWLINE)
            if obj is not None:
                _slow_stats(obj, self.judger, self.st)
            self.acc.add(self.idx, raw, issues, obj, schema=obj is not None)
        self.idx += 1

    def too_long(self, head: bytes, n: int) -> None:
        """A line of ``n`` bytes over the limit, of which only ``head`` was read."""
        res = self.res
        res.lines += 1
        res.bytes += n
        self.acc.add(self.idx, head, [("line_too_long", "", f"line is {n} bytes, over the {self.limit}-byte limit")])
        self.idx += 1

    def finish(self) -> RangeResult:
        """Close the range: its distinct prompt hashes, sorted, in place of the per-line list."""
        res = self.res
        hashes = res.stats.hashes[:DUP_HASH_CAP]
        distinct = sorted(set(hashes))
        res.hashed = len(hashes)
        res.duplicates_within = len(hashes) - len(distinct)
        res.hashes_sorted = array("q", distinct).tobytes()
        res.hash_domain = HASH_DOMAIN
        res.stats.hashes = array("q")
        return res


def _has_long_digits(body: bytes) -> bool:
    """Whether ``body`` holds a run of over 4300 digits, looking closely only where a 1-in-1024 sample says so."""
    for hint in LONG_DIGITS_HINT_RE.finditer(body[::1024]):
        at = hint.start() * 1024
        if LONG_DIGITS_RE.search(body, max(0, at - INT_DIGITS_LIMIT - 1), at + 4 * 1024 + INT_DIGITS_LIMIT + 1):
            return True
    return False


def _needs_precise(raw: bytes) -> bool:
    """Bytes msgspec would accept but XTuner's reader would not (strict UTF-8 + stdlib ``json``, cited in
    references/schemas/rl-sample.schema.json): invalid UTF-8 inside members msgspec skips, or a 4301+ digit integer."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return len(raw) > INT_DIGITS_LIMIT and _has_long_digits(raw)


def _decode_block(body: bytes) -> list[_Line] | None:
    """The typed decode of every line of ``body`` (whole lines), or None when any line needs the line-by-line path.

    The lines become the elements of one JSON array: each newline turns into a comma. An element can neither span
    lines (no JSON token holds a raw newline) nor be missing (an empty line leaves two commas in a row), so the
    decode succeeds with exactly one element per line -- unless a line holds several comma-separated values, which
    the element count against the newline count catches. The bytes checks msgspec does not make come first.
    """
    if _needs_precise(body):
        return None
    array_text = body.replace(b"\n", b"\n,")  # one byte longer per line: the length difference counts the lines
    try:
        objs = _BLOCK_DECODER.decode(b"".join((b"[", array_text, _BLOCK_SENTINEL, b"]")))
    except Exception:  # DecodeError/ValidationError, RecursionError: some line is not a clean record
        return None
    objs.pop()
    return objs if len(objs) == len(array_text) - len(body) else None


def scan_range(
    path: str,
    start: int = 0,
    end: int | None = None,
    opts: ScanOptions | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> RangeResult:
    """Scan the lines whose first byte lies in ``[start, end)`` of ``path`` (``end=None``: to the end of file)."""
    opts = opts or ScanOptions()
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return RangeResult(path, start, start, error=f"cannot read {path}: {exc.strerror or exc}")
    end = size if end is None else min(end, size)
    res = RangeResult(path, start, end)
    scan = _RangeScan(res, opts)
    limit = scan.limit
    block_bytes = min(BLOCK_BYTES, limit)  # so a line inside a block is never over the limit
    try:
        f = open(path, "rb", buffering=1 << 16)  # blocks are read whole; the buffer serves readline
    except OSError as exc:
        res.error = f"cannot read {path}: {exc.strerror or exc}"
        return res
    with f:
        pos = start
        if start > 0:
            f.seek(start - 1)
            pos = start - 1 + _skip_line(f)
        read, readline = f.read, f.readline
        report_every = 8 << 20
        next_report = pos + report_every
        while pos < end:
            chunk = read(min(block_bytes, end - pos))
            if not chunk:
                break
            pos += len(chunk)
            cut = chunk.rfind(b"\n") + 1
            if cut:
                scan.block(chunk[:cut])  # the whole chunk (no copy) when it ends with a newline
            head = chunk[cut:]
            if head:  # the block ends inside a line that starts in this range: finish it
                tail = readline(limit + 1 - len(head))
                pos += len(tail)
                raw = head + tail
                if raw.endswith(b"\n") or len(raw) <= limit:  # whole, or the file's unterminated last line
                    scan.line(raw)
                else:  # over the limit: report it, never load the rest
                    extra = _skip_line(f)
                    pos += extra
                    scan.too_long(raw, len(raw) + extra)
            if on_bytes is not None and pos >= next_report:
                on_bytes(pos - start)
                next_report = pos + report_every
    res.end = max(end, pos)
    return scan.finish()


# --------------------------------------------------------------------------------------------------------
# Planning and merging
# --------------------------------------------------------------------------------------------------------


def plan_ranges(size: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """Cut ``[0, size)`` into ranges of about ``chunk_bytes`` (lines are assigned by their first byte)."""
    if size <= 0:
        return [(0, 0)]
    chunk_bytes = max(1, chunk_bytes)
    return [(s, min(size, s + chunk_bytes)) for s in range(0, size, chunk_bytes)]


def _merge_counter(into: dict, other: dict) -> None:
    for k, v in other.items():
        _bump(into, k, v)


def merge_ranges(path: str, parts: list[RangeResult], opts: ScanOptions) -> FileResult:
    """Combine the ranges of one file (any order) into the file's result with 1-based line numbers."""
    parts = sorted(parts, key=lambda r: r.start)
    out = FileResult(path)
    errors = [p.error for p in parts if p.error]
    if errors:
        out.error = errors[0]
    kept = 0
    kept_all = True
    out.hash_domain = _main_domain((p.hash_domain, p.hashed) for p in parts)
    for part in parts:
        base = out.lines + 1
        out.lines += part.lines
        out.valid += part.valid
        out.invalid += part.invalid
        out.bytes += part.bytes
        for code, n in part.codes.items():
            out.codes[code] = out.codes.get(code, 0) + n
        for code, exs in part.examples.items():
            bucket = out.examples.setdefault(code, [])
            for ex in exs:
                if len(bucket) >= opts.max_examples_per_code:
                    break
                bucket.append(replace(ex, line=ex.line + base))
        # duplicates are checked on a prefix of whole ranges that fits the cap, among ranges hashed alike
        kept_all = kept_all and kept + part.hashed <= DUP_HASH_CAP
        if kept_all and part.hashed and part.hash_domain == out.hash_domain:
            kept += part.hashed
            out.duplicates_within += part.duplicates_within
            arr = array("q")
            arr.frombytes(part.hashes_sorted)
            out.hash_arrays.append(arr)
    out.stats = merge_stats(p.stats for p in parts)
    out.duplicate_checked = kept
    out.duplicate_prompts = out.duplicates_within + count_duplicates(out.hash_arrays)
    return out


def merge_stats(parts: Iterable[Stats]) -> Stats:
    """Sum statistics (counters keep their key cap)."""
    st = Stats()
    for ps in parts:
        _merge_counter(st.data_sources, ps.data_sources)
        _merge_counter(st.ground_truth_types, ps.ground_truth_types)
        _merge_counter(st.prompt_roles, ps.prompt_roles)
        st.empty_prompts += ps.empty_prompts
        for k, v in ps.length_hist.items():
            st.length_hist[k] = st.length_hist.get(k, 0) + v
    return st


def duplicates_across(files: list[FileResult]) -> tuple[int, int]:
    """(duplicate prompts, prompts checked) over several files, on a prefix of whole files within the global cap."""
    arrays: list[array] = []
    within = kept = 0
    domain = _main_domain((fr.hash_domain, fr.duplicate_checked) for fr in files)
    for fr in files:
        if fr.hash_domain != domain:
            continue
        if kept + fr.duplicate_checked > DUP_HASH_CAP:
            break
        arrays.extend(fr.hash_arrays)
        within += fr.duplicates_within
        kept += fr.duplicate_checked
    return within + count_duplicates(arrays), kept


def range_from_dict(d: dict) -> RangeResult:
    """Rebuild a RangeResult from ``dataclasses.asdict`` output (what Ray tasks return)."""
    d = dict(d)
    stats = Stats(**d.pop("stats"))
    stats.length_hist = {int(k): v for k, v in stats.length_hist.items()}
    stats.hashes = array("q", stats.hashes)
    examples = {code: [Example(**e) for e in exs] for code, exs in d.pop("examples").items()}
    return RangeResult(**d, stats=stats, examples=examples)


def _main_domain(sizes: Iterable[tuple[int, int]]) -> int:
    """The hash salt most prompts were hashed with (normally the only one; a range rescanned elsewhere may differ)."""
    total: dict[int, int] = {}
    for domain, n in sizes:
        total[domain] = total.get(domain, 0) + n
    return max(total, key=total.__getitem__) if total else 0


def count_duplicates(sorted_arrays: list[array]) -> int:
    """Items equal to an item of another array, over arrays that are each sorted and free of repeats.

    Distinct values are counted bucket by bucket on the top ``DUP_BUCKET_BITS`` bits (sorted arrays give each
    bucket as one slice), so the transient set holds a sixteenth of the hashes; the work is C-level set building.
    """
    arrays = [a for a in sorted_arrays if len(a)]
    if len(arrays) < 2:
        return 0
    total = sum(map(len, arrays))
    distinct = 0
    los = [0] * len(arrays)
    step = 1 << (64 - DUP_BUCKET_BITS)
    for bucket in range(1, (1 << DUP_BUCKET_BITS) + 1):
        hi = bucket * step - (1 << 63)  # signed 64-bit values
        pieces = []
        for i, arr in enumerate(arrays):
            j = bisect_left(arr, hi, los[i]) if bucket < 1 << DUP_BUCKET_BITS else len(arr)
            if j > los[i]:
                pieces.append(arr[los[i] : j])
                los[i] = j
        if len(pieces) == 1:
            distinct += len(pieces[0])
        elif pieces:
            distinct += len(set(chain.from_iterable(pieces)))
    return total - distinct


def percentile(hist: dict[int, int], total: int, q: float) -> int | None:
    """The q-quantile (0..1) of a bucket histogram (nearest-rank on bucket lower bounds)."""
    if total <= 0:
        return None
    rank = max(1, int(-(-q * total // 1)))  # ceil
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return k
    return max(hist)


#: Range size for sequential in-process scans: keeps per-range buffers small whatever the file size.
SEQUENTIAL_RANGE_BYTES = 64 << 20


def scan_file(path: str, opts: ScanOptions | None = None, on_bytes: Callable[[int], None] | None = None) -> FileResult:
    """Scan one whole file in this process, range after range (no parallelism, bounded memory)."""
    opts = opts or ScanOptions()
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return FileResult(path, error=f"cannot read {path}: {exc.strerror or exc}")
    parts = []
    for start, end in plan_ranges(size, SEQUENTIAL_RANGE_BYTES):
        cb = None if on_bytes is None else (lambda n, s=start: on_bytes(s + n))
        parts.append(scan_range(path, start, end, opts, cb))
        if on_bytes is not None:
            on_bytes(end)
    return merge_ranges(path, parts, opts)


# --------------------------------------------------------------------------------------------------------
# Local worker processes: length-prefixed pickles over stdin/stdout
# --------------------------------------------------------------------------------------------------------


def send_message(stream: Any, obj: Any) -> None:
    import pickle

    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def recv_message(stream: Any) -> Any:
    import pickle

    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("worker closed its output")
    n = int.from_bytes(head, "little")
    data = stream.read(n)
    if len(data) < n:
        raise EOFError("worker output cut short")
    return pickle.loads(data)


def worker_main() -> None:
    """Entry point of a local worker process: scan the (path, start, end, options) tasks read from stdin."""
    import sys

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            path, start, end, opts = recv_message(stdin)
        except EOFError:
            return
        send_message(stdout, scan_range(path, start, end, opts))
