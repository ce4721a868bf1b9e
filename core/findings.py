"""The shared result vocabulary: severities, the fixed category set, owners, ``Finding``, the result base, caps."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

XTUNER_SOURCE = "InternLM/xtuner@b934f46"

Severity = Literal["blocker", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"blocker": 0, "warning": 1, "info": 2}

#: The failure-mode catalog's fixed category set (issue 3); every Finding uses one of them.
Category = Literal[
    "ray_not_running",
    "ray_resources_insufficient",
    "backend_not_installed",
    "backend_flag_missing_or_multiple",
    "backend_unsupported",
    "backend_runtime_error",
    "missing_env_var_or_path",
    "config_load_error",
    "reward_data_missing_ground_truth",
    "data_format_other",
    "resource_mismatch_num_workers",
    "staleness_or_partial_rollout",
    "eval_or_interval_config",
    "debug_trace_output",
    "model_loading",
    "other",
]
CATEGORIES: tuple[str, ...] = Category.__args__  # type: ignore[attr-defined]

#: Who fixes a problem: where preflight routes a finding.
Owner = Literal[
    "data_preparation",
    "backend_install",
    "cluster_setup",
    "config_edit",
    "launch_command",
    "model_files",
    "environment",
]

Detail = Literal["summary", "normal", "full"]

#: When an XTuner RL run would hit a problem, in the order a launch goes through them (issue 20): the launch script
#: and the CLI's imports, ``ray.init`` (xtuner/v1/train/cli/rl.py:45-46), loading the config file (rl.py:57), the
#: trainer's common init and backend version check (xtuner/v1/train/rl_trainer.py:589-658), the placement group
#: (rl_trainer.py:1605; disaggregated :1921-1922), train and rollout workers (:1625-1645), the agent-loop managers
#: and their datasets (:708-735), then the first judged batch, the first evaluation, and later steps.
Stage = Literal[
    "launch",
    "ray_connect",
    "config_load",
    "trainer_init",
    "placement_group",
    "rollout_start",
    "dataset_build",
    "first_judged_batch",
    "first_eval",
    "later",
]
STAGES: tuple[str, ...] = Stage.__args__  # type: ignore[attr-defined]
STAGE_ORDER: dict[str, int] = {s: i for i, s in enumerate(STAGES)}

#: One owner per root cause: findings in these categories belong to this owner whatever the emitter says, so one
#: finding id carries the same owner in every tool.
FORCED_OWNER: dict[str, str] = {
    "backend_not_installed": "backend_install",
    "backend_flag_missing_or_multiple": "backend_install",
    "backend_unsupported": "backend_install",
    "backend_runtime_error": "backend_install",
    "ray_not_running": "cluster_setup",
    "ray_resources_insufficient": "cluster_setup",
    "resource_mismatch_num_workers": "cluster_setup",
}
#: The owner of a finding whose emitter named none.
DEFAULT_OWNER: dict[str, str] = {
    "reward_data_missing_ground_truth": "data_preparation",
    "data_format_other": "data_preparation",
    "config_load_error": "config_edit",
    "eval_or_interval_config": "config_edit",
    "staleness_or_partial_rollout": "config_edit",
    "debug_trace_output": "config_edit",
    "missing_env_var_or_path": "environment",
    "model_loading": "model_files",
}

#: Default cap on list lengths in results; every capped list has a sibling ``*_omitted`` count.
DEFAULT_LIST_CAP = 50


class Finding(BaseModel):
    """One problem or observation, shared by every tool."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(description="Stable, e.g. 'data.missing_ground_truth'")
    severity: Severity = Field(description="blocker: the run will fail; warning: likely wrong; info: note")
    category: Category = Field(description="Catalog category")
    title: str = Field(description="One line saying what is wrong")
    evidence: str = Field(default="", description="Observed value, line or message")
    location: str | None = Field(default=None, description="'file:line' or a JSON pointer")
    fix: str = Field(default="", description="What to do about it")
    reference: str = Field(default="", description="Resource URI, e.g. xtuner-rl://references/data-contract")
    source: str | None = Field(default=None, description="XTuner 'path:line' of the rule")
    owner: Owner | None = Field(default=None, description="Who fixes it")
    stage: Stage | None = Field(default=None, description="When XTuner would hit it")
    patch: str | None = Field(default=None, description="Unified diff of the fix; `git apply` in the allowed root")

    @model_validator(mode="after")
    def _route(self) -> Finding:
        """Owner by category: forced for cluster and backend problems, a default where the emitter named none."""
        owner = FORCED_OWNER.get(self.category) or self.owner or DEFAULT_OWNER.get(self.category)
        if owner != self.owner:
            object.__setattr__(self, "owner", owner)
        return self


class ToolResult(BaseModel):
    """Base of every tool result: opens with a one-line summary an agent can quote."""

    # Validators are built on first use, so a tool that is listed but never called costs less at start.
    model_config = ConfigDict(defer_build=True)

    summary: str = Field(description="One line an agent can quote")


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Blockers first, then warnings, then info; within a severity by the stage that fires first (unstaged last),
    stable otherwise."""
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], STAGE_ORDER.get(f.stage or "", len(STAGES))))


def dedupe_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Keep the first finding per (id, location)."""
    seen: set[tuple[str, str | None]] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.id, f.location)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


T = TypeVar("T")


def cap(items: Sequence[T], limit: int) -> tuple[list[T], int]:
    """Return at most ``limit`` items and how many were left out."""
    limit = max(0, limit)
    return list(items[:limit]), max(0, len(items) - limit)


def count_severities(findings: Iterable[Finding]) -> dict[str, int]:
    counts = {"blocker": 0, "warning": 0, "info": 0}
    for f in findings:
        counts[f.severity] += 1
    return counts
