"""The typed fast path: the contract as msgspec types, a block of whole lines decoded in one call, and
column-wise checks that pass a block only when every line in it is clean (anything else goes line by line)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .jsonl_contract import DAPO_ANSWER_RE, EXPECTED_SOURCE, GSM8K_CANONICAL_RE, KNOWN_SOURCES, type_name
from .jsonl_results import DUP_HASH_CAP, Stats, bump, length_bucket

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
    ground_truth: Any  # any JSON value: the judger-specific checks decide what is acceptable


class TypedLine(Struct, gc=False):
    prompt: Annotated[list[_Message], Meta(min_length=1)]
    data_source: Annotated[str, Meta(min_length=1)]
    reward_model: _RewardModel
    extra_info: _Object | UnsetType = UNSET


LINE_DECODER = msgspec.json.Decoder(TypedLine)
#: A block's lines are decoded as one JSON array; a valid record closes it, so the array never ends in a comma.
_BLOCK_DECODER = msgspec.json.Decoder(list[TypedLine])
_BLOCK_SENTINEL = b'{"prompt":[{"role":"-","content":"-"}],"data_source":"-","reward_model":{"ground_truth":"-"}}'


def _struct_prompt(msgs: list[_Message]) -> tuple[str, list[str]]:
    """The prompt text (message texts joined by newlines) and roles of a typed decode, as the precise path's
    ``_prompt_text`` reads them."""
    texts = []
    for m in msgs:
        c = m.content
        if isinstance(c, str):
            texts.append(c)
        else:
            for part in c:
                if part.type == "text" and type(part.text) is str:
                    texts.append(part.text)
    return "\n".join(texts), [m.role for m in msgs]


def quick_ok(o: TypedLine, judger: str, st: Stats) -> bool:
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
    # statistics, inlined (this runs for every clean line of a block that did not pass whole); as record_prompt
    counter = st.data_sources
    if ds in counter:
        counter[ds] += 1
    else:
        bump(counter, ds)
    bump(st.ground_truth_types, "string" if type(gt) is str else type_name(gt))
    counter = st.prompt_roles
    for r in roles:
        if r in counter:
            counter[r] += 1
        else:
            bump(counter, r)
    total = len(text)
    b = total if total < 1024 else length_bucket(total)
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


def block_ok(objs: list[TypedLine], judger: str, st: Stats) -> bool:
    """Column-wise ``quick_ok`` over a decoded block: True, with every line's statistics recorded, only when every
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
        bump(st.data_sources, key, n)
    if lj == "generic":
        for t, n in Counter(map(type, truths)).items():
            bump(st.ground_truth_types, _JSON_TYPE_NAMES.get(t, t.__name__), n)
    else:
        bump(st.ground_truth_types, "string", len(truths))
    for key, n in roles.items():
        bump(st.prompt_roles, key, n)
    lengths = list(map(len, texts))
    hist = st.length_hist
    for k, n in Counter(lengths).items():
        b = k if k < 1024 else length_bucket(k)
        hist[b] = hist.get(b, 0) + n
    room = DUP_HASH_CAP - len(st.hashes)
    if room > 0:
        st.hashes.extend(map(hash, texts[:room] if room < len(texts) else texts))
    return True


def _has_long_digits(body: bytes) -> bool:
    """Whether ``body`` holds a run of over 4300 digits, looking closely only where a 1-in-1024 sample says so."""
    for hint in LONG_DIGITS_HINT_RE.finditer(body[::1024]):
        at = hint.start() * 1024
        if LONG_DIGITS_RE.search(body, max(0, at - INT_DIGITS_LIMIT - 1), at + 4 * 1024 + INT_DIGITS_LIMIT + 1):
            return True
    return False


def needs_precise(raw: bytes) -> bool:
    """Bytes msgspec would accept but XTuner's reader would not (strict UTF-8 + stdlib ``json``, cited in
    references/schemas/rl-sample.schema.json): invalid UTF-8 inside members msgspec skips, or a 4301+ digit integer."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return len(raw) > INT_DIGITS_LIMIT and _has_long_digits(raw)


def decode_block(body: bytes) -> list[TypedLine] | None:
    """The typed decode of every line of ``body`` (whole lines), or None when any line needs the line-by-line path.

    The lines become the elements of one JSON array: each newline turns into a comma. An element can neither span
    lines (no JSON token holds a raw newline) nor be missing (an empty line leaves two commas in a row), so the
    decode succeeds with exactly one element per line -- unless a line holds several comma-separated values, which
    the element count against the newline count catches. The bytes checks msgspec does not make come first.
    """
    if needs_precise(body):
        return None
    array_text = body.replace(b"\n", b"\n,")  # one byte longer per line: the length difference counts the lines
    try:
        objs = _BLOCK_DECODER.decode(b"".join((b"[", array_text, _BLOCK_SENTINEL, b"]")))
    except Exception:  # DecodeError/ValidationError, RecursionError: some line is not a clean record
        return None
    objs.pop()
    return objs if len(objs) == len(array_text) - len(body) else None
