"""lookup_reference: answers from the shipped references and the failure-mode catalog, ranked.

For clients that only support tools (no resources). The search engine (tokenizer, Chinese glossary, section and
passage index, scoring) is ``knowledge.search``; this module validates the input and shapes the result. Each hit is
one passage (a paragraph, list item, table row with its header, or code block) returned whole, with the section it
comes from (heading, anchor, URI to read it in full) and the XTuner source lines that section cites.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..core import RunContext, ToolInputError, ToolResult, params_model_config
from ..knowledge import docs, search

MAX_QUERY_CHARS = 2000


class Params(BaseModel):
    model_config = params_model_config()

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Question, identifier or error text; English or Chinese",
    )
    limit: int = Field(default=5, ge=1, le=20)
    doc: str | None = Field(
        default=None,
        description="workflows, cluster-and-backends, api-reference, data-contract, troubleshooting or failure-modes",
    )


class Hit(BaseModel):
    rank: int = Field(description="1 = best match")
    doc: str = Field(description="Document name, or 'failure-modes' for a catalog entry")
    heading: str = Field(description="Section heading (catalog: entry title)")
    anchor: str = Field(description="Section anchor (catalog: entry id)")
    uri: str = Field(description="Resource URI that returns the whole section")
    score: float = Field(description="Relevance score; only comparable within one answer")
    snippet: str = Field(description="The best-matching sentence, table row or code line")
    passage: str = Field(
        description="The whole paragraph, list item, table row (with header) or code block; long ones cut to "
        "sentences around the best, marked …"
    )
    sources: list[str] = Field(description="XTuner path:line citations of the section (b934f46)")


class Result(ToolResult):
    query_terms: list[str] = Field(
        description="Terms searched: stopwords dropped, identifiers split, Chinese mapped via the glossary"
    )
    hits: list[Hit] = Field(description="Best first; at most two per section in the first five")
    hits_omitted: int = Field(description="Further matching passages left out by `limit`")


def _valid_docs() -> list[str]:
    return [*docs.list_docs(), search.FAILURE_MODES_DOC]


def _doc_filter(raw: str | None) -> str | None:
    doc = raw.strip() if raw else None
    if doc is None:
        return None
    doc = doc[:-3] if doc.endswith(".md") else doc
    if doc not in _valid_docs():
        raise ToolInputError(
            "unknown_doc",
            f"no reference document named {raw!r}",
            f"Use one of: {', '.join(_valid_docs())}, or omit `doc`.",
        )
    return doc


def run(params: Params, ctx: RunContext) -> Result:
    doc = _doc_filter(params.doc)
    terms = search.parse_query(params.query).terms
    if not terms:
        raise ToolInputError(
            "query_has_no_terms",
            "the query has no searchable words (only stopwords or punctuation)",
            "Ask with concrete words, e.g. 'which env var picks SGLang' or an identifier like max_staleness.",
        )
    found, omitted = search.search(params.query, params.limit, doc)
    hits = [
        Hit(
            rank=i + 1,
            doc=f.section.doc,
            heading=f.section.heading,
            anchor=f.section.anchor,
            uri=f.section.uri,
            score=round(f.score, 3),
            snippet=f.snippet,
            passage=f.passage,
            sources=list(f.section.sources),
        )
        for i, f in enumerate(found)
    ]
    if hits:
        top = hits[0]
        summary = f"Best match: {top.doc} > {top.heading} ({top.uri}); {len(hits)} of {len(hits) + omitted} shown"
    else:
        summary = "No section matches these terms; try other words, an identifier, or the exact error text"
    return Result(summary=summary, query_terms=sorted(set(terms)), hits=hits, hits_omitted=omitted)
