"""Errors in a run's logs, local and collected from the Ray nodes, through the diagnosis engine (the catalog
signatures, traceback tracking and ranking behind diagnose_symptom); each remote file keeps its node as source."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core import RunContext
from ..diagnosis.log_scanner import Scanner
from ..diagnosis.models import Diagnosis
from ..diagnosis.ranking import choose_verdict, rank
from ..diagnosis.sources import collect_log_files, file_chunks
from ..knowledge.catalog import load_catalog
from .ray_logs import RemoteLog

MAX_FILE_BYTES = 256 << 20  # per file: the tail (where a failure is)
MAX_TOTAL_BYTES = 1 << 30


@dataclass
class LogDiagnosis:
    verdict: str = "no_known_failure"
    diagnoses: list[Diagnosis] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    sources_omitted: int = 0
    lines: int = 0
    bytes: int = 0


def _text_chunks(text: str) -> Iterator[bytes]:
    data = text.encode("utf-8", "replace")
    for i in range(0, len(data), 8 << 20):
        yield data[i : i + (8 << 20)]


def diagnose(logs_dir: Path | None, remote: list[RemoteLog], ctx: RunContext, evidence_cap: int) -> LogDiagnosis:
    """Scan every *.log/*.txt/*.out/*.err under ``logs_dir`` (newest first) and the remote tails together."""
    catalog = load_catalog()
    scanner = Scanner(catalog, evidence_cap)
    out = LogDiagnosis()
    files: list[Path] = []
    if logs_dir is not None and logs_dir.is_dir():
        files, out.sources_omitted = collect_log_files(logs_dir, ctx)
    budget = MAX_TOTAL_BYTES
    for path in files:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if budget <= 0:
            out.sources_omitted += 1
            continue
        start = max(0, size - min(MAX_FILE_BYTES, budget))
        budget -= size - start
        scanner.scan_bytes_stream(str(path), file_chunks(path, start), size - start, start_line=1)
        out.sources.append(str(path))
    for log in remote:
        source = f"{log.node_ip}:{log.filename}"
        data = log.text
        scanner.scan_bytes_stream(source, _text_chunks(data), len(data.encode("utf-8", "replace")))
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
