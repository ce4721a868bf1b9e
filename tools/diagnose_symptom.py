"""diagnose_symptom: ranked, evidence-backed diagnosis of a failed or stuck XTuner RL run.

Input is pasted text and/or a log file or log directory. Logs are streamed in chunks with bounded memory: a few
C-speed ``bytes.find`` passes over each chunk pick the candidate lines (lines holding an error/warning marker, or
for small inputs any catalog literal), only those lines are decoded, cleaned (ANSI codes, CR, timestamps, log
levels, Ray worker prefixes) and matched against the failure-mode catalog (``references/failure_modes.toml``).
A small per-worker state machine follows Python tracebacks (chained exceptions, Ray-wrapped errors, pydantic
validation blocks) so the root-cause exception weighs most. Findings are ranked by a confidence built from the
entry's specificity and where it matched.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import (
    Category,
    Detail,
    Finding,
    RunContext,
    Severity,
    ToolInputError,
    ToolResult,
    ToolSpec,
    params_model_config,
)

# --------------------------------------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------------------------------------

MAX_TEXT_CHARS = 4_000_000
CHUNK_BYTES = 8 << 20
#: A "line" longer than this without a newline is cut and scanned in pieces.
MAX_CARRY_BYTES = 1 << 20
#: Characters of a candidate line kept for matching (a window around the marker for longer lines).
MAX_LINE_CHARS = 4096
#: Inputs up to this size are scanned with every catalog literal (exact); larger ones with the markers only.
FULL_SCAN_MAX_BYTES = 4 << 20
MAX_FILE_BYTES = 1 << 30  # per file: larger files are read from the end (the failure is at the end)
MAX_TOTAL_BYTES = 2 << 30  # per call, over all files of a directory
MAX_FILES = 200
MAX_DIR_DEPTH = 4
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
EVIDENCE_CAP: dict[str, int] = {"summary": 1, "normal": 3, "full": 10}
UNRECOGNIZED_CAP: dict[str, int] = {"summary": 3, "normal": 10, "full": 50}
MAX_DISTINCT_UNRECOGNIZED = 500

DOC_URI = "xtuner-rl://references/troubleshooting"

# --------------------------------------------------------------------------------------------------------
# Line cleaning
# --------------------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Ray prefixes worker output with "(ActorName pid=123, ip=10.0.0.5)", "(raylet)", "(autoscaler +2m3s)" ...
_RAY_PREFIX = re.compile(
    r"^\((?:[\w.:\-\[\] ]|\([\w.:\-]{0,60}\)){0,100}?\s?pid=\w+(?:,\s*ip=[\w.:\-]+)?(?:,\s*repr=[^)]{0,200})?\)\s*"
    r"|^\((?:raylet|gcs_server|autoscaler|monitor|dashboard|log_monitor)[^)]{0,40}\)\s*"
)
#: Ray's log deduplication suffix.
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_LEVEL_WORD = r"(?P<level>TRACE|DEBUG|INFO|SUCCESS|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL|EXCEPTION)"
_PREFIXES = [
    # [XTuner][RANK 0][2026-08-21 16:02:20][WARNING][module][name:function:line]
    re.compile(r"^\[XTuner\](?:\[RANK \d+\])?\[[^\]]*\]\[" + _LEVEL_WORD + r"\](?:\[[^\]]{0,120}\])*\s*"),
    # loguru default: 2026-08-21 16:02:20.123 | ERROR    | module:function:12 - message
    re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s*\|\s*" + _LEVEL_WORD + r"\s*\|\s*[^|]{0,200}?\s-\s"),
    # logging: 2026-08-21 16:02:20,441 INFO worker.py:1852 -- message  /  2026-08-21 16:02:20 ERROR message
    re.compile(
        r"^\[?\d{4}-\d\d-\d\d[ T][\d:.,]+(?:[+-]\d\d:?\d\d|Z)?\]?\s+" + _LEVEL_WORD + r"\b:?\s*(?:[\w.]+:\d+\s+--\s+)?"
    ),
    # [2026-08-21 16:02:20] [ERROR] / [2026-08-21 16:02:20 TP0] message / [2026-08-21 16:02:20,123]
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T][^\]]{0,40}\]\s*(?:\[?" + _LEVEL_WORD + r"\]?:?\s*)?"),
    # FastChat-style: 2024-08-27 12:54:55 | ERROR | stderr | message
    re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s*\|\s*" + _LEVEL_WORD + r"\s*\|\s*[\w.]{1,40}\s*\|\s?"),
    # torch.distributed rank prefix: [rank0]: message
    re.compile(r"^\[[Rr]ank\s?\d+\]:\s?"),
    # docker compose service prefix: service-1  | message
    re.compile(r"^[\w.-]{1,60}\s+\|\s"),
    # LMDeploy: 2025-04-28 10:00:00,000 - lmdeploy - ERROR - engine.py:781 - message
    re.compile(
        r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s+-\s+[\w.]{1,40}\s+-\s+" + _LEVEL_WORD + r"\s+-\s+(?:[\w.]+:\d+\s+-\s+)?"
    ),
    # TurboMind: [TM][WARNING] message; vLLM: ERROR 08-21 16:02:25 [engine.py:123] message
    re.compile(r"^\[TM\]\[" + _LEVEL_WORD + r"\]\s*"),
    re.compile(r"^" + _LEVEL_WORD + r" \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]{1,80}\]\s*"),
    # mmengine: 04/02 11:50:24 - mmengine - WARNING - message
    re.compile(r"^\d\d/\d\d \d\d:\d\d:\d\d - [\w.]{1,40} - " + _LEVEL_WORD + r" - "),
    # logging.basicConfig default: ERROR:logger.name:message
    re.compile(r"^" + _LEVEL_WORD + r":[\w.\-]{1,80}:(?=\S)"),
    # glog (Ray C++): E0821 16:02:20.123456 12345 file.cc:123] message
    re.compile(r"^(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.]+:\d+\]\s*"),
    # uvicorn / plain: ERROR:    message / WARNING: message / [ERROR] message
    re.compile(r"^\[?" + _LEVEL_WORD + r"\]?:\s+"),
    re.compile(r"^\[" + _LEVEL_WORD + r"\]\s*"),
    # exception groups (Python 3.11+): "  | ValueError: ..." / "+ Exception Group Traceback ..."
    re.compile(r"^(?:[|+]\s+)+"),
    # bare timestamps: 2026-08-21 16:02:20,441 / 08-21 16:02:20 / 16:02:20.123
    re.compile(r"^\[?(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*[-|:]?\s*"),
]
_GLOG_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


def clean_line(raw: str) -> tuple[str, str, str]:
    """Strip terminal codes and prefixes. Returns (text, worker key, log level or '')."""
    text = raw
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:  # progress bars rewrite the line: keep what the terminal showed last, plus any error text
        parts = [p for p in text.split("\r") if p.strip()]
        text = " ".join(parts[-2:]) if parts else ""
    text = _CTRL.sub(" ", text).strip()
    if text.endswith("across cluster]"):
        text = _RAY_REPEATED.sub("", text)
    worker = ""
    level = ""
    for _ in range(4):  # prefixes nest: "(pid=1) [2026-...] [ERROR] ..."
        changed = False
        m = _RAY_PREFIX.match(text)
        if m:
            worker = worker or m.group(0).strip()
            text = text[m.end() :].lstrip()
            changed = True
        for rx in _PREFIXES:
            m = rx.match(text)
            if m and m.end() > 0:
                gd = m.groupdict()
                lv = gd.get("level") or _GLOG_LEVEL.get(gd.get("glog") or "", "")
                level = level or (lv or "").upper()
                text = text[m.end() :].lstrip()
                changed = True
                break
        if not changed:
            break
    return text, worker, level


# --------------------------------------------------------------------------------------------------------
# Line classification
# --------------------------------------------------------------------------------------------------------

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

    def __init__(self, catalog: Any, evidence_cap: int, progress: Callable[[int], None] | None = None) -> None:
        self.catalog = catalog
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


class Params(BaseModel):
    model_config = params_model_config()

    text: str | None = Field(
        default=None,
        max_length=MAX_TEXT_CHARS,
        description="Pasted error, traceback or log excerpt (any prefixes, ANSI colours, CRLF are fine). "
        "Give this and/or log_path.",
    )
    log_path: str | None = Field(
        default=None,
        description="A log file, or a directory such as <work_dir>/<timestamp>/logs: every *.log, *.txt, *.out, "
        f"*.err below it (depth {MAX_DIR_DEPTH}, newest first, at most {MAX_FILES} files) is read. Must be inside "
        "the server's allowed roots. Files are streamed; over 1 GiB only the last 1 GiB is read; over 4 MiB only lines "
        "carrying an error/warning marker (exception name, ERROR/WARNING level, traceback) are matched.",
    )
    config_path: str | None = Field(
        default=None,
        description="The run's XTuner RL config (.py): fills confirm_with calls and, with run_probes, is inspected.",
    )
    data_path: str | None = Field(
        default=None,
        description="The run's training JSONL (file or directory): fills confirm_with calls and, with run_probes, "
        "is checked with check_reward_data.",
    )
    run_probes: bool = Field(
        default=False,
        description="Also run read-only live checks to confirm the diagnosis: probe_environment (backend flag and "
        "package, Ray reachable and its resources), check_reward_data on data_path, inspect_config on config_path.",
    )
    max_findings: int = Field(default=5, ge=1, le=50, description="Most findings to return, best first.")
    detail: Detail = Field(
        default="normal",
        description="summary: 1 evidence line per finding, 3 unrecognized lines; normal: 3 and 10; full: 10 and 50.",
    )


class Evidence(BaseModel):
    source: str = Field(description="'text' for pasted input, else the log file path")
    line: int = Field(description="1-based line number in that source")
    text: str = Field(description="The matching line, cleaned of prefixes and colour codes")
    kind: Literal["exception", "detail", "log", "frame"] = Field(
        description="exception: an exception line; detail: a pydantic validation detail; log: a log line"
    )
    context: str = Field(default="", description="For pydantic details: the line above (names the field)")


class ToolCall(BaseModel):
    tool: str = Field(description="Tool of this server to call")
    arguments: dict[str, Any] = Field(description="Arguments, filled from this call's inputs where known")
    missing: list[str] = Field(default_factory=list, description="Arguments you still have to supply")


class Diagnosis(BaseModel):
    failure_mode_id: str = Field(description="Catalog entry id (stable)")
    category: Category
    severity: Severity
    confidence: float = Field(ge=0, le=1, description="How likely this is the (or a) cause, 0-1")
    title: str
    evidence: list[Evidence]
    evidence_omitted: int = Field(description="Further matching lines not listed")
    occurrences: int = Field(description="Matching lines in total")
    cause: str
    fix: list[str] = Field(description="Ordered fix steps")
    confirm_with: list[ToolCall]
    reference: str = Field(description="xtuner-rl://failure-modes/<id>")
    doc_reference: str = Field(description="Section of the troubleshooting guide")
    source: list[str] = Field(description="XTuner path:line at b934f46")
    route: str | None = Field(default=None, description="Area the fix belongs to, when not the RL launch itself")


class UnrecognizedError(BaseModel):
    source: str
    line: int = Field(description="First occurrence")
    text: str
    count: int = Field(description="Occurrences of this message (numbers ignored)")


class Probe(BaseModel):
    tool: str
    status: Literal["ok", "failed", "unavailable"] = Field(
        description="ok: ran; failed: refused its input or crashed; unavailable: tool not installed"
    )
    summary: str
    confirms: list[str] = Field(default_factory=list, description="Diagnosed failure_mode_ids this probe supports")
    findings: list[Finding] = Field(default_factory=list, description="The probe's blockers and warnings (capped)")


class Route(BaseModel):
    area: Literal["data_preparation", "sft_training", "model_backends", "legacy_cli"]
    reason: str
    failure_mode_ids: list[str] = Field(default_factory=list)


class Scanned(BaseModel):
    sources: list[str]
    sources_omitted: int
    bytes: int
    lines: int
    candidate_lines: int = Field(description="Lines decoded and matched (the rest were skipped by the prefilter)")
    scan_mode: Literal["exact", "markers"] = Field(
        description="exact: every catalog literal was searched; markers: large input, only lines with an "
        "error/warning marker (exception names, log levels, traceback and pydantic structure) were matched"
    )
    notes: list[str] = Field(default_factory=list)


class Result(ToolResult):
    verdict: Literal["failure_found", "hang_suspected", "warnings_only", "no_known_failure"] = Field(
        description="failure_found: a blocker matched; hang_suspected: only stall signals; warnings_only; "
        "no_known_failure: nothing in the catalog matched (see unrecognized_errors)"
    )
    findings: list[Diagnosis] = Field(description="Ranked by confidence, best first")
    findings_omitted: int
    unrecognized_errors: list[UnrecognizedError] = Field(
        description="Error-looking lines no catalog entry matched (distinct messages, first occurrence)"
    )
    unrecognized_errors_omitted: int = Field(description="Distinct unrecognized messages not listed")
    probes: list[Probe] = Field(default_factory=list, description="Live checks, when run_probes is true")
    route: list[Route] = Field(default_factory=list, description="Where the fix belongs when not in this server")
    scanned: Scanned


# --------------------------------------------------------------------------------------------------------
# Reading sources
# --------------------------------------------------------------------------------------------------------


def _collect_files(root: Path, ctx: RunContext) -> tuple[list[Path], int]:
    """Log files under a directory, newest first; returns (files, omitted)."""
    found: list[tuple[float, Path]] = []
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if len(Path(dirpath).parts) - base_depth >= MAX_DIR_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        for name in sorted(filenames):
            if not name.lower().endswith(LOG_SUFFIXES):
                continue
            p = Path(dirpath) / name
            try:
                real = ctx.paths.check(str(p), kind="file", what="log file")
                found.append((real.stat().st_mtime, real))
            except (ToolInputError, OSError):
                continue
            if len(found) > 10 * MAX_FILES:
                break
    found.sort(key=lambda t: (-t[0], str(t[1])))
    files = [p for _, p in found]
    return files[:MAX_FILES], max(0, len(files) - MAX_FILES)


def _file_chunks(path: Path, start: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        if start:
            f.seek(start)
        while True:
            chunk = f.read(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk


def _text_chunks(text: str) -> Iterator[bytes]:
    data = text.encode("utf-8", "replace")
    for i in range(0, len(data), CHUNK_BYTES):
        yield data[i : i + CHUNK_BYTES]


# --------------------------------------------------------------------------------------------------------
# Ranking
# --------------------------------------------------------------------------------------------------------


def _confidence(fm: Any, st: EntryState, any_specific: bool, any_error_blocker: bool, any_cause: bool) -> float:
    score = 0.35 + 0.1 * fm.specificity
    if st.best_kind_rank >= _KIND_RANK["detail"]:
        score += 0.06
    if st.root:
        score += 0.04
    score += 0.02 * min(3.0, math.log2(st.count)) if st.count > 1 else 0.0
    if fm.specificity <= 2 and any_specific:
        score -= 0.25  # a generic wrapper next to a specific cause
    if fm.hang and any_error_blocker:
        score -= 0.3
    if fm.consequence and any_cause:
        score -= 0.25  # e.g. failed health checks after the engine ran out of memory
    if fm.severity == "warning":
        score -= 0.15
    elif fm.severity == "info":
        score -= 0.3
    return round(min(0.99, max(0.05, score)), 2)


def _fill_call(call: Any, values: dict[str, Any]) -> ToolCall:
    args: dict[str, Any] = {}
    missing: list[str] = []
    for key, val in call.arguments.items():
        if isinstance(val, str) and val.startswith("{") and val.endswith("}"):
            name = val[1:-1]
            if values.get(name) is not None:
                args[key] = values[name]
            else:
                missing.append(key)
        else:
            args[key] = val
    return ToolCall(tool=call.tool, arguments=args, missing=missing)


# --------------------------------------------------------------------------------------------------------
# Probes (colleagues' tools, imported lazily)
# --------------------------------------------------------------------------------------------------------

_PROBE_CONFIRMS: dict[str, set[str]] = {
    "probe_environment": {
        "ray_not_running",
        "ray_resources_insufficient",
        "backend_not_installed",
        "backend_flag_missing_or_multiple",
        "backend_unsupported",
        "missing_env_var_or_path",
        "model_loading",
    },
    "check_reward_data": {"reward_data_missing_ground_truth", "data_format_other"},
    "inspect_config": {
        "config_load_error",
        "eval_or_interval_config",
        "staleness_or_partial_rollout",
        "debug_trace_output",
        "resource_mismatch_num_workers",
        "backend_unsupported",
        "missing_env_var_or_path",
    },
}


def _run_probe(tool: str, args: dict[str, Any], ctx: RunContext, diagnosed: list[Diagnosis]) -> Probe:
    import importlib

    try:
        module = importlib.import_module(f"{__package__}.{tool}")
        params = module.SPEC.params(**args)
    except ImportError:
        return Probe(tool=tool, status="unavailable", summary=f"{tool} is not available in this server")
    except Exception as exc:  # a bad argument for the colleague's tool
        return Probe(tool=tool, status="failed", summary=f"{tool} refused the arguments: {_short(exc)}")
    try:
        res = module.SPEC.run(params, ctx)
    except ToolInputError as exc:
        return Probe(tool=tool, status="failed", summary=f"{tool}: {exc.message}")
    except Exception as exc:
        return Probe(tool=tool, status="failed", summary=f"{tool} failed: {type(exc).__name__}")
    findings = [f for f in getattr(res, "findings", []) or [] if isinstance(f, Finding) and f.severity != "info"]
    cats = {f.category for f in findings}
    relevant = _PROBE_CONFIRMS.get(tool, set())
    confirms = [d.failure_mode_id for d in diagnosed if d.category in cats and d.category in relevant]
    return Probe(tool=tool, status="ok", summary=res.summary, confirms=confirms, findings=findings[:8])


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


# --------------------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------------------


def run(params: Params, ctx: RunContext) -> Result:
    from ..knowledge.catalog import load_catalog

    if not (params.text and params.text.strip()) and not params.log_path:
        raise ToolInputError(
            "no_input",
            "Nothing to diagnose: give `text` (a pasted error or log excerpt) and/or `log_path`.",
            "Paste the traceback or the last few hundred log lines into `text`, or pass the log file/directory.",
        )
    catalog = load_catalog()
    files: list[Path] = []
    omitted_files = 0
    if params.log_path:
        root = ctx.paths.check(params.log_path, kind="any", what="log_path")
        if root.is_dir():
            files, omitted_files = _collect_files(root, ctx)
            if not files:
                raise ToolInputError(
                    "no_log_files",
                    f"log_path {params.log_path!r} is a directory without *.log/*.txt/*.out/*.err files "
                    f"(searched {MAX_DIR_DEPTH} levels deep)",
                    "Pass the logs directory of the run (<work_dir>/<timestamp>/logs) or a log file.",
                )
        else:
            files = [root]
    sizes = [f.stat().st_size for f in files]
    total = sum(min(s, MAX_FILE_BYTES) for s in sizes) + (len(params.text.encode()) if params.text else 0)
    done = 0

    def progress(n: int) -> None:
        nonlocal done
        done += n
        ctx.progress(done, max(total, done), "scanning logs")

    scanner = Scanner(catalog, EVIDENCE_CAP[params.detail], progress)
    notes: list[str] = []
    sources: list[str] = []
    if params.text and params.text.strip():
        data_len = len(params.text.encode("utf-8", "replace"))
        scanner.scan_bytes_stream("text", _text_chunks(params.text), data_len)
        sources.append("text")
    budget = MAX_TOTAL_BYTES
    text_bytes = len(params.text.encode("utf-8", "replace")) if params.text else 0
    exact = text_bytes <= FULL_SCAN_MAX_BYTES and all(s <= FULL_SCAN_MAX_BYTES for s in sizes)
    for path, size in zip(files, sizes, strict=True):
        if budget <= 0:
            omitted_files += 1
            continue
        start = max(0, size - min(MAX_FILE_BYTES, budget))
        if start:
            notes.append(f"{path}: read the last {(size - start) >> 20} MiB of {size >> 20} MiB")
        budget -= size - start
        # line numbers are only known when the file is read from its start
        scanner.scan_bytes_stream(str(path), _file_chunks(path, start), size - start, start_line=1)
        if start:
            notes.append(f"{path}: line numbers count from byte {start}")
        sources.append(str(path))
    if omitted_files:
        notes.append(f"{omitted_files} more log files were not read (newest first, limits)")
    notes.extend(scanner.notes)

    backend = max(scanner.backend_hints, key=lambda k: scanner.backend_hints[k]) if scanner.backend_hints else None
    values = {
        "data_path": params.data_path,
        "config_path": params.config_path,
        "log_path": params.log_path,
        "backend": backend,
        "nodes": None,
    }
    diagnosed = _rank(catalog, scanner, values, params)
    shown = diagnosed[: params.max_findings]
    unrec_all = sorted(scanner.unrecognized.values(), key=lambda it: (it[0] != "text", it[1]))
    ucap = UNRECOGNIZED_CAP[params.detail]
    unrec = [UnrecognizedError(source=s, line=n, text=t, count=c) for s, n, t, c in unrec_all[:ucap]]

    probes: list[Probe] = []
    if params.run_probes:
        checks = sorted(
            {
                c
                for d in shown
                for call in d.confirm_with
                if call.tool == "probe_environment"
                for c in call.arguments.get("checks", [])
            }
            or {"backend", "ray"}
        )
        probes.append(_run_probe("probe_environment", {"checks": checks, "detail": "summary"}, ctx, shown))
        if params.data_path:
            probes.append(_run_probe("check_reward_data", {"path": params.data_path, "detail": "summary"}, ctx, shown))
        if params.config_path:
            probes.append(_run_probe("inspect_config", {"path": params.config_path, "detail": "summary"}, ctx, shown))

    routes = _routes(shown, scanner)
    verdict = _verdict(shown)
    summary = _summary(verdict, shown, len(diagnosed), scanner, len(unrec_all))
    return Result(
        summary=summary,
        verdict=verdict,
        findings=shown,
        findings_omitted=len(diagnosed) - len(shown),
        unrecognized_errors=unrec,
        unrecognized_errors_omitted=max(0, len(unrec_all) - len(unrec)),
        probes=probes,
        route=routes,
        scanned=Scanned(
            sources=sources[:20],
            sources_omitted=max(0, len(sources) - 20) + omitted_files,
            bytes=scanner.bytes,
            lines=scanner.lines,
            candidate_lines=scanner.candidates,
            scan_mode="exact" if exact else "markers",
            notes=notes[:10],
        ),
    )


def _rank(catalog: Any, scanner: Scanner, values: dict[str, Any], params: Params) -> list[Diagnosis]:
    by_id = catalog.by_id
    items = [(by_id[i], st) for i, st in scanner.states.items()]
    any_specific = any(fm.specificity >= 4 and not fm.hang and not fm.consequence for fm, _ in items)
    any_error_blocker = any(fm.severity == "blocker" and not fm.hang for fm, _ in items)
    any_cause = any(fm.severity == "blocker" and not fm.hang and not fm.consequence for fm, _ in items)
    items = [(fm, st) for fm, st in items if not (fm.wrapper and _subsumed(fm, st, items))]
    ranked = []
    for fm, st in items:
        conf = _confidence(fm, st, any_specific, any_error_blocker, any_cause)
        ranked.append((conf, fm, st))
    ranked.sort(key=lambda t: (-t[0], {"blocker": 0, "warning": 1, "info": 2}[t[1].severity], t[2].first_order))
    out: list[Diagnosis] = []
    for conf, fm, st in ranked:
        hits = list(st.hits)
        if st.last is not None and len(hits) > 1:
            hits[-1] = st.last
        evidence = [Evidence(source=h.source, line=h.line, text=h.text, kind=h.kind, context=h.context) for h in hits]
        out.append(
            Diagnosis(
                failure_mode_id=fm.id,
                category=fm.category,
                severity=fm.severity,
                confidence=conf,
                title=fm.title,
                evidence=evidence,
                evidence_omitted=max(0, st.count - len(evidence)),
                occurrences=st.count,
                cause=fm.cause,
                fix=list(fm.fix),
                confirm_with=[_fill_call(c, values) for c in fm.confirm_with],
                reference=fm.uri,
                doc_reference=fm.doc_uri,
                source=list(fm.source),
                route=fm.route,
            )
        )
    return out


def _subsumed(fm: Any, st: EntryState, items: list[tuple[Any, EntryState]]) -> bool:
    """A wrapper entry whose every line sits next to a line of a more specific entry adds nothing."""
    if st.count > len(st.hits):
        return False
    near = {(h.source, h.line) for o, ost in items if o.specificity > fm.specificity for h in ost.hits}
    return all(any((h.source, h.line + d) in near for d in range(-3, 4)) for h in st.hits)


def _routes(shown: list[Diagnosis], scanner: Scanner) -> list[Route]:
    reasons = {
        "data_preparation": "the training/eval data must be converted or fixed before the RL run",
        "sft_training": "the traceback runs through XTuner's SFT trainer, not the RL trainer",
        "model_backends": "the error is raised inside the inference engine (LMDeploy/SGLang/vLLM)",
        "legacy_cli": "the command or config uses the legacy XTuner CLI or removed V1 RL APIs",
    }
    areas: dict[str, list[str]] = {}
    for d in shown:
        if d.route:
            areas.setdefault(d.route, []).append(d.failure_mode_id)
    for area in scanner.routes:
        areas.setdefault(area, [])
    return [Route(area=a, reason=reasons[a], failure_mode_ids=ids) for a, ids in areas.items()]  # type: ignore[arg-type]


def _verdict(shown: list[Diagnosis]) -> Literal["failure_found", "hang_suspected", "warnings_only", "no_known_failure"]:
    from ..knowledge.catalog import get_failure_mode

    if not shown:
        return "no_known_failure"
    hang = {d.failure_mode_id for d in shown if (fm := get_failure_mode(d.failure_mode_id)) and fm.hang}
    if any(d.severity == "blocker" and d.failure_mode_id not in hang for d in shown):
        return "failure_found"
    if hang:
        return "hang_suspected"
    return "warnings_only"


def _summary(verdict: str, shown: list[Diagnosis], total: int, scanner: Scanner, unrec: int) -> str:
    tail = f"scanned {scanner.lines:,} lines"
    if unrec:
        tail = f"{unrec} unrecognized error line(s); " + tail
    if not shown:
        return f"No known XTuner RL failure matched; {tail}."
    top = shown[0]
    lead = {
        "failure_found": "Most likely cause",
        "hang_suspected": "Run looks stuck",
        "warnings_only": "No fatal error; top warning",
        "no_known_failure": "",
    }[verdict]
    more = f"; {total - 1} more finding(s)" if total > 1 else ""
    return f"{lead}: {top.failure_mode_id} ({top.confidence:.2f}) — {top.title}{more}; {tail}."


DESCRIPTION = """\
Diagnoses a failed or stuck XTuner V1 RL (GRPO) run from a pasted traceback/log excerpt or a log file/directory: \
ranked findings from the failure-mode catalog, each with confidence, evidence lines, cause, ordered fix steps, \
the tool calls that would confirm it, the XTuner source and a reference URI; error lines no entry matched are \
listed, never dropped. Handles Python tracebacks (chained, Ray-wrapped), pydantic validation blocks, log \
prefixes, ANSI colours, CRLF, interleaved workers and stalls (placement groups pending); streams large logs.
Use when: a run crashed, hung or misbehaved and you have its error text or logs.
Not for: checking a run before launch (use preflight, inspect_config, check_reward_data, probe_environment) or \
general questions (use lookup_reference)."""

SPEC = ToolSpec("diagnose_symptom", "Diagnose a failed or stuck RL run", DESCRIPTION, Params, Result, run)
