"""What a diagnosis says: a ranked catalog entry with its evidence lines and the calls that confirm it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import Category, Severity


class Evidence(BaseModel):
    source: str = Field(description="'text' for pasted input, else the log file path")
    line: int = Field(description="1-based line number in that source (0: a live check)")
    text: str = Field(description="The matching line, cleaned of prefixes and colour codes")
    kind: Literal["exception", "detail", "log", "frame", "phrase", "probe"] = Field(
        description="detail: a pydantic validation detail; phrase: wording matches the failure's description; "
        "probe: a live check's finding (source 'probe:<tool>')"
    )
    context: str = Field(default="", description="detail: the line above; phrase: the phrase matched")


class ToolCall(BaseModel):
    tool: str = Field(description="Tool of this server to call")
    arguments: dict[str, Any] = Field(description="Arguments, filled from this call's inputs where known")
    missing: list[str] = Field(default_factory=list, description="Arguments you still have to supply")


#: How a finding was found: an exact message, the report's wording, a live probe, or two of them.
MatchKind = Literal["signature", "description", "signature_and_description", "probe", "description_and_probe"]


class Diagnosis(BaseModel):
    failure_mode_id: str = Field(description="Catalog entry id (stable)")
    category: Category
    match: MatchKind = Field(
        default="signature",
        description="signature: an exact error message; description: matching wording, a lead to confirm with "
        "look_for; probe: a live check (run_probes) found it",
    )
    severity: Severity
    confidence: float = Field(
        ge=0,
        le=1,
        description="How often findings like this were right on held-out real reports, 0-1; 0.8 or more only for "
        "the exact message of an entry that names its cause and led labelled reports right before",
    )
    title: str
    evidence: list[Evidence]
    evidence_omitted: int = Field(description="Further matching lines not listed")
    occurrences: int = Field(description="Matching lines in total")
    cause: str
    fix: list[str] = Field(description="Ordered fix steps")
    confirm_with: list[ToolCall]
    look_for: list[str] = Field(default_factory=list, description="Messages that would confirm a description match")
    reference: str = Field(description="xtuner-rl://failure-modes/<id>")
    doc_reference: str = Field(description="Section of the troubleshooting guide")
    source: list[str] = Field(description="XTuner path:line at b934f46")
    route: str | None = Field(default=None, description="Area the fix belongs to, when not the RL launch itself")
