"""What the rules of one analysis share: the finding collector, unchecked-rule notes and API-reference anchors."""

from __future__ import annotations

from typing import Any

from ..core import Finding
from ..core.findings import Category, Owner, Severity
from .env_fixes import EnvFixer
from .evaluator import Evaluation
from .patches import SourcePatcher
from .report import REF, Setting
from .values import Obj, Unres, Val

#: XTuner loads the config with Config.fromfile, which executes the file (cited at InternLM/xtuner@b934f46).
SRC_CONFIG_PY = "xtuner/v1/utils/config.py:17-29"


class Ctx:
    """State shared by the rules of one analysis."""

    def __init__(
        self,
        path: str,
        ev: Evaluation,
        env: dict[str, str] | None,
        patcher: SourcePatcher | None = None,
        env_fix: EnvFixer | None = None,
    ) -> None:
        self.path = path
        self.name = path.rsplit("/", 1)[-1]
        self.ev = ev
        self.env = env
        self.patcher = patcher
        self.env_fix = env_fix  # fixes in the launch env file, when the planned env came from one
        self.patch_notes: dict[str, str] = {}  # patch -> what the finding's evidence adds about it
        self.findings: list[Finding] = []
        self.unchecked: list[str] = []
        self.settings: list[Setting] = []

    # ---- patches: one diff per finding, None when the fix cannot be written exactly -----------------------------

    def set_value(self, obj: Obj, name: str, value: Any) -> str | None:
        """A diff giving ``name`` the value ``value``: set where written, inserted when the config leaves it out."""
        if self.patcher is None:
            return None
        if name not in obj.kwargs:
            return self.patcher.diff(self.patcher.insert_keyword(obj, name, value))
        patch = self.patcher.diff([self.patcher.set_keyword(obj, name, value)])
        if patch is None and self.env_fix is not None:  # the value comes from the environment: the env file's line
            return self.noted(self.env_fix.value(self.ev, obj, name, value))
        return patch

    def noted(self, made: tuple[str, str] | None) -> str | None:
        """The diff of an env-file fix, remembering the note its finding's evidence carries."""
        if made is None:
            return None
        self.patch_notes[made[0]] = made[1]
        return made[0]

    def remove(self, obj: Obj, name: str) -> str | None:
        """A diff deleting keyword ``name`` from ``obj``'s call (XTuner's default applies)."""
        return self.patcher.diff([self.patcher.remove_keyword(obj, name)]) if self.patcher is not None else None

    def rename(self, obj: Obj, new_cls: str) -> str | None:
        """A diff calling ``new_cls`` instead of ``obj.cls`` (imported next to it when missing)."""
        return self.patcher.diff(self.patcher.rename_call(obj, new_cls)) if self.patcher is not None else None

    def loc(self, line: int | None) -> str | None:
        return f"{self.name}:{line}" if line else self.name

    def add(
        self,
        fid: str,
        severity: Severity,
        category: Category,
        title: str,
        *,
        evidence: str = "",
        line: int | None = None,
        fix: str = "",
        anchor: str = "",
        source: str | None = None,
        owner: Owner = "config_edit",
        patch: str | None = None,
    ) -> None:
        if patch is not None and patch in self.patch_notes:
            evidence = f"{evidence} {self.patch_notes[patch]}".strip()
        self.findings.append(
            Finding(
                id=fid,
                severity=severity,
                category=category,
                title=title,
                evidence=evidence,
                location=self.loc(line),
                fix=fix,
                reference=REF + anchor if anchor else "",
                source=source,
                owner=owner,
                patch=patch,
            )
        )

    def skip(self, rule: str, val: Val) -> None:
        msg = f"{rule}: {describe_unres(val)}"
        if msg not in self.unchecked:
            self.unchecked.append(msg)


def describe_unres(v: Val) -> str:
    if isinstance(v, Unres):
        return f"`{v.expr}` unresolved ({v.reason}) at line {v.line}"
    return f"`{v.expr}` is not a literal (line {v.line})"


def env_note(v: Val) -> str:
    if v.env_defaulted:
        return f" (default used because {', '.join(v.env_defaulted)} is not set in the planned env)"
    if v.env:
        return f" (from env {', '.join(v.env)})"
    return ""


ANCHORS = {
    "BaseRLTrainerConfig": "baserltrainerconfig",
    "RLColocateTrainerConfig": "rlcolocatetrainerconfig",
    "RLDisaggregatedTrainerConfig": "rldisaggregatedtrainerconfig",
    "WorkerConfig": "workerconfig",
    "RolloutConfig": "rolloutconfig",
    "AgentLoopManagerConfig": "agentloopmanagerconfig",
    "DisaggAgentLoopManagerConfig": "agentloopmanagerconfig",
    "TaskSpecConfig": "taskspecconfig",
    "DisaggTaskSpecConfig": "taskspecconfig",
    "SamplerConfig": "samplerconfig",
    "EvaluatorConfig": "evaluatorconfig",
    "TraceConfig": "traceconfig",
    "SampleParams": "sampleparams",
    "AcceleratorResourcesConfig": "resources",
    "CPUResourcesConfig": "resources",
}


def anchor_for(cls: str) -> str:
    if cls in ANCHORS:
        return ANCHORS[cls]
    if "ProduceStrategy" in cls:
        return "produce-strategies"
    if "ReplayBuffer" in cls:
        return "replay-buffers"
    if "AgentLoop" in cls:
        return "agent-loops"
    if "Judger" in cls or "Verifier" in cls:
        return "judgers"
    if "Advantage" in cls or "Loss" in cls:
        return "advantage-and-loss"
    return "baserltrainerconfig"
