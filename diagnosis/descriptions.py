"""Ranking catalog entries by how a failure is described: prose, partial logs, Chinese, other stacks' wording.

Every catalog entry lists ``phrases``. A report is normalised once (``knowledge.text``); a phrase matches when its
words occur in a row (Chinese: as a substring). A phrase weighs more when few entries share it (inverse entry
frequency) and when it is longer; an entry's score adds its matched phrases with diminishing returns, so one
specific phrase beats many generic ones. Only lines a person wrote or an error/warning line take part: INFO and
DEBUG log lines describe a healthy run as much as a broken one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..knowledge.text import contains_phrase, is_cjk, normalise
from .log_lines import clean_line

#: Characters of pasted text matched by description (head and tail kept: the failure is usually at the end).
MAX_DESCRIBED_CHARS = 256 * 1024
#: Each further matched phrase of one entry counts this much less than the previous one.
DECAY = 0.6
_QUIET_LEVELS = frozenset({"INFO", "DEBUG", "TRACE", "SUCCESS", "NOTICE"})


@dataclass(frozen=True)
class Phrase:
    text: str  # as written in the catalog
    norm: str  # normalised, with surrounding spaces
    words: frozenset[str]  # Latin words that must all be present (cheap prefilter); empty for Chinese
    weight: float


@dataclass
class DescriptionMatch:
    """One entry whose phrases occur in the report."""

    failure_mode_id: str
    score: float
    phrases: list[Phrase] = field(default_factory=list)
    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, line text, phrase)


@dataclass(frozen=True)
class PhraseIndex:
    by_entry: dict[str, tuple[Phrase, ...]]


_INDEX: dict[int, PhraseIndex] = {}


def phrase_index(catalog: Any) -> PhraseIndex:
    """Phrases of every entry, normalised and weighted once per catalog object."""
    idx = _INDEX.get(id(catalog))
    if idx is not None:
        return idx
    normalised = {fm.id: {normalise(p): p for p in fm.phrases if normalise(p).strip()} for fm in catalog.entries}
    df: dict[str, int] = {}
    for forms in normalised.values():
        for norm in forms:
            df[norm] = df.get(norm, 0) + 1
    n = max(1, len(normalised))
    by_entry: dict[str, tuple[Phrase, ...]] = {}
    for fm_id, forms in normalised.items():
        phrases = []
        for norm, raw in forms.items():
            core = norm.strip()
            if is_cjk(core.replace(" ", "")) and " " not in core:
                length = 1.0 + 0.15 * max(0, len(core) - 2)
                words: frozenset[str] = frozenset()
            else:
                parts = core.split()
                length = 1.0 + 0.35 * (len(parts) - 1)
                words = frozenset(p for p in parts if not is_cjk(p))
            weight = math.log(1.0 + n / df[norm]) * length
            phrases.append(Phrase(raw, norm, words, weight))
        by_entry[fm_id] = tuple(sorted(phrases, key=lambda p: -p.weight))
    idx = PhraseIndex(by_entry)
    _INDEX[id(catalog)] = idx
    return idx


def described_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a report that take part: prose and error/warning lines, not INFO/DEBUG log chatter."""
    if len(text) > MAX_DESCRIBED_CHARS:
        half = MAX_DESCRIBED_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    out = []
    for i, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        cleaned, _worker, level = clean_line(raw)
        if level in _QUIET_LEVELS:
            continue
        out.append((i, cleaned))
    return out


def match_description(catalog: Any, lines: Iterable[tuple[int, str]]) -> list[DescriptionMatch]:
    """Entries whose phrases occur in the given lines, best first."""
    numbered = [(n, t, normalise(t)) for n, t in lines]
    if not numbered:
        return []
    whole = " " + " ".join(norm.strip() for _, _, norm in numbered) + " "
    present = set(whole.split())
    matches = []
    for fm_id, phrases in phrase_index(catalog).by_entry.items():
        hit = [p for p in phrases if p.words <= present and contains_phrase(whole, p.norm)]
        if not hit:
            continue
        score = sum(p.weight * DECAY**i for i, p in enumerate(hit))
        m = DescriptionMatch(fm_id, round(score, 3), hit)
        for p in hit[:3]:
            line = next(((n, t) for n, t, norm in numbered if contains_phrase(norm, p.norm)), None)
            if line is not None:  # a phrase spanning two lines has no single line to show
                m.lines.append((line[0], line[1], p.text))
        matches.append(m)
    matches.sort(key=lambda m: (-m.score, m.failure_mode_id))
    return matches


def confidence(score: float, best: float) -> float:
    """A description match is a lead, not a proof: 0.15-0.6, higher for a strong score close to the best one."""
    strength = 1.0 - math.exp(-score / 4.0)
    relative = score / best if best > 0 else 0.0
    return round(0.15 + 0.3 * strength + 0.15 * relative, 2)
