"""How the machine and cluster probes word a finding: ``probe.*`` ids that cite the cluster-and-backends reference."""

from __future__ import annotations

from ..core import Finding
from ..core.findings import Category, Owner, Severity

REF = "xtuner-rl://references/cluster-and-backends"


def probe_finding(
    id: str,
    severity: Severity,
    category: Category,
    title: str,
    anchor: str,
    *,
    source: str | None = None,
    evidence: str = "",
    fix: str = "",
    location: str | None = None,
    owner: Owner | None = None,
) -> Finding:
    """A ``probe.<id>`` finding; ``anchor`` is the section of the cluster-and-backends reference ('' for none)."""
    return Finding(
        id=f"probe.{id}",
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,
        location=location,
        fix=fix,
        reference=f"{REF}#{anchor}" if anchor else "",
        source=source,
        owner=owner,
    )
