"""Ranking what the scanner found: a confidence per catalog entry from its specificity and where it matched."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from ..knowledge.catalog import get_failure_mode
from .descriptions import (
    DescriptionMatch,
    area_leads,
    rank_descriptions,
    report_language,
    report_terms,
    reports_trouble,
)
from .descriptions import confidence as desc_confidence
from .log_scanner import _KIND_RANK, EntryState, Scanner
from .models import Diagnosis, Evidence, MatchKind, ToolCall
from .report_model import AGREE_P, Calibration, EvidenceKind, Language, active_model
from .report_values import message_fixes, recovery_lines


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
    "choose_topology": (
        "nodes",
        "gpus_per_node",
        "params_b",
        "backend",
        "tensor_parallel_size",
        "expert_parallel_size",
    ),
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
    match: MatchKind = "signature",
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
        fix=[*message_fixes((e.text for e in evidence), values.get("gpus_per_node")), *fm.fix],
        confirm_with=[fill_call(c, values) for c in fm.confirm_with],
        look_for=[] if match == "signature" else list(fm.examples[:2]),
        reference=fm.uri,
        doc_reference=fm.doc_uri,
        source=list(fm.source),
        route=fm.route,
    )


#: The entry of XTuner's own recovery line (health_manager.py:517), found by the scanner in log files.
RESTARTED_ID = "rollout_worker_group_restarted"
#: Categories whose blockers a recovery resolves: a failed health check, an engine that crashed and was restarted.
RECOVERABLE = frozenset({"backend_runtime_error"})


def recoveries(scanner: Scanner, text: str | None) -> list[tuple[str, int]]:
    """(source, line) of every line that says a failure was recovered from: pasted text and scanned logs."""
    found = [("text", n) for n in recovery_lines(enumerate((text or "").splitlines(), 1))]
    st = scanner.states.get(RESTARTED_ID)
    if st is not None:
        found += [(h.source, h.line) for h in [*st.hits, *([st.last] if st.last else [])]]
    return sorted(set(found))


def demote_recovered(findings: list[Diagnosis], scanner: Scanner, text: str | None) -> list[Diagnosis]:
    """A runtime blocker whose latest occurrence comes before a recovery line of the same source is a warning now:
    it happened and was dealt with, it is not what stops the run. It loses 0.3 of its (calibrated) confidence and
    moves below the messages that now show more, still ahead of leads from wording alone (whose confidence it caps,
    so that confidence never rises down the list)."""
    recovered = recoveries(scanner, text)
    demoted: list[Diagnosis] = []
    for d in findings:
        st = scanner.states.get(d.failure_mode_id)
        if d.severity != "blocker" or d.category not in RECOVERABLE or st is None or not st.hits:
            continue
        latest = st.last or st.hits[-1]
        after = [n for src, n in recovered if src == latest.source and n > latest.line]
        if not after:
            continue
        d.severity = "warning"
        d.confidence = round(max(0.05, d.confidence - 0.3), 2)
        d.cause = f"Recovered: line {after[0]} reports that it came back after this. {d.cause}"
        d.fix = [f"Nothing to do while the run keeps stepping (it recovered at line {after[0]}); if it recurs:", *d.fix]
        demoted.append(d)
    out = [d for d in findings if all(d is not x for x in demoted)]
    for d in demoted:
        at = next((i for i, o in enumerate(out) if o.confidence < d.confidence or o.match == "description"), len(out))
        out.insert(at, d)
        for o in out[at + 1 :]:
            o.confidence = min(o.confidence, d.confidence)
    return out


#: Share of the area model in the order of categories (the rest is the catalog's own evidence: each category's best
#: finding relative to the best one). Chosen by nested cross-validation on the development part of the real-report
#: corpus (``python bench/real_reports.py --cv``), like the constants of ``descriptions``.
AREA_SHARE = 0.35
#: Softmax temperature of the area model (higher: flatter probabilities).
AREA_TEMPERATURE = 1.0
#: The area model's first AREA_LEADS categories (each with at least AREA_MIN_P) get a lead when no finding shows them.
AREA_LEADS = 3
AREA_MIN_P = 0.02
#: Places AREA_PLACE to AREA_LAST_PLACE go, one by one, to the area model's likeliest category (at least AREA_PLACE_P)
#: that no finding above shows; a message that matched keeps its place. On the development part's reports no phrase
#: was written from (5-fold held out), places 2-3 this way lifted top-3 from 84% to 92% and left top-1 as it was.
AREA_PLACE = 2
AREA_LAST_PLACE = 3
AREA_PLACE_P = 0.02
#: A first finding from wording alone gives way to the area model's likeliest category when the model gives that
#: category at least this much more probability than the wording lead's (held out on the reports no phrase was
#: written from: top-1 +3 points, Chinese +6; on the older reports, whose wording the phrases were written from, -1).
AREA_OVERRULE = 0.3
#: The same for a Chinese report: its wording leads are right less often than an English report's (the catalog's
#: phrases and the dictionary's English reach it less well), so the area model overrules them sooner. Chosen by
#: nested cross-validation on the development part, like the constants of ``descriptions``: among 0.2 and 0.3 on 1,089
#: reports, 0.2 (Chinese top-1 55.2% -> 55.6%; each collection round since 2026-12-04 answered by a model fitted
#: without it, 842 reports: Chinese top-1 52.3% -> 54.9%, English answers and top-3 unchanged); among 0.1, 0.2 and 0.3
#: on 1,132 reports, 0.1 in four folds of five (5-fold held out: Chinese top-1 56.6% -> 57.1%, English unchanged); on
#: 1,152, 0.1 in two folds and 0.2 in three, 0.1 still with the most inner-fold hits.
AREA_OVERRULE_ZH = 0.1

#: A report with fewer telling terms than this gives the area model's opinion of a wording lead less weight.
#: Chosen on the development part's unseen reports (20 scored best among 5, 10, 20, 30 and 50).
EVIDENCE_TERMS = 20
#: Only the exact message of an entry that names its cause, in the category the area model finds likeliest, may claim
#: the confidence of a found failure: a generic line (an OOM, an NCCL error, an engine crash), wording alone, or an
#: exact message the report's words point elsewhere from (the area a maintainer files it under may be another: an
#: unknown architecture fixed by upgrading is a missing version) stays below this, however often such leads were right
#: on held-out reports (a confidence of 0.8 or more is meant to be right at least nine times in ten, and two signals
#: that agree are what held on fresh reports). An exact message also needs its entry's track record on labelled reports
#: (``Calibration.has_earned``): the message may be right while the area a maintainer files it under is another.
LEAD_CAP = 0.75

#: Asked about when nothing matched at all: the causes real reports name most often.
PRIOR_IDS = ("rollout_server_start_timeout", "cuda_out_of_memory", "placement_group_pending")


def with_descriptions(
    catalog: Any,
    signature: list[Diagnosis],
    matches: list[DescriptionMatch],
    values: dict[str, Any],
    from_log: bool = False,
    area: dict[str, float] | None = None,
    *,
    language: Language,
) -> list[Diagnosis]:
    """Signature findings and description matches in one ranking.

    An entry found both ways keeps its signature confidence plus a little; an entry found only by its description
    gets a capped confidence and what to look for. Exact messages of a cause come first, then the other messages,
    then the wording leads; with the area model's probabilities (``area``), the latter two are ordered by category,
    by their best finding's confidence (relative to the best one) and the model together (AREA_SHARE), and by
    confidence within a category. The first finding of each category moves ahead of a second description match of
    a category already shown, so the top three cover different causes; a first wording lead gives way to the area
    model's likeliest category when the model prefers that by more than AREA_OVERRULE (AREA_OVERRULE_ZH for a report
    in Chinese: ``language``); and the places from AREA_PLACE to AREA_LAST_PLACE that no message holds go to the area
    model's likeliest categories not shown above.
    """
    found = {d.failure_mode_id: d for d in signature}
    best = matches[0].score if matches else 0.0
    merged = list(signature)
    # An exact message of a specific entry outranks any reading of the wording (a note of context does not).
    exact_confidences = [
        d.confidence for d in signature if catalog.by_id[d.failure_mode_id].specificity >= 3 and d.severity != "info"
    ]
    ceiling = min(exact_confidences) - 0.01 if exact_confidences else 1.0
    weakest = min((d.confidence for d in signature), default=1.0) - 0.01
    for m in matches:
        conf = min(desc_confidence(m.score, best), ceiling if m.phrases and not from_log else min(ceiling, weakest))
        if m.failure_mode_id in found:
            d = found[m.failure_mode_id]
            d.match = "signature_and_description"
            d.confidence = round(min(0.99, d.confidence + 0.05 + 0.1 * conf), 2)
            continue
        evidence = [Evidence(source="text", line=n, text=t[:300], kind="phrase", context=p) for n, t, p in m.lines]
        fm = catalog.by_id[m.failure_mode_id]
        merged.append(diagnosis(fm, conf, evidence, max(len(m.phrases), len(evidence)), values, match="description"))
        found[fm.id] = merged[-1]
    order = {"blocker": 0, "warning": 1, "info": 2}
    merged.sort(key=lambda d: (-d.confidence, order[d.severity]))
    exact = [d for d in merged if evidence_kind(catalog, d) == "exact"]
    others = [d for d in merged if d.match != "description" and evidence_kind(catalog, d) != "exact"]
    wording = [d for d in merged if d.match == "description"]
    if area and merged:
        # an exact message of a cause first; then the other messages, then the wording leads, each by category
        # (the catalog's evidence relative to the best finding and the area model together) and by confidence
        top = max(d.confidence for d in merged) or 1.0
        for group in (others, wording):
            strength: dict[str, float] = {}
            for d in group:
                strength[d.category] = max(strength.get(d.category, 0.0), d.confidence / top)
            fused = {c: (1 - AREA_SHARE) * e + AREA_SHARE * area.get(c, 0.0) for c, e in strength.items()}
            group.sort(key=lambda d: (-fused[d.category], -d.confidence, order[d.severity]))
        merged = exact + others + wording
    head: list[Diagnosis] = []
    later: list[Diagnosis] = []
    seen: set[str] = set()
    for d in merged:
        if d.match == "description" and d.category in seen:
            later.append(d)
        else:
            head.append(d)
            seen.add(d.category)
    ranked = head + later
    kept = len(exact) + len(others)  # a message that matched keeps its place
    if area and ranked and ranked[0].match == "description":
        likeliest = max(area, key=lambda c: area[c])
        at = next((i for i, d in enumerate(ranked) if d.category == likeliest), None)
        overrule = AREA_OVERRULE_ZH if language == "zh" else AREA_OVERRULE
        if at and area[likeliest] - area.get(ranked[0].category, 0.0) > overrule:
            ranked.insert(0, ranked.pop(at))
            kept = 2  # the wording lead it overruled stays second
    probabilities = area or {}
    for place in range(max(AREA_PLACE - 1, kept), AREA_LAST_PLACE if probabilities else 0):
        # this place goes to the area model's likeliest category that the findings above it do not show
        above = {d.category for d in ranked[:place]}
        likely = [c for c in probabilities if c not in above and probabilities[c] >= AREA_PLACE_P]
        pick = max(likely, key=lambda c: probabilities[c], default=None)
        at = next((i for i, d in enumerate(ranked) if d.category == pick), None)
        if at is not None and at > place:
            ranked.insert(place, ranked.pop(at))
    return ranked


def area_probabilities(described: list[tuple[int, str]], from_log: bool) -> dict[str, float]:
    """The area model's category probabilities for the report's lines (empty without a model, or for a log whose
    lines say nothing is wrong)."""
    model = active_model()
    if model is None or AREA_SHARE <= 0 or not described or (from_log and not reports_trouble(described)):
        return {}
    return model.areas.probabilities(report_terms(described), AREA_TEMPERATURE)


def evidence_kind(catalog: Any, d: Diagnosis) -> EvidenceKind | None:
    """exact: the message of an entry that names its cause; symptom: a generic line (an OOM, an NCCL error, a crash
    of the engine) or a warning; wording: only how the report reads. None for a live check's finding."""
    if d.match == "description":
        return "wording"
    if d.match not in ("signature", "signature_and_description"):
        return None
    fm = catalog.by_id[d.failure_mode_id]
    return "exact" if fm.specificity >= 4 and not fm.consequence and d.severity == "blocker" else "symptom"


def wording_raw(area_p: float, terms: int) -> float:
    """What a wording lead is calibrated by: the area model's probability of its category, discounted when the
    report has fewer than EVIDENCE_TERMS telling terms (three words say little, whatever the model makes of them)."""
    return area_p * min(1.0, terms / EVIDENCE_TERMS)


def calibrate(
    catalog: Any,
    ranked: list[Diagnosis],
    area: dict[str, float],
    terms: int,
    language: Language,
    calibration: Calibration,
) -> None:
    """Replace raw confidences with how often findings like them were right on held-out reports in the report's
    language (a message by its raw confidence, a wording lead by ``wording_raw``); a finding never shows more
    confidence than one ranked above it."""
    ceiling = 1.0
    for d in ranked:
        kind = evidence_kind(catalog, d)
        p = area.get(d.category, 0.0)
        if kind is not None:
            raw = wording_raw(p, terms) if kind == "wording" else d.confidence
            calibrated = calibration.probability(kind, not area or p >= AGREE_P, raw, language)
            strong = (
                kind == "exact"
                and (not area or (p >= AGREE_P and p >= max(area.values())))
                and calibration.has_earned(d.failure_mode_id)
            )
            d.confidence = round(min(calibrated, ceiling, 1.0 if strong else LEAD_CAP), 2)
        ceiling = d.confidence


def rank_findings(
    catalog: Any,
    signature: list[Diagnosis],
    described: list[tuple[int, str]],
    values: dict[str, Any],
    from_log: bool,
) -> list[Diagnosis]:
    """Signature findings, description matches and the areas labelled reports point to, in one calibrated ranking.

    An area the model ranks high that no finding shows gets a lead: the entry of it that shares the most words
    with the report (with the lowest confidence of a wording lead).
    """
    matches = rank_descriptions(catalog, described, from_log)
    area = area_probabilities(described, from_log)
    if area:
        shown = {catalog.by_id[m.failure_mode_id].category for m in matches} | {d.category for d in signature}
        likely = sorted(area.items(), key=lambda kv: -kv[1])[:AREA_LEADS]
        matches += area_leads(catalog, described, [c for c, p in likely if p >= AREA_MIN_P and c not in shown])
    language = report_language(described)
    ranked = with_descriptions(catalog, signature, matches, values, from_log, area, language=language)
    model = active_model()
    if model is not None and model.calibration is not None:
        evidence = len(report_terms(described, dictionary=False))
        calibrate(catalog, ranked, area, evidence, language, model.calibration)
    return ranked


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
    "uncertain",
    "no_known_failure",
]

#: A wording lead this close in (calibrated) confidence to the lead of another category is no answer: the verdict
#: says so. Held out in the development part's nested cross-validation (487 reports, 2026-12-04), such tops were right
#: 53% of the time, clear wording leads 78%, answers with a matched blocker message 93%.
UNCERTAIN_MARGIN = 0.05


def competing(shown: list[Diagnosis]) -> tuple[Diagnosis, Diagnosis] | None:
    """The top wording lead and the best lead of another category, when they are too close to choose between."""
    if not shown or shown[0].match != "description":
        return None
    top = shown[0]
    rival = next((d for d in shown[1:] if d.category != top.category), None)
    if rival is None or top.confidence - rival.confidence >= UNCERTAIN_MARGIN:
        return None
    return top, rival


def choose_verdict(shown: list[Diagnosis]) -> Verdict:
    """What the findings add up to; a description match alone is a suspicion, never a found failure, and two close
    suspicions are uncertain; a blocker a live check found decides when the report names no exact failure."""
    exact = [d for d in shown if d.match in ("signature", "signature_and_description")]
    hang = {d.failure_mode_id for d in exact if (fm := get_failure_mode(d.failure_mode_id)) and fm.hang}
    if any(d.severity == "blocker" and d.failure_mode_id not in hang for d in exact):
        return "failure_found"
    if any(d.severity == "blocker" and d.match in ("probe", "description_and_probe") for d in shown):
        return "blocker_found_by_probe"
    if not exact:
        if not shown:
            return "no_known_failure"
        return "uncertain" if competing(shown) else "suspected_from_description"
    if hang:
        return "hang_suspected"
    return "warnings_only"


def _sample(d: Diagnosis) -> str:
    text = d.look_for[0] if d.look_for else d.title
    return text if len(text) <= 120 else text[:117] + "..."


def _render(call: ToolCall) -> str:
    return f"{call.tool}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"


def separating_question(a: Diagnosis, b: Diagnosis) -> str:
    """The one check that tells two close leads apart: the message each would print, and a ready live check that
    only one of them names."""
    question = (
        f'Which does the log show: "{_sample(a)}" (then it is {a.failure_mode_id}) or "{_sample(b)}" (then it is '
        f"{b.failure_mode_id})?"
    )
    for d, other in ((a, b), (b, a)):
        other_tools = {c.tool for c in other.confirm_with}
        ready = next((c for c in d.confirm_with if not c.missing and c.tool not in other_tools), None)
        if ready is not None:
            return f"{question} Or run {_render(ready)}: it checks {d.failure_mode_id}."
    return question


def separating_questions(catalog: Any, shown: list[Diagnosis], values: dict[str, Any], limit: int = 4) -> list[str]:
    """What to look for in the logs that tells the suspected causes apart (the common causes when none is); when
    two leads are too close, the question that separates them comes first."""
    out: list[str] = []
    if not shown:
        out.append("Paste the first Python traceback, or the last ~200 lines of the failing rank's log (log_path).")
        shown = [diagnosis(catalog.by_id[i], 0.0, [], 0, values, match="description") for i in PRIOR_IDS]
    pair = competing(shown)
    if pair is not None:
        out.append(separating_question(*pair))
    seen: set[str] = set()
    for d in shown:
        if d.match != "description" or d.category in seen or not d.look_for:
            continue
        seen.add(d.category)
        out.append(f'Does a log contain a line like "{_sample(d)}"? Then it is {d.failure_mode_id} ({d.title}).')
        if len(out) >= limit:
            break
    return out
