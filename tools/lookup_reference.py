"""lookup_reference: answers from the shipped references and the failure-mode catalog, ranked.

For clients that only support tools (no resources). The search engine (tokenizer, Chinese glossary, section and
passage index, scoring) is ``knowledge.search``; this module validates the input and shapes the result. Each hit is
one passage (a paragraph, list item, table row with its header, or code block) returned whole, with the section it
comes from (heading, anchor, URI to read it in full) and the XTuner source lines that section cites.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..core import RunContext, ToolInputError, ToolResult, ToolSpec, params_model_config
from ..knowledge import docs, search

MAX_QUERY_CHARS = 2000

DESCRIPTION = """\
Answer a question from the XTuner V1 RL references (workflows, cluster-and-backends, api-reference, \
data-contract, troubleshooting) and the failure-mode catalog. Returns ranked passages - a paragraph, list item, \
table row with its header, or code block, given whole - each with its best sentence as `snippet`, the section \
heading and anchor, the resource URI to read the section in full, and the XTuner source lines it is based on. \
Questions may be in English or Chinese (e.g. "环境变量怎么传到 Ray worker").
Use when: you have a question about XTuner RL (e.g. "which env var picks SGLang", "what does max_staleness do") \
or an error message to explain ("'Config' object is not callable"), and your client cannot read resources.
Not for: checking your own files or cluster - use check_reward_data, inspect_config, probe_environment or \
preflight; for a whole failed-run log use diagnose_symptom."""


class Params(BaseModel):
    model_config = params_model_config()

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Question or keywords in plain words, English or Chinese; code identifiers (max_staleness, "
        "XTUNER_USE_SGLANG) and pasted error messages work best",
    )
    limit: int = Field(default=5, ge=1, le=20, description="How many ranked passages to return (1-20)")
    doc: str | None = Field(
        default=None,
        description="Search only this document: workflows, cluster-and-backends, api-reference, data-contract, "
        "troubleshooting (searches the catalog entries it is rendered from), or 'failure-modes'; omit to search "
        "everything",
    )


class Hit(BaseModel):
    rank: int = Field(description="1 = best match")
    doc: str = Field(description="Document name, or 'failure-modes' for a catalog entry")
    heading: str = Field(description="Heading of the section the passage is in (catalog: entry title)")
    anchor: str = Field(description="Section anchor (catalog: entry id)")
    uri: str = Field(description="Resource URI that returns the whole section")
    score: float = Field(description="Relevance score; only comparable within one answer")
    snippet: str = Field(description="The sentence, table row or code line of the passage that best matches")
    passage: str = Field(
        description="The passage, whole: a paragraph, a list item (with its parent or lead-in line), a table row "
        "under its header row, or a code block with the sentence before it; a long one is cut to whole "
        "sentences around the best one, marked with …"
    )
    sources: list[str] = Field(description="XTuner path:line citations of the section (InternLM/xtuner@b934f46)")


class Result(ToolResult):
    query_terms: list[str] = Field(
        description="Terms searched: stopwords dropped, identifiers also split, Chinese mapped to English through "
        "the glossary (plus Chinese character pairs)"
    )
    hits: list[Hit] = Field(description="Ranked passages, best first; at most two of one section in the first five")
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


SPEC = ToolSpec("lookup_reference", "Look up the XTuner RL references", DESCRIPTION, Params, Result, run)
