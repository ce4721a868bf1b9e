"""Streaming log scanner: a literal prefilter picks candidate lines, which are cleaned and matched against the
catalog; a per-worker state machine follows Python tracebacks (chained, Ray-wrapped) and pydantic blocks so the
root-cause exception weighs most."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.limits import UNLIMITED, CallLimits
from .log_lines import clean_line

#: A "line" longer than this without a newline is cut and scanned in pieces.
MAX_CARRY_BYTES = 1 << 20
#: Characters of a candidate line kept for matching (a window around the marker for longer lines).
MAX_LINE_CHARS = 4096
#: Inputs up to this size are scanned with every catalog literal (exact); larger ones with the markers only.
FULL_SCAN_MAX_BYTES = 4 << 20
MAX_DISTINCT_UNRECOGNIZED = 500

#: "pkg.mod.SomeError: message", "SomeError(Inner): message", also inside Chinese or other text.
_EXC_LINE = re.compile(
    r"(?:^|(?<=[\s:：,，(\[]))(?P<qual>(?:[A-Za-z_]\w*\.)*)(?P<type>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|"
    r"Warning))(?:\((?P<inner>[A-Za-z_][\w.]*)\))?(?::\s|:$|$)"
)
_TRACEBACK = "Traceback (most recent call last)"
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_FRAME = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+)')
_PYDANTIC_DETAIL = re.compile(r"^(?:Value error, |Assertion failed, |.*\[type=\w+)")
_PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for (\w+)")
_ERRORISH_LEVEL = frozenset({"ERROR", "CRITICAL", "FATAL", "EXCEPTION"})
_ERRORISH_TEXT = re.compile(r"Segmentation fault|core dumped|\bKilled\b|\bFATAL\b|\bCRITICAL\b")
_NUM = re.compile(r"\d+")
_DIGITS = b"0123456789"
_FRAME_ANCHOR = b'File "'
MAX_BORING_BYTES = 16 << 20
#: Past this many decoded lines in one source, the rest up to its last TAIL_BYTES is only counted.
MAX_HANDLED_LINES = 200_000
TAIL_BYTES = 32 << 20
MAX_WORKERS = 10_000
#: Candidate lines matched between two checks of the call's deadline (besides one check per chunk).
CHECK_EVERY_LINES = 4096
#: Lines read after a traceback start / a pydantic ValidationError header, marked or not.
FOLLOW_TRACEBACK = 80
FOLLOW_PYDANTIC = 40
_WRAPPERS = frozenset({"RayTaskError", "RaySystemError"})
_BACKEND_HINT = re.compile(r"XTUNER_USE_(LMDEPLOY|SGLANG|VLLM)\s*=\s*1|No module named '(lmdeploy|sglang|vllm)")
#: Frames inside an inference engine or another XTuner area route the question there.
_FRAME_ROUTES = (
    (
        re.compile(r"[/\\](?:site-packages|dist-packages)[/\\](?:sglang|lmdeploy|vllm|sgl_kernel)[/\\]"),
        "model_backends",
    ),
    (re.compile(r"xtuner[/\\]v1[/\\]train[/\\]cli[/\\]sft\.py"), "sft_training"),
    (re.compile(r"xtuner[/\\](?:tools[/\\]train\.py|entry_point\.py|engine[/\\])"), "legacy_cli"),
)


@dataclass
class Hit:
    """One line that matched one entry."""

    source: str
    line: int
    text: str
    kind: Literal["exception", "detail", "log", "frame"]
    level: str
    root: bool = False  # root cause of a traceback chain, or the error a Ray wrapper carries
    context: str = ""


@dataclass
class EntryState:
    hits: list[Hit] = field(default_factory=list)
    last: Hit | None = None
    count: int = 0
    best_kind_rank: int = 0
    root: bool = False
    first_order: int = 0


@dataclass
class WorkerState:
    """Traceback parsing state for one output stream (one Ray worker, or the driver)."""

    in_traceback: bool = False
    chain_len: int = 0  # tracebacks seen in the current chain
    chain_open: bool = False  # a chain marker was seen: the next traceback continues the chain
    pydantic_until: int = -1  # line number up to which detail lines belong to a ValidationError block
    frame_line: int = -10  # line number of the last 'File "..."' frame line (the next line is source code)
    tb_matched: bool = False  # a catalog entry matched inside the current traceback (e.g. on a source line)
    last_frame_route: str | None = None


_KIND_RANK = {"log": 1, "frame": 1, "detail": 2, "exception": 3}


# --------------------------------------------------------------------------------------------------------
# The scanner
# --------------------------------------------------------------------------------------------------------


class Scanner:
    """Streams sources, picks candidate lines with the prefilter and matches them against the catalog."""

    def __init__(
        self,
        catalog: Any,
        evidence_cap: int,
        progress: Callable[[int], None] | None = None,
        limits: CallLimits = UNLIMITED,
    ) -> None:
        self.catalog = catalog
        self.limits = limits
        self.entries = catalog.failure_mode
        self.pf = catalog.prefilter
        self.literals = sorted(self.pf.entries_for)
        self.evidence_cap = max(1, evidence_cap)
        self.states: dict[str, EntryState] = {}
        self.unrecognized: dict[str, list[Any]] = {}  # key -> [source, line, text, count]
        self.unrecognized_total = 0
        self.workers: dict[str, WorkerState] = {}
        self.order = 0
        self.bytes = 0
        self.lines = 0
        self.candidates = 0
        self.backend_hints: dict[str, int] = {}
        self.routes: dict[str, set[str]] = {}
        self.progress = progress
        #: lines (digits removed) that matched nothing and said nothing about tracebacks: seen again, skipped
        self._boring: set[bytes] = set()
        self._boring_bytes = 0
        self.handled = 0  # lines decoded and matched (not skipped by the cache)
        self.notes: list[str] = []
        self._follow = 0  # set by handle_line: how many following lines to read whatever their markers

    # ---- reading -----------------------------------------------------------------------------------

    def scan_bytes_stream(self, source: str, chunks: Iterator[bytes], size: int, start_line: int = 1) -> None:
        anchors = self.pf.full if size <= FULL_SCAN_MAX_BYTES else self.pf.fast
        carry = b""
        line_no = start_line
        consumed = 0
        handled_at_start = self.handled
        skipped = 0
        for chunk in chunks:
            self.limits.check()
            self.bytes += len(chunk)
            consumed += len(chunk)
            if self.handled - handled_at_start > MAX_HANDLED_LINES and size - consumed > TAIL_BYTES:
                # far too many error-looking lines: count lines until the last TAIL_BYTES, where the end of the
                # run (and usually its cause) is, so time stays bounded and line numbers stay exact
                buf = carry + chunk if carry else chunk
                cut = buf.rfind(b"\n")
                counted = buf.count(b"\n", 0, cut + 1)
                line_no += counted
                self.lines += counted
                carry = buf[cut + 1 :][-MAX_CARRY_BYTES:]
                skipped += len(chunk)
                if self.progress:
                    self.progress(len(chunk))
                continue
            buf = carry + chunk if carry else chunk
            cut = buf.rfind(b"\n")
            if cut == -1:
                if len(buf) <= MAX_CARRY_BYTES:
                    carry = buf
                    continue
                seg, carry = buf, b""  # an overlong line: scan what we have, keep the line number
                line_no = self._scan_segment(source, seg + b"\n", line_no, anchors) - 1
            else:
                seg, carry = buf[: cut + 1], buf[cut + 1 :]
                line_no = self._scan_segment(source, seg, line_no, anchors)
            if self.progress:
                self.progress(len(chunk))
        if carry:
            self._scan_segment(source, carry + b"\n", line_no, anchors)
        if skipped:
            self.notes.append(
                f"{source}: over {MAX_HANDLED_LINES:,} error-looking lines; {skipped >> 20} MiB before the last "
                f"{TAIL_BYTES >> 20} MiB were only counted, not matched"
            )

    def _scan_segment(self, source: str, seg: bytes, line_no: int, anchors: tuple[bytes, ...]) -> int:
        """Scan one newline-terminated segment; return the line number after it."""
        starts: dict[int, tuple[int, int]] = {}  # line start -> (first marker position, line end)
        find = seg.find
        rfind = seg.rfind
        size = len(seg)
        for a in anchors:
            frame = a == _FRAME_ANCHOR
            p = find(a)
            while p != -1:
                le = find(b"\n", p)
                ls = rfind(b"\n", 0, p) + 1
                if ls not in starts:
                    starts[ls] = (p, le)
                if frame and le + 1 < size:  # the source line printed under a frame
                    starts.setdefault(le + 1, (le + 1, find(b"\n", le + 1)))
                p = find(a, le + 1)
        total_lines = seg.count(b"\n")
        self.lines += total_lines
        if not starts:
            return line_no + total_lines
        order = sorted(starts)
        n_order = len(order)
        oi = 0
        pos = 0
        cur = line_no
        follow_end = -1
        boring = self._boring
        ls = order[0]
        while True:
            entry = starts.get(ls)
            hit, le = entry if entry is not None else (ls, find(b"\n", ls))
            if le - ls > MAX_LINE_CHARS:
                lo = max(ls, hit - MAX_LINE_CHARS // 4)
                raw = seg[lo : min(le, lo + MAX_LINE_CHARS)]
            else:
                raw = seg[ls:le]
            key = raw.translate(None, _DIGITS)
            if key in boring:
                self.candidates += 1
            else:
                cur += seg.count(b"\n", pos, ls)  # line numbers only where a line is reported
                pos = ls
                self.handled += 1
                if self.handled % CHECK_EVERY_LINES == 0:
                    self.limits.check()
                if self.handle_line(source, cur, raw.decode("utf-8", "replace"), self._prev_line(seg, ls)):
                    if self._boring_bytes < MAX_BORING_BYTES:
                        boring.add(key)
                        self._boring_bytes += len(key) + 50
                if self._follow:  # read the next lines too (traceback frames, pydantic details)
                    end = le
                    for _ in range(self._follow):
                        nxt = find(b"\n", end + 1)
                        if nxt == -1:
                            break
                        end = nxt
                    follow_end = max(follow_end, end)
                    self._follow = 0
            while oi < n_order and order[oi] <= ls:
                oi += 1
            if le + 1 <= follow_end:
                ls = le + 1
            elif oi < n_order:
                ls = order[oi]
            else:
                break
        return line_no + total_lines

    @staticmethod
    def _prev_line(seg: bytes, ls: int) -> str:
        if ls <= 1:
            return ""
        ps = seg.rfind(b"\n", 0, ls - 1) + 1
        return seg[ps : min(ls - 1, ps + 400)].decode("utf-8", "replace")

    # ---- matching ----------------------------------------------------------------------------------

    def handle_line(self, source: str, line_no: int, raw: str, prev_raw: str = "") -> bool:
        """Match one candidate line; True when the line was "boring" regardless of its context."""
        text, worker, level = clean_line(raw)
        if not text:
            return True
        self.candidates += 1
        if worker not in self.workers and len(self.workers) >= MAX_WORKERS:
            worker = ""
        ws = self.workers.setdefault(worker, WorkerState())
        kind: Literal["exception", "detail", "log", "frame"] = "log"
        root = False
        exc = None
        closes_matched_tb = False
        if _TRACEBACK in text:
            self._follow = FOLLOW_TRACEBACK
            if not ws.chain_open:
                ws.chain_len = 0
            ws.in_traceback, ws.chain_open, ws.tb_matched = True, False, False
            return False
        if text.startswith(_CHAIN):
            ws.chain_open = True
            return False
        fm = _FRAME.match(text)
        if fm:
            for rx, route in _FRAME_ROUTES:
                if rx.search(fm.group("file")):
                    ws.last_frame_route = route
            ws.frame_line = line_no
            kind = "frame"
        elif line_no == ws.frame_line + 1:  # the source line printed under a frame
            kind = "frame"
        else:
            exc = _EXC_LINE.search(text)
            if exc and (exc.start() == 0 or ws.in_traceback or level in _ERRORISH_LEVEL or exc.group("inner")):
                kind = "exception"
                if ws.in_traceback:
                    closes_matched_tb = ws.tb_matched
                    ws.chain_len += 1
                    root = ws.chain_len == 1  # Python prints the original cause first
                    if ws.last_frame_route:
                        self.routes.setdefault(ws.last_frame_route, set())
                    ws.in_traceback = False
                    ws.last_frame_route = None
                if exc.group("inner"):  # RayTaskError(InnerError): the real error is printed inside it
                    root = False
                if _PYDANTIC_HEAD.search(text):
                    ws.pydantic_until = line_no + 200
                    self._follow = FOLLOW_PYDANTIC
            elif line_no <= ws.pydantic_until and _PYDANTIC_DETAIL.match(text):
                kind = "detail"
                root = True
            else:
                exc = None
        bh = _BACKEND_HINT.search(text)
        if bh:
            name = (bh.group(1) or bh.group(2) or "").lower()
            self.backend_hints[name] = self.backend_hints.get(name, 0) + 1
        matched = self._match(text)
        context = ""
        if kind == "detail" and prev_raw:
            context = clean_line(prev_raw)[0][:200]
        for idx in matched:
            self._record(idx, Hit(source, line_no, text[:600], kind, level, root, context))
        if matched and ws.in_traceback:
            ws.tb_matched = True
        if matched or kind in ("frame", "detail") or closes_matched_tb:
            return False
        if kind == "exception" and exc is not None and (exc.group("inner") or exc.group("type") in _WRAPPERS):
            return False  # a wrapper: the error it carries is printed below it
        if kind == "exception" or level in _ERRORISH_LEVEL or _ERRORISH_TEXT.search(text):
            self._unrecognized(source, line_no, text)
            return False
        return bh is None and _EXC_LINE.search(text) is None

    def _match(self, text: str) -> list[int]:
        idxs: set[int] = set()
        for lit in self.literals:
            if lit in text:
                idxs.update(self.pf.entries_for[lit])
        return [i for i in sorted(idxs) if self.entries[i].match(text)]

    def _record(self, idx: int, hit: Hit) -> None:
        fm = self.entries[idx]
        st = self.states.get(fm.id)
        if st is None:
            self.order += 1
            st = self.states[fm.id] = EntryState(first_order=self.order)
        st.count += 1
        st.root = st.root or hit.root
        st.best_kind_rank = max(st.best_kind_rank, _KIND_RANK[hit.kind])
        if len(st.hits) < self.evidence_cap:
            st.hits.append(hit)
        else:
            st.last = hit  # keep the latest occurrence too

    def _unrecognized(self, source: str, line_no: int, text: str) -> None:
        self.unrecognized_total += 1
        key = _NUM.sub("N", text[:300])
        item = self.unrecognized.get(key)
        if item is not None:
            item[3] += 1
        elif len(self.unrecognized) < MAX_DISTINCT_UNRECOGNIZED:
            self.unrecognized[key] = [source, line_no, text[:600], 1]


# --------------------------------------------------------------------------------------------------------
# Parameters and result
# --------------------------------------------------------------------------------------------------------
