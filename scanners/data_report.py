"""The check_reward_data report: per-file scan results turned into counts, findings (titles and fixes from
xtuner_rules.data_contract), examples spread over the codes, data statistics and a one-line summary."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from ..core import DEFAULT_LIST_CAP, Detail, Finding, Severity, cap, sort_findings
from ..xtuner_rules.data_contract import CODES, FILE_CODES, ContractEntry
from .data_fixes import Suggestion, suggestions
from .jsonl import merge_stats
from .jsonl_contract import BLOCKER, CODE_SEVERITY
from .jsonl_duplicates import duplicates_across
from .jsonl_results import FileResult

DATA_DOC = "xtuner-rl://references/data-contract"
MAX_EXAMPLES_TOTAL = 50  # detail="normal": every code gets its first examples before any gets more
SUMMARY_CODES = 4  # blocker codes named in the summary line; the others are counted


class FileReport(BaseModel):
    path: str
    lines: int
    valid: int
    invalid: int
    bytes: int
    error: str | None = Field(default=None, description="Why the file could not be (fully) read")


class LineExample(BaseModel):
    file: str
    line: int = Field(description="1-based line number")
    code: str
    severity: str
    pointer: str = Field(description="JSON pointer of the offending value ('' = the whole line)")
    message: str
    excerpt: str = Field(description="Start of the line (at most 160 characters)")
    schema_error: str | None = Field(
        default=None, description="jsonschema's message vs rl-sample.schema.json (path: message)"
    )
    count: int = Field(default=1, description="Lines with this same issue (numbers in the message ignored)")
    lines: list[int] = Field(default_factory=list, description="The first (up to 10) of those line numbers")


class DerivableGroundTruth(BaseModel):
    """Lines without ground truth whose answer field holds it as '#### <n>'."""

    lines: int = Field(description="Lines missing reward_model.ground_truth a field can supply")
    fields: dict[str, int] = Field(description="JSON pointer of the answer field -> lines")
    first_lines: list[str] = Field(description="file:line of the first such lines")


class PromptLength(BaseModel):
    count: int
    min: int | None = None
    p50: int | None = None
    p90: int | None = None
    p99: int | None = None
    max: int | None = None
    unit: str = "characters of all message texts (exact below 1024, within 1% above)"


class DataStats(BaseModel):
    data_sources: dict[str, int] = Field(description="Lines per data_source value ('<missing>' etc. for bad ones)")
    ground_truth_types: dict[str, int] = Field(description="JSON type of reward_model.ground_truth -> lines")
    prompt_roles: dict[str, int] = Field(description="Messages per role over all well-formed prompts")
    empty_prompts: int = Field(description="Prompts whose every message text is empty or whitespace")
    duplicate_prompts: int = Field(description="Lines repeating an earlier prompt (hash-based)")
    duplicate_prompts_checked: int = Field(description="Prompts the duplicate count covers (capped at 4 million)")
    prompt_length: PromptLength


def _finding(
    code: str, severity: Severity, evidence: str, location: str | None, table: dict[str, ContractEntry]
) -> Finding:
    title, category, anchor, source, fix = table[code]
    return Finding(
        id=f"data.{code}",
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,
        location=location,
        fix=fix,
        reference=f"{DATA_DOC}#{anchor}",
        source=source,
        owner="data_preparation",
    )


@dataclass
class DataReport:
    """Everything check_reward_data reports about the data (the tool adds how and how long it scanned)."""

    summary: str
    ok: bool
    files_scanned: int
    lines: int
    valid: int
    invalid: int
    bytes: int
    errors_by_code: dict[str, int]
    files: list[FileReport]
    files_omitted: int
    examples: list[LineExample]
    examples_omitted: int
    stats: DataStats
    findings: list[Finding]
    suggestions: list[Suggestion]
    derivable: DerivableGroundTruth | None = None


def build_report(
    per_file: list[FileResult], parquet: list[str], *, role: str, judger: str, detail: Detail
) -> DataReport:
    """The report on merged file results (and the Parquet files found instead of JSONL)."""
    codes, first_locs, examples = _codes_and_examples(per_file)
    lines = sum(fr.lines for fr in per_file)
    valid = sum(fr.valid for fr in per_file)
    invalid = sum(fr.invalid for fr in per_file)
    nbytes = sum(fr.bytes for fr in per_file)
    stats = data_stats(per_file)
    derivable = derivable_ground_truth(per_file)
    findings = _findings(per_file, parquet, codes, first_locs, lines, stats, role)
    if derivable:
        findings = [_with_derivation(f, derivable) for f in findings]

    ok = not any(f.severity == "blocker" for f in findings)
    examples = _round_robin(examples)
    kept: list[LineExample]
    if detail == "summary":
        kept, omitted = [], len(examples)
    elif detail == "normal":
        kept, omitted = cap(examples, MAX_EXAMPLES_TOTAL)
    else:
        kept, omitted = examples, 0
    file_reports = [
        FileReport(path=fr.path, lines=fr.lines, valid=fr.valid, invalid=fr.invalid, bytes=fr.bytes, error=fr.error)
        for fr in per_file
    ] + [FileReport(path=pq, lines=0, valid=0, invalid=0, bytes=0, error="Parquet file, not JSONL") for pq in parquet]
    shown_files, files_omitted = cap(file_reports, DEFAULT_LIST_CAP)

    nfiles = len(per_file) + len(parquet)
    head = f"{valid}/{lines} lines valid in {nfiles} file(s) ({nbytes} bytes, judger={judger})"
    summary = _summary(ok, head, codes, findings, invalid)
    if derivable:
        summary += (
            f"; ground_truth derivable on {derivable.lines} line(s) from {_field_names(derivable)}: see suggestions"
        )
    return DataReport(
        summary=summary,
        ok=ok,
        files_scanned=nfiles,
        lines=lines,
        valid=valid,
        invalid=invalid,
        bytes=nbytes,
        errors_by_code=dict(sorted(codes.items(), key=lambda kv: -kv[1])),
        files=shown_files,
        files_omitted=files_omitted,
        examples=kept,
        examples_omitted=omitted,
        stats=stats,
        findings=findings,
        suggestions=suggestions(per_file, parquet),
        derivable=derivable,
    )


def derivable_ground_truth(per_file: list[FileResult]) -> DerivableGroundTruth | None:
    """Where a missing ground truth can be taken from a '#### <n>' answer field, summed over the files."""
    fields: dict[str, int] = {}
    first: list[str] = []
    for fr in per_file:
        for pointer, n in fr.derivable.items():
            fields[pointer] = fields.get(pointer, 0) + n
        first.extend(f"{fr.path}:{i}" for i in fr.derivable_lines[: max(0, 5 - len(first))])
    if not fields:
        return None
    return DerivableGroundTruth(lines=sum(fields.values()), fields=fields, first_lines=first)


def _field_names(d: DerivableGroundTruth) -> str:
    return ", ".join(p.lstrip("/").replace("/", ".") for p in sorted(d.fields, key=lambda p: -d.fields[p]))


def _with_derivation(f: Finding, d: DerivableGroundTruth) -> Finding:
    """A missing-ground-truth finding that says which field already holds the answer and how to derive it."""
    if f.id not in ("data.missing_ground_truth", "data.missing_reward_model", "data.empty_ground_truth"):
        return f
    names = _field_names(d)
    return f.model_copy(
        update={
            "evidence": f"{f.evidence}; {d.lines} of these lines hold the answer as '#### <n>' in {names}",
            "fix": f"Derive reward_model.ground_truth from {names} the way XTuner's GSM8K converter does (the number "
            "after '#### ', commas removed): run the 'Derive ground_truth' command in suggestions, then check the "
            f"new file again. {f.fix}",
        }
    )


def _codes_and_examples(
    per_file: list[FileResult],
) -> tuple[dict[str, int], dict[str, list[str]], list[LineExample]]:
    """Lines per code over all files, the first three file:line locations per code, and every example kept."""
    codes: dict[str, int] = {}
    first_locs: dict[str, list[str]] = {}
    examples: list[LineExample] = []
    for fr in per_file:
        for code, n in fr.codes.items():
            codes[code] = codes.get(code, 0) + n
        for code, exs in fr.examples.items():
            locs = first_locs.setdefault(code, [])
            nums = sorted({n for ex in exs for n in (ex.lines or [ex.line])})[: max(0, 3 - len(locs))]
            locs.extend(f"{fr.path}:{n}" for n in nums)
            for ex in exs:
                examples.append(
                    LineExample(
                        file=fr.path,
                        line=ex.line,
                        code=code,
                        severity=CODE_SEVERITY[code],
                        pointer=ex.pointer,
                        message=ex.message,
                        excerpt=ex.excerpt,
                        schema_error=ex.schema_error,
                        count=ex.count,
                        lines=ex.lines or [ex.line],
                    )
                )
    return codes, first_locs, examples


def _findings(
    per_file: list[FileResult],
    parquet: list[str],
    codes: dict[str, int],
    first_locs: dict[str, list[str]],
    lines: int,
    stats: DataStats,
    role: str,
) -> list[Finding]:
    """One finding per code, per unreadable, empty or Parquet file, and for duplicate prompts; blockers first."""
    findings: list[Finding] = []
    for code, n in codes.items():
        sev = CODE_SEVERITY[code]
        locs = first_locs.get(code, [])
        evidence = f"{n} of {lines} lines; first at {', '.join(locs)}" if locs else f"{n} of {lines} lines"
        findings.append(_finding(code, sev, evidence, locs[0] if locs else None, CODES))
    for fr in per_file:
        if fr.error:
            findings.append(_finding("file_unreadable", "blocker", fr.error, fr.path, FILE_CODES))
        elif fr.lines == 0:
            findings.append(_finding("empty_file", "blocker", f"{fr.path} is empty", fr.path, FILE_CODES))
    for pq in parquet:
        findings.append(
            _finding("parquet_file", "blocker", f"{pq} starts with the Parquet magic 'PAR1'", pq, FILE_CODES)
        )
    if stats.duplicate_prompts:
        dup_severity: Severity = "warning" if role == "eval" else "info"
        ev = f"{stats.duplicate_prompts} of {stats.duplicate_prompts_checked} prompts repeat an earlier prompt"
        findings.append(_finding("duplicate_prompts", dup_severity, ev, None, FILE_CODES))
    return sort_findings(findings)


def _summary(ok: bool, head: str, codes: dict[str, int], findings: list[Finding], invalid: int) -> str:
    if ok:
        warn = sum(1 for f in findings if f.severity == "warning")
        notes = len(findings) - warn
        summary = f"OK: {head}" + (f"; {warn} warning(s)" if warn else "; no problems found")
        summary += f", {notes} note(s)" if notes else ""
        return summary
    blockers = sorted((c for c in codes if CODE_SEVERITY[c] == BLOCKER), key=lambda c: -codes[c])
    top = ", ".join(f"{c} x{codes[c]}" for c in blockers[:SUMMARY_CODES]) or ", ".join(
        f.id for f in findings if f.severity == "blocker"
    )
    rest = blockers[SUMMARY_CODES:]
    if rest:  # every code is counted: the listed ones and the rest add up to the lines they mark
        top += f", +{len(rest)} more code(s) on {sum(codes[c] for c in rest)} line(s)"
    return f"NOT OK: {head}; {invalid} invalid line(s): {top}"


def _round_robin(examples: list[LineExample]) -> list[LineExample]:
    """Blocker codes first; the first example of every code, then the second of every code, and so on."""
    order = {"blocker": 0, "warning": 1, "info": 2}
    by_code: dict[str, list[LineExample]] = {}
    for ex in sorted(examples, key=lambda e: (e.file, e.line)):
        by_code.setdefault(ex.code, []).append(ex)
    codes = sorted(by_code, key=lambda c: (order[CODE_SEVERITY[c]], -len(by_code[c]), c))
    out: list[LineExample] = []
    for rank in range(max((len(v) for v in by_code.values()), default=0)):
        out.extend(by_code[c][rank] for c in codes if rank < len(by_code[c]))
    return out


def data_stats(per_file: list[FileResult]) -> DataStats:
    """The files' statistics summed, duplicates counted across them, prompt lengths as percentiles."""
    st = merge_stats(fr.stats for fr in per_file)
    hist = st.length_hist
    n = sum(hist.values())
    dup, checked = duplicates_across(per_file)
    return DataStats(
        data_sources=st.data_sources,
        ground_truth_types=st.ground_truth_types,
        prompt_roles=st.prompt_roles,
        empty_prompts=st.empty_prompts,
        duplicate_prompts=dup,
        duplicate_prompts_checked=checked,
        prompt_length=PromptLength(
            count=n,
            min=min(hist) if hist else None,
            p50=percentile(hist, n, 0.5),
            p90=percentile(hist, n, 0.9),
            p99=percentile(hist, n, 0.99),
            max=max(hist) if hist else None,
        ),
    )


def percentile(hist: dict[int, int], total: int, q: float) -> int | None:
    """The q-quantile (0..1) of a bucket histogram (nearest-rank on bucket lower bounds)."""
    if total <= 0:
        return None
    rank = max(1, int(-(-q * total // 1)))  # ceil
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return k
    return max(hist)
