"""Search over the shipped references and the failure-mode catalog: sections ranked, then passages within them.

Two stages, one index built once (``build_index``):

1. **Sections.** BM25 over heading + body (heading terms weighted up), with extra weight when a code identifier of
   the query (``max_staleness``, ``XTUNER_USE_SGLANG``) names a heading or a table's first cell, when a failure-mode
   pattern matches an error message pasted into the query, when pasted text shares 4-word runs with a section, and
   when one of a catalog entry's ``phrases`` (English or Chinese) occurs in the query.
2. **Passages** (``knowledge.passages``: paragraphs, list items, table rows with their header, code blocks) of the
   best sections are ranked by their own BM25 (idf over all passages, the heading counted once in each), whole
   identifiers and word pairs of the query they contain, plus a share of their section's score. The first place
   goes to the best passage of the best section; at most two passages per section fill the first five places, and
   a passage another chosen one already shows is skipped.

Chinese questions: every run of CJK characters is cut into the longest terms of ``references/glossary_zh.toml`` and
replaced by their English search words; Latin words and identifiers in the question are kept as they are. The CJK
character bigrams of the question are searched too (they match the Chinese ``phrases`` of catalog entries).
Identifiers are indexed whole and by their parts; ``knowledge.text.stem`` folds plurals and -ing/-ed forms.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

from . import catalog, docs
from .passages import Passage, catalog_passages, shown_text, snippet_text, split_markdown
from .text import CJK_RUNS, chinese_word_spans, contains_phrase, is_cjk, is_function_word, normalise, stem
from .text import terms as bag_terms

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

log = logging.getLogger("xtuner_rl_mcp")

FAILURE_MODES_DOC = "failure-modes"
CATALOG_DOC_RENDERED = "troubleshooting"
GLOSSARY_FILE = "glossary_zh.toml"
_REFERENCES_PACKAGE = f"{(__package__ or 'xtuner_rl_mcp.knowledge').rsplit('.', 1)[0]}.references"

# Section ranking
HEADING_WEIGHT = 3.0
K1, B = 1.2, 0.75
IDENT_HEADING_BONUS = 4.0
IDENT_DEFINED_BONUS = 2.0
PATTERN_BONUS = 12.0
PHRASE_N = 4
PHRASE_BONUS = 1.5
#: Per catalog phrase found in the query (at most DESCRIBED_MAX count): a Chinese phrase is how a Chinese question
#: finds an entry; an English one only adds to what the entry's own text already matched.
DESCRIBED_BONUS_CJK = 3.0
DESCRIBED_BONUS_LATIN = 1.0
DESCRIBED_MAX = 3
CATALOG_WEIGHT = 0.6
#: A Chinese character pair is a noisy term (境变, 量来): it counts this much of a word.
CJK_TERM_WEIGHT = 0.4
# Passage ranking
CANDIDATE_SECTIONS = 8
MIN_SECTION_RATIO = 0.5
PASSAGE_B = 0.5
IDENT_PASSAGE_BONUS = 2.0
PAIR_BONUS = 1.0
SECTION_SHARE = 0.6
FIRST_PASSAGE_BONUS = 0.05
PER_SECTION_IN_TOP = 2
TOP_PLACES = 5

_STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing done down during each few for from further had has have having he her here
    hers how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
    our out over own same she should so some such than that the their them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    get gets got getting use used using want need needs mean means tell explain happen happens happening work works
    way ways thing things please also doesn't don't can't isn't
    """.split()
)

#: Words folded to one spelling on both sides of the index (after stemming).
_CANON = {
    "env": "environment",
    "environ": "environment",
    "var": "variable",
    "envvar": "variable",
    "pick": "select",
    "choose": "select",
    "choos": "select",
    "chose": "select",
    "chosen": "select",
    "selection": "select",
    "cpus": "cpu",  # the stemmer keeps '-us' endings
    "gpus": "gpu",
    "npus": "npu",
    "configuration": "config",
    "cfg": "config",
}
#: The same, keyed and valued by stemmed forms (the stemmer runs first).
_CANON_STEMMED = {stem(k): stem(v) for k, v in _CANON.items()} | {k: stem(v) for k, v in _CANON.items()}
#: Chinese function characters: a CJK bigram holding one says nothing on its own (什么, 怎么, 哪个, 的是).
_CJK_FUNCTION_CHARS = frozenset("的了吗呢么是在我你他它这那哪个和与或及就都也还要会能可吧啊呀把被让给对从什怎如何为")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*[A-Za-z0-9])")
_HUMP = re.compile(r"[a-z0-9][A-Z][a-z]")
_CAMEL = re.compile(r"[A-Z0-9]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")
_TABLE_FIRST_CELL = re.compile(r"^\|\s*([^|]+?)\s*\|")
_BACKTICKED = re.compile(r"`([^`]+)`")


# --------------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------------


def is_identifier(raw: str) -> bool:
    """Code-like token: snake_case or CamelCase with at least two humps (not brand names like SGLang, vLLM)."""
    return "_" in raw.strip("_") or _HUMP.search(raw) is not None


def _word_term(word: str) -> str | None:
    w = word.lower()
    if (len(w) < 2 and not w.isdigit()) or w in _STOPWORDS:
        return None
    w = stem(w)
    return _CANON_STEMMED.get(w, w)


def tokenize(text: str) -> list[str]:
    """Lower-cased terms; identifiers yield themselves plus their snake/camel parts; stopwords dropped.

    Command-line flags (``--num-workers``) also yield the whole flag name. CJK text yields nothing here (see
    ``cjk_terms``).
    """
    out: list[str] = [f.lower() for f in _FLAG.findall(text)]
    for raw in _WORD.findall(text):
        parts: list[str] = []
        if is_identifier(raw):
            out.append(raw.lower())
            for piece in raw.split("_"):
                parts.extend(_CAMEL.findall(piece) if piece else [])
        else:
            parts.append(raw)
        for p in parts:
            term = _word_term(p)
            if term is not None:
                out.append(term)
    return out


def word_pairs(text: str) -> set[tuple[str, str]]:
    """Adjacent content words (stopwords skipped, identifiers whole): how exact phrases of a question are matched."""
    words = [t for t in (_word_term(w) if not is_identifier(w) else w.lower() for w in _WORD.findall(text)) if t]
    return set(itertools.pairwise(words))


def phrases(text: str) -> set[tuple[str, ...]]:
    """Word n-grams (stopwords kept) of a text: how pasted message fragments are recognised."""
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + PHRASE_N]) for i in range(len(words) - PHRASE_N + 1)}


def cjk_terms(text: str) -> list[str]:
    """Character bigrams of the CJK runs of a text, without those made of function characters (什么, 怎么)."""
    return [t for t in bag_terms(text) if is_cjk(t) and not (set(t) & _CJK_FUNCTION_CHARS)]


# --------------------------------------------------------------------------------------------------------
# Chinese glossary
# --------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def glossary() -> dict[str, str]:
    """Chinese term -> English search words, from ``references/glossary_zh.toml`` (empty if it cannot be read)."""
    try:
        raw = resources.files(_REFERENCES_PACKAGE).joinpath(GLOSSARY_FILE).read_text(encoding="utf-8")
        data = tomllib.loads(raw)
    except (OSError, ValueError):  # TOMLDecodeError is a ValueError
        log.warning("glossary %s unreadable; Chinese questions searched without it", GLOSSARY_FILE, exc_info=True)
        return {}
    table = data.get("terms", {})
    return {str(k).strip(): str(v).strip() for k, v in table.items() if str(k).strip() and isinstance(v, str)}


@lru_cache(maxsize=4096)
def glossary_cut(run: str) -> tuple[tuple[str, str | None], ...]:
    """One CJK run cut into glossary terms (matched left to right, longest first) with their English, and the
    stretches between them (English None)."""
    table = glossary()
    longest = max((len(k) for k in table), default=0)
    out: list[tuple[str, str | None]] = []
    gap_start = i = 0
    while i < len(run):
        for n in range(min(longest, len(run) - i), 0, -1):
            english = table.get(run[i : i + n])
            if english is not None:
                if gap_start < i:
                    out.append((run[gap_start:i], None))
                out.append((run[i : i + n], english))
                i += n
                gap_start = i
                break
        else:
            i += 1
    if gap_start < len(run):
        out.append((run[gap_start:], None))
    return tuple(out)


def translate_cjk(run: str) -> tuple[str, ...]:
    """English words of one CJK run: the English of its glossary terms (``glossary_cut``); characters no term covers
    skipped."""
    return tuple(english for _, english in glossary_cut(run) if english is not None)


#: English of the Chinese words the glossary lacks: the slice of CC-CEDICT the ranking can use, derived with the
#: report model (``bench/real_reports.py --build-model``; CC BY-SA 4.0, attribution in the file).
DICTIONARY_FILE = "dictionary_zh.json"

_DICTIONARY_OVERRIDE: list[Mapping[str, str]] = []


@lru_cache(maxsize=1)
def shipped_dictionary() -> dict[str, str]:
    """Chinese word -> English words, from ``references/dictionary_zh.json`` (empty if it cannot be read)."""
    try:
        raw = resources.files(_REFERENCES_PACKAGE).joinpath(DICTIONARY_FILE).read_text(encoding="utf-8")
        words = json.loads(raw)["words"]
    except (OSError, ValueError, KeyError, TypeError):  # JSONDecodeError is a ValueError
        log.warning("dictionary %s unreadable; Chinese words outside the glossary bring no English", DICTIONARY_FILE)
        return {}
    return {str(k): str(v) for k, v in words.items()} if isinstance(words, dict) else {}


@contextmanager
def using_dictionary(table: Mapping[str, str]) -> Iterator[None]:
    """Look Chinese words up in ``table`` for the duration (the report model's build uses the whole dictionary)."""
    _DICTIONARY_OVERRIDE.append(table)
    try:
        yield
    finally:
        _DICTIONARY_OVERRIDE.pop()


def dictionary_english(word: str) -> str:
    """The English a Chinese word brings from CC-CEDICT: the sense a bug report means by it, for the commonest words,
    else its first plain sense ('' when the word is not there).
    截图 -> "screenshot"."""
    table = _DICTIONARY_OVERRIDE[-1] if _DICTIONARY_OVERRIDE else shipped_dictionary()
    return table.get(word, "")


def cjk_english(run: str, dictionary: bool = True) -> tuple[str, ...]:
    """English of one CJK run: its glossary terms (``translate_cjk``), then, for each word jieba finds that is no
    glossary term and is not cut across by one (function words aside), its sense in CC-CEDICT (``dictionary_english``;
    ``dictionary`` off: the glossary's only). The glossary speaks the catalog's language; the dictionary lends the
    rest of a Chinese report the words an English report would have used."""
    if not dictionary:
        return translate_cjk(run)
    if _DICTIONARY_OVERRIDE:
        return _with_dictionary(run)
    return _with_shipped_dictionary(run)


def _with_dictionary(run: str) -> tuple[str, ...]:
    cut = glossary_cut(run)
    term_at: list[tuple[int, int] | None] = []  # per character: where the glossary term covering it starts and ends
    for piece, english in cut:
        start = len(term_at)
        term_at.extend([(start, start + len(piece)) if english is not None else None] * len(piece))
    general: list[str] = []
    for start, end, word in chinese_word_spans(run):
        # A word inside a glossary term is the term's; a word a term cuts across is a misreading (jieba reads 运行时报错
        # as 运行 / 时报, a newspaper / 错, across the glossary's 报错). A word that holds whole terms (文件夹 holds 文件)
        # is looked up.
        terms = {t for t in term_at[start:end] if t is not None}
        in_or_across = any(t[0] < start or t[1] > end or t == (start, end) for t in terms)
        if len(word) > 1 and not in_or_across and not is_function_word(word):
            general.append(dictionary_english(word))
    return (*(e for _, e in cut if e is not None), *(e for e in general if e))


#: A report's runs are read several times per ranking (area model, retrieval, leads), and pasted logs repeat them.
_with_shipped_dictionary = lru_cache(maxsize=4096)(_with_dictionary)


def expand_query(text: str) -> str:
    """The query with each CJK run replaced by its glossary English (Latin text kept as written)."""
    if not CJK_RUNS.search(text):
        return text
    return CJK_RUNS.sub(lambda m: " " + " ".join(translate_cjk(m.group(0))) + " ", text)


@dataclass(frozen=True)
class Query:
    """A question prepared once: terms (English, glossary English, CJK bigrams), identifiers, phrases."""

    raw: str
    terms: tuple[str, ...]
    weights: dict[str, float]  # each distinct term once: 1, or CJK_TERM_WEIGHT for a Chinese character pair
    idents: frozenset[str]
    grams: frozenset[tuple[str, ...]]
    pairs: frozenset[tuple[str, str]]
    normalised: str  # knowledge.text.normalise of the question, for catalog phrases
    words: frozenset[str]  # the words of ``normalised``
    has_cjk: bool


def parse_query(text: str) -> Query:
    english = expand_query(text)
    latin, cjk = tokenize(english), cjk_terms(text)
    weights = dict.fromkeys(cjk, CJK_TERM_WEIGHT) | dict.fromkeys(latin, 1.0)
    idents = {raw.lower() for raw in _WORD.findall(english) if is_identifier(raw)}
    idents.update(f.lower() for f in _FLAG.findall(text))
    grams, pairs = frozenset(phrases(text)), frozenset(word_pairs(english))
    norm = normalise(text)
    words = frozenset(norm.split())
    return Query(
        text, (*latin, *cjk), weights, frozenset(idents), grams, pairs, norm, words, bool(CJK_RUNS.search(text))
    )


# --------------------------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Described:
    """One catalog phrase, normalised; ``words`` (all Latin words of it) is a cheap prefilter."""

    norm: str
    words: frozenset[str]
    chinese: bool  # purely Chinese
    bonus: float

    def found_in(self, q: Query) -> bool:
        if self.chinese:  # one run: a substring of the question's Chinese text
            return q.has_cjk and self.norm.strip() in q.normalised
        return self.words <= q.words and contains_phrase(q.normalised, self.norm)


def _described(raw: Iterable[str]) -> tuple[_Described, ...]:
    out = []
    for phrase in raw:
        norm = normalise(phrase)
        core = norm.strip()
        if not core:
            continue
        parts = core.split()
        chinese = all(is_cjk(w) for w in parts)
        if len(phrase.split()) < 2 and not chinese:
            continue  # one English word or identifier is a search term like any other, not a description
        words = frozenset(w for w in parts if not is_cjk(w))
        bonus = DESCRIBED_BONUS_CJK if any(is_cjk(w) for w in parts) else DESCRIBED_BONUS_LATIN
        out.append(_Described(norm, words, chinese, bonus))
    return tuple(out)


@dataclass(frozen=True)
class _SectionDoc:
    section: docs.Section
    tf: dict[str, float]
    length: float
    heading_terms: frozenset[str]
    defined: frozenset[str]
    matches: Callable[[str], bool] | None
    grams: frozenset[tuple[str, ...]]
    described: tuple[_Described, ...]  # catalog phrases
    passages: tuple[int, ...]  # ids into Index.passages


@dataclass(frozen=True)
class _PassageDoc:
    section: int
    order: int
    passage: Passage
    tf: dict[str, int]
    length: int
    pairs: frozenset[tuple[str, str]]
    unit_terms: tuple[frozenset[str], ...]


@dataclass(frozen=True)
class Index:
    sections: tuple[_SectionDoc, ...]
    idf: dict[str, float]
    avg_len: float
    passages: tuple[_PassageDoc, ...]
    passage_idf: dict[str, float]
    passage_avg: float
    postings: dict[str, tuple[int, ...]]


def _matcher(section: docs.Section) -> Callable[[str], bool] | None:
    """Does a pasted log line match this catalog entry? Uses the entry's own matcher (with anti-patterns)."""
    own = section.extra.get("matches")
    if own is not None:
        return own
    compiled = []
    for p in section.extra.get("patterns", []):
        try:
            compiled.append(re.compile(p))
        except re.error:
            continue
    if not compiled:
        return None
    return lambda line: any(rx.search(line) for rx in compiled)


def _defined_names(text: str) -> frozenset[str]:
    """Names in the first cell of a table row: the fields and classes a section defines."""
    out: set[str] = set()
    for line in text.splitlines():
        m = _TABLE_FIRST_CELL.match(line)
        if m:
            for code in _BACKTICKED.findall(m.group(1)):
                out.update(w.lower() for w in _WORD.findall(code))
    return frozenset(out)


def _heading_identifiers(heading: str) -> set[str]:
    return {raw.lower() for raw in _WORD.findall(heading) if is_identifier(raw)}


@lru_cache(maxsize=1)
def _catalog_entries() -> dict[str, catalog.FailureMode]:
    """Catalog entries by id (cause, fix, phrases); empty if the catalog cannot be loaded (docs logs why)."""
    try:
        return {fm.id: fm for fm in catalog.load_catalog().entries}
    except Exception:  # a broken catalog must not take the references down with it
        return {}


def _entry_parts(section: docs.Section) -> tuple[list[Passage], list[str]]:
    """Passages and description phrases of a catalog entry."""
    entry = _catalog_entries().get(section.anchor)
    phrases_ = section.extra.get("phrases") or (entry.phrases if entry is not None else None)
    if entry is not None:
        return catalog_passages(entry.cause, list(entry.fix)), [str(p) for p in phrases_ or []]
    lines = [ln for ln in section.text.splitlines() if ln.strip()]
    if lines and lines[-1] == section.extra.get("category"):
        lines = lines[:-1]
    return catalog_passages(lines[0] if lines else "", lines[1:]), [str(p) for p in phrases_ or []]


def _passage_doc(section_id: int, order: int, passage: Passage, heading: list[str]) -> _PassageDoc:
    """A passage is read under its heading: the heading's terms count once in it (a field's definition rarely
    repeats the field's name)."""
    toks = tokenize(passage.text) + cjk_terms(passage.text) + heading
    units = tuple(frozenset(tokenize(u)) for u in passage.units)
    return _PassageDoc(
        section_id, order, passage, dict(Counter(toks)), len(toks), frozenset(word_pairs(passage.text)), units
    )


def _idf(counts: Counter[str], n: int) -> dict[str, float]:
    return {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in counts.items()}


def index_sections(sections: Iterable[docs.Section]) -> Index:
    """Index the given sections (reference sections and catalog entries) with their passages."""
    items: list[_SectionDoc] = []
    passages: list[_PassageDoc] = []
    for sid, s in enumerate(sections):
        head = tokenize(s.heading)
        if s.kind == "failure_mode":  # the entry id (e.g. missing_ground_truth) names it too
            head += tokenize(s.anchor.replace(".", " ").replace("-", " "))
            parts, described = _entry_parts(s)
        else:
            parts, described = split_markdown(s.text), []
        full_text = "\n".join([s.text, *s.extra.get("examples", [])])
        # Chinese phrases are searched as character pairs; English ones only as whole phrases (their words would
        # outweigh the entry's own text for every English question)
        body = tokenize(full_text) + cjk_terms("\n".join(described))
        tf: dict[str, float] = dict(Counter(body))
        for t in head:
            tf[t] = tf.get(t, 0) + HEADING_WEIGHT
        ids = tuple(range(len(passages), len(passages) + len(parts)))
        passages.extend(_passage_doc(sid, i, p, head) for i, p in enumerate(parts))
        items.append(
            _SectionDoc(
                s,
                dict(tf),
                float(len(body) + HEADING_WEIGHT * len(head)),
                frozenset(head) | frozenset(_heading_identifiers(s.heading)),
                _defined_names(s.text),
                _matcher(s),
                frozenset(phrases(f"{s.heading}\n{full_text}")),
                _described(described),
                ids,
            )
        )
    df: Counter[str] = Counter(t for d in items for t in d.tf)
    pdf: Counter[str] = Counter(t for p in passages for t in p.tf)
    postings: dict[str, list[int]] = {}
    for pid, p in enumerate(passages):
        for t in p.tf:
            postings.setdefault(t, []).append(pid)
    avg = sum(d.length for d in items) / len(items) if items else 1.0
    pavg = sum(p.length for p in passages) / len(passages) if passages else 1.0
    return Index(
        tuple(items),
        _idf(df, len(items)),
        avg or 1.0,
        tuple(passages),
        _idf(pdf, len(passages)),
        pavg or 1.0,
        {t: tuple(v) for t, v in postings.items()},
    )


@lru_cache(maxsize=1)
def build_index() -> Index:
    """Index every reference section (below the title) and every failure-mode catalog entry, once."""
    entries = docs.catalog_sections()
    # troubleshooting.md is rendered from the catalog: index the entries once, as catalog entries.
    skip = {CATALOG_DOC_RENDERED} if entries else set()
    refs = [s for s in docs.all_sections() if s.level > 1 and s.doc not in skip]
    return index_sections([*refs, *entries])


# --------------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------------


def _bm25(tf: Mapping[str, float], length: float, avg: float, b: float, q: Query, idf: dict[str, float]) -> float:
    score = 0.0
    for t, weight in q.weights.items():
        f = tf.get(t)
        if f:
            score += weight * idf.get(t, 0.0) * f * (K1 + 1) / (f + K1 * (1 - b + b * length / avg))
    return score


def _any_line_matches(matches: Callable[[str], bool], text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()][:200] or [text]
    return any(matches(ln) for ln in lines)


def section_score(doc: _SectionDoc, q: Query, index: Index) -> tuple[float, float]:
    """The section's score, and the weight its passages' own scores get (CATALOG_WEIGHT for a catalog entry that
    no pasted message matches: questions are answered by the references, pasted error texts by the catalog)."""
    terms = set(q.terms)
    score = _bm25(doc.tf, doc.length, index.avg_len, B, q, index.idf)
    if terms:
        score += 2.0 * len(terms & doc.heading_terms) / len(terms)
    for ident in q.idents:
        if ident in doc.heading_terms:
            score += IDENT_HEADING_BONUS
        elif ident in doc.defined:
            score += IDENT_DEFINED_BONUS
    exact = doc.matches is not None and _any_line_matches(doc.matches, q.raw)
    described = sorted((d.bonus for d in doc.described if d.found_in(q)), reverse=True)
    weight = CATALOG_WEIGHT if doc.section.kind == "failure_mode" and not exact else 1.0
    score *= weight
    if exact:
        score += PATTERN_BONUS
    score += sum(described[:DESCRIBED_MAX])
    score += PHRASE_BONUS * min(len(q.grams & doc.grams), 6)
    return score, weight


def passage_score(p: _PassageDoc, q: Query, index: Index) -> float:
    score = _bm25(p.tf, p.length, index.passage_avg, PASSAGE_B, q, index.passage_idf)
    score += IDENT_PASSAGE_BONUS * sum(1 for ident in q.idents if ident in p.tf)
    score += PAIR_BONUS * len(q.pairs & p.pairs)
    return score


def _best_unit(p: _PassageDoc, q: Query, index: Index) -> int:
    """Index of the unit (sentence, row, line) covering most of the query, context units skipped."""
    terms = set(q.terms)
    best, best_score = p.passage.context, -1.0
    for i in range(p.passage.context, len(p.unit_terms)):
        s = sum(index.passage_idf.get(t, 0.0) for t in terms & p.unit_terms[i])
        if s > best_score:
            best, best_score = i, s
    return min(best, len(p.passage.units) - 1)


@dataclass(frozen=True)
class Found:
    """One ranked passage."""

    section: docs.Section
    score: float
    passage: str  # the passage text shown (whole, or a window of whole units)
    snippet: str  # its best sentence, row or line
    kind: str  # paragraph, item, row, code, cause, fix


class _Ranked(NamedTuple):
    score: float
    section: int
    passage_weight: float


def _ranked_sections(q: Query, index: Index, doc: str | None) -> list[_Ranked]:
    if doc == CATALOG_DOC_RENDERED and any(d.section.kind == "failure_mode" for d in index.sections):
        doc = FAILURE_MODES_DOC  # the rendered catalog is indexed as its entries
    scored = []
    for i, d in enumerate(index.sections):
        if doc is not None and d.section.doc != doc:
            continue
        s, weight = section_score(d, q, index)
        if s > 0:
            scored.append(_Ranked(s, i, weight))
    scored.sort(key=lambda x: (-x.score, x.section))
    return scored


def _pick(ranked: list[tuple[float, int]], limit: int, index: Index, top_section: int) -> list[tuple[float, int]]:
    """The passages to show, best first.

    The first place goes to the best passage of the best section (the section ranking decides where the answer
    is); then at most PER_SECTION_IN_TOP passages of one section fill the first TOP_PLACES places, unless too few
    sections match to fill them; later places take the rest in score order. A passage whose text a better one of
    its section already shows is left out.
    """
    if not ranked:
        return []
    first = next((item for item in ranked if index.passages[item[1]].section == top_section), ranked[0])
    chosen = [first]
    rest = [item for item in ranked if item is not first and not _repeats(item[1], chosen, index)]
    per_section: Counter[int] = Counter({index.passages[first[1]].section: 1})
    for item in rest:
        if len(chosen) >= min(limit, TOP_PLACES):
            break
        section = index.passages[item[1]].section
        if per_section[section] < PER_SECTION_IN_TOP and not _repeats(item[1], chosen, index):
            chosen.append(item)
            per_section[section] += 1
    for item in rest:
        if len(chosen) >= limit:
            break
        if item not in chosen and not _repeats(item[1], chosen, index):
            chosen.append(item)
    return chosen


def _repeats(pid: int, chosen: list[tuple[float, int]], index: Index) -> bool:
    """Is every sentence of this passage (its context aside) already shown by a chosen passage of its section?

    A lead-in paragraph that carries its list, and the list's items, would otherwise fill the answer twice.
    """
    p = index.passages[pid]
    own = p.passage.units[p.passage.context :]
    for _, other in chosen:
        o = index.passages[other]
        if o.section == p.section and all(u in o.passage.text for u in own):
            return True
    return False


def _candidates(q: Query, index: Index, sections: list[_Ranked], limit: int) -> list[tuple[float, int]]:
    """(score, passage id) for the passages of the best sections, best first.

    Candidate sections: up to CANDIDATE_SECTIONS, those scoring at least MIN_SECTION_RATIO of the best one (weaker
    ones only while the per-section cap leaves fewer than ``limit`` places filled). A passage's score is its own relevance (relative to
    the best passage) plus a share of its section's score (relative to the best section). A candidate section none
    of whose passages matches offers its first passage.
    """
    top_section = sections[0].score
    raw: list[tuple[float, float, int]] = []  # (passage score, section share, passage id)
    placeable = 0  # passages the per-section cap lets into the first places
    for r in sections[:CANDIDATE_SECTIONS]:
        if r.score < MIN_SECTION_RATIO * top_section and placeable >= limit:
            break
        pids = index.sections[r.section].passages
        scored = [(r.passage_weight * passage_score(index.passages[pid], q, index), pid) for pid in pids]
        matched = [(s, pid) for s, pid in scored if s > 0] or scored[:1]
        share = SECTION_SHARE * r.score / top_section
        raw.extend((s, share, pid) for s, pid in matched)
        placeable += min(len(matched), PER_SECTION_IN_TOP)
    best = max((r[0] for r in raw), default=0.0) or 1.0
    ranked = []
    for s, share, pid in raw:
        first = FIRST_PASSAGE_BONUS if index.passages[pid].order == 0 else 0.0
        ranked.append((s / best + share + first, pid))
    ranked.sort(key=lambda x: (-x[0], x[1]))
    return ranked


def search(query: str, limit: int = 5, doc: str | None = None, index: Index | None = None) -> tuple[list[Found], int]:
    """Ranked passages for a query, and how many further matching passages were left out.

    ``index`` defaults to the shipped references and catalog (``build_index``).
    """
    q = parse_query(query)
    index = index if index is not None else build_index()
    sections = _ranked_sections(q, index, doc)
    if not sections or limit <= 0:
        return [], 0
    found = []
    for score, pid in _pick(_candidates(q, index, sections, limit), limit, index, sections[0].section):
        p = index.passages[pid]
        best = _best_unit(p, q, index)
        section = index.sections[p.section].section
        passage, snippet = shown_text(p.passage, best), snippet_text(p.passage.units[best])
        found.append(Found(section, score, passage, snippet, p.passage.kind))
    return found, max(0, _matching_passages(q, index, sections) - len(found))


def _matching_passages(q: Query, index: Index, sections: list[_Ranked]) -> int:
    """Passages of the matching sections that contain a query term (at least one per matching section)."""
    allowed = {r.section for r in sections}
    hit: set[int] = set()
    for t in set(q.terms):
        hit.update(pid for pid in index.postings.get(t, ()) if index.passages[pid].section in allowed)
    with_hits = {index.passages[pid].section for pid in hit}
    return len(hit) + sum(1 for sid in allowed if sid not in with_hits and index.sections[sid].passages)
