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

from ..knowledge.text import contains_phrase, is_cjk, normalise, terms
from .log_lines import clean_line

#: Characters of pasted text matched by description (head and tail kept: the failure is usually at the end).
MAX_DESCRIBED_CHARS = 256 * 1024
#: Least word-overlap score that makes an entry a lead: two or three rare shared words, not one common one.
MIN_RELATED = 4.0
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
    #: Bag-of-words side: term -> [(entry id, weight)], for reports whose wording no phrase covers exactly.
    postings: dict[str, tuple[tuple[str, float], ...]]
    #: The same weights by entry: entry id -> {term: weight}.
    entry_terms: dict[str, dict[str, float]]


#: One index per catalog object; the object is kept with it, so a recycled id() can never return a stale index.
_INDEX: dict[int, tuple[Any, PhraseIndex]] = {}


def phrase_index(catalog: Any) -> PhraseIndex:
    """Phrases of every entry, normalised and weighted once per catalog object."""
    cached = _INDEX.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1]
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
    postings = _postings(catalog)
    entry_terms: dict[str, dict[str, float]] = {}
    for t, posts in postings.items():
        for e, w in posts:
            entry_terms.setdefault(e, {})[t] = w
    idx = PhraseIndex(by_entry, postings, entry_terms)
    _INDEX[id(catalog)] = (catalog, idx)
    return idx


#: Words that say something is wrong without saying what: they let weak word-overlap leads through.
_TROUBLE = frozenset(
    normalise(
        "error exception traceback fail failed failure crash crashed hang hung stuck freeze frozen killed oom "
        "timeout timed abort aborted cannot can't unable refused denied invalid missing broken wrong nan inf "
        "segfault segmentation died dead slow never zero always"
    ).split()
)
_TROUBLE_ZH = (
    "报错",
    "错误",
    "失败",
    "异常",
    "卡住",
    "卡死",
    "崩溃",
    "超时",
    "无法",
    "不能",
    "不行",
    "没有",
    "挂了",
    "退出",
    "问题",
)

#: Words that say nothing about which failure it is.
_STOP = frozenset(
    normalise(
        "the a an and or of to in on at for with by from is are was were be been it this that these those not no "
        "when while after before can cannot can't could would should will do does did have has had my our your i we "
        "you they he she its as if then than so but also only just all any some more most very into out up down "
        "error errors fail failed failure run runs running training train model use using used get got issue bug "
        "problem help please thanks hi hello question how why what which work works working line file "
        "报错 问题 错误 失败 训练 模型 请问 谢谢 运行 使用"
    ).split()
)


def _useful(term: str) -> bool:
    """A word that can tell failures apart: not a stopword, not a bare number, not a generic trouble word."""
    return len(term) > 1 and not term.isdigit() and term not in _STOP and term not in _TROUBLE


def _entry_terms(fm: Any) -> dict[str, float]:
    """Terms of an entry and how much each says about it: phrases and title most, cause and messages less."""
    weighted: dict[str, float] = {}
    parts = [(" ".join(fm.phrases), 2.0), (fm.title, 1.5), (" ".join(fm.examples), 1.0), (fm.cause, 0.5)]
    for text, w in parts:
        for t in terms(text):
            if _useful(t):
                weighted[t] = max(weighted.get(t, 0.0), w)
    return weighted


def _postings(catalog: Any) -> dict[str, tuple[tuple[str, float], ...]]:
    per_entry = {fm.id: _entry_terms(fm) for fm in catalog.entries}
    df: dict[str, int] = {}
    for ts in per_entry.values():
        for t in ts:
            df[t] = df.get(t, 0) + 1
    n = max(1, len(per_entry))
    out: dict[str, list[tuple[str, float]]] = {}
    for fm_id, ts in per_entry.items():
        norm = math.sqrt(len(ts)) or 1.0  # long entries do not win by size
        for t, w in ts.items():
            idf = math.log(1.0 + n / df[t])
            out.setdefault(t, []).append((fm_id, w * idf * idf / norm))
    return {t: tuple(v) for t, v in out.items()}


def related_entries(
    catalog: Any, lines: Iterable[tuple[int, str]], from_log: bool = False, limit: int = 8
) -> list[tuple[str, float]]:
    """Entries whose words the report shares, weighted by rarity: the weak signal behind phrase matches.

    A person describing a run is describing a problem; a log is only taken to report one when a line says
    something went wrong, so a healthy log raises no suspicion.
    """
    lines = list(lines)
    if from_log and not reports_trouble(lines):
        return []
    postings = phrase_index(catalog).postings
    seen = {t for _, text in lines for t in terms(text) if _useful(t)}
    scores: dict[str, float] = {}
    for t in seen:
        for fm_id, w in postings.get(t, ()):
            scores[fm_id] = scores.get(fm_id, 0.0) + w
    ranked = sorted(((k, v) for k, v in scores.items() if v >= MIN_RELATED), key=lambda kv: (-kv[1], kv[0]))
    return ranked[:limit]


def shared_words_line(catalog: Any, lines: Iterable[tuple[int, str]], fm_id: str) -> tuple[int, str, str] | None:
    """The line that shares the most weight of words with an entry, and those words (evidence for a weak lead)."""
    weights = phrase_index(catalog).entry_terms.get(fm_id, {})
    best: tuple[float, int, str, list[str]] | None = None
    for n, text in lines:
        shared = sorted({t for t in terms(text) if t in weights and _useful(t)}, key=lambda t: -weights[t])
        score = sum(weights[t] for t in shared)
        if shared and (best is None or score > best[0]):
            best = (score, n, text, shared)
    if best is None:
        return None
    return best[1], best[2], "shared words: " + ", ".join(best[3][:6])


def is_log(text: str) -> bool:
    """Mostly log records (a level or timestamp prefix on most lines), rather than a person's description."""
    lines = [ln for ln in text.splitlines()[:400] if ln.strip()]
    leveled = sum(1 for ln in lines if clean_line(ln)[2])
    return len(lines) >= 3 and leveled * 2 >= len(lines)


def described_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a report that take part: prose and error/warning lines, not INFO/DEBUG log chatter."""
    if len(text) > MAX_DESCRIBED_CHARS:
        half = MAX_DESCRIBED_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    out = []
    after_frame = False
    for i, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        cleaned, _worker, level = clean_line(raw)
        code_line, after_frame = after_frame, cleaned.startswith('File "')
        # INFO chatter, traceback frames and the source lines they quote say where, not what went wrong.
        if level in _QUIET_LEVELS or after_frame or code_line or cleaned.startswith("Traceback (most recent"):
            continue
        out.append((i, cleaned))
    return out


def reports_trouble(lines: Iterable[tuple[int, str]]) -> bool:
    """Whether the lines say that something is wrong at all (a healthy log's lines do not)."""
    for _, text in lines:
        norm = normalise(text)
        if _TROUBLE.intersection(norm.split()) or any(w in text for w in _TROUBLE_ZH):
            return True
    return False


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
