"""How the machine and cluster probes word a finding: ``probe.*`` ids that cite the cluster-and-backends reference."""

from __future__ import annotations

from ..core import Finding

REF = "xtuner-rl://references/cluster-and-backends"


def probe_finding(
    id: str, severity: str, category: str, title: str, anchor: str, *, source: str | None = None, **kw: str
) -> Finding:
    """A ``probe.<id>`` finding; ``anchor`` is the section of the cluster-and-backends reference ('' for none)."""
    return Finding(
        id=f"probe.{id}",
        severity=severity,  # type: ignore[arg-type]
        category=category,  # type: ignore[arg-type]
        title=title,
        reference=f"{REF}#{anchor}" if anchor else "",
        source=source,
        **kw,  # type: ignore[arg-type]
    )
