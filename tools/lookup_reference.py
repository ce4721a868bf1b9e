"""lookup_reference: ranked search over the shipped references and the failure-mode catalog.

For clients that only support tools (no resources). The index is built once from ``references/docs.py`` and
cached. Ranking is BM25 over heading + body (heading terms weighted up), with extra weight when a code identifier
of the query (``max_staleness``, ``XTUNER_USE_SGLANG``) appears in a heading, and when a failure-mode pattern
matches an error message pasted into the query. Identifiers are indexed whole and by their parts.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel, Field

from ..core import RunContext, ToolInputError, ToolResult, ToolSpec, params_model_config
from ..knowledge import docs

MAX_QUERY_CHARS = 2000
SNIPPET_CHARS = 280
HEADING_WEIGHT = 3.0
K1, B = 1.2, 0.75
IDENT_HEADING_BONUS = 4.0
IDENT_DEFINED_BONUS = 2.0
PATTERN_BONUS = 12.0
FAILURE_MODES_DOC = "failure-modes"
CATALOG_DOC_RENDERED = "troubleshooting"

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
PHRASE_N = 4
PHRASE_BONUS = 1.5
CATALOG_WEIGHT = 0.6

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*[A-Za-z0-9])")
_HUMP = re.compile(r"[a-z0-9][A-Z][a-z]")
_CAMEL = re.compile(r"[A-Z0-9]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")


def _stem(word: str) -> str:
    """A light suffix stripper: enough to match 'workers' with 'worker' and 'picks' with 'pick'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def is_identifier(raw: str) -> bool:
    """Code-like token: snake_case or CamelCase with at least two humps (not brand names like SGLang, vLLM)."""
    return "_" in raw.strip("_") or _HUMP.search(raw) is not None


def tokenize(text: str) -> list[str]:
    """Lower-cased terms; identifiers yield themselves plus their snake/camel parts; stopwords dropped.

    Command-line flags (``--num-workers``) also yield the whole flag name.
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
            w = p.lower()
            if len(w) < 2 and not w.isdigit():
                continue
            if w in _STOPWORDS:
                continue
            w = _stem(w)
            out.append(_CANON.get(w, w))
    return out


def phrases(text: str) -> set[tuple[str, ...]]:
    """Word n-grams (stopwords kept) of a text: how pasted message fragments are recognised."""
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + PHRASE_N]) for i in range(len(words) - PHRASE_N + 1)}


@dataclass(frozen=True)
class _Doc:
    section: docs.Section
    tf: dict[str, float]
    length: float
    heading_terms: frozenset[str]
    defined: frozenset[str]
    matches: Callable[[str], bool] | None
    phrases: frozenset[tuple[str, ...]]


@dataclass(frozen=True)
class _Index:
    items: tuple[_Doc, ...]
    idf: dict[str, float]
    avg_len: float


def _matcher(section: docs.Section) -> Callable[[str], bool] | None:
    """Does a pasted log line match this catalog entry? Uses the entry's own matcher (with anti-patterns)."""
    own = section.extra.get("matches")
    if callable(own):
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


_TABLE_FIRST_CELL = re.compile(r"^\|\s*([^|]+?)\s*\|")
_BACKTICKED = re.compile(r"`([^`]+)`")


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
def build_index() -> _Index:
    """Index every reference section and every failure-mode catalog entry."""
    items: list[_Doc] = []
    catalog = docs.catalog_sections()
    # troubleshooting.md is rendered from the catalog: index the entries once, as catalog entries.
    skip = {CATALOG_DOC_RENDERED} if catalog else set()
    reference_secs = [s for s in docs.all_sections() if s.level > 1 and s.doc not in skip]
    for s in [*reference_secs, *catalog]:
        head = tokenize(s.heading)
        if s.kind == "failure_mode":  # the entry id (e.g. missing_ground_truth) names it too
            head += tokenize(s.anchor.replace(".", " ").replace("-", " "))
        full_text = "\n".join([s.text, *s.extra.get("examples", [])])
        body = tokenize(full_text)
        tf: Counter[str] = Counter(body)
        for t in head:
            tf[t] += HEADING_WEIGHT
        length = len(body) + HEADING_WEIGHT * len(head)
        heading_terms = frozenset(head) | frozenset(_heading_identifiers(s.heading))
        grams = frozenset(phrases(f"{s.heading}\n{full_text}"))
        items.append(_Doc(s, dict(tf), float(length), heading_terms, _defined_names(s.text), _matcher(s), grams))
    n = len(items)
    df: Counter[str] = Counter()
    for d in items:
        df.update(d.tf.keys())
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    avg = sum(d.length for d in items) / n if n else 1.0
    return _Index(tuple(items), idf, avg or 1.0)


def _score(
    doc: _Doc, terms: list[str], idents: set[str], raw_query: str, query_phrases: set[tuple[str, ...]], index: _Index
) -> float:
    score = 0.0
    for t in set(terms):
        f = doc.tf.get(t)
        if not f:
            continue
        idf = index.idf.get(t, 0.0)
        score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * doc.length / index.avg_len))
    matched_heading = {t for t in terms if t in doc.heading_terms}
    if terms:
        score += 2.0 * len(matched_heading) / len(set(terms))
    for ident in idents:
        if ident in doc.heading_terms:
            score += IDENT_HEADING_BONUS
        elif ident in doc.defined:
            score += IDENT_DEFINED_BONUS
    exact = doc.matches is not None and _any_line_matches(doc.matches, raw_query)
    shared = len(query_phrases & doc.phrases)
    if doc.section.kind == "failure_mode" and not exact:
        score *= CATALOG_WEIGHT  # questions are answered by the references; pasted error texts by the catalog
    if exact:
        score += PATTERN_BONUS
    score += PHRASE_BONUS * min(shared, 6)
    return score


def _any_line_matches(matches: Callable[[str], bool], text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()][:200] or [text]
    return any(matches(ln) for ln in lines)


def _snippet(text: str, terms: set[str]) -> str:
    """The body line that covers most query terms (citation lines skipped), trimmed to SNIPPET_CHARS."""
    best, best_hits = "", -1
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or docs._SOURCE_LINE.match(stripped) or stripped.startswith(("```", "|---", "| ---")):
            continue
        hits = len(terms & set(tokenize(stripped)))
        if hits > best_hits:
            best, best_hits = stripped, hits
    if len(best) > SNIPPET_CHARS:
        best = best[: SNIPPET_CHARS - 1].rstrip() + "…"
    return best


def search(query: str, limit: int = 5, doc: str | None = None) -> tuple[list[tuple[docs.Section, float, str]], int]:
    """Ranked (section, score, snippet) for a query, and how many further matches were left out."""
    terms = tokenize(query)
    idents = {raw.lower() for raw in _WORD.findall(query) if is_identifier(raw)}
    idents.update(f.lower() for f in _FLAG.findall(query))
    index = build_index()
    query_phrases = phrases(query)
    if doc == CATALOG_DOC_RENDERED and any(d.section.kind == "failure_mode" for d in index.items):
        doc = FAILURE_MODES_DOC  # the rendered catalog is indexed as its entries
    scored: list[tuple[float, int, _Doc]] = []
    for i, d in enumerate(index.items):
        if doc is not None and d.section.doc != doc:
            continue
        s = _score(d, terms, idents, query, query_phrases, index)
        if s > 0:
            scored.append((s, i, d))
    scored.sort(key=lambda x: (-x[0], x[1]))
    top = scored[: max(0, limit)]
    term_set = set(terms)
    return [(d.section, s, _snippet(d.section.text, term_set)) for s, _, d in top], max(0, len(scored) - limit)


# --------------------------------------------------------------------------------------------------------
# Tool
# --------------------------------------------------------------------------------------------------------

DESCRIPTION = """\
Search the XTuner V1 RL references (workflows, cluster-and-backends, api-reference, data-contract, \
troubleshooting) and the failure-mode catalog; returns the best sections ranked, each with heading, anchor, \
snippet, the resource URI to read it in full, and the XTuner source lines it is based on.
Use when: you have a question about XTuner RL (e.g. "which env var picks SGLang", "what does max_staleness do") \
or an error message to explain ("'Config' object is not callable"), and your client cannot read resources.
Not for: checking your own files or cluster - use check_reward_data, inspect_config, probe_environment or \
preflight; for a whole failed-run log use diagnose_symptom."""


class Params(BaseModel):
    model_config = params_model_config()

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Question or keywords in plain words; code identifiers (max_staleness, XTUNER_USE_SGLANG) "
        "and pasted error messages work best",
    )
    limit: int = Field(default=5, ge=1, le=20, description="How many ranked sections to return (1-20)")
    doc: str | None = Field(
        default=None,
        description="Search only this document: workflows, cluster-and-backends, api-reference, data-contract, "
        "troubleshooting (searches the catalog entries it is rendered from), or 'failure-modes'; omit to search "
        "everything",
    )


class Hit(BaseModel):
    rank: int = Field(description="1 = best match")
    doc: str = Field(description="Document name, or 'failure-modes' for a catalog entry")
    heading: str = Field(description="Section heading (catalog: entry title)")
    anchor: str = Field(description="Section anchor (catalog: entry id)")
    uri: str = Field(description="Resource URI that returns the full text")
    score: float = Field(description="Relevance score; only comparable within one answer")
    snippet: str = Field(description="The line of the section that best matches the query")
    sources: list[str] = Field(description="XTuner path:line citations of the section (InternLM/xtuner@b934f46)")


class Result(ToolResult):
    query_terms: list[str] = Field(description="Terms searched after dropping stopwords (identifiers also split)")
    hits: list[Hit] = Field(description="Ranked matches, best first")
    hits_omitted: int = Field(description="Further sections that matched but were left out by `limit`")


def _valid_docs() -> list[str]:
    return [*docs.list_docs(), FAILURE_MODES_DOC]


def run(params: Params, ctx: RunContext) -> Result:
    doc = params.doc.strip() if params.doc else None
    if doc is not None:
        doc = doc[:-3] if doc.endswith(".md") else doc
        if doc not in _valid_docs():
            raise ToolInputError(
                "unknown_doc",
                f"no reference document named {params.doc!r}",
                f"Use one of: {', '.join(_valid_docs())}, or omit `doc`.",
            )
    terms = tokenize(params.query)
    if not terms:
        raise ToolInputError(
            "query_has_no_terms",
            "the query has no searchable words (only stopwords or punctuation)",
            "Ask with concrete words, e.g. 'which env var picks SGLang' or an identifier like max_staleness.",
        )
    found, omitted = search(params.query, params.limit, doc)
    hits = [
        Hit(
            rank=i + 1,
            doc=s.doc,
            heading=s.heading,
            anchor=s.anchor,
            uri=s.uri,
            score=round(score, 3),
            snippet=snippet,
            sources=list(s.sources),
        )
        for i, (s, score, snippet) in enumerate(found)
    ]
    if hits:
        top = hits[0]
        summary = f"Best match: {top.doc} > {top.heading} ({top.uri}); {len(hits)} of {len(hits) + omitted} shown"
    else:
        summary = "No section matches these terms; try other words, an identifier, or the exact error text"
    return Result(summary=summary, query_terms=sorted(set(terms)), hits=hits, hits_omitted=omitted)


SPEC = ToolSpec("lookup_reference", "Look up the XTuner RL references", DESCRIPTION, Params, Result, run)
