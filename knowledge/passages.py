"""Reference sections cut into passages: the units lookup_reference returns as answers.

A passage is a paragraph; a list item (a nested item carries its parent item's line; an item of a list introduced
by a line ending in ':' carries that line); a table row under the table's header row; or a fenced code block with
the sentence before it. A paragraph ending in ':' also carries the list or paragraph it introduces when both fit
in PASSAGE_CHARS (that block stays a passage of its own too). Citation lines (``Source: path:line``) are not
passages: they are the section's sources. Each passage keeps its *units* - sentences of prose, rows of a table,
lines of code - so it can be shown whole or cut at a unit boundary, and its best unit can serve as a snippet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Longest passage text returned whole; longer ones are cut to a window of whole units around the best one.
PASSAGE_CHARS = 700
#: Longest snippet (one sentence or line); longer sentences are cut at a word boundary.
SNIPPET_CHARS = 400
ELLIPSIS = "…"

_SOURCE_LINE = re.compile(r"^\s*(?:\*\*)?Sources?:(?:\*\*)?\s", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|[\s:|-]+\|\s*$")
#: A sentence ends at . ! ? (plus closing quotes/brackets/emphasis) followed by white space.
_SENTENCE_END = re.compile(r"[.!?][\"')\]*]*\s+")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "resp.", "No.")


@dataclass(frozen=True)
class Passage:
    """One answer-sized piece of a section."""

    kind: str  # "paragraph", "item", "row", "code", "cause" or "fix"
    text: str  # the passage as shown (context lines included)
    units: tuple[str, ...]  # the parts it may be cut into; the context line (if any) is the first unit
    context: int = 0  # how many leading units are context (a header row, a parent item, a lead-in sentence)


def split_sentences(text: str) -> list[str]:
    """Sentences of one paragraph; never splits inside a `code span` or after an abbreviation such as e.g."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        end = m.end()
        head = text[start : m.start() + 1]
        if head.count("`") % 2 == 1:  # inside an inline code span
            continue
        last_word = head.rsplit(None, 1)[-1] if head.strip() else ""
        if last_word.endswith(_ABBREVIATIONS) or re.fullmatch(r"\(?[A-Za-z]\.", last_word):
            continue
        nxt = text[end : end + 1]
        if nxt and nxt.islower():  # "... (10 s timeout). then" is not a sentence start
            continue
        out.append(text[start:end].strip())
        start = end
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def _last_sentence(paragraph: str) -> str:
    sentences = split_sentences(paragraph)
    return sentences[-1] if sentences else ""


def _prose(kind: str, text: str, lead: str = "") -> Passage:
    units = ([lead] if lead else []) + split_sentences(text)
    shown = f"{lead}\n{text}" if lead else text
    return Passage(kind, shown, tuple(units), 1 if lead else 0)


@dataclass
class _Item:
    indent: int
    marker: str
    text: str

    def line(self) -> str:
        return f"{' ' * self.indent}{self.marker} {self.text}"


class _Splitter:
    """Line-by-line state machine over one section's markdown body."""

    def __init__(self) -> None:
        self.out: list[Passage] = []
        self.para: list[str] = []
        self.last_para = ""  # the paragraph just before the current block (for lead-ins)
        self.items: list[_Item] = []  # the open list: items in order
        self.lead = ""  # a list's introducing line (ends with ':')
        self.after_blank = False  # a blank line since the last list item: unindented text ends the list
        self.lead_pos: int | None = None  # position in ``out`` of the paragraph that introduces the open list

    # -- blocks ----------------------------------------------------------------------------------------------
    def flush_para(self) -> None:
        if self.para:
            text = " ".join(p.strip() for p in self.para)
            prev = self.out[-1] if self.out else None
            if prev is not None and prev.kind == "paragraph" and prev.text == self.last_para:
                merged = f"{prev.text}\n{text}"  # "It is computed as:" + the formula paragraph below it
                if prev.text.endswith(":") and len(merged) <= PASSAGE_CHARS:
                    self.out[-1] = Passage("paragraph", merged, (*prev.units, *split_sentences(text)))
            self.out.append(_prose("paragraph", text))
            self.last_para = text
            self.para = []

    def flush_items(self) -> None:
        parents: list[_Item] = []
        for item in self.items:
            while parents and parents[-1].indent >= item.indent:
                parents.pop()
            parent = parents[-1] if parents else None
            context = parent.line() if parent else self.lead
            units = ([context] if context else []) + split_sentences(item.text)
            shown = item.line().strip() if not context else f"{context}\n{item.line()}"
            self.out.append(Passage("item", shown, tuple(units), 1 if context else 0))
            parents.append(item)
        self._merge_into_lead()
        self.items = []
        self.lead = ""
        self.lead_pos = None

    def _merge_into_lead(self) -> None:
        """A paragraph ending in ':' is incomplete without its list: when both fit, the paragraph carries the list."""
        if self.lead_pos is None or not self.items:
            return
        para = self.out[self.lead_pos]
        lines = [item.line() for item in self.items]
        merged = "\n".join([para.text, *lines])
        if len(merged) <= PASSAGE_CHARS:
            units = list(para.units) + [u for item in self.items for u in split_sentences(item.text)]
            self.out[self.lead_pos] = Passage("paragraph", merged, tuple(units))

    def flush(self) -> None:
        self.flush_para()
        self.flush_items()

    def table(self, rows: list[str]) -> None:
        self.flush()
        rows = [r.strip() for r in rows if not _TABLE_RULE.match(r)]
        if len(rows) < 2:
            if rows:
                self.out.append(Passage("row", rows[0], (rows[0],)))
            return
        header = rows[0]
        for row in rows[1:]:
            self.out.append(Passage("row", f"{header}\n{row}", (header, row), 1))
        self.last_para = ""

    def code(self, lines: list[str]) -> None:
        lead = self.last_para_sentence()
        self.flush()
        body = "\n".join(lines).strip("\n")
        shown = f"{lead}\n{body}" if lead else body
        code_units = tuple(ln for ln in lines if ln.strip())
        self.out.append(Passage("code", shown, ((lead,) if lead else ()) + code_units, 1 if lead else 0))
        self.last_para = ""

    def last_para_sentence(self) -> str:
        if self.para:
            return _last_sentence(" ".join(p.strip() for p in self.para))
        if self.items:
            return ""
        return _last_sentence(self.last_para) if self.last_para else ""

    # -- lines -------------------------------------------------------------------------------------------------
    def item(self, m: re.Match[str]) -> None:
        if self.para:  # a list right under its introducing line, without a blank line
            text = " ".join(p.strip() for p in self.para)
            self.flush_para()
            self.lead = _last_sentence(text) if text.rstrip().endswith(":") else ""
            self.lead_pos = len(self.out) - 1 if self.lead else None
        elif not self.items:
            self.lead = _last_sentence(self.last_para) if self.last_para.rstrip().endswith(":") else ""
            follows = bool(self.out) and self.out[-1].kind == "paragraph" and self.out[-1].text == self.last_para
            self.lead_pos = len(self.out) - 1 if self.lead and follows else None
        self.items.append(_Item(len(m.group(1)), m.group(2), m.group(3).strip()))
        self.after_blank = False

    def text_line(self, line: str) -> None:
        indented = line.startswith((" ", "\t"))
        if self.items and (indented or not self.after_blank):
            self.items[-1].text += " " + line.strip()  # continuation of the open item
            self.after_blank = False
            return
        self.flush_items()
        self.para.append(line)

    def blank(self) -> None:
        self.flush_para()
        self.after_blank = True


def split_markdown(body: str) -> list[Passage]:
    """Passages of one section body (markdown, headings already removed)."""
    sp = _Splitter()
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            j = i + 1
            while j < len(lines) and not _FENCE.match(lines[j]):
                j += 1
            sp.code(lines[i : j + 1])
            i = j + 1
            continue
        if _TABLE_ROW.match(line):
            j = i
            while j < len(lines) and _TABLE_ROW.match(lines[j]):
                j += 1
            sp.table(lines[i:j])
            i = j
            continue
        if not line.strip():
            sp.blank()
        elif _SOURCE_LINE.match(line):
            sp.flush()
        elif m := _ITEM.match(line):
            sp.item(m)
        else:
            sp.text_line(line)
        i += 1
    sp.flush()
    return [p for p in sp.out if p.text.strip()]


def catalog_passages(cause: str, fixes: list[str]) -> list[Passage]:
    """A catalog entry: its cause, and each fix as an item under 'Fix:'."""
    out = [_prose("cause", cause.strip())] if cause.strip() else []
    for fix in fixes:
        if fix.strip():
            out.append(Passage("fix", f"Fix: {fix.strip()}", tuple(split_sentences(f"Fix: {fix.strip()}"))))
    return out


def _joined_len(units: list[str], sep: str) -> int:
    return len(sep.join(units))


def shown_text(passage: Passage, best: int) -> str:
    """The passage whole if it fits PASSAGE_CHARS; else its context plus a window of whole units around ``best``.

    Cut ends are marked with an ellipsis; a unit is never cut (a single unit longer than the cap is kept whole).
    """
    if len(passage.text) <= PASSAGE_CHARS:
        return passage.text
    sep = " " if passage.kind in ("paragraph", "item", "cause", "fix") else "\n"
    context = list(passage.units[: passage.context])
    body = list(passage.units[passage.context :])
    best = min(max(best - passage.context, 0), max(len(body) - 1, 0))
    lo, hi = best, best + 1
    budget = PASSAGE_CHARS - sum(len(c) + 1 for c in context) - 2 * (len(ELLIPSIS) + 1)
    while True:
        grown = False
        if hi < len(body) and _joined_len(body[lo : hi + 1], sep) <= budget:
            hi += 1
            grown = True
        if lo > 0 and _joined_len(body[lo - 1 : hi], sep) <= budget:
            lo -= 1
            grown = True
        if not grown:
            break
    window = sep.join(body[lo:hi])
    if lo > 0:
        window = f"{ELLIPSIS} {window}"
    if hi < len(body):
        window = f"{window} {ELLIPSIS}"
    return "\n".join([*context, window])


def snippet_text(unit: str) -> str:
    """One unit as a snippet: whole, or cut at a word boundary when longer than SNIPPET_CHARS."""
    unit = unit.strip()
    if len(unit) <= SNIPPET_CHARS:
        return unit
    cut = unit[: SNIPPET_CHARS - 1]
    space = cut.rfind(" ")
    if space > SNIPPET_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + ELLIPSIS
