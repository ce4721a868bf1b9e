"""The rules behind inspect_config: XTuner's validation, applied to a statically evaluated config.

Imported lazily by :mod:`.inspect_config` (keeps server start-up cheap). Every rule cites the XTuner ``path:line`` at
``InternLM/xtuner@b934f46`` it predicts, and quotes the message XTuner would raise or log.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from ..core import Finding, dedupe_findings, sort_findings
from ..xtuner_rules import classes as xc
from .evaluator import Coll, Evaluation, Func, Lit, Obj, Unres, Val, coll_get, elements, evaluate, to_python
from .report import REF, CPUPool, ResourcePool, Setting, TaskInfo

BACKEND_FLAGS = ("XTUNER_USE_SGLANG", "XTUNER_USE_VLLM", "XTUNER_USE_LMDEPLOY")  # precedence order

# XTuner sources cited by the rules (all at b934f46).
SRC_CONFIG_PY = "xtuner/v1/utils/config.py:17-29"
SRC_CLI_BUILD = "xtuner/v1/train/cli/rl.py:62"
SRC_VALIDATOR = "xtuner/v1/train/rl_trainer.py:373-394"
SRC_INTERVALS = "xtuner/v1/train/rl_trainer.py:295-326"
SRC_EVAL_MANAGER = "xtuner/v1/train/rl_trainer.py:720"
SRC_EVALUATOR = "xtuner/v1/train/rl_trainer.py:734"
SRC_BACKEND = "xtuner/v1/rl/rollout/worker.py:457-470"
SRC_CONTEXT_LEN = "xtuner/v1/rl/rollout/worker.py:510-513"
SRC_VLLM = "xtuner/v1/rl/rollout/vllm.py:135-142"
SRC_BATCH_JUDGE = "xtuner/v1/rl/judger/native.py:188-189"
SRC_COMPASS_BATCH = "xtuner/v1/rl/judger/compass_verifier_v2.py:66-67"
SRC_NO_REWARD = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:182-183"
SRC_REWARD_ASSERT = "xtuner/v1/train/rl_trainer.py:1087-1088"
SRC_EVAL_REWARD = "xtuner/v1/rl/evaluator.py:37-40"
SRC_OTELCOL = "xtuner/v1/rl/trace/runtime.py:164-169"
SRC_OTEL_PKG = "xtuner/v1/rl/trace/otel_utils.py:19-29"
SRC_STALENESS = "xtuner/v1/rl/agent_loop_manager/producer.py:356-359"
SRC_TOKEN_STALE = "xtuner/v1/rl/agent_loop_manager/producer.py:243-252"
SRC_STALE_THRESHOLD = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:97-99"
SRC_TRANSPORT = "xtuner/v1/rl/weight_update/data.py:42-54"
SRC_TP_EP = "xtuner/v1/rl/weight_update/data.py:114"
SRC_DISAGG_NCCL = "xtuner/v1/train/rl_trainer.py:1882-1886"
SRC_COLOC_IPC = "xtuner/v1/train/rl_trainer.py:1646-1647"
SRC_TASKS_EMPTY = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:131-132"
SRC_TASKS_DUP = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:136-138"
SRC_TASKS_WEIGHT = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:191-192"
SRC_LOSS_KEYS = "xtuner/v1/rl/loss/loss_fn.py:51-55,66"
SRC_LOSS_TYPE = "xtuner/v1/rl/loss/loss_fn.py:45-47"
SRC_GRPO_STD = "xtuner/v1/rl/advantage/grpo.py:26-29"
SRC_PG_STRATEGY = "xtuner/v1/rl/utils/ray_accelerator_worker.py:82-86"
SRC_DEBUG_ROLLOUT = "xtuner/v1/train/rl_trainer.py:1621"
SRC_DEBUG_TRAIN = "xtuner/v1/train/rl_trainer.py:1637"
SRC_OVER_CONCURRENCY = "xtuner/v1/rl/rollout/worker.py:477-484"


# --------------------------------------------------------------------------------------------------------
# Helpers over evaluated values
# --------------------------------------------------------------------------------------------------------


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


def synth(cls: str, line: int) -> Obj:
    """A class default such as ``SyncReplayBufferConfig()`` that the config did not write."""
    return Obj(line, f"{cls}() (XTuner default)", cls=cls, synthetic=True)


def field_val(obj: Obj, name: str) -> tuple[Val, str]:
    """The value of a field on an object: the keyword given, else XTuner's default. Returns (value, origin)."""
    if name in obj.kwargs:
        v = obj.kwargs[name]
        return v, origin_of(v)
    spec = (xc.fields_of(obj.cls) or {}).get(name)
    if spec is not None and spec.has_literal_default:
        return Lit(obj.line, f"{obj.cls}.{name} default", value=spec.default), "default"
    if spec is not None and spec.default_expr:
        m = re.fullmatch(r"([A-Za-z_]\w*)\(\)", spec.default_expr)
        if m:
            return synth(m.group(1), obj.line), "default"
        return Unres(obj.line, spec.default_expr, reason="non-literal XTuner default"), "default"
    return Unres(obj.line, f"{obj.cls}.{name}", reason="not given and no default"), "unresolved"


def origin_of(v: Val) -> str:
    if isinstance(v, Unres):
        return "unresolved"
    if v.env_defaulted:
        return "env_default"
    if v.env:
        return "env"
    return "literal"


def lit(v: Val) -> tuple[bool, Any]:
    """(True, python value) if the value is literal."""
    if isinstance(v, Lit | Coll):
        try:
            return True, to_python(v)
        except (ValueError, TypeError):
            return False, None
    return False, None


def json_value(v: Val) -> Any:
    ok, py = lit(v)
    if ok:
        return py if isinstance(py, int | float | str | bool | type(None) | list | dict) else repr(py)
    if isinstance(v, Obj):
        return f"{v.cls}(...)"
    if isinstance(v, Func):
        return f"<function {v.name}>"
    return None


def env_note(v: Val) -> str:
    if v.env_defaulted:
        return f" (default used because {', '.join(v.env_defaulted)} is not set in the planned env)"
    if v.env:
        return f" (from env {', '.join(v.env)})"
    return ""


def annotation_classes(type_text: str) -> tuple[list[str], bool]:
    """Config classes named in an annotation, and whether every class-like name in it is a listed class."""
    names = re.findall(r"[A-Za-z_]\w*", type_text)
    ignore = {
        "None",
        "list",
        "dict",
        "tuple",
        "str",
        "int",
        "float",
        "bool",
        "Path",
        "Optional",
        "Union",
        "List",
        "Literal",
        "Any",
        "Dict",
        "Tuple",
    }
    classes = [n for n in names if n not in ignore]
    known = [n for n in classes if xc.get(n) is not None]
    return known, bool(classes) and len(known) == len(classes)


# --------------------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------------------


def check_objects(c: Ctx) -> None:
    """Pydantic-level checks on every class call: unknown kwargs, positional args, required fields, types."""
    for obj in c.ev.objects:
        spec = xc.get(obj.cls)
        fields = xc.fields_of(obj.cls)
        if spec is None or fields is None:
            continue
        cond = " (inside a conditional branch)" if obj.conditional else ""
        sev = "warning" if obj.conditional else "blocker"  # the branch may not run
        if obj.args:
            c.add(
                "config.positional_arguments",
                sev,
                "config_load_error",
                f"{obj.cls}(...) is called with positional arguments{cond}",
                evidence=f"`{obj.expr}` — pydantic models accept keyword arguments only: TypeError: "
                f"BaseModel.__init__() takes 1 positional argument but {len(obj.args) + 1} were given",
                line=obj.line,
                fix="Pass every value by name, e.g. Field=value.",
                anchor=anchor_for(obj.cls),
                source=spec.source,
            )
        if xc.forbids_extra(obj.cls) and not obj.splat:
            for kw in obj.kwargs:
                if kw in fields:
                    continue
                extra_fix = f"Remove `{kw}=`; {obj.cls} fields are: {', '.join(sorted(fields))}."
                if obj.cls == "RolloutConfig" and kw == "backend":
                    extra_fix = (
                        "Remove `backend=`: RolloutConfig has no backend field (its docstring is stale). Select the "
                        "backend with exactly one of XTUNER_USE_LMDEPLOY=1 / XTUNER_USE_SGLANG=1 in the environment "
                        "the Ray cluster is started with."
                    )
                c.add(
                    "config.unknown_field",
                    sev,
                    "config_load_error",
                    f"{obj.cls} has no field `{kw}`{cond}",
                    evidence=f"XTuner raises at config load: 1 validation error for {obj.cls}\n{kw}\n  Extra inputs "
                    f"are not permitted [type=extra_forbidden]",
                    line=obj.kw_lines.get(kw, obj.line),
                    fix=extra_fix,
                    anchor=anchor_for(obj.cls),
                    source=(xc.extra_owner(obj.cls) or spec).source,
                )
        if not obj.splat and not obj.synthetic:
            for fname, f in fields.items():
                if f.required and fname not in obj.kwargs:
                    owner = xc.field_owner(obj.cls, fname) or spec
                    c.add(
                        "config.missing_required_field",
                        sev,
                        "config_load_error",
                        f"{obj.cls}(...) is missing required field `{fname}`{cond}",
                        evidence=f"XTuner raises at config load: 1 validation error for {obj.cls}\n{fname}\n  Field "
                        f"required [type=missing]",
                        line=obj.line,
                        fix=f"Add `{fname}=` ({f.type}).",
                        anchor=anchor_for(obj.cls),
                        source=f"{owner.path}:{f.line}",
                    )
        for kw, val in obj.kwargs.items():
            f = fields.get(kw)
            if f is None:
                continue
            check_field_type(c, obj, kw, f, val)


def check_field_type(c: Ctx, obj: Obj, kw: str, f: xc.F, val: Val) -> None:
    allowed, complete = annotation_classes(f.type)
    if not allowed or not complete:
        return
    candidates = [val]
    if "list[" in f.type:
        candidates = elements(val) or [val]
    for item in candidates:
        if not isinstance(item, Obj) or xc.get(item.cls) is None:
            continue
        if any(xc.is_subclass(item.cls, a) for a in allowed):
            continue
        expected = " | ".join(allowed)
        owner = xc.field_owner(obj.cls, kw) or xc.get(obj.cls)
        c.add(
            "config.class_mismatch",
            "warning" if obj.conditional else "blocker",
            "config_load_error",
            f"{obj.cls}.{kw} gets a {item.cls}, but XTuner expects {expected}",
            evidence=f"XTuner raises at config load: validation error for {obj.cls}\n{kw}\n  Input should be a valid "
            f"dictionary or instance of {allowed[0]} [type=model_type]",
            line=item.line,
            fix=pairing_fix(obj.cls, kw, item.cls),
            anchor="config-type-mismatches",
            source=f"{owner.path}:{f.line}" if owner else None,
        )


def pairing_fix(parent: str, kw: str, got: str) -> str:
    if parent == "RLDisaggregatedTrainerConfig" and kw == "agent_loop_manager_cfg":
        return (
            "A disaggregated trainer needs DisaggAgentLoopManagerConfig(tasks=DisaggTaskSpecConfig(..., "
            "produce_strategy_config=DisaggAsyncProduceStrategyConfig(...))); or switch to RLColocateTrainerConfig."
        )
    if parent == "RLColocateTrainerConfig" and kw == "agent_loop_manager_cfg":
        return "A colocated trainer needs AgentLoopManagerConfig(tasks=TaskSpecConfig(...)); Disagg* classes are for RLDisaggregatedTrainerConfig."
    if parent == "DisaggAgentLoopManagerConfig":
        return "Inside DisaggAgentLoopManagerConfig use DisaggTaskSpecConfig for every task."
    if parent == "AgentLoopManagerConfig":
        return "Inside AgentLoopManagerConfig (colocated, and every eval manager) use TaskSpecConfig."
    if parent == "DisaggTaskSpecConfig" and kw == "produce_strategy_config":
        return (
            "Disaggregated train tasks support only DisaggAsyncProduceStrategyConfig (there is no disaggregated "
            "sync strategy); for on-policy behaviour keep max_staleness=0 and over_sample_threshold=0."
        )
    if parent == "TaskSpecConfig" and kw == "produce_strategy_config":
        return "Colocated tasks use SyncProduceStrategyConfig() or AsyncProduceStrategyConfig(...); Disagg* strategies are for DisaggTaskSpecConfig."
    if kw == "eval_agent_loop_manager_cfg":
        return "Evaluation always uses AgentLoopManagerConfig(tasks=TaskSpecConfig(...)), in both trainer modes."
    return f"Pass an instance of the expected class instead of {got}."


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


def check_trainer_validator(c: Ctx, t: Obj) -> None:
    """BaseRLTrainerConfig._validate_sync_intervals, in XTuner's order (rl_trainer.py:373-394, 295-326)."""
    vals = {
        n: field_val(t, n)[0]
        for n in (
            "debug_rollout",
            "debug_train",
            "debug_rollout_dir",
            "total_train_steps",
            "total_epochs",
            "sync_weights_interval",
            "checkpoint_interval",
            "hf_interval",
            "enable_evaluate",
            "evaluate_step",
        )
    }
    got = {n: lit(v) for n, v in vals.items()}

    def val(n: str) -> Any:
        return got[n][1]

    def known(*names: str, rule: str) -> bool:
        for n in names:
            if not got[n][0]:
                c.skip(rule, vals[n])
                return False
        return True

    def line(n: str) -> int:
        return t.kw_lines.get(n, t.line)

    def bad(
        fid: str,
        title: str,
        msg: str,
        n: str,
        fix: str,
        anchor: str = "interval-validation",
        cat: str = "eval_or_interval_config",
        src: str = SRC_VALIDATOR,
    ) -> None:
        c.add(
            fid,
            "blocker",
            cat,
            title,
            evidence=f"XTuner raises at config load (ValidationError): {msg}" + env_note(vals[n]),
            line=line(n),
            fix=fix,
            anchor=anchor,
            source=src,
        )

    if known("debug_rollout", "debug_train", rule="debug flags"):
        if val("debug_rollout") and val("debug_train"):
            bad(
                "config.debug_flags_conflict",
                "debug_rollout and debug_train are both on",
                "debug_rollout and debug_train cannot be enabled at the same time.",
                "debug_train",
                "Run debug_rollout first (it records rollouts), then a separate run with debug_train.",
                "baserltrainerconfig",
                "debug_trace_output",
                "xtuner/v1/train/rl_trainer.py:375-376",
            )
        if known("debug_rollout_dir", rule="debug_rollout_dir"):
            for flag in ("debug_rollout", "debug_train"):
                if val(flag) and val("debug_rollout_dir") is None:
                    bad(
                        "config.debug_dir_missing",
                        f"{flag}=True without debug_rollout_dir",
                        f"debug_rollout_dir must be provided when {flag}=True.",
                        flag,
                        "Set debug_rollout_dir to a directory (rollouts are saved/replayed there).",
                        "baserltrainerconfig",
                        "debug_trace_output",
                        "xtuner/v1/train/rl_trainer.py:377-380",
                    )
        for flag, src, text in (
            (
                "debug_rollout",
                SRC_DEBUG_ROLLOUT,
                "Debug rollout mode is enabled. Only rollout workers will be started.",
            ),
            (
                "debug_train",
                SRC_DEBUG_TRAIN,
                "Debug train mode is enabled. Only training workers will be started and "
                "rollout weights will not be synchronized.",
            ),
        ):
            if val(flag):
                c.add(
                    f"config.{flag}_on",
                    "warning",
                    "debug_trace_output",
                    f"{flag} is on: this is not a training run",
                    evidence=f"XTuner logs: {text}" + env_note(vals[flag]),
                    line=line(flag),
                    fix=f"Set {flag}=False for a real training run.",
                    anchor="baserltrainerconfig",
                    source=src,
                )
    debug_train = got["debug_train"][1] if got["debug_train"][0] else False
    if known("total_train_steps", "total_epochs", rule="steps/epochs present"):
        if not debug_train and val("total_train_steps") is None and val("total_epochs") is None:
            bad(
                "config.steps_missing",
                "Neither total_train_steps nor total_epochs is set",
                "Either total_train_steps or total_epochs must be provided.",
                "total_train_steps",
                "Set total_train_steps=<n> (or total_epochs=<n>) on the trainer config.",
                "baserltrainerconfig",
                src="xtuner/v1/train/rl_trainer.py:381-382",
            )
        for n, src in (("total_train_steps", "383-384"), ("total_epochs", "385-386")):
            v = val(n)
            if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
                bad(
                    f"config.{n}_not_positive",
                    f"{n}={v} is not positive",
                    f"{n} must be positive, got {v}.",
                    n,
                    f"Set {n} to a positive integer.",
                    "baserltrainerconfig",
                    src=f"xtuner/v1/train/rl_trainer.py:{src}",
                )
    if not known("sync_weights_interval", rule="interval multiples"):
        return
    s = val("sync_weights_interval")
    if not isinstance(s, int) or isinstance(s, bool):
        return
    if s <= 0:
        bad(
            "config.sync_interval_not_positive",
            f"sync_weights_interval={s} is not positive",
            f"sync_weights_interval must be positive, got {s}.",
            "sync_weights_interval",
            "Set sync_weights_interval to 1 or more.",
            src="xtuner/v1/train/rl_trainer.py:302-303",
        )
        return
    for n in ("checkpoint_interval", "hf_interval"):
        if not known(n, rule=f"{n} multiple of sync_weights_interval"):
            continue
        v = val(n)
        if v is None or v == -1 or not isinstance(v, int):
            continue
        if v <= 0:
            bad(
                "config.interval_not_positive",
                f"{n}={v} is neither positive nor -1/None",
                f"{n} must be positive or -1/None to disable it, got {v}.",
                n,
                f"Set {n}=-1 to disable, or a positive multiple of {s}.",
                src="xtuner/v1/train/rl_trainer.py:309-312",
            )
        elif v % s:
            bad(
                "config.interval_not_multiple",
                f"{n}={v} is not a multiple of sync_weights_interval={s}",
                f"{n}={v} must be a multiple of sync_weights_interval={s}, because checkpoint/HF saves only run on "
                "weight-sync steps.",
                n,
                f"Use {n}={max(s, v - v % s)} (a multiple of {s}).",
                src="xtuner/v1/train/rl_trainer.py:313-317",
            )
    if known("enable_evaluate", "evaluate_step", rule="evaluate_step multiple of sync_weights_interval"):
        if val("enable_evaluate"):
            e = val("evaluate_step")
            if e is None or (isinstance(e, int) and e <= 0):
                bad(
                    "config.evaluate_step_not_positive",
                    f"evaluate_step={e} with evaluation enabled",
                    f"evaluate_step must be positive when evaluation is enabled, got {e}.",
                    "evaluate_step",
                    "Set evaluate_step to a positive multiple of sync_weights_interval, or enable_evaluate=False.",
                    src="xtuner/v1/train/rl_trainer.py:319-321",
                )
            elif isinstance(e, int) and e % s:
                origin = "XTuner's default evaluate_step=1" if "evaluate_step" not in t.kwargs else f"evaluate_step={e}"
                bad(
                    "config.evaluate_step_not_multiple",
                    f"{origin} is not a multiple of sync_weights_interval={s}",
                    f"evaluate_step={e} must be a multiple of sync_weights_interval={s}, because evaluation only runs "
                    "on weight-sync steps.",
                    "evaluate_step" if "evaluate_step" in t.kwargs else "sync_weights_interval",
                    f"Set evaluate_step to a multiple of {s} (e.g. {s * max(1, e // s)}), or enable_evaluate=False.",
                    src="xtuner/v1/train/rl_trainer.py:322-326",
                )


def check_evaluation(c: Ctx, t: Obj) -> None:
    """enable_evaluate=True needs an eval manager and an evaluator; the asserts fire only after workers start."""
    ev_val, _ = field_val(t, "enable_evaluate")
    ok, enabled = lit(ev_val)
    if not ok:
        c.skip("evaluation components", ev_val)
        return
    if not enabled:
        return
    default_note = " (enable_evaluate defaults to True)" if "enable_evaluate" not in t.kwargs else env_note(ev_val)
    for fname, fid, src, what in (
        (
            "eval_agent_loop_manager_cfg",
            "config.eval_manager_missing",
            SRC_EVAL_MANAGER,
            "eval_agent_loop_manager_cfg=AgentLoopManagerConfig(tasks=TaskSpecConfig(task_name='eval_task', ...))",
        ),
        ("evaluator_config", "config.evaluator_missing", SRC_EVALUATOR, "evaluator_config=EvaluatorConfig()"),
    ):
        v, _ = field_val(t, fname)
        okv, py = lit(v)
        if isinstance(v, Unres):
            c.skip(f"{fname} present", v)
        elif okv and py is None:
            c.add(
                fid,
                "blocker",
                "eval_or_interval_config",
                f"Evaluation is enabled{default_note} but {fname} is not set",
                evidence=f"XTuner fails with a bare `AssertionError` (no message) at {src.split(':')[0]}:"
                f"{src.split(':')[1]} (`assert cfg.{fname} is not None`) inside trainer build — after the "
                "placement groups, training workers and rollout servers have started.",
                line=t.kw_lines.get(fname, t.line),
                fix=f"Add {what} to the trainer, or set enable_evaluate=False.",
                anchor="evaluatorconfig" if fname == "evaluator_config" else "baserltrainerconfig",
                source=src,
            )


def tasks_of(c: Ctx, manager: Val, role: str) -> list[Obj]:
    if not isinstance(manager, Obj):
        return []
    tv = manager.kwargs.get("tasks")
    if tv is None:
        return []
    items = elements(tv)
    if items is None:
        items = [tv]
        if isinstance(tv, Unres):
            c.skip(f"{role} tasks", tv)
            return []
    src_sfx = "disagg_agent_loop_manager.py" if manager.cls.startswith("Disagg") else "agent_loop_manager.py"
    if not items and isinstance(elements(tv), list):
        c.add(
            "config.tasks_empty",
            "blocker",
            "config_load_error",
            f"{manager.cls}(tasks=[]) has no task",
            evidence=f"XTuner raises at build: {manager.cls} requires at least one task config.",
            line=manager.line,
            fix="Add at least one task spec.",
            anchor="agentloopmanagerconfig",
            source=SRC_TASKS_EMPTY
            if src_sfx == "agent_loop_manager.py"
            else "xtuner/v1/rl/agent_loop_manager/disagg_agent_loop_manager.py:73-74",
        )
    return [i for i in items if isinstance(i, Obj)]


def describe_tasks(c: Ctx, t: Obj, mode: str) -> list[TaskInfo]:
    infos: list[TaskInfo] = []
    train_mgr, _ = field_val(t, "agent_loop_manager_cfg")
    eval_mgr, _ = field_val(t, "eval_agent_loop_manager_cfg")
    evaluator, _ = field_val(t, "evaluator_config")
    custom_metric = isinstance(evaluator, Obj) and not (
        isinstance(field_val(evaluator, "compute_metric_func")[0], Lit)
        and field_val(evaluator, "compute_metric_func")[0].value is None  # type: ignore[union-attr]
    )
    adv, _ = field_val(t, "advantage_estimator_config")
    grpo = isinstance(adv, Obj) and adv.cls == "GRPOAdvantageConfig"
    enabled_ok, eval_enabled = lit(field_val(t, "enable_evaluate")[0])
    for role, mgr in (("train", train_mgr), ("eval", eval_mgr)):
        tasks = tasks_of(c, mgr, role)
        check_task_set(c, mgr, tasks, role)
        for task in tasks:
            infos.append(task_info(c, task, role))
            check_task(
                c,
                task,
                role,
                mode,
                custom_metric=custom_metric,
                grpo=grpo,
                eval_used=(not enabled_ok) or bool(eval_enabled),
            )
    return infos


def check_task_set(c: Ctx, mgr: Val, tasks: list[Obj], role: str) -> None:
    if not isinstance(mgr, Obj) or not tasks:
        return
    names = [lit(field_val(tk, "task_name")[0]) for tk in tasks]
    seen: set[Any] = set()
    for (ok, name), tk in zip(names, tasks, strict=True):
        if ok and name in seen:
            c.add(
                "config.duplicate_task_name",
                "blocker",
                "config_load_error",
                f"Task name {name!r} is used twice in the {role} manager",
                evidence=f"XTuner raises at build: Duplicate task_name found in {mgr.cls}: {name}",
                line=tk.line,
                fix="Give every task a unique task_name.",
                anchor="taskspecconfig",
                source=SRC_TASKS_DUP,
            )
        seen.add(name)
    weights = [lit(field_val(tk, "weight")[0]) for tk in tasks]
    if all(ok for ok, _ in weights) and all(isinstance(w, int | float) and w == 0 for _, w in weights):
        c.add(
            "config.task_weights_zero",
            "blocker",
            "config_load_error",
            f"All {role} task weights are 0",
            evidence=f"XTuner raises at build: At least one task weight must be positive for "
            f"{mgr.cls.replace('Config', '')}.",
            line=mgr.line,
            fix="Give at least one task a weight > 0.",
            anchor="taskspecconfig",
            source=SRC_TASKS_WEIGHT,
        )
    for (ok, w), tk in zip(weights, tasks, strict=True):
        if ok and isinstance(w, int | float) and w < 0:
            c.add(
                "config.task_weight_negative",
                "blocker",
                "config_load_error",
                f"Task weight {w} is negative",
                evidence=f"XTuner raises at config load: 1 validation error for {tk.cls}\nweight\n  Input should be "
                "greater than or equal to 0 [type=greater_than_equal]",
                line=tk.kw_lines.get("weight", tk.line),
                fix="Use a weight >= 0.",
                anchor="taskspecconfig",
                source="xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:82",
            )


def task_info(c: Ctx, task: Obj, role: str) -> TaskInfo:
    loop, _ = field_val(task, "agent_loop_config")
    judger, _ = field_val(task, "judger_config")
    strategy, _ = field_val(task, "produce_strategy_config")
    sampler, _ = field_val(task, "sampler_config")
    rep = None
    paths: list[Any] = []
    if isinstance(sampler, Obj):
        rep = json_value(field_val(sampler, "prompt_repeat_k")[0])
        paths = data_paths(sampler)
    return TaskInfo(
        manager=role,
        task_name=json_value(field_val(task, "task_name")[0]),
        spec_class=task.cls,
        weight=json_value(field_val(task, "weight")[0]),
        agent_loop=loop.cls if isinstance(loop, Obj) else None,
        judger=judger.cls if isinstance(judger, Obj) else (None if isinstance(judger, Lit) else "unresolved"),
        judger_name=json_value(field_val(judger, "judger_name")[0]) if isinstance(judger, Obj) else None,
        produce_strategy=strategy.cls if isinstance(strategy, Obj) else None,
        prompt_repeat_k=rep,
        data_paths=paths,
        location=c.loc(task.line),
    )


def data_paths(sampler: Obj) -> list[Any]:
    out: list[Any] = []
    dl = sampler.kwargs.get("dataloader_cfg")
    if not isinstance(dl, Obj):
        return out
    for entry in elements(dl.kwargs.get("dataset_config_list") or Lit(0, "", value=[])) or []:
        ds = coll_get(entry, "dataset")
        if isinstance(ds, Obj) and "anno_path" in ds.kwargs:
            v = ds.kwargs["anno_path"]
            out.append(json_value(v) if not isinstance(v, Unres) else f"<unresolved: {v.expr}>")
    return out


def check_task(c: Ctx, task: Obj, role: str, mode: str, *, custom_metric: bool, grpo: bool, eval_used: bool) -> None:
    name = json_value(field_val(task, "task_name")[0])
    loop, _ = field_val(task, "agent_loop_config")
    judger, _ = field_val(task, "judger_config")
    self_judging = isinstance(loop, Obj) and loop.cls in xc.SELF_JUDGING_AGENT_LOOPS
    ok, jv = lit(judger)
    if ok and jv is None and not self_judging and (role == "train" or eval_used):
        if role == "train":
            c.add(
                "config.task_missing_judger",
                "blocker",
                "reward_data_missing_ground_truth",
                f"Train task {name!r} has no judger_config: its samples get no reward",
                evidence="XTuner warns `Missing reward score in item (rollout_id: ...) of completed group for task "
                f"{name}. This item will be skipped in reward statistics.` ({SRC_NO_REWARD}) and then training "
                "fails with `AssertionError: Reward is missing or does not contain 'score' key in data: ...` "
                f"({SRC_REWARD_ASSERT}).",
                line=task.line,
                fix="Add judger_config=... to this task (e.g. GSM8KJudgerConfig() for GSM8K data, "
                "DapoMathJudgerConfig(...) for math), or a ComposedJudgerConfig routing by data_source.",
                anchor="judgers",
                source=SRC_REWARD_ASSERT,
            )
        else:
            sev = "warning" if custom_metric else "blocker"
            c.add(
                "config.eval_task_missing_judger",
                sev,
                "eval_or_interval_config",
                f"Eval task {name!r} has no judger_config: its samples get no reward",
                evidence=(
                    "With the default metric XTuner fails with a bare `AssertionError` in _reward_score "
                    f"({SRC_EVAL_REWARD}) at the first evaluation."
                    if not custom_metric
                    else "The custom compute_metric_func will see `reward` = None for these samples."
                ),
                line=task.line,
                fix="Add judger_config=... to the eval task (usually the same judger as training).",
                anchor="judgers",
                source=SRC_EVAL_REWARD,
            )
    if isinstance(loop, Obj) and isinstance(judger, Obj):
        bj_ok, bj = lit(field_val(loop, "enable_batch_judge")[0])
        if bj_ok and bj and judger.cls in xc.NO_BATCH_JUDGERS:
            native = judger.cls in xc.NATIVE_JUDGERS
            msg = (
                "NativeJudger does not support batch_judge."
                if native
                else "CompassVerifierV2 does not support batch_judge."
            )
            c.add(
                "config.batch_judge_unsupported",
                "blocker",
                "config_load_error",
                f"Task {name!r}: enable_batch_judge=True with {judger.cls}, which cannot judge in batches",
                evidence=f"XTuner raises during rollout: NotImplementedError: {msg}",
                line=loop.kw_lines.get("enable_batch_judge", loop.line),
                fix="Remove enable_batch_judge=True (per-sample judging works with every judger).",
                anchor="judgers",
                source=SRC_BATCH_JUDGE if native else SRC_COMPASS_BATCH,
            )
    strategy, _ = field_val(task, "produce_strategy_config")
    if isinstance(strategy, Obj) and role == "train":
        check_strategy(c, strategy, name)
    sampler, _ = field_val(task, "sampler_config")
    if grpo and role == "train" and isinstance(sampler, Obj):
        rk_ok, rk = lit(field_val(sampler, "prompt_repeat_k")[0])
        if rk_ok and isinstance(rk, int) and rk < 2:
            c.add(
                "config.grpo_single_sample_group",
                "warning",
                "config_load_error",
                f"Train task {name!r}: prompt_repeat_k={rk} with GRPO advantages",
                evidence="GRPO normalises each group by its standard deviation (rewards.std() + eps); with one "
                "sample per group the std is NaN, so advantages are NaN or zero (inferred from the code).",
                line=sampler.kw_lines.get("prompt_repeat_k", sampler.line),
                fix="Use prompt_repeat_k >= 2 (the GSM8K examples use 5).",
                anchor="samplerconfig",
                source=SRC_GRPO_STD,
            )


def check_strategy(c: Ctx, s: Obj, task_name: Any) -> None:
    if s.cls not in ("AsyncProduceStrategyConfig", "DisaggAsyncProduceStrategyConfig"):
        return
    src_file = "producer.py" if s.cls.startswith("Async") else "disagg_producer.py"
    vals = {
        n: lit(field_val(s, n)[0])
        for n in ("max_staleness", "max_token_staleness", "tail_batch_trigger_size", "enable_partial_rollout")
    }
    bounds = {"max_staleness": 0, "max_token_staleness": 0, "tail_batch_trigger_size": -1}
    for n, lo in bounds.items():
        ok, v = vals[n]
        if ok and isinstance(v, int) and v < lo:
            c.add(
                "config.strategy_bound",
                "blocker",
                "staleness_or_partial_rollout",
                f"{s.cls}.{n}={v} is below {lo}",
                evidence=f"XTuner raises at config load: 1 validation error for {s.cls}\n{n}\n  Input should be "
                f"greater than or equal to {lo} [type=greater_than_equal]",
                line=s.kw_lines.get(n, s.line),
                fix=f"Use {n} >= {lo}.",
                anchor="produce-strategies",
                source=f"xtuner/v1/rl/agent_loop_manager/{src_file}:{(xc.fields_of(s.cls) or {})[n].line}",
            )
    (ms_ok, ms), (mt_ok, mt) = vals["max_staleness"], vals["max_token_staleness"]
    pr_ok, pr = vals["enable_partial_rollout"]
    tb_ok, tb = vals["tail_batch_trigger_size"]
    if ms_ok and pr_ok and isinstance(ms, int) and ms > 0 and not pr:
        c.add(
            "config.staleness_without_partial_rollout",
            "warning",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: max_staleness={ms} with enable_partial_rollout=False",
            evidence="XTuner warns: max_staleness > 0, enable_partial_rollout is False, this will affect rollout "
            "efficiency because not support tail_batch_max_tries logic now",
            line=s.kw_lines.get("max_staleness", s.line),
            fix="Enable enable_partial_rollout=True with max_staleness > 0, or keep max_staleness=0.",
            anchor="produce-strategies",
            source=SRC_STALENESS
            if src_file == "producer.py"
            else "xtuner/v1/rl/agent_loop_manager/disagg_producer.py:355-358",
        )
    if mt_ok and ms_ok and isinstance(mt, int) and isinstance(ms, int) and mt > ms:
        c.add(
            "config.token_staleness_above_staleness",
            "warning",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: max_token_staleness={mt} > max_staleness={ms}",
            evidence="XTuner warns: max_token_staleness is greater than max_staleness; token-level masking will "
            "not take effect before the group expires.",
            line=s.kw_lines.get("max_token_staleness", s.line),
            fix="Keep max_token_staleness <= max_staleness.",
            anchor="produce-strategies",
            source=SRC_TOKEN_STALE,
        )
    if mt_ok and tb_ok and mt is not None and tb == -1:
        c.add(
            "config.token_staleness_discards",
            "info",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: token-expired groups will be discarded (tail_batch_trigger_size=-1)",
            evidence="XTuner warns: Token-expired groups will be terminally discarded because "
            "tail_batch_trigger_size=-1 disables rerollout.",
            line=s.kw_lines.get("max_token_staleness", s.line),
            fix="Set tail_batch_trigger_size >= 0 to re-roll expired groups.",
            anchor="produce-strategies",
            source=SRC_TOKEN_STALE,
        )


def check_rollout(c: Ctx, r: Obj, mode: str, backend: str | None) -> None:
    cl, _ = field_val(r, "context_length")
    mb, _ = field_val(r, "rollout_max_batch_size_per_instance")
    cl_ok, clv = lit(cl)
    mb_ok, mbv = lit(mb)
    if not cl_ok:
        c.skip("RolloutConfig context_length", cl)
    if not mb_ok:
        c.skip("RolloutConfig rollout_max_batch_size_per_instance", mb)
    if cl_ok and mb_ok and clv is None and mbv is None:
        c.add(
            "config.rollout_context_length_missing",
            "blocker",
            "config_load_error",
            "RolloutConfig has neither context_length nor rollout_max_batch_size_per_instance",
            evidence="XTuner raises at config load: 1 validation error for RolloutConfig — Assertion failed, "
            "context_length must be set if rollout_max_batch_size_per_instance is not provided.",
            line=r.line,
            fix="Set context_length=max_prompt_length + max_response_length on RolloutConfig.",
            anchor="rolloutconfig",
            source=SRC_CONTEXT_LEN,
        )
    tp_ok, tp = lit(field_val(r, "tensor_parallel_size")[0])
    ep_ok, ep = lit(field_val(r, "expert_parallel_size")[0])
    if tp_ok and ep_ok and isinstance(tp, int) and isinstance(ep, int) and tp > 1 and ep > 1:
        c.add(
            "config.rollout_tp_and_ep",
            "blocker",
            "config_load_error",
            f"RolloutConfig sets tensor_parallel_size={tp} and expert_parallel_size={ep}",
            evidence="XTuner fails at the first weight update: AssertionError: Either tensor parallel size or "
            "engine parallel size must be 1.",
            line=r.line,
            fix="Use either TP or EP for rollout, not both.",
            anchor="rolloutconfig",
            source=SRC_TP_EP,
        )
    dp_ok, dp = lit(field_val(r, "data_parallel_size")[0])
    if dp_ok and isinstance(dp, int) and dp != 1:
        c.add(
            "config.vllm_only_field",
            "warning",
            "backend_unsupported",
            f"RolloutConfig.data_parallel_size={dp} is only read by the vLLM backend",
            evidence="data_parallel_size is used only in xtuner/v1/rl/rollout/vllm.py:167-170; LMDeploy and "
            "SGLang ignore it, and vLLM rollout cannot start at this XTuner version (NotImplementedError: vLLM "
            "rollout topology has not been verified after topology refactor.).",
            line=r.kw_lines.get("data_parallel_size", r.line),
            fix="Remove data_parallel_size (keep 1).",
            anchor="rolloutconfig",
            source="xtuner/v1/rl/rollout/vllm.py:167-170",
        )
    oc_ok, oc = lit(field_val(r, "allow_over_concurrency_ratio")[0])
    if oc_ok and oc != 1.2:
        c.add(
            "config.deprecated_over_concurrency",
            "info",
            "config_load_error",
            "RolloutConfig.allow_over_concurrency_ratio is deprecated and ignored",
            evidence="XTuner warns: rollout_config.allow_over_concurrency_ratio is deprecated and no longer controls "
            "runtime rollout concurrency.",
            line=r.kw_lines.get("allow_over_concurrency_ratio", r.line),
            fix="Remove allow_over_concurrency_ratio.",
            anchor="rolloutconfig",
            source=SRC_OVER_CONCURRENCY,
        )
    wt, _ = field_val(r, "weight_transport_type")
    wt_ok, wtv = lit(wt)
    if not wt_ok:
        c.skip("weight transport", wt)
        return
    if isinstance(wtv, str) and wtv.lower() not in ("ipc", "nccl", "checkpoint_engine"):
        c.add(
            "config.weight_transport_invalid",
            "blocker",
            "config_load_error",
            f"weight_transport_type={wtv!r} is not a transport XTuner knows",
            evidence=f"XTuner raises at the first weight update: ValueError: Unsupported weight_transport_type: "
            f"{wtv!r}. Expected 'ipc', 'nccl' or 'checkpoint_engine'.",
            line=r.kw_lines.get("weight_transport_type", r.line),
            fix="Use 'ipc' (colocated), 'nccl' (disaggregated) or leave it unset.",
            anchor="rolloutconfig",
            source=SRC_TRANSPORT,
        )
        return
    if mode == "disaggregated" and wtv != "nccl":
        c.add(
            "config.disagg_transport_forced",
            "info",
            "config_load_error",
            f"Disaggregated mode will use NCCL weight transport (config says {wtv!r})",
            evidence="XTuner logs: Currently, disaggregated mode only support nccl as weight update transport. It "
            "will use NCCL for weight transport.",
            line=r.kw_lines.get("weight_transport_type", r.line),
            fix="Set weight_transport_type='nccl' to make this explicit.",
            anchor="rolloutconfig",
            source=SRC_DISAGG_NCCL,
        )
    if isinstance(wtv, str) and wtv.lower() == "checkpoint_engine" and backend and backend != "sglang":
        c.add(
            "config.checkpoint_engine_backend",
            "blocker",
            "backend_unsupported",
            f"checkpoint_engine weight transport with the {backend} backend",
            evidence="XTuner raises at the first weight update: NotImplementedError: Checkpoint Engine weight "
            f"transport currently only supports sglang, got backend={backend!r}.",
            line=r.kw_lines.get("weight_transport_type", r.line),
            fix="Use weight_transport_type='ipc' for colocated runs, or switch to SGLang.",
            anchor="rolloutconfig",
            source=SRC_TRANSPORT,
        )


def backend_from_env(env: dict[str, str] | None) -> tuple[str | None, list[str]]:
    if env is None:
        return None, []
    on = [f for f in BACKEND_FLAGS if env.get(f, "0") == "1"]
    names = {"XTUNER_USE_SGLANG": "sglang", "XTUNER_USE_VLLM": "vllm", "XTUNER_USE_LMDEPLOY": "lmdeploy"}
    return (names[on[0]] if on else None), on


def check_backend_env(c: Ctx, rollout_objs: list[Obj], backend: str | None, flags_on: list[str]) -> None:
    """RolloutConfig reads XTUNER_USE_* when it is constructed, i.e. while XTuner loads the config file."""
    if c.env is None or not rollout_objs:
        return
    line = rollout_objs[0].line
    if backend is None:
        c.add(
            "config.backend_flag_needed",
            "info",
            "backend_flag_missing_or_multiple",
            "No rollout backend flag in the supplied env: RolloutConfig reads XTUNER_USE_* while the config loads",
            evidence="XTuner raises at config load: 1 validation error for RolloutConfig — Assertion failed, "
            "Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY "
            "to 1.",
            line=line,
            fix="Export exactly one of XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1 before `ray start` and in the "
            'launch shell (value must be exactly "1").',
            anchor="rolloutconfig",
            source=SRC_BACKEND,
            owner="backend_install",
        )
    elif len(flags_on) > 1:
        c.add(
            "config.backend_flags_multiple",
            "warning",
            "backend_flag_missing_or_multiple",
            f"Several backend flags are set ({', '.join(flags_on)}); {backend} wins",
            evidence="RolloutConfig.rollout_backend checks SGLANG, then VLLM, then LMDEPLOY and takes the first "
            "flag equal to '1'.",
            line=line,
            fix="Set only the flag of the backend you installed.",
            anchor="rolloutconfig",
            source=SRC_BACKEND,
            owner="backend_install",
        )
    if backend == "vllm":
        c.add(
            "config.vllm_backend_unsupported",
            "blocker",
            "backend_unsupported",
            "vLLM rollout cannot start at this XTuner version",
            evidence="XTuner raises when rollout workers start: NotImplementedError: vLLM rollout topology has not "
            "been verified after topology refactor.",
            line=line,
            fix="Use XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1 instead.",
            anchor="rolloutconfig",
            source=SRC_VLLM,
            owner="backend_install",
        )


def check_trace(c: Ctx, t: Obj) -> bool | None:
    tr, _ = field_val(t, "trace_config")
    if not isinstance(tr, Obj):
        c.skip("trace", tr)
        return None
    ok, enabled = lit(field_val(tr, "enabled")[0])
    if not ok:
        c.skip("trace", field_val(tr, "enabled")[0])
        return None
    if enabled:
        c.add(
            "config.trace_needs_otel",
            "warning",
            "debug_trace_output",
            "Tracing is enabled: the driver needs an OpenTelemetry Collector binary and the OTel Python packages",
            evidence="Without them XTuner raises at trainer start: RuntimeError: XTuner OTel tracing requires "
            "`otelcol-contrib` or `otelcol` on PATH. Install an official OpenTelemetry Collector binary before "
            f"enabling trace. ({SRC_OTELCOL}); then RuntimeError: XTuner OTel tracing requires the official "
            "OpenTelemetry OTLP gRPC trace exporter. Install `opentelemetry-exporter-otlp-proto-grpc` before "
            f"enabling trace. ({SRC_OTEL_PKG})",
            line=tr.line,
            fix="Install otelcol-contrib (or otelcol) on PATH and `pip install opentelemetry-sdk "
            "opentelemetry-exporter-otlp-proto-grpc`, or set TraceConfig(enabled=False).",
            anchor="traceconfig",
            source=SRC_OTELCOL,
            owner="environment",
        )
        vok, viewer = lit(field_val(tr, "xtuner_viewer_enabled")[0])
        if vok and viewer:
            c.add(
                "config.trace_viewer",
                "warning",
                "debug_trace_output",
                "The trace viewer runs `python -m recipe.trace.viewer.server`: launch from the XTuner repo root",
                evidence="If the viewer process exits early (`recipe` not importable, port busy) XTuner raises "
                "RuntimeError: XTuner trace viewer failed to start: exit_code=... Manual command: ...",
                line=tr.kw_lines.get("xtuner_viewer_enabled", tr.line),
                fix="Run from the XTuner checkout (PYTHONPATH includes it) or set xtuner_viewer_enabled=False.",
                anchor="traceconfig",
                source="xtuner/v1/rl/trace/runtime.py:344-347",
                owner="environment",
            )
    return bool(enabled)


def check_losses(c: Ctx) -> None:
    for obj in c.ev.objects:
        if obj.cls != "GRPOLossConfig" or "policy_loss_cfg" not in obj.kwargs:
            continue
        pl = obj.kwargs["policy_loss_cfg"]
        if not isinstance(pl, Coll | Lit):
            c.skip("policy_loss_cfg keys", pl)
            continue
        lt = coll_get(pl, "loss_type")
        lt_ok, ltv = lit(lt) if lt is not None else (True, "vanilla")
        keys = (
            [k.value for k in (pl.keys or []) if isinstance(k, Lit)] if isinstance(pl, Coll) else list(pl.value or {})
        )
        if lt_ok and ltv == "vanilla":
            missing = [k for k in ("cliprange_low", "cliprange_high") if k not in keys]
            if missing:
                c.add(
                    "config.policy_loss_missing_key",
                    "blocker",
                    "config_load_error",
                    f"policy_loss_cfg lacks {', '.join(missing)} (required by the vanilla policy loss)",
                    evidence=f"XTuner raises at the first train step: ValueError: Missing required key '{missing[0]}' "
                    f"in config. Available keys: {keys}",
                    line=obj.kw_lines.get("policy_loss_cfg", obj.line),
                    fix="Add cliprange_low=0.2, cliprange_high=0.28 to policy_loss_cfg.",
                    anchor="advantage-and-loss",
                    source=SRC_LOSS_KEYS,
                )
        elif lt_ok and isinstance(ltv, str) and "." not in ltv:
            c.add(
                "config.policy_loss_unknown",
                "blocker",
                "config_load_error",
                f"Unknown policy loss type {ltv!r}",
                evidence=f"XTuner raises at the first train step: ValueError: Unsupported loss mode: {ltv}. Supported "
                "modes are: ['vanilla']",
                line=obj.kw_lines.get("policy_loss_cfg", obj.line),
                fix="Use loss_type='vanilla' or a dotted import path to your own loss function.",
                anchor="advantage-and-loss",
                source=SRC_LOSS_TYPE,
            )


def check_dapo_judgers(c: Ctx) -> None:
    """DapoMathJudgerConfig's after-validator (xtuner/v1/rl/judger/dapo_math.py:305-329), run at config load."""
    for obj in c.ev.objects:
        if obj.cls != "DapoMathJudgerConfig" or obj.splat:
            continue
        eos_ok, eos = lit(field_val(obj, "eos_token")[0]) if "eos_token" in obj.kwargs else (False, None)
        if eos_ok and isinstance(eos, str) and not eos.strip():
            c.add(
                "config.dapo_judger_invalid",
                "blocker",
                "config_load_error",
                "DapoMathJudgerConfig.eos_token is empty",
                evidence="XTuner raises at config load: 1 validation error for DapoMathJudgerConfig — Assertion "
                "failed, eos_token string must not be empty",
                line=obj.kw_lines.get("eos_token", obj.line),
                fix="Pass the model's EOS token string (e.g. from the tokenizer).",
                anchor="judgers",
                source="xtuner/v1/rl/judger/dapo_math.py:307-308",
            )
        ob_ok, overlong = (
            lit(field_val(obj, "enable_overlong_buffer")[0])
            if "enable_overlong_buffer" in obj.kwargs
            else (False, None)
        )
        if not (ob_ok and overlong):
            continue
        for i, name in enumerate(("max_response_len", "overlong_buffer_len", "overlong_penalty_factor", "tokenizer")):
            v, _ = field_val(obj, name)
            ok, py = lit(v)
            if ok and py is None:
                c.add(
                    "config.dapo_judger_invalid",
                    "blocker",
                    "config_load_error",
                    f"DapoMathJudgerConfig(enable_overlong_buffer=True) without {name}",
                    evidence=f"XTuner raises at config load: 1 validation error for DapoMathJudgerConfig — "
                    f"Assertion failed, {name} is required.",
                    line=obj.line,
                    fix=f"Pass {name}=... or set enable_overlong_buffer=False.",
                    anchor="judgers",
                    source=f"xtuner/v1/rl/judger/dapo_math.py:{326 + i}",
                )
                break


def check_pg_strategies(c: Ctx) -> None:
    for obj in c.ev.objects:
        if obj.cls not in ("AcceleratorResourcesConfig", "CPUResourcesConfig") or "pg_pack_strategy" not in obj.kwargs:
            continue
        ok, v = lit(obj.kwargs["pg_pack_strategy"])
        if ok and v not in xc.VALID_PG_STRATEGIES:
            src = SRC_PG_STRATEGY if obj.cls.startswith("Accel") else "xtuner/v1/rl/utils/ray_cpu_worker.py:67-71"
            c.add(
                "config.pg_strategy_invalid",
                "blocker",
                "config_load_error",
                f"{obj.cls}.pg_pack_strategy={v!r} is not a Ray placement strategy",
                evidence=f"XTuner raises at config load: Value error, pg_pack_strategy must be one of "
                f"{set(xc.VALID_PG_STRATEGIES)}",
                line=obj.kw_lines.get("pg_pack_strategy", obj.line),
                fix=f"Use one of {', '.join(xc.VALID_PG_STRATEGIES)}.",
                anchor="resources",
                source=src,
            )


def check_env(c: Ctx) -> None:
    if c.env is not None:
        reported: set[str] = set()
        lookups = sorted(c.ev.env_lookups, key=lambda x: x[4])  # unconditional reads first
        for name, line, required, supplied, conditional in lookups:
            if required and not supplied and name not in reported:
                reported.add(name)
                when = " if that branch runs" if conditional else ""
                c.add(
                    "config.env_var_missing",
                    "warning" if conditional else "blocker",
                    "missing_env_var_or_path",
                    f"The config requires env var {name}, which the planned env does not set",
                    evidence=f"`os.environ[{name!r}]` at line {line}: XTuner's Config.fromfile executes the file, "
                    f"so loading fails with KeyError: '{name}'{when}.",
                    line=line,
                    fix=f"Export {name}=... in the launch environment (before `ray start` when workers need it).",
                    anchor="baserltrainerconfig",
                    source=SRC_CONFIG_PY,
                    owner="environment",
                )
    for line, expr, err in c.ev.invalid_casts:
        c.add(
            "config.invalid_value_cast",
            "blocker",
            "config_load_error",
            f"`{expr}` fails while the config loads",
            evidence=f"{err} (line {line}); Config.fromfile executes the file.",
            line=line,
            fix="Fix the value (often an env var holding a non-number).",
            anchor="baserltrainerconfig",
            source=SRC_CONFIG_PY,
            owner="environment",
        )


# --------------------------------------------------------------------------------------------------------
# Settings, resources
# --------------------------------------------------------------------------------------------------------


def add_setting(c: Ctx, name: str, obj: Obj, fname: str, *, effective: Any = None) -> None:
    v, origin = field_val(obj, fname)
    line = obj.kw_lines.get(fname, v.line if fname in obj.kwargs else obj.line)
    value = json_value(v)
    if origin == "default" and effective is not None:
        value = effective
    c.settings.append(
        Setting(
            name=name,
            value=value,
            origin=origin,
            expression=v.expr if fname in obj.kwargs else None,
            reason=v.reason if isinstance(v, Unres) else None,
            env_vars=list(v.env),
            location=c.loc(line),
        )
    )


def collect_settings(c: Ctx, t: Obj, mode: str) -> None:
    for f in (
        "total_train_steps",
        "total_epochs",
        "train_batch_size",
        "sync_weights_interval",
        "enable_evaluate",
        "enable_initial_evaluate",
        "evaluate_step",
        "checkpoint_interval",
        "hf_interval",
        "debug_rollout",
        "debug_train",
        "debug_rollout_dir",
        "work_dir",
        "load_from",
        "tokenizer_path",
        "seed",
        "auto_resume",
    ):
        add_setting(c, f"trainer.{f}", t, f)
    rb, _ = field_val(t, "replay_buffer_config")
    c.settings.append(
        Setting(
            name="trainer.replay_buffer_config",
            value=json_value(rb),
            origin=origin_of(rb) if "replay_buffer_config" in t.kwargs else "default",
            location=c.loc(rb.line),
        )
    )
    r, _ = field_val(t, "rollout_config")
    if isinstance(r, Obj):
        for f in (
            "tensor_parallel_size",
            "expert_parallel_size",
            "context_length",
            "rollout_max_batch_size_per_instance",
            "gpu_memory_utilization",
            "dtype",
            "enable_return_routed_experts",
        ):
            add_setting(c, f"rollout.{f}", r, f)
        add_setting(
            c,
            "rollout.weight_transport_type",
            r,
            "weight_transport_type",
            effective="ipc" if mode == "colocated" else "nccl" if mode == "disaggregated" else None,
        )
    w, _ = field_val(t, "train_worker_cfg")
    if isinstance(w, Obj):
        for f in ("optimizer_steps", "sp_size", "pack_max_length"):
            add_setting(c, f"train_worker.{f}", w, f)


def resource_pool(c: Ctx, role: str, v: Val) -> ResourcePool:
    if not isinstance(v, Obj):
        return ResourcePool(role=role, unresolved=["*"], location=c.loc(v.line))
    out = ResourcePool(role=role, location=c.loc(v.line))
    for f, attr in (
        ("accelerator", "accelerator"),
        ("num_workers", "num_workers"),
        ("num_accelerators_per_worker", "num_accelerators_per_worker"),
        ("num_cpus_per_worker", "num_cpus_per_worker"),
        ("cpu_memory_per_worker", "cpu_memory_per_worker_bytes"),
    ):
        val, _ = field_val(v, f)
        ok, py = lit(val)
        if ok:
            setattr(out, attr, py)
        else:
            out.unresolved.append(f"{f}: {val.expr}")
    return out


def collect_resources(c: Ctx, t: Obj, mode: str) -> tuple[list[ResourcePool], list[CPUPool]]:
    pools: list[ResourcePool] = []
    if mode == "colocated":
        pools.append(resource_pool(c, "shared", field_val(t, "resources")[0]))
    elif mode == "disaggregated":
        pools.append(resource_pool(c, "train", field_val(t, "train_resources")[0]))
        pools.append(resource_pool(c, "rollout", field_val(t, "rollout_resources")[0]))
    cpu: list[CPUPool] = []
    for role in ("agent_loop_manager_cfg", "eval_agent_loop_manager_cfg"):
        for task in tasks_of(Ctx(c.path, c.ev, c.env), field_val(t, role)[0], role):
            tname = json_value(field_val(task, "task_name")[0])
            loop, _ = field_val(task, "agent_loop_config")
            judger, _ = field_val(task, "judger_config")
            comps: list[tuple[str, Val]] = [(f"agent_loop:{loop.cls}", loop)] if isinstance(loop, Obj) else []
            judgers = [judger]
            if isinstance(judger, Obj) and judger.cls == "ComposedJudgerConfig":
                branches = judger.kwargs.get("branches")
                judgers = list(branches.items) if isinstance(branches, Coll) else []
            for j in judgers:
                if isinstance(j, Obj):
                    comps.append((f"judger:{json_value(field_val(j, 'judger_name')[0])}", j))
            for label, comp in comps:
                cr = comp.kwargs.get("cpu_resources") if isinstance(comp, Obj) else None
                if not isinstance(cr, Obj):
                    continue
                # XTuner registers one pool per build, under a unique name (ray_cpu_worker.py:373-375)
                cpu.append(
                    CPUPool(
                        owner=f"{label} (task {tname})",
                        num_workers=json_value(field_val(cr, "num_workers")[0]),
                        num_cpus_per_worker=json_value(field_val(cr, "num_cpus_per_worker")[0]),
                        cpu_memory_per_worker_bytes=json_value(field_val(cr, "cpu_memory_per_worker")[0]),
                        location=c.loc(cr.line),
                    )
                )
    return pools, cpu


# --------------------------------------------------------------------------------------------------------
# Entry
def analyse(path: str, source: str, env: dict[str, str] | None) -> dict[str, Any]:
    """Analyse config source text; returns the pieces of a Result (used by preflight too)."""
    name = path.rsplit("/", 1)[-1]
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        f = Finding(
            id="config.syntax_error",
            severity="blocker",
            category="config_load_error",
            title=f"The config is not valid Python: {exc.msg}",
            evidence=f"line {exc.lineno}: {(exc.text or '').strip()[:200]}",
            location=f"{name}:{exc.lineno}",
            fix="Fix the syntax error; XTuner executes the file to load it.",
            reference=REF + "baserltrainerconfig",
            source=SRC_CONFIG_PY,
            owner="config_edit",
        )
        return {"findings": [f], "trainer_found": False, "mode": "unknown"}
    except (RecursionError, MemoryError, ValueError) as exc:
        f = Finding(
            id="config.syntax_error",
            severity="blocker",
            category="config_load_error",
            title="The config cannot be parsed",
            evidence=f"{type(exc).__name__}: {str(exc)[:200]}",
            location=name,
            fix="Simplify the file; XTuner executes it to load it.",
            reference=REF + "baserltrainerconfig",
            source=SRC_CONFIG_PY,
            owner="config_edit",
        )
        return {"findings": [f], "trainer_found": False, "mode": "unknown"}
    ev = evaluate(tree, env, source)
    c = Ctx(path, ev, env)
    check_env(c)
    check_objects(c)
    check_losses(c)
    check_pg_strategies(c)
    check_dapo_judgers(c)
    backend, flags_on = backend_from_env(env)
    check_backend_env(c, [o for o in ev.objects if o.cls == "RolloutConfig"], backend, flags_on)
    out: dict[str, Any] = {"backend": backend, "env_reads": ev.env_reads}
    trainer = ev.scope.get("trainer")
    out["trainer_found"] = trainer is not None
    if trainer is None:
        c.add(
            "config.missing_trainer",
            "blocker",
            "config_load_error",
            "The config defines no module-level variable named `trainer`",
            evidence="The RL CLI loads the file with Config.fromfile and calls cfg.trainer.build(); a missing key "
            "is an empty addict Config, so the run fails with TypeError: 'Config' object is not callable.",
            line=None,
            fix="Assign the trainer config to a module-level variable named exactly `trainer`, e.g. "
            "`trainer = RLColocateTrainerConfig(...)`.",
            anchor="baserltrainerconfig",
            source=f"{SRC_CLI_BUILD}; {SRC_CONFIG_PY}",
        )
        out["mode"] = "unknown"
    elif not isinstance(trainer, Obj):
        if isinstance(trainer, Lit | Coll):
            c.add(
                "config.trainer_not_config",
                "blocker",
                "config_load_error",
                "`trainer` is a plain value, not a trainer config object",
                evidence=f"`trainer = {trainer.expr}`: addict turns it into a Config, so cfg.trainer.build() fails "
                "with TypeError: 'Config' object is not callable.",
                line=ev.bound_at.get("trainer"),
                fix="Use `trainer = RLColocateTrainerConfig(...)` (or RLDisaggregatedTrainerConfig).",
                anchor="baserltrainerconfig",
                source=SRC_CLI_BUILD,
            )
        else:
            c.add(
                "config.trainer_unresolved",
                "warning",
                "config_load_error",
                "`trainer` cannot be resolved statically, so the trainer checks were skipped",
                evidence=describe_unres(trainer),
                line=ev.bound_at.get("trainer"),
                fix="Assign `trainer = RLColocateTrainerConfig(...)` unconditionally at module level.",
                anchor="baserltrainerconfig",
                source=SRC_CLI_BUILD,
            )
        out["mode"] = "unknown"
    else:
        out["trainer_class"] = trainer.cls
        mode = {xc.COLOCATED_TRAINER: "colocated", xc.DISAGGREGATED_TRAINER: "disaggregated"}.get(
            trainer.cls, "unknown"
        )
        out["mode"] = mode
        if mode == "unknown":
            c.add(
                "config.trainer_class_unknown",
                "warning",
                "config_load_error",
                f"`trainer` is a {trainer.cls}, not an RL trainer config",
                evidence="The RL CLI expects RLColocateTrainerConfig or RLDisaggregatedTrainerConfig.",
                line=trainer.line,
                fix="Use RLColocateTrainerConfig or RLDisaggregatedTrainerConfig.",
                anchor="baserltrainerconfig",
                source=SRC_CLI_BUILD,
            )
        else:
            check_trainer_validator(c, trainer)
            check_evaluation(c, trainer)
            r, _ = field_val(trainer, "rollout_config")
            if isinstance(r, Obj):
                check_rollout(c, r, mode, backend)
            out["tasks"] = describe_tasks(c, trainer, mode)
            out["trace_enabled"] = check_trace(c, trainer)
            collect_settings(c, trainer, mode)
            out["resources"], out["cpu_pools"] = collect_resources(c, trainer, mode)
    out["findings"] = sort_findings(dedupe_findings(c.findings))
    out["settings"] = c.settings
    out["unchecked"] = c.unchecked
    return out
