"""Ranking what the scanner found: a confidence per catalog entry from its specificity and where it matched."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from ..knowledge.catalog import get_failure_mode
from .descriptions import DescriptionMatch, shared_words_line
from .descriptions import confidence as desc_confidence
from .log_scanner import _KIND_RANK, EntryState, Scanner
from .models import Diagnosis, Evidence, ToolCall


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


#: Arguments a tool takes that a report can name ("2 × 8 GPUs", "70B", "with SGLang"): added to its calls when known.
REPORTED_ARGS: dict[str, tuple[str, ...]] = {
    "choose_topology": ("nodes", "gpus_per_node", "params_b", "backend"),
    "build_rl_command": ("nodes", "gpus_per_node", "backend"),
}


def fill_call(call: Any, values: dict[str, Any]) -> ToolCall:
    """A catalog call with its {placeholders} filled from the inputs and the values the report names."""
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
    for key in REPORTED_ARGS.get(call.tool, ()):
        if key not in args and key not in missing and values.get(key) is not None:
            args[key] = values[key]
    return ToolCall(tool=call.tool, arguments=args, missing=missing)


def rank(catalog: Any, scanner: Scanner, values: dict[str, Any]) -> list[Diagnosis]:
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
        out.append(diagnosis(fm, conf, evidence, st.count, values))
    return out


def diagnosis(
    fm: Any,
    conf: float,
    evidence: list[Evidence],
    occurrences: int,
    values: dict[str, Any],
    match: str = "signature",
) -> Diagnosis:
    """One catalog entry as a finding, its confirm_with calls filled from what the caller gave."""
    return Diagnosis(
        failure_mode_id=fm.id,
        category=fm.category,
        match=match,
        severity=fm.severity,
        confidence=conf,
        title=fm.title,
        evidence=evidence,
        evidence_omitted=max(0, occurrences - len(evidence)),
        occurrences=occurrences,
        cause=fm.cause,
        fix=list(fm.fix),
        confirm_with=[fill_call(c, values) for c in fm.confirm_with],
        look_for=[] if match == "signature" else list(fm.examples[:2]),
        reference=fm.uri,
        doc_reference=fm.doc_uri,
        source=list(fm.source),
        route=fm.route,
    )


#: Asked about when nothing matched at all: the causes real reports name most often.
PRIOR_IDS = ("rollout_server_start_timeout", "cuda_out_of_memory", "placement_group_pending")


def with_descriptions(
    catalog: Any,
    signature: list[Diagnosis],
    matches: list[DescriptionMatch],
    values: dict[str, Any],
    related: Sequence[tuple[str, float]] = (),
    lines: Sequence[tuple[int, str]] = (),
) -> list[Diagnosis]:
    """Signature findings and description matches in one ranking; never empty.

    An entry found both ways keeps its signature confidence plus a little; an entry found only by its description
    gets a capped confidence and what to look for; the first finding of each category moves ahead of a second
    description match of a category already shown, so the top three cover different causes.
    """
    found = {d.failure_mode_id: d for d in signature}
    best = matches[0].score if matches else 0.0
    merged = list(signature)
    # An exact message of a specific entry outranks any reading of the wording.
    exact = [d.confidence for d in signature if (fm := catalog.by_id[d.failure_mode_id]).specificity >= 3]
    ceiling = min(exact) - 0.01 if exact else 1.0
    for m in matches:
        conf = min(desc_confidence(m.score, best), ceiling)
        if m.failure_mode_id in found:
            d = found[m.failure_mode_id]
            d.match = "signature_and_description"
            d.confidence = round(min(0.99, d.confidence + 0.05 + 0.1 * conf), 2)
            continue
        evidence = [Evidence(source="text", line=n, text=t[:300], kind="phrase", context=p) for n, t, p in m.lines]
        fm = catalog.by_id[m.failure_mode_id]
        merged.append(diagnosis(fm, conf, evidence, len(m.phrases), values, match="description"))
        found[fm.id] = merged[-1]
    # Entries that share only words with the report: weaker leads, kept below every phrase match, and left out
    # when an exact message already names a specific cause.
    decided = any(d.confidence >= 0.75 and d.match != "description" for d in signature)
    top_related = related[0][1] if related and not decided else 0.0
    for fm_id, score in related if top_related else ():
        if fm_id in found or score < 0.25 * top_related:
            continue
        fm = catalog.by_id[fm_id]
        conf = min(round(0.05 + 0.1 * score / top_related, 2), ceiling)
        line = shared_words_line(catalog, lines, fm_id)
        evidence = (
            [Evidence(source="text", line=line[0], text=line[1][:300], kind="phrase", context=line[2])] if line else []
        )
        merged.append(diagnosis(fm, conf, evidence, len(evidence), values, match="description"))
        found[fm_id] = merged[-1]
    order = {"blocker": 0, "warning": 1, "info": 2}
    merged.sort(key=lambda d: (-d.confidence, order[d.severity]))
    head: list[Diagnosis] = []
    later: list[Diagnosis] = []
    seen: set[str] = set()
    for d in merged:
        if d.match == "description" and d.category in seen:
            later.append(d)
        else:
            head.append(d)
            seen.add(d.category)
    return head + later


def _subsumed(fm: Any, st: EntryState, items: list[tuple[Any, EntryState]]) -> bool:
    """A wrapper entry whose every line sits next to a line of a more specific entry adds nothing."""
    if st.count > len(st.hits):
        return False
    near = {(h.source, h.line) for o, ost in items if o.specificity > fm.specificity for h in ost.hits}
    return all(any((h.source, h.line + d) in near for d in range(-3, 4)) for h in st.hits)


Verdict = Literal[
    "failure_found",
    "blocker_found_by_probe",
    "hang_suspected",
    "warnings_only",
    "suspected_from_description",
    "no_known_failure",
]


def choose_verdict(shown: list[Diagnosis]) -> Verdict:
    """What the findings add up to; a description match alone is a suspicion, never a found failure; a blocker a
    live check found decides when the report itself names no exact failure."""
    exact = [d for d in shown if d.match in ("signature", "signature_and_description")]
    hang = {d.failure_mode_id for d in exact if (fm := get_failure_mode(d.failure_mode_id)) and fm.hang}
    if any(d.severity == "blocker" and d.failure_mode_id not in hang for d in exact):
        return "failure_found"
    if any(d.severity == "blocker" and d.match in ("probe", "description_and_probe") for d in shown):
        return "blocker_found_by_probe"
    if not exact:
        return "suspected_from_description" if shown else "no_known_failure"
    if hang:
        return "hang_suspected"
    return "warnings_only"


def separating_questions(catalog: Any, shown: list[Diagnosis], values: dict[str, Any], limit: int = 4) -> list[str]:
    """What to look for in the logs that tells the suspected causes apart (the common causes when none is)."""
    out: list[str] = []
    if not shown:
        out.append("Paste the first Python traceback, or the last ~200 lines of the failing rank's log (log_path).")
        shown = [diagnosis(catalog.by_id[i], 0.0, [], 0, values, match="description") for i in PRIOR_IDS]
    seen: set[str] = set()
    for d in shown:
        if d.match != "description" or d.category in seen or not d.look_for:
            continue
        seen.add(d.category)
        sample = d.look_for[0] if len(d.look_for[0]) <= 120 else d.look_for[0][:117] + "..."
        out.append(f'Does a log contain a line like "{sample}"? Then it is {d.failure_mode_id} ({d.title}).')
        if len(out) >= limit:
            break
    return out
