"""Errors in a run's logs, local and collected from the Ray nodes, through the diagnosis engine (the catalog
signatures, traceback tracking and ranking behind diagnose_symptom); each remote file keeps its node as source."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core import RunContext
from ..diagnosis.log_scanner import Scanner
from ..diagnosis.models import Diagnosis
from ..diagnosis.ranking import choose_verdict, rank
from ..diagnosis.sources import LogFiles, collect_log_files, scan_log_files, text_chunks
from ..knowledge.catalog import load_catalog
from .ray_logs import RemoteLog


@dataclass
class LogDiagnosis:
    verdict: str = "no_known_failure"
    diagnoses: list[Diagnosis] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    sources_omitted: int = 0
    lines: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def diagnose(logs_dir: Path | None, remote: list[RemoteLog], ctx: RunContext, evidence_cap: int) -> LogDiagnosis:
    """Scan every *.log/*.txt/*.out/*.err under ``logs_dir`` (checked inside the roots; newest first) and the remote
    tails together."""
    catalog = load_catalog()
    scanner = Scanner(catalog, evidence_cap, limits=ctx.limits)
    out = LogDiagnosis()
    listed = collect_log_files(logs_dir, ctx) if logs_dir is not None else LogFiles()
    read = scan_log_files(scanner, listed, ctx.paths)
    out.sources, out.notes, out.sources_omitted = read.sources, read.notes, read.omitted
    for remote_log in remote:
        source = f"{remote_log.node_ip}:{remote_log.filename}"
        data = remote_log.text
        scanner.scan_bytes_stream(source, text_chunks(data), len(data.encode("utf-8", "replace")))
        out.sources.append(source)
    values = {
        "log_path": str(logs_dir) if logs_dir else None,
        "data_path": None,
        "config_path": None,
        "backend": None,
        "nodes": None,
    }
    out.diagnoses = rank(catalog, scanner, values)
    out.verdict = choose_verdict(out.diagnoses)
    out.lines = scanner.lines
    out.bytes = scanner.bytes
    return out
