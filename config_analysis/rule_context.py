"""What the rules of one analysis share: the finding collector, unchecked-rule notes and API-reference anchors."""

from __future__ import annotations

from ..core import Finding
from .evaluator import Evaluation
from .report import REF, Setting
from .values import Unres, Val

#: XTuner loads the config with Config.fromfile, which executes the file (cited at InternLM/xtuner@b934f46).
SRC_CONFIG_PY = "xtuner/v1/utils/config.py:17-29"


class Ctx:
    """State shared by the rules of one analysis."""

    def __init__(self, path: str, ev: Evaluation, env: dict[str, str] | None) -> None:
        self.path = path
        self.name = path.rsplit("/", 1)[-1]
        self.ev = ev
        self.env = env
        self.findings: list[Finding] = []
        self.unchecked: list[str] = []
        self.settings: list[Setting] = []

    def loc(self, line: int | None) -> str | None:
        return f"{self.name}:{line}" if line else self.name

    def add(
        self,
        fid: str,
        severity: str,
        category: str,
        title: str,
        *,
        evidence: str = "",
        line: int | None = None,
        fix: str = "",
        anchor: str = "",
        source: str | None = None,
        owner: str = "config_edit",
    ) -> None:
        self.findings.append(
            Finding(
                id=fid,
                severity=severity,  # type: ignore[arg-type]
                category=category,  # type: ignore[arg-type]
                title=title,
                evidence=evidence,
                location=self.loc(line),
                fix=fix,
                reference=REF + anchor if anchor else "",
                source=source,
                owner=owner,  # type: ignore[arg-type]
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
