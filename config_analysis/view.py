"""One reading of an RL config: parsed once, evaluated once with the planned environment, and every fact the tools
use taken from that one evaluation — the trainer and its kind, the env reads, the values a plan keeps with their
lines, the accelerator groups and CPU pools, and what they ask of Ray.

:func:`read_view` is the one reader of a config file (guarded open, size cap, never executed); every consumer —
the rules of ``inspect_config``, planning, the launch plan, the cluster fit, ``preflight`` (which reads once and
passes the view on) — takes the :class:`ConfigView` it returns.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict

from ..core import PathPolicy, ToolInputError, read_text_input
from ..xtuner_rules import classes as xc
from ..xtuner_rules import resources as rr
from ..xtuner_rules.ray_need import RayNeed, ray_need
from .env_reads import EnvRead
from .evaluator import Evaluation, evaluate
from .field_values import field_val, lit
from .trainer_facts import TrainerFacts, trainer_facts
from .values import Obj, Val, elements

MAX_CONFIG_BYTES = 1 << 20
Mode = Literal["colocated", "disaggregated", "unknown"]

#: XTuner loads the config with Config.fromfile, which executes it; the suffix decides (xtuner/v1/utils/config.py:17).
SRC_CONFIG_PY = "xtuner/v1/utils/config.py:17-29"
#: For a colocated run the CLI's --num-workers replaces resources.num_workers (xtuner/v1/train/cli/rl.py:60-61).
SRC_CLI_NUM_WORKERS = "xtuner/v1/train/cli/rl.py:60-61"

#: The scalar values a plan keeps, by owner: trainer, rollout, sampler and produce strategy fields.
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

    value: Any  # the literal as the config computes it (any type; consumers check it)
    line: int | None
    default: bool = False


@dataclass(frozen=True)
class SyntaxProblem:
    """Why the file is not valid Python: the line, the parser's message and the offending source line."""

    line: int | None
    message: str
    text: str = ""

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class GroupInput:
    """One ``AcceleratorResourcesConfig`` of the config (colocated: 'shared'; else 'train' / 'rollout')."""

    role: str
    line: int | None
    num_workers: Given | None = None
    num_cpus_per_worker: Given | None = None
    cpu_memory_per_worker: Given | None = None
    accelerator: rr.Accelerator = "GPU"
    num_accelerators_per_worker: float = 1.0
    unresolved: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigView:
    """Everything a static read of one config found; immutable, built once by :func:`read_view`."""

    name: str  # file name, used in locations ("rl.py:12")
    path: str | None = None  # resolved path (None for text given directly)
    source: str = ""
    env: Mapping[str, str] | None = None  # the planned env the values were evaluated with (None: unresolved)
    env_unknown: frozenset[str] = frozenset()  # set at launch to values not known statically (launch env file)
    read: bool = True  # False: the file could not be read at all (see unread_reason)
    unread_reason: str = ""
    syntax: SyntaxProblem | None = None  # when the file is not valid Python
    tree: ast.Module | None = None
    evaluation: Evaluation | None = None
    facts: TrainerFacts = field(default_factory=TrainerFacts)
    trainer: Val | None = None
    trainer_class: str | None = None
    mode: Mode = "unknown"
    plan_why_not: str = ""  # why no value could be read for planning (no resolvable trainer)
    groups: tuple[GroupInput, ...] = ()
    pools: tuple[rr.ExternalCPUPool, ...] = ()
    values: Mapping[str, Given] = field(default_factory=dict)
    strategy_class: str | None = None
    strategy_line: int | None = None
    unresolved: tuple[str, ...] = ()

    @property
    def syntax_error(self) -> str | None:
        """'line N: message' when the file is not valid Python."""
        return str(self.syntax) if self.syntax is not None else None

    @property
    def env_reads(self) -> list[EnvRead]:
        return self.evaluation.env_reads if self.evaluation is not None else []

    def get(self, name: str) -> Any:
        g = self.values.get(name)
        return g.value if g is not None else None

    def line(self, name: str) -> str:
        """'file:line' where the value is written, or 'XTuner default' when the config leaves it unset."""
        g = self.values.get(name)
        if g is not None and g.default:
            return "XTuner default"
        return f"{self.name}:{g.line}" if g is not None and g.line else self.name

    # ---- what the config asks of Ray --------------------------------------------------------------------------

    def ray_requirements(self, passed_workers: int | None = None) -> tuple[rr.RayRequirements | None, str]:
        """XTuner's placement-group and pool requirements, each group with its own per-worker CPUs and memory;
        (None, why) when a value is unresolved. ``passed_workers``: the CLI's --num-workers (colocated only)."""
        if not self.groups:
            return None, self.plan_why_not or self.unread_reason or "the config's resources could not be read"
        bad = [
            u for g in self.groups for u in g.unresolved if not (passed_workers and u.startswith("shared.num_workers"))
        ]
        if bad:
            return None, "; ".join(bad)[:400]
        pgs = []
        for g in self.groups:
            workers = (
                passed_workers if (g.role == "shared" and passed_workers) else (g.num_workers and g.num_workers.value)
            )
            if not isinstance(workers, int) or workers < 1:
                return None, f"{g.role}.num_workers is not a positive integer"
            cpw = g.num_cpus_per_worker.value if g.num_cpus_per_worker else rr.DEFAULT_NUM_CPUS_PER_WORKER
            mem = g.cpu_memory_per_worker.value if g.cpu_memory_per_worker else rr.DEFAULT_CPU_MEMORY_PER_WORKER_BYTES
            pgs.append(
                rr.accelerator_pg_requirements(
                    workers,
                    float(cpw),
                    int(mem),
                    accelerator=g.accelerator,
                    num_accelerators_per_worker=g.num_accelerators_per_worker,
                    name="train" if g.role == "shared" else g.role,
                )
            )
        return rr.ray_requirements(pgs, self.pools), ""

    def ray_need(self, passed_workers: int | None, nodes: int, accelerators_per_node: int) -> RayNeed:
        """What Ray must offer for this config and launch shape: the one answer every tool gives."""
        req, why = self.ray_requirements(passed_workers)
        if req is None:
            return RayNeed(known=False, why_unknown=why)
        where = {g.role if g.role != "shared" else "train": self._group_lines(g) for g in self.groups}
        return ray_need(req, nodes, accelerators_per_node, where=where)

    def _group_lines(self, g: GroupInput) -> str:
        lines = [x.line for x in (g.num_workers, g.num_cpus_per_worker, g.cpu_memory_per_worker) if x and x.line]
        return f"{self.name}:{','.join(map(str, lines))}" if lines else ""


# --------------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------------


def read_source(raw: str, paths: PathPolicy, what: str = "config") -> tuple[str, str]:
    """(resolved path, text) of a config file: guarded open, at most 1 MiB, no NUL bytes (not Python source)."""
    return read_text_input(
        paths, raw, what=what, code="config", limit=MAX_CONFIG_BYTES, fix="Pass the RL config .py file."
    )


def read_view(
    raw: str,
    paths: PathPolicy,
    env: Mapping[str, str] | None,
    classes: dict[str, xc.C] | None = None,
    env_unknown: frozenset[str] = frozenset(),
) -> ConfigView:
    """The one reader of a config file: read it (inside the roots, capped), parse and evaluate it once with ``env``
    against the class table ``classes`` (None: b934f46's); ``env_unknown``: names the launch sets to values not
    known statically. A file that is not ``.py`` or cannot be read raises :class:`ToolInputError`."""
    if os.path.splitext(raw)[1] != ".py":
        raise ToolInputError(
            "config_not_python", f"config {raw!r} is not a .py file", "Pass the Python RL config the CLI loads."
        )
    real, text = read_source(raw, paths)
    return view_of_source(real.rsplit("/", 1)[-1], text, env, classes, path=real, env_unknown=env_unknown)


def unread_view(raw: str, why: str) -> ConfigView:
    """A view of a config that could not be read: consumers report ``why`` instead of its contents."""
    return ConfigView(name=raw.rsplit("/", 1)[-1], read=False, unread_reason=why, plan_why_not=why)


def view_of_source(
    name: str,
    source: str,
    env: Mapping[str, str] | None,
    classes: dict[str, xc.C] | None = None,
    path: str | None = None,
    env_unknown: frozenset[str] = frozenset(),
) -> ConfigView:
    """Parse and evaluate config text once and take every fact from that one evaluation."""
    env_copy = dict(env) if env is not None else None
    base = ConfigView(name=name, path=path, source=source, env=env_copy, env_unknown=env_unknown)
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        why = "the config does not parse (SyntaxError); run inspect_config"
        problem = SyntaxProblem(exc.lineno, exc.msg, (exc.text or "").strip()[:200])
        return replace(base, syntax=problem, plan_why_not=why)
    except (ValueError, RecursionError, MemoryError) as exc:
        why = f"config could not be parsed ({type(exc).__name__})"
        return replace(base, read=False, unread_reason=why, plan_why_not=why)
    with xc.use_table(classes):
        ev = evaluate(tree, env_copy, source, env_unknown)
        facts = trainer_facts(tree, source, ev.env_reads)
        trainer = ev.scope.get("trainer")
        if not isinstance(trainer, Obj):
            why = "no module-level `trainer = RL...TrainerConfig(...)` could be resolved; run inspect_config"
            return replace(base, tree=tree, evaluation=ev, facts=facts, trainer=trainer, plan_why_not=why)
        return replace(base, tree=tree, evaluation=ev, facts=facts, trainer=trainer, **_plan_fields(trainer))


# --------------------------------------------------------------------------------------------------------
# The values a plan keeps, read from the evaluated trainer
# --------------------------------------------------------------------------------------------------------


def _given(obj: Obj, name: str, out: list[str], label: str) -> Given | None:
    val, origin = field_val(obj, name)
    ok, py = lit(val)
    if not ok:
        out.append(f"{label}: `{val.expr}` is not resolved statically")
        return None
    line = obj.kw_lines.get(name, val.line) if name in obj.kwargs else None
    return Given(py, line, origin == "default")


def tasks_of(manager: Val) -> list[Obj]:
    """The task configs of an agent-loop manager (a list, or a single task)."""
    if not isinstance(manager, Obj) or "tasks" not in manager.kwargs:
        return []
    tv = manager.kwargs["tasks"]
    items = elements(tv)
    return [i for i in (items if items is not None else [tv]) if isinstance(i, Obj)]


def _group(role: str, v: Val, unresolved: list[str]) -> GroupInput:
    if not isinstance(v, Obj):
        unresolved.append(f"{role} resources: `{v.expr}` is not an AcceleratorResourcesConfig(...) call")
        return GroupInput(role, v.line, unresolved=("*",))
    own: list[str] = []
    workers = _given(v, "num_workers", own, f"{role}.num_workers")
    cpus = _given(v, "num_cpus_per_worker", own, f"{role}.num_cpus_per_worker")
    memory = _given(v, "cpu_memory_per_worker", own, f"{role}.cpu_memory_per_worker")
    ok, acc = lit(field_val(v, "accelerator")[0])
    ok_per, per = lit(field_val(v, "num_accelerators_per_worker")[0])
    unresolved += own
    return GroupInput(
        role,
        v.line,
        workers,
        cpus,
        memory,
        acc if ok and acc in ("GPU", "NPU") else "GPU",
        float(per) if ok_per and isinstance(per, int | float) else 1.0,
        tuple(own),
    )


def _pools(trainer: Obj) -> tuple[rr.ExternalCPUPool, ...]:
    """Judger and agent-loop ``cpu_resources`` of every task, as XTuner registers them (plus the controller)."""
    pools = [rr.rollout_controller_pool()]
    for role in ("agent_loop_manager_cfg", "eval_agent_loop_manager_cfg"):
        for task in tasks_of(field_val(trainer, role)[0]):
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
    return tuple(rr.unique_pool_names(pools))


class _PlanFields(TypedDict, total=False):
    """The ConfigView fields read from a resolved trainer."""

    trainer_class: str
    mode: Mode
    groups: tuple[GroupInput, ...]
    pools: tuple[rr.ExternalCPUPool, ...]
    values: Mapping[str, Given]
    strategy_class: str
    strategy_line: int
    unresolved: tuple[str, ...]


_TRAINER_MODES: dict[str, Mode] = {xc.COLOCATED_TRAINER: "colocated", xc.DISAGGREGATED_TRAINER: "disaggregated"}


def _plan_fields(trainer: Obj) -> _PlanFields:
    """Mode, groups, pools and the kept values of a resolved trainer (runs inside the caller's class table)."""
    unresolved: list[str] = []
    values: dict[str, Given] = {}
    out: _PlanFields = {"trainer_class": trainer.cls}
    mode = _TRAINER_MODES.get(trainer.cls, "unknown")
    groups: list[GroupInput] = []
    if mode == "colocated":
        groups = [_group("shared", field_val(trainer, "resources")[0], unresolved)]
    elif mode == "disaggregated":
        groups = [
            _group("train", field_val(trainer, "train_resources")[0], unresolved),
            _group("rollout", field_val(trainer, "rollout_resources")[0], unresolved),
        ]

    def keep(key: str, obj: Obj, fname: str) -> None:
        g = _given(obj, fname, unresolved, key)
        if g is not None:
            values[key] = g

    for f in TRAINER_FIELDS:
        keep(f"trainer.{f}", trainer, f)
    rollout = field_val(trainer, "rollout_config")[0]
    if isinstance(rollout, Obj):
        for f in ROLLOUT_FIELDS:
            keep(f"rollout.{f}", rollout, f)
    tasks = tasks_of(field_val(trainer, "agent_loop_manager_cfg")[0])
    if tasks:
        sampler = field_val(tasks[0], "sampler_config")[0]
        if isinstance(sampler, Obj):
            keep("sampler.prompt_repeat_k", sampler, "prompt_repeat_k")
        strategy = field_val(tasks[0], "produce_strategy_config")[0]
        if isinstance(strategy, Obj):
            out["strategy_class"], out["strategy_line"] = strategy.cls, strategy.line
            for f in STRATEGY_FIELDS:
                if f in (strategy.kwargs or {}) or "Async" in strategy.cls:
                    keep(f"strategy.{f}", strategy, f)
    out.update(
        {
            "mode": mode,
            "groups": tuple(groups),
            "pools": _pools(trainer),
            "values": values,
            "unresolved": tuple(unresolved),
        }
    )
    return out
