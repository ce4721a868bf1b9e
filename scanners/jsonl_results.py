"""What a scan produces -- options, examples, statistics, range and file results -- and the bounded statistics
both line paths feed (counters keep at most ``MAX_COUNTER_KEYS`` keys, prompt lengths go into buckets)."""

from __future__ import annotations

import builtins
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_MAX_LINE_BYTES = 1 << 20
#: Distinct keys kept per counter (data_source, roles); the rest are summed under OTHER.
MAX_COUNTER_KEYS = 200
OTHER = "<other>"
#: Line numbers kept per collapsed example and per derivable-ground-truth field.
MAX_LINES_PER_EXAMPLE = 10
#: Prompt hashes kept for duplicate detection (8 bytes each): beyond this, duplicates are checked on a prefix.
DUP_HASH_CAP = 4_000_000


@dataclass(frozen=True)
class ScanOptions:
    judger: str = "auto"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_examples_per_code: int = 20
    #: identical issues (same code, pointer and message, digits ignored) share one example with a count
    collapse: bool = True


@dataclass
class Example:
    line: int  # 1-based once merged; 0-based index inside its range before
    code: str
    pointer: str
    message: str
    excerpt: str
    schema_error: str | None = None
    #: lines with this same issue (collapsed), and the first of their line numbers (this example's first)
    count: int = 1
    lines: list[int] = field(default_factory=list)


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
    hashes_sorted: builtins.bytes = b""
    hash_domain: int = 0
    #: prompts hashed in the range, and how many of them repeat an earlier prompt of the same range
    hashed: int = 0
    duplicates_within: int = 0
    #: lines missing a ground truth that a field's '#### <n>' answer could supply: pointer -> count, first indexes
    derivable: dict[str, int] = field(default_factory=dict)
    derivable_lines: list[int] = field(default_factory=list)
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
    derivable: dict[str, int] = field(default_factory=dict)
    derivable_lines: list[int] = field(default_factory=list)
    error: str | None = None


def bump(counter: dict[str, int], key: str, n: int = 1) -> None:
    if key in counter or len(counter) < MAX_COUNTER_KEYS:
        counter[key] = counter.get(key, 0) + n
    else:
        counter[OTHER] = counter.get(OTHER, 0) + n


def length_bucket(n: int) -> int:
    """Exact below 1024, else rounded down to 7 significant bits (< 1% error); bounded number of buckets."""
    if n < 1024:
        return n
    shift = n.bit_length() - 7
    return (n >> shift) << shift


def record_prompt(st: Stats, roles: Iterable[str], text: str) -> None:
    """Feed one well-formed prompt (its message texts joined by newlines) into the statistics; both paths use it."""
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
    if not text or text.isspace():
        st.empty_prompts += 1
    if len(st.hashes) < DUP_HASH_CAP:
        st.hashes.append(hash(text))


def range_from_dict(d: dict) -> RangeResult:
    """Rebuild a RangeResult from ``dataclasses.asdict`` output (what Ray tasks return)."""
    d = dict(d)
    stats = Stats(**d.pop("stats"))
    stats.length_hist = {int(k): v for k, v in stats.length_hist.items()}
    stats.hashes = array("q", stats.hashes)
    examples = {code: [Example(**e) for e in exs] for code, exs in d.pop("examples").items()}
    return RangeResult(**d, stats=stats, examples=examples)
