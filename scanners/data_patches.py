"""Line patches for check_reward_data (issue 27): a finding whose fix follows from each offending line alone gets a
unified diff of the data file as it is on disk. The server never writes the file; the agent applies the diff with
``git apply`` from the allowed root.

Only where the corrected line is certain, in a file small enough for a diff to be useful (at most
:data:`MAX_PATCH_FILE_BYTES`, the in-process scan threshold) and with few lines to change (at most
:data:`MAX_PATCH_LINES` per finding over all files); otherwise the finding keeps its converter command alone.

* ``blank_line``: the line is deleted (XTuner parses every line, jsonl.py:626-627).
* ``bom``: the byte-order mark is stripped (``data.decode()`` keeps it, json.loads refuses it).
* ``missing_final_newline``: the newline is added.
* ``messages_instead_of_prompt``: the key is renamed in place (text_tokenize_fn.py:52 reads ``item['prompt']``).
* ``gsm8k_ground_truth_not_string``: an integer, or an integral float below 2**53, becomes its decimal string
  (gsm8k.py compares strings exactly: 72 and 72.0 become "72").

A re-written JSON line keeps its own layout when ``json.dumps`` reproduces it (default or compact separators, ASCII
escapes or not); otherwise it is written the way XTuner's converters write (``ensure_ascii=False``). Every corrected
line is judged again: it must lose its code and, when the old line parsed, gain no blocker; or the finding gets no
patch. The lines to change
are found again in the bytes read for the diff, and must be exactly as many as the scan counted (else no patch).
``truncated_last_line`` never gets one: the rest of the record cannot be known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from .jsonl import NO_LIMITS, Limits
from .jsonl_contract import BLOCKING
from .jsonl_precise import BOM, NO_FINAL_NEWLINE, analyze_line
from .jsonl_results import FileResult, ScanOptions
from .parallel import PARALLEL_MIN_BYTES

#: Files larger than this get no patch (the in-process scan threshold); the converter command is the fix.
MAX_PATCH_FILE_BYTES = PARALLEL_MIN_BYTES
#: Lines one finding's patch may change over all files; beyond this the converter command is the fix.
MAX_PATCH_LINES = 20
#: Lines of context around each change, as ``diff -u`` and ``git diff`` use.
CONTEXT_LINES = 3
#: The codes a line patch can fix.
PATCHABLE = frozenset(
    {"blank_line", "bom", "missing_final_newline", "messages_instead_of_prompt", "gsm8k_ground_truth_not_string"}
)
#: Codes that only a line's JSON content can carry, and what such a line holds (other codes: a line not starting
#: with '{', or the last line); a line with a ``\\u`` escape is judged whatever it holds.
_CONTENT_CODES = {
    "messages_instead_of_prompt": re.compile(rb'"messages"'),
    "gsm8k_ground_truth_not_string": re.compile(rb'"ground_truth"\s*:\s*[^"\s]'),
}
_EXACT_FLOAT = 2**53
_LAYOUTS: tuple[dict[str, Any], ...] = (
    {"ensure_ascii": False},
    {},
    {"ensure_ascii": False, "separators": (",", ":")},
    {"separators": (",", ":")},
)

Reader = Callable[[str], "bytes | None"]


# ---- one line -----------------------------------------------------------------------------------------------------


def _codes(raw: bytes, judger: str) -> tuple[set[str], Any]:
    """The codes the scanner gives one line (newline included unless it is the file's last), and its object."""
    last = not raw.endswith(b"\n")
    issues, obj = analyze_line(raw, last_unterminated=last, judger=judger)
    codes = {c for c, _, _ in issues}
    if last and raw and not codes & BLOCKING:
        codes.add(NO_FINAL_NEWLINE[0])
    return codes, obj


def _split_eol(raw: bytes) -> tuple[bytes, bytes]:
    for eol in (b"\r\n", b"\n"):
        if raw.endswith(eol):
            return raw[: -len(eol)], eol
    return raw, b""


def _rewrite(raw: bytes, old: dict, new: dict) -> bytes:
    """``new`` in place of the JSON object ``old`` on this line: its layout kept when json.dumps reproduces it, the
    surrounding whitespace and the line ending kept."""
    body, eol = _split_eol(raw)
    text = body.decode("utf-8")
    core = text.strip()
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    layout = next((kw for kw in _LAYOUTS if json.dumps(old, **kw) == core), _LAYOUTS[0])
    return (lead + json.dumps(new, **layout) + trail).encode("utf-8") + eol


def _gt_string(gt: Any) -> str | None:
    """The decimal string of a number ground truth when it is exact: an integer, or an integral float below 2**53."""
    if isinstance(gt, bool):
        return None
    if isinstance(gt, int):
        return str(gt)
    if isinstance(gt, float) and gt.is_integer() and abs(gt) < _EXACT_FLOAT:
        return str(int(gt))
    return None


def fixed_line(code: str, raw: bytes, judger: str) -> bytes | None:
    """The line that replaces ``raw`` to fix ``code`` (b"" deletes it), or None when the fix is not certain: the new
    line must be a JSON object without the code, and gain no blocker unless the old line did not parse (a BOM hides
    every other rule of its line)."""
    if code == "blank_line":
        return b""
    if code == "missing_final_newline":
        return raw + b"\n" if raw and not raw.endswith(b"\n") else None
    old_codes, obj = _codes(raw, judger)
    new: bytes | None = None
    if code == "bom" and raw.startswith(BOM):
        new = raw[len(BOM) :]
    elif code == "messages_instead_of_prompt" and isinstance(obj, dict) and "prompt" not in obj and "messages" in obj:
        new = _rewrite(raw, obj, {("prompt" if k == "messages" else k): v for k, v in obj.items()})
    elif code == "gsm8k_ground_truth_not_string" and isinstance(obj, dict):
        rm = obj.get("reward_model")
        gt = _gt_string(rm.get("ground_truth")) if isinstance(rm, dict) else None
        if isinstance(rm, dict) and gt is not None:
            new = _rewrite(raw, obj, {**obj, "reward_model": {**rm, "ground_truth": gt}})
    if new is None:
        return None
    new_codes, new_obj = _codes(new, judger)
    hidden = not isinstance(obj, dict)  # the old line did not parse: what it hid shows now
    if not isinstance(new_obj, dict) or code in new_codes or (not hidden and (new_codes - old_codes) & BLOCKING):
        return None
    return new


# ---- one file -----------------------------------------------------------------------------------------------------


def split_lines(data: bytes) -> list[bytes]:
    """The file's lines as the scanner cuts them: at b"\\n" only, newline kept (the last one may lack it)."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _may_carry(raw: bytes, wanted: set[str], last: bool) -> bool:
    """Whether a line could carry one of the wanted codes (a cheap filter; the count check catches a miss)."""
    if last or not raw.startswith(b"{"):
        return True
    return any(code in wanted and (b"\\u" in raw or held.search(raw)) for code, held in _CONTENT_CODES.items())


def line_fixes(lines: list[bytes], wanted: set[str], opts: ScanOptions, limits: Limits) -> dict[str, dict[int, bytes]]:
    """For each wanted code, every line (0-based) carrying it and its fixed line (None where not certain)."""
    found: dict[str, dict[int, bytes]] = {code: {} for code in wanted}
    uncertain: set[str] = set()
    for i, raw in enumerate(lines):
        if i % 256 == 0:
            limits.check()
        last = i == len(lines) - 1
        if len(raw.rstrip(b"\n")) > opts.max_line_bytes or not _may_carry(raw, wanted, last):
            continue
        codes, _ = _codes(raw, opts.judger)
        for code in codes & wanted:
            fixed = fixed_line(code, raw, opts.judger) if code not in uncertain else None
            if fixed is None:
                uncertain.add(code)
            else:
                found[code][i] = fixed
    return {code: fixes for code, fixes in found.items() if code not in uncertain}


# ---- the diff -----------------------------------------------------------------------------------------------------


def _body(prefix: str, line: str) -> str:
    return f"{prefix}{line}" if line.endswith("\n") else f"{prefix}{line}\n\\ No newline at end of file\n"


def line_diff(label: str, old: list[str], changes: dict[int, str]) -> str:
    """A ``git diff``-style patch replacing line ``i`` of ``old`` (lines split at "\\n", newline kept) by
    ``changes[i]`` ("" deletes it), with ``CONTEXT_LINES`` of context and the no-newline marker git apply needs."""
    groups: list[list[int]] = []
    for i in sorted(changes):
        if groups and i - groups[-1][-1] <= 2 * CONTEXT_LINES:
            groups[-1].append(i)
        else:
            groups.append([i])
    out = [f"--- a/{label}\n", f"+++ b/{label}\n"]
    shift = 0
    for group in groups:
        start, end = max(0, group[0] - CONTEXT_LINES), min(len(old), group[-1] + CONTEXT_LINES + 1)
        body: list[str] = []
        n_old = n_new = 0
        for j in range(start, end):
            n_old += 1
            if j in changes:
                body.append(_body("-", old[j]))
                if changes[j]:
                    body.append(_body("+", changes[j]))
                    n_new += 1
            else:
                body.append(_body(" ", old[j]))
                n_new += 1
        new_start = start + shift + (1 if n_new else 0)
        out.append(f"@@ -{start + 1},{n_old} +{new_start},{n_new} @@\n")
        out += body
        shift += n_new - n_old
    return "".join(out)


# ---- the findings' patches ------------------------------------------------------------------------------------------


def data_patches(
    per_file: Sequence[FileResult],
    opts: ScanOptions,
    read: Reader,
    label: Callable[[str], str],
    limits: Limits = NO_LIMITS,
) -> dict[str, str]:
    """The patch of each patchable finding (``"data.<code>"`` -> diff over every file carrying the code), when every
    such file is small, readable and valid UTF-8 and the code's lines are few and each certain to fix. ``read``
    returns a file's bytes (None when it cannot be read); ``label`` its path in the diff header."""
    files = [fr for fr in per_file if not fr.error]
    total: dict[str, int] = {}
    for fr in per_file:
        for code, n in fr.codes.items():
            if code in PATCHABLE:
                total[code] = total.get(code, 0) + n
    wanted = {c for c, n in total.items() if n <= MAX_PATCH_LINES}
    for fr in per_file:
        if fr.error or fr.bytes > MAX_PATCH_FILE_BYTES:
            wanted -= set(fr.codes)
    diffs: dict[str, list[str]] = {code: [] for code in wanted}
    for fr in files:
        here = wanted & {c for c, n in fr.codes.items() if n}
        if not here:
            continue
        data = read(fr.path)
        if data is None or not _diffable(data, fr.bytes):
            wanted -= here
            continue
        lines = split_lines(data)
        fixes = line_fixes(lines, here, opts, limits)
        old = [line.decode("utf-8") for line in lines]
        for code in here:
            got = fixes.get(code)
            if got is None or len(got) != fr.codes[code]:
                wanted.discard(code)
                continue
            changes = {i: new.decode("utf-8") for i, new in got.items()}
            diffs[code].append(line_diff(label(fr.path), old, changes))
    return {f"data.{code}": "".join(diffs[code]) for code in sorted(wanted) if diffs[code]}


def _diffable(data: bytes, size: int) -> bool:
    """Whether the bytes read are the file the scan saw (same size) and text a diff can carry: UTF-8, no NUL."""
    if len(data) != size or b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
