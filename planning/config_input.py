"""The user's RL config as planning input: the values a plan must keep (workers, per-worker CPUs and memory,
rollout TP/EP, produce-strategy knobs, intervals), each with its line, read statically (never executed).

The config is evaluated by :mod:`..config_analysis.evaluator` with the planned environment, so values that come
from ``os.environ.get(..., default)`` resolve the way the launch will see them.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config_analysis.evaluator import evaluate
from ..config_analysis.field_values import field_val, lit
from ..config_analysis.values import Obj, Val, elements
from ..core import PathPolicy, ToolInputError, open_guarded
from ..xtuner_rules import resources as rr

MAX_CONFIG_BYTES = 1_000_000
Mode = Literal["colocated", "disaggregated", "unknown"]

SRC_CLI_NUM_WORKERS = "xtuner/v1/train/cli/rl.py:60-61"

#: (dotted name, owner object key, field) of the scalar values a plan keeps.
TRAINER_FIELDS = (
    "sync_weights_interval",
    "total_train_steps",
    "train_batch_size",
    "enable_evaluate",
    "evaluate_step",
    "checkpoint_interval",
    "hf_interval",
)
ROLLOUT_FIELDS = ("tensor_parallel_size", "expert_parallel_size", "gpu_memory_utilization", "context_length")
STRATEGY_FIELDS = ("over_sample_threshold", "enable_partial_rollout", "max_staleness", "tail_batch_trigger_size")


@dataclass(frozen=True)
class Given:
    """One value as the config gives it: literal value, line, and whether it is XTuner's default."""

    value: Any
    line: int | None
    default: bool = False


@dataclass
class GroupInput:
    """One ``AcceleratorResourcesConfig`` of the config (colocated: 'shared'; else 'train' / 'rollout')."""

    role: str
    line: int | None
    num_workers: Given | None = None
    num_cpus_per_worker: Given | None = None
    cpu_memory_per_worker: Given | None = None
    accelerator: str = "GPU"
    num_accelerators_per_worker: float = 1.0
    unresolved: list[str] = field(default_factory=list)


@dataclass
class ConfigInput:
    """What a static read of the config found, for planning and for the launch's Ray need."""

    name: str
    mode: Mode = "unknown"
    trainer_class: str | None = None
    groups: list[GroupInput] = field(default_factory=list)
    pools: list[rr.ExternalCPUPool] = field(default_factory=list)
    values: dict[str, Given] = field(default_factory=dict)
    strategy_class: str | None = None
    strategy_line: int | None = None
    unresolved: list[str] = field(default_factory=list)
    why_not: str = ""

    def get(self, name: str) -> Any:
        g = self.values.get(name)
        return g.value if g is not None else None

    def line(self, name: str) -> str:
        """'file:line' where the value is written, or 'XTuner default' when the config leaves it unset."""
        g = self.values.get(name)
        if g is not None and g.default:
            return "XTuner default"
        return f"{self.name}:{g.line}" if g is not None and g.line else self.name


def read_config_text(path: str, policy: PathPolicy) -> tuple[str, str]:
    """(display name, source) of a .py config inside the allowed roots; ToolInputError when it cannot be read."""
    if os.path.splitext(path)[1] != ".py":
        raise ToolInputError(
            "config_not_python", f"config {path!r} is not a .py file", "Pass the Python RL config the CLI loads."
        )
    real = policy.check(path, kind="file", what="config")
    with open_guarded(policy, real, what="config") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES or b"\x00" in data:
        raise ToolInputError(
            "config_invalid",
            f"config {path!r} is larger than {MAX_CONFIG_BYTES} bytes or not text",
            "Pass the .py file.",
        )
    return real.name, data.decode("utf-8", errors="replace")


def _given(obj: Obj, name: str, out: list[str], label: str) -> Given | None:
    val, origin = field_val(obj, name)
    ok, py = lit(val)
    if not ok:
        out.append(f"{label}: `{val.expr}` is not resolved statically")
        return None
    line = obj.kw_lines.get(name, val.line) if name in obj.kwargs else None
    return Given(py, line, origin == "default")


def _tasks(manager: Val) -> list[Obj]:
    if not isinstance(manager, Obj) or "tasks" not in manager.kwargs:
        return []
    tv = manager.kwargs["tasks"]
    items = elements(tv)
    return [i for i in (items if items is not None else [tv]) if isinstance(i, Obj)]


def _group(role: str, v: Val, unresolved: list[str]) -> GroupInput:
    if not isinstance(v, Obj):
        unresolved.append(f"{role} resources: `{v.expr}` is not an AcceleratorResourcesConfig(...) call")
        return GroupInput(role, v.line, unresolved=["*"])
    g = GroupInput(role, v.line)
    g.num_workers = _given(v, "num_workers", g.unresolved, f"{role}.num_workers")
    g.num_cpus_per_worker = _given(v, "num_cpus_per_worker", g.unresolved, f"{role}.num_cpus_per_worker")
    g.cpu_memory_per_worker = _given(v, "cpu_memory_per_worker", g.unresolved, f"{role}.cpu_memory_per_worker")
    ok, acc = lit(field_val(v, "accelerator")[0])
    g.accelerator = acc if ok and acc in ("GPU", "NPU") else "GPU"
    ok, per = lit(field_val(v, "num_accelerators_per_worker")[0])
    g.num_accelerators_per_worker = float(per) if ok and isinstance(per, int | float) else 1.0
    unresolved += g.unresolved
    return g


def _pools(trainer: Obj) -> list[rr.ExternalCPUPool]:
    """Judger and agent-loop ``cpu_resources`` of every task, as XTuner registers them (plus the controller)."""
    pools = [rr.rollout_controller_pool()]
    for role in ("agent_loop_manager_cfg", "eval_agent_loop_manager_cfg"):
        for task in _tasks(field_val(trainer, role)[0]):
            for key, make in (("agent_loop_config", rr.agent_loop_pool), ("judger_config", rr.judger_pool)):
                comp = task.kwargs.get(key)
                cr = comp.kwargs.get("cpu_resources") if isinstance(comp, Obj) else None
                if not isinstance(comp, Obj) or not isinstance(cr, Obj):
                    continue
                ok_n, n = lit(field_val(cr, "num_workers")[0])
                ok_c, c = lit(field_val(cr, "num_cpus_per_worker")[0])
                ok_m, m = lit(field_val(cr, "cpu_memory_per_worker")[0])
                ok_name, jname = lit(field_val(comp, "judger_name")[0])
                name = str(jname) if key == "judger_config" and ok_name else comp.cls
                kw = {"cpu_memory_per_worker_bytes": int(m)} if ok_m and isinstance(m, int) and m > 0 else {}
                pools.append(
                    make(
                        name,
                        int(n) if ok_n and isinstance(n, int) and n >= 1 else 1,
                        float(c) if ok_c and isinstance(c, int | float) and c > 0 else 1.0,
                        **kw,
                    )
                )
    return rr.unique_pool_names(pools)


def analyse_config(name: str, source: str, env: dict[str, str] | None) -> ConfigInput:
    """Evaluate the config with ``env`` and collect what a plan keeps; ``why_not`` says when nothing could be read."""
    out = ConfigInput(name=name)
    try:
        tree = ast.parse(source, filename=name)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        out.why_not = f"the config does not parse ({type(exc).__name__}); run inspect_config"
        return out
    trainer = evaluate(tree, env, source).scope.get("trainer")
    if not isinstance(trainer, Obj):
        out.why_not = "no module-level `trainer = RL...TrainerConfig(...)` could be resolved; run inspect_config"
        return out
    out.trainer_class = trainer.cls
    out.mode = {"RLColocateTrainerConfig": "colocated", "RLDisaggregatedTrainerConfig": "disaggregated"}.get(
        trainer.cls, "unknown"
    )
    if out.mode == "colocated":
        out.groups = [_group("shared", field_val(trainer, "resources")[0], out.unresolved)]
    elif out.mode == "disaggregated":
        out.groups = [
            _group("train", field_val(trainer, "train_resources")[0], out.unresolved),
            _group("rollout", field_val(trainer, "rollout_resources")[0], out.unresolved),
        ]
    for f in TRAINER_FIELDS:
        _keep(out, f"trainer.{f}", trainer, f)
    rollout = field_val(trainer, "rollout_config")[0]
    if isinstance(rollout, Obj):
        for f in ROLLOUT_FIELDS:
            _keep(out, f"rollout.{f}", rollout, f)
    tasks = _tasks(field_val(trainer, "agent_loop_manager_cfg")[0])
    if tasks:
        sampler = field_val(tasks[0], "sampler_config")[0]
        if isinstance(sampler, Obj):
            _keep(out, "sampler.prompt_repeat_k", sampler, "prompt_repeat_k")
        strategy = field_val(tasks[0], "produce_strategy_config")[0]
        if isinstance(strategy, Obj):
            out.strategy_class, out.strategy_line = strategy.cls, strategy.line
            for f in STRATEGY_FIELDS:
                if f in (strategy.kwargs or {}) or "Async" in strategy.cls:
                    _keep(out, f"strategy.{f}", strategy, f)
    out.pools = _pools(trainer)
    return out


def _keep(out: ConfigInput, name: str, obj: Obj, fname: str) -> None:
    g = _given(obj, fname, out.unresolved, name)
    if g is not None:
        out.values[name] = g


def read_plan_config(path: str, policy: PathPolicy, env: dict[str, str] | None) -> ConfigInput:
    """Read and analyse the config at ``path`` (inside the allowed roots)."""
    name, source = read_config_text(path, policy)
    return analyse_config(name, source, env)
