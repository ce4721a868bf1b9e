"""Streaming, line-accurate scanner for XTuner RL JSONL data: the engine behind ``check_reward_data``.

Self-contained on purpose (stdlib + msgspec; jsonschema only for failing lines): Ray ships this module and the
``jsonl_*`` modules it imports to its workers by value (``ray_scan.SCANNER_MODULES``), so they import nothing else
from this package -- only each other, relatively.

How a line is judged:

* hot path (``jsonl_blocks``), a block (about 1 MiB of whole lines) at a time: the block is checked as bytes
  (UTF-8, digit runs), its lines are decoded by one typed ``msgspec`` call as the elements of a JSON array (the
  contract of ``references/schemas/rl-sample.schema.json`` as msgspec types), and the contract's remaining rules and
  the statistics run column-wise over the decoded block in C-level ``map`` calls. A block only passes when every line
  in it has no issue of any severity.
* a block that does not pass is judged line by line: the same typed decode and quick checks per line, and a line
  that still fails takes the precise path.
* anything else takes the precise path (``jsonl_precise``): the bytes are decoded the way XTuner's dataset does
  (strict UTF-8, stdlib ``json``), every rule gives a stable code, and ``jsonschema`` explains the first failing
  lines per code.

The unit of work is a byte range of one file: a range owns every line whose first byte lies inside it, so ranges
cut anywhere can be scanned independently (processes, Ray tasks) and merged into exactly the single-pass result.
Memory stays bounded whatever the file size: the file is read a block at a time (an over-long line is skipped in
1 MiB pieces, never held), counters keep at most ``MAX_COUNTER_KEYS`` keys, prompt lengths go into a bucket
histogram and duplicate detection keeps 8 bytes per distinct prompt of a range (capped at ``DUP_HASH_CAP``), merged
in buckets of the hash's top bits (``jsonl_duplicates``). Codes and patterns live in ``jsonl_contract``, the result
records in ``jsonl_results``; this module reads ranges and merges them.

Entry points: ``scan_file`` (one file, this process), ``plan_ranges`` + ``scan_range`` + ``merge_ranges`` (parallel
use: ``parallel`` over local worker processes, ``ray_scan`` over a Ray cluster).

Files are opened by the caller's ``open_file`` (the server passes its guarded opener: roots per file, regular files
only, non-blocking); the default, for paths a caller already checked (workers, Ray tasks), refuses a link in the last
component and anything but a regular file, without blocking. A caller's ``limits`` (``core.limits.CallLimits``) is
checked once per block, so a cancelled or expired call stops within a block.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, BinaryIO, Protocol

from .jsonl_blocks import LINE_DECODER, TypedLine, block_ok, decode_block, needs_precise, quick_ok
from .jsonl_contract import BLOCKING, GT_MISSING_CODES, derivable_field
from .jsonl_duplicates import HASH_DOMAIN, count_duplicates, main_domain
from .jsonl_precise import NO_FINAL_NEWLINE, Issue, analyze_line, schema_explanation, slow_stats
from .jsonl_results import (
    DUP_HASH_CAP,
    MAX_LINES_PER_EXAMPLE,
    Example,
    FileResult,
    RangeResult,
    ScanOptions,
    Stats,
    bump,
)

EXCERPT_CHARS = 160
#: Bytes read per block; a line inside a block is never longer than a block, so blocks never exceed the line limit.
BLOCK_BYTES = 1 << 20
#: Range size for sequential in-process scans: keeps per-range buffers small whatever the file size.
SEQUENTIAL_RANGE_BYTES = 64 << 20
_DIGITS = re.compile(r"[0-9]+")
#: Read buffer of a scanned file: blocks are read whole; the buffer serves ``readline``.
READ_BUFFER_BYTES = 1 << 16


class Limits(Protocol):
    """What a scan checks once per block: ``check()`` raises when the call is cancelled or past its deadline."""

    def check(self) -> None: ...


class _NoLimits:
    def check(self) -> None:
        return None


NO_LIMITS: Limits = _NoLimits()
#: Opens one file of a scan for binary reading.
Opener = Callable[[str], AbstractContextManager[BinaryIO]]


@contextlib.contextmanager
def open_regular(path: str) -> Iterator[BinaryIO]:
    """Open a file its caller already checked: no link in the last component, never blocking, regular files only."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb", buffering=READ_BUFFER_BYTES)
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def example_key(ex: Example) -> tuple[str, str, str]:
    """What makes two issues the same for collapsing: code, pointer and message with its numbers ignored."""
    return ex.code, ex.pointer, _DIGITS.sub("#", ex.message)


# --------------------------------------------------------------------------------------------------------
# Range scanning
# --------------------------------------------------------------------------------------------------------


def _excerpt(raw: bytes) -> str:
    text = raw[: EXCERPT_CHARS * 4].decode("utf-8", "replace").rstrip("\r\n")
    if len(text) > EXCERPT_CHARS:
        text = text[:EXCERPT_CHARS] + "…"
    return text.replace("\x00", "\\u0000")


class _Acc:
    """Accumulates one range's counts and examples; identical issues share one example (``opts.collapse``)."""

    def __init__(self, res: RangeResult, opts: ScanOptions) -> None:
        self.res = res
        self.opts = opts
        self.same: dict[tuple[str, str, str], Example] = {}

    def add(self, idx: int, raw: bytes, issues: list[Issue], obj: Any = None, schema: bool = False) -> None:
        """Count a line's issues and keep their examples; ``obj`` is the decoded line (any JSON value), None when it
        did not decode."""
        res = self.res
        blocked = no_gt = False
        for code, pointer, message in issues:
            res.codes[code] = res.codes.get(code, 0) + 1
            blocked = blocked or code in BLOCKING
            no_gt = no_gt or code in GT_MISSING_CODES
            key = (code, pointer, _DIGITS.sub("#", message)) if self.opts.collapse else None
            same = self.same.get(key) if key else None
            if same is not None:
                same.count += 1
                if len(same.lines) < MAX_LINES_PER_EXAMPLE:
                    same.lines.append(idx)
                continue
            bucket = res.examples.setdefault(code, [])
            if len(bucket) < self.opts.max_examples_per_code:
                schema_error = None
                if schema and code in BLOCKING:
                    schema_error = schema_explanation(obj, self.opts.judger)
                ex = Example(idx, code, pointer, message, _excerpt(raw), schema_error, 1, [idx])
                bucket.append(ex)
                if key:
                    self.same[key] = ex
        if no_gt and isinstance(obj, dict):
            answer_at = derivable_field(obj)
            if answer_at:
                res.derivable[answer_at] = res.derivable.get(answer_at, 0) + 1
                if len(res.derivable_lines) < MAX_LINES_PER_EXAMPLE:
                    res.derivable_lines.append(idx)
        if blocked:
            res.invalid += 1
        else:
            res.valid += 1


def _skip_line(f: BinaryIO, limits: Limits, chunk: int = 1 << 20) -> int:
    """Consume the rest of the current line (through its newline); return the bytes consumed."""
    n = 0
    while True:
        limits.check()
        piece = f.readline(chunk)
        n += len(piece)
        if not piece or piece.endswith(b"\n"):
            return n


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
        objs = decode_block(body)
        if objs is None:  # something in the bytes needs a closer look: every line on its own
            for raw in body.split(b"\n")[:-1]:
                self.line(raw + b"\n")
            return
        if block_ok(objs, self.judger, self.st):
            n = len(objs)
            res = self.res
            res.lines += n
            res.valid += n
            res.bytes += len(body)
            self.idx += n
            return
        for o, raw in zip(objs, body.split(b"\n")[:-1], strict=True):  # i-th element = i-th line (decode_block)
            self.verdict(o, raw + b"\n")

    def line(self, raw: bytes) -> None:
        """One line (newline included unless it is the file's last), at most the line limit long."""
        try:
            o = None if needs_precise(raw) else LINE_DECODER.decode(raw)
        except Exception:  # DecodeError/ValidationError, RecursionError: the precise path decides
            o = None
        self.verdict(o, raw)

    def verdict(self, o: TypedLine | None, raw: bytes) -> None:
        """Judge one line given its typed decode (None: it did not decode or its bytes need the precise path)."""
        res = self.res
        res.lines += 1
        res.bytes += len(raw)
        terminated = raw.endswith(b"\n")
        if o is not None and quick_ok(o, self.judger, self.st):
            if terminated:
                res.valid += 1
            else:
                self.acc.add(self.idx, raw, [NO_FINAL_NEWLINE])
        else:
            issues, obj = analyze_line(raw, last_unterminated=not terminated, judger=self.judger)
            if not terminated and not any(c in BLOCKING for c, _, _ in issues):
                issues.append(NO_FINAL_NEWLINE)
            if obj is not None:
                slow_stats(obj, self.judger, self.st)
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


def scan_range(
    path: str,
    start: int = 0,
    end: int | None = None,
    opts: ScanOptions | None = None,
    on_bytes: Callable[[int], None] | None = None,
    *,
    open_file: Opener = open_regular,
    limits: Limits = NO_LIMITS,
) -> RangeResult:
    """Scan the lines whose first byte lies in ``[start, end)`` of ``path`` (``end=None``: to the end of file)."""
    opts = opts or ScanOptions()
    with contextlib.ExitStack() as stack:
        try:
            f = stack.enter_context(open_file(path))
        except Exception as exc:  # OSError, or the caller's opener refusing the file
            return RangeResult(path, start, start, error=f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        size = os.fstat(f.fileno()).st_size
        end = size if end is None else min(end, size)
        res = RangeResult(path, start, end)
        scan = _RangeScan(res, opts)
        limit = scan.limit
        block_bytes = min(BLOCK_BYTES, limit)  # so a line inside a block is never over the limit
        pos = start
        if start > 0:
            f.seek(start - 1)
            pos = start - 1 + _skip_line(f, limits)
        read, readline = f.read, f.readline
        report_every = 8 << 20
        next_report = pos + report_every
        while pos < end:
            limits.check()
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
                    extra = _skip_line(f, limits)
                    pos += extra
                    scan.too_long(raw, len(raw) + extra)
            if on_bytes is not None and pos >= next_report:
                on_bytes(pos - start)
                next_report = pos + report_every
    res.end = max(end, pos)
    return scan.finish()


def scan_file(
    path: str,
    opts: ScanOptions | None = None,
    on_bytes: Callable[[int], None] | None = None,
    *,
    open_file: Opener = open_regular,
    limits: Limits = NO_LIMITS,
) -> FileResult:
    """Scan one whole file in this process, range after range (no parallelism, bounded memory)."""
    opts = opts or ScanOptions()
    try:
        with open_file(path) as f:
            size = os.fstat(f.fileno()).st_size
    except Exception as exc:  # OSError, or the caller's opener refusing the file
        return FileResult(path, error=f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
    parts = []
    for start, end in plan_ranges(size, SEQUENTIAL_RANGE_BYTES):
        cb = None if on_bytes is None else (lambda n, s=start: on_bytes(s + n))
        parts.append(scan_range(path, start, end, opts, cb, open_file=open_file, limits=limits))
        if on_bytes is not None:
            on_bytes(end)
    return merge_ranges(path, parts, opts)


# --------------------------------------------------------------------------------------------------------
# Planning and merging
# --------------------------------------------------------------------------------------------------------


def plan_ranges(size: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """Cut ``[0, size)`` into ranges of about ``chunk_bytes`` (lines are assigned by their first byte)."""
    if size <= 0:
        return [(0, 0)]
    chunk_bytes = max(1, chunk_bytes)
    return [(s, min(size, s + chunk_bytes)) for s in range(0, size, chunk_bytes)]


def _merge_counter(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        bump(into, k, v)


def merge_ranges(path: str, parts: list[RangeResult], opts: ScanOptions) -> FileResult:
    """Combine the ranges of one file (any order) into the file's result with 1-based line numbers."""
    parts = sorted(parts, key=lambda r: r.start)
    out = FileResult(path)
    errors = [p.error for p in parts if p.error]
    if errors:
        out.error = errors[0]
    kept = 0
    kept_all = True
    same: dict[tuple[str, str, str], Example] = {}
    out.hash_domain = main_domain((p.hash_domain, p.hashed) for p in parts)
    for part in parts:
        base = out.lines + 1
        out.lines += part.lines
        out.valid += part.valid
        out.invalid += part.invalid
        out.bytes += part.bytes
        for code, n in part.codes.items():
            out.codes[code] = out.codes.get(code, 0) + n
        _merge_examples(out, part, base, opts, same)
        for pointer, n in part.derivable.items():
            out.derivable[pointer] = out.derivable.get(pointer, 0) + n
        room = MAX_LINES_PER_EXAMPLE - len(out.derivable_lines)
        out.derivable_lines.extend(i + base for i in part.derivable_lines[: max(0, room)])
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


def _merge_examples(
    out: FileResult, part: RangeResult, base: int, opts: ScanOptions, same: dict[tuple[str, str, str], Example]
) -> None:
    """Add a range's examples with file line numbers; an issue already shown by an earlier range adds its count."""
    for code, exs in part.examples.items():
        bucket = out.examples.setdefault(code, [])
        for ex in exs:
            lines = [i + base for i in (ex.lines or [ex.line])]
            key = example_key(ex) if opts.collapse else None
            first = same.get(key) if key else None
            if first is not None:
                first.count += ex.count
                first.lines.extend(lines[: max(0, MAX_LINES_PER_EXAMPLE - len(first.lines))])
            elif len(bucket) < opts.max_examples_per_code:
                bucket.append(replace(ex, line=ex.line + base, lines=lines))
                if key:
                    same[key] = bucket[-1]


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
