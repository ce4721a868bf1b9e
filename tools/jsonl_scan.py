"""Streaming, line-accurate scanner for XTuner RL JSONL data: the engine behind ``check_reward_data``.

Self-contained on purpose (stdlib + msgspec; jsonschema only for failing lines): Ray ships this module to its
workers by value, so it must not import anything else from this package.

How a line is judged:

* hot path: one typed ``msgspec`` decode of the contract (``references/schemas/rl-sample.schema.json``) plus a few
  cheap checks. A line that passes has no issue of any severity and only feeds the statistics.
* anything else takes the precise path: the bytes are decoded the way XTuner's dataset does (strict UTF-8, stdlib
  ``json``), every rule below gives a stable code, and ``jsonschema`` explains the first failing lines per code.

The unit of work is a byte range of one file: a range owns every line whose first byte lies inside it, so ranges
cut anywhere can be scanned independently (processes, Ray tasks) and merged into exactly the single-pass result.
Memory stays bounded whatever the file size: lines are read one at a time (an over-long line is skipped in 1 MiB
pieces, never held), counters keep at most ``MAX_COUNTER_KEYS`` keys, prompt lengths go into a bucket histogram and
duplicate detection keeps 8 bytes per prompt (capped at ``DUP_HASH_CAP``).

Entry points: ``scan_file`` (one file, this process), ``scan_range`` + ``merge_ranges`` (parallel use),
``worker_main`` (a local worker process, driven by check_reward_data over stdin/stdout).
"""

from __future__ import annotations

import heapq
import json
import os
import re
import zlib
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache
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
    hashes: list[int] = field(default_factory=list)


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
    hashes_sorted: bytes = b""
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
    hash_arrays: list[array] = field(default_factory=list, repr=False)
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
        st.hashes.append(zlib.crc32(text.encode("utf-8", "surrogatepass")) | ((total & 0xFFFFFFFF) << 32))


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


def _quick_ok(o: _Line, judger: str, st: Stats) -> bool:
    """Hot-path checks on a typed decode; True (and statistics recorded) only when the line has no issue at all."""
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
        texts = []
        for m in msgs:
            c = m.content
            if type(c) is str:
                texts.append(c)
            else:
                for part in c:
                    if part.type == "text" and type(part.text) is str:
                        texts.append(part.text)
        text = "\n".join(texts)
        roles = [m.role for m in msgs]
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
    # statistics, inlined (this runs for every clean line); same results as _record_prompt
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
        hashes.append(zlib.crc32(text.encode("utf-8", "surrogatepass")) | ((total & 0xFFFFFFFF) << 32))
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
    acc = _Acc(res, opts)
    st = res.stats
    limit = max(1, opts.max_line_bytes)
    judger = opts.judger
    decode = _DECODER.decode
    try:
        f = open(path, "rb", buffering=1 << 20)
    except OSError as exc:
        res.error = f"cannot read {path}: {exc.strerror or exc}"
        return res
    with f:
        pos = start
        if start > 0:
            f.seek(start - 1)
            pos = start - 1 + _skip_line(f)
        readline = f.readline
        idx = 0
        report_every = 8 << 20
        next_report = pos + report_every
        while pos < end:
            line = readline(limit + 1)
            if not line:
                break
            n = len(line)
            terminated = line[-1] == 10  # b"\n"
            if not terminated and n > limit:  # over the limit: report, never load the rest
                n += _skip_line(f)
                pos += n
                res.lines += 1
                res.bytes += n
                acc.add(idx, line, [("line_too_long", "", f"line is {n} bytes, over the {limit}-byte limit")])
                idx += 1
                continue
            pos += n
            res.lines += 1
            res.bytes += n
            try:
                o = decode(line)
                if not line.isascii():
                    line.decode("utf-8")  # msgspec does not check UTF-8 inside the members it skips
                if n > INT_DIGITS_LIMIT and LONG_DIGITS_RE.search(line):
                    o = None  # json.loads refuses integers this long; msgspec may skip over them
            except Exception:  # DecodeError/ValidationError, UnicodeDecodeError, RecursionError: precise path decides
                o = None
            if o is not None and _quick_ok(o, judger, st):
                if terminated:
                    res.valid += 1
                else:
                    acc.add(idx, line, [NO_FINAL_NEWLINE])
            else:
                last_unterminated = not terminated
                issues, obj = analyze_line(line, last_unterminated=last_unterminated, judger=judger)
                if last_unterminated and not any(c in BLOCKING for c, _, _ in issues):
                    issues.append(NO_FINAL_NEWLINE)
                if obj is not None:
                    _slow_stats(obj, judger, st)
                acc.add(idx, line, issues, obj, schema=obj is not None)
            idx += 1
            if on_bytes is not None and pos >= next_report:
                on_bytes(pos - start)
                next_report = pos + report_every
    res.end = max(end, pos)
    hashes = array("Q", sorted(st.hashes[:DUP_HASH_CAP]))
    res.hashes_sorted = hashes.tobytes()
    st.hashes = []
    return res


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
    hash_arrays: list[array] = []
    kept = 0
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
        if part.hashes_sorted and kept < DUP_HASH_CAP:
            arr = array("Q")
            arr.frombytes(part.hashes_sorted)
            if kept + len(arr) > DUP_HASH_CAP:  # keep a prefix: re-sort is cheap at this size
                arr = array("Q", sorted(arr[: DUP_HASH_CAP - kept]))
            kept += len(arr)
            hash_arrays.append(arr)
    out.stats = merge_stats(p.stats for p in parts)
    out.duplicate_checked = kept
    out.duplicate_prompts = count_duplicates(hash_arrays)
    out.hash_arrays = hash_arrays
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
    """(duplicate prompts, prompts checked) over several files' hash arrays, within the global cap."""
    arrays: list[array] = []
    kept = 0
    for fr in files:
        for arr in fr.hash_arrays:
            if kept >= DUP_HASH_CAP:
                break
            if kept + len(arr) > DUP_HASH_CAP:
                arr = array("Q", sorted(arr[: DUP_HASH_CAP - kept]))
            arrays.append(arr)
            kept += len(arr)
    return count_duplicates(arrays), kept


def range_from_dict(d: dict) -> RangeResult:
    """Rebuild a RangeResult from ``dataclasses.asdict`` output (what Ray tasks return)."""
    d = dict(d)
    stats = Stats(**d.pop("stats"))
    stats.length_hist = {int(k): v for k, v in stats.length_hist.items()}
    examples = {code: [Example(**e) for e in exs] for code, exs in d.pop("examples").items()}
    return RangeResult(**d, stats=stats, examples=examples)


def count_duplicates(sorted_arrays: list[array]) -> int:
    """Number of items equal to an earlier one, over already-sorted arrays (streaming, O(1) extra memory)."""
    dup = 0
    prev = None
    for h in heapq.merge(*sorted_arrays):
        if h == prev:
            dup += 1
        prev = h
    return dup


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
