"""Planning from the user's own config: what the plan reads from it, which of its values XTuner's rules or the cluster
force to change (each with its rule), and the effective staleness it runs with.

Values the caller passed explicitly win over the config (each recorded as requested); everything else the config
sets is copied into the request the planner runs on. :class:`ConfigReading` carries, besides the view, why each value
the plan changes has to change; ``config_report`` turns that into the edited config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ..config_analysis.values import Unres
from ..config_analysis.view import ConfigView
from ..core import Finding
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_STALE
from .cluster_fit import DEFAULT_ASK, RaySizing, WorkerAsk
from .config_fields import current_value
from .models import PlanRequest, RolloutPlan, Topology, TrainingPlan, WorkerGroupPlan

SRC_PRODUCER_STALE = "xtuner/v1/rl/agent_loop_manager/producer.py:364"
#: Where a request is the reason for a change.
REQUESTED = "your request"

#: planning key -> request field it sets (keys as config_fields.owner_of reads them)
REQUEST_KEYS = {
    "rollout.tensor_parallel_size": "tensor_parallel_size",
    "rollout.expert_parallel_size": "expert_parallel_size",
    "rollout.gpu_memory_utilization": "gpu_memory_utilization",
    "trainer.sync_weights_interval": "sync_weights_interval",
    "trainer.total_train_steps": "total_train_steps",
    "trainer.train_batch_size": "train_batch_size",
    "trainer.enable_evaluate": "enable_evaluate",
    "trainer.evaluate_step": "evaluate_step",
    "trainer.checkpoint_interval": "checkpoint_interval",
    "trainer.hf_interval": "hf_interval",
    "sampler.prompt_repeat_k": "prompt_repeat_k",
    "worker.pack_max_length": "pack_max_length",
    "worker.sp_size": "sp_size",
}
#: Intervals XTuner disables with -1 or None (xtuner/v1/train/rl_trainer.py:309-310).
DISABLING_INTERVALS = ("trainer.checkpoint_interval", "trainer.hf_interval")
#: Group role -> the trainer keyword holding it.
GROUP_KEYS = {"shared": "resources", "train": "train_resources", "rollout": "rollout_resources"}


class Staleness(BaseModel):
    steps: int = Field(description="How many train steps a sample may lag the trained weights")
    formula: str = Field(description="The arithmetic with the config's values")
    source: str = SRC_STALE


def effective_staleness(ci: ConfigView) -> Staleness | None:
    """(max_staleness + 1) * sync_weights_interval for async strategies (produce_utils.py:97-99, applied at
    producer.py:364); a synchronous strategy lags by at most the sync interval."""
    sync = ci.get("trainer.sync_weights_interval")
    if not isinstance(sync, int) or sync < 1:
        return None
    if ci.strategy_class and "Async" in ci.strategy_class:
        ms = ci.get("strategy.max_staleness")
        if not isinstance(ms, int):
            return None
        return Staleness(
            steps=(ms + 1) * sync,
            formula=f"(max_staleness {ms} + 1) × sync_weights_interval {sync} = {(ms + 1) * sync} "
            f"({ci.line('strategy.max_staleness')}, {ci.line('trainer.sync_weights_interval')})",
        )
    return Staleness(
        steps=sync,
        formula=f"synchronous production: weights sync every {sync} step(s) ({ci.line('trainer.sync_weights_interval')})",
        source="xtuner/v1/rl/agent_loop_manager/producer.py:151",
    )


def config_topology(ci: ConfigView) -> Topology | None:
    if ci.mode == "disaggregated":
        return "disaggregated"
    if ci.mode == "colocated":
        return "colocated_async" if ci.strategy_class and "Async" in ci.strategy_class else "colocated_sync"
    return None


@dataclass
class ConfigReading:
    """The user's config as the plan reads it, and why each value the plan changes must change (key -> (why,
    XTuner source or 'your request'))."""

    view: ConfigView
    env: dict[str, str]
    topology: Topology | None
    reasons: dict[str, tuple[str, str]] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)  # checkpoint/HF intervals the config turns off


def _usable(fname: str, value: Any) -> bool:
    """Whether a config value can size a plan (XTuner itself rejects the others when it builds the trainer)."""
    if fname == "enable_evaluate":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if fname == "gpu_memory_utilization":
        return 0 < value < 1
    return isinstance(value, int) and 1 <= value <= 10_000_000


def _requested(reading: ConfigReading, key: str, fname: str, value: Any) -> None:
    reading.reasons[key] = (f"you passed {fname}={value}", REQUESTED)


def request_updates(
    ci: ConfigView, env: Mapping[str, str], explicit: set[str], current: dict[str, Any]
) -> tuple[dict[str, Any], ConfigReading]:
    """The request fields the config sets (unless passed explicitly), and the reading with the caller's requests.
    ``current``: the request's fields by name (its ``model_dump``); the updates are by name too."""
    reading = ConfigReading(view=ci, env=dict(env), topology=config_topology(ci))
    upd: dict[str, Any] = {}
    if reading.topology is not None and "topology" not in explicit:
        upd["topology"] = reading.topology
    if ci.groups and "accelerator" not in explicit:
        upd["accelerator"] = ci.groups[0].accelerator
    elif ci.groups:
        for g in ci.groups:
            _requested(reading, f"{GROUP_KEYS[g.role]}.accelerator", "accelerator", current["accelerator"])
    for key, fname in REQUEST_KEYS.items():
        ok, value, val = current_value(ci, key)
        if fname in explicit:
            _requested(reading, key, fname, current.get(fname))
        elif not ok:
            if isinstance(val, Unres):
                reading.assumed.append(
                    f"{key}: `{val.expr}` is not resolved statically; the plan assumed {fname}={current.get(fname)}"
                )
        elif key in DISABLING_INTERVALS and (value is None or value == -1):
            reading.disabled.add(key.split(".", 1)[1])
        elif _usable(fname, value):
            upd[fname] = value
        elif value is not None:
            reading.assumed.append(
                f"{key}: {value!r} is not a usable value; the plan assumed {fname}={current.get(fname)}"
            )
    _lengths(ci, explicit, current, upd, reading)
    if ci.mode == "disaggregated" and len(ci.groups) == 2 and "rollout_gpus" not in explicit:
        rg = ci.groups[1].num_workers
        if rg is not None and isinstance(rg.value, int) and rg.value >= 1:
            upd["rollout_gpus"] = rg.value
    return upd, reading


def _lengths(
    ci: ConfigView, explicit: set[str], current: dict[str, Any], upd: dict[str, Any], reading: ConfigReading
) -> None:
    """Prompt and response lengths from the config's context_length and the train task's max_tokens; a length the
    caller passed wins (and changes the config's context_length with it)."""
    for fname, key in (("max_response_len", "sample_params.max_tokens"), ("max_prompt_len", "tokenize.max_length")):
        if fname in explicit:
            _requested(reading, key, fname, current[fname])
            _requested(reading, "rollout.context_length", fname, current[fname])
    ok_ctx, ctx, _ = current_value(ci, "rollout.context_length")
    if not (ok_ctx and isinstance(ctx, int) and ctx > 1):
        return
    ok_tok, max_tokens, _ = current_value(ci, "sample_params.max_tokens")
    response = max_tokens if ok_tok and isinstance(max_tokens, int) and 0 < max_tokens < ctx else None
    prompt = ctx - response if response else min(current["max_prompt_len"], ctx - 1)
    if "max_prompt_len" not in explicit:
        upd["max_prompt_len"] = prompt
    if "max_response_len" not in explicit:
        upd["max_response_len"] = ctx - prompt


def group_workers(ci: ConfigView | None) -> dict[str, int]:
    """Workers per role the config asks for ('shared', 'train', 'rollout'), where literal."""
    out: dict[str, int] = {}
    for g in ci.groups if ci is not None else []:
        if g.num_workers is not None and isinstance(g.num_workers.value, int) and g.num_workers.value >= 1:
            out[g.role] = g.num_workers.value
    return out


def group_asks(ci: ConfigView | None) -> dict[str, WorkerAsk]:
    """Per-worker CPUs, memory and accelerators of each of the config's groups, as written or XTuner's defaults."""
    out: dict[str, WorkerAsk] = {}
    for g in ci.groups if ci is not None else []:
        cpus = g.num_cpus_per_worker.value if g.num_cpus_per_worker else DEFAULT_ASK.cpus
        mem = g.cpu_memory_per_worker.value if g.cpu_memory_per_worker else DEFAULT_ASK.memory
        ok = isinstance(cpus, int | float) and isinstance(mem, int) and cpus > 0 and mem > 0
        out[g.role] = WorkerAsk(float(cpus), int(mem), g.num_accelerators_per_worker) if ok else DEFAULT_ASK
    return out


def strategy_knobs(ci: ConfigView | None) -> tuple[str, dict[str, Any]] | None:
    """The config's produce strategy class and its async knobs (as written or XTuner's defaults)."""
    if ci is None or not ci.strategy_class:
        return None
    knobs = {k.split(".", 1)[1]: g.value for k, g in ci.values.items() if k.startswith("strategy.")}
    return ci.strategy_class, knobs


def _layout_finding(ci: ConfigView, want: int, planned: int, tp: int, ep: int, per_node: int, total: int) -> Finding:
    engine = rr.num_gpus_per_engine(tp, ep)
    kind = "EP" if ep > 1 else "TP"
    g = ci.groups[0].num_workers
    return Finding(
        id="topo.config_layout_rejected",
        severity="blocker",
        category="resource_mismatch_num_workers",
        title=f"Your config fails XTuner's rollout check: num_rollout_workers={want} must be divisible by "
        f"num_gpus_per_engine={engine}",
        evidence=f"XTuner raises at rollout start: num_rollout_workers={want} must be divisible by "
        f"num_gpus_per_engine={engine}. ({kind} {engine}; {want} workers)",
        location=f"{ci.name}:{g.line}" if g is not None and g.line else ci.name,
        fix=rr.engine_layout_fix(want, engine, kind, per_node, limit=total) + f". This plan uses {planned}.",
        reference=f"{CB}#divisibility-rules",
        source=rr.SRC_LMDEPLOY_TP,
        owner="config_edit",
        stage="rollout_start",
    )


def config_findings(
    reading: ConfigReading,
    total: int,
    per_node: int,
    engine: tuple[int, int],
    groups: list[tuple[str, int]],
    sizing: RaySizing,
    accelerator: rr.Accelerator,
) -> list[Finding]:
    """Why the plan's groups differ from the config's (into ``reading.reasons``) and what XTuner would reject."""
    ci = reading.view
    tp, ep = engine
    out: list[Finding] = []
    for g in ci.groups:
        if g.accelerator != accelerator:
            why = f"the cluster's accelerators are {accelerator}s, not {g.accelerator}s"
            reading.reasons.setdefault(f"{GROUP_KEYS[g.role]}.accelerator", (why, rr.SRC_PG_ACCEL))
    planned = dict(groups)
    for role, asked in group_workers(ci).items():
        got = planned.get(role)
        key = f"{GROUP_KEYS[role]}.num_workers"
        if got is None or got == asked:
            continue
        reason: tuple[str, str]
        if role == "shared" and asked <= total and asked % rr.num_gpus_per_engine(tp, ep):
            reason = (
                f"XTuner's rollout divisibility rule: {asked} workers in engines of {rr.num_gpus_per_engine(tp, ep)}",
                rr.SRC_ENGINE_SIZE,
            )
            out.append(_layout_finding(ci, asked, got, tp, ep, per_node, total))
        elif asked > total:
            reason = (f"the cluster has {total} accelerators", rr.SRC_PG_ACCEL)
        else:
            reason = ("to fit the cluster and the engine size", rr.SRC_ENGINE_SIZE)
        reading.reasons.setdefault(key, reason)
    for role, ask in group_asks(ci).items():
        now = sizing.ask(role)
        prefix = GROUP_KEYS[role]
        if now.cpus != ask.cpus:
            why = f"the cluster's Ray CPUs hold {now.cpus:g} per worker, not {ask.cpus:g}"
            reading.reasons.setdefault(f"{prefix}.num_cpus_per_worker", (why, rr.SRC_PG_CPU))
        if now.memory != ask.memory:
            why = f"the cluster's Ray memory holds {now.memory / rr.GIB:g} GiB per worker, not {ask.memory / rr.GIB:g}"
            reading.reasons.setdefault(f"{prefix}.cpu_memory_per_worker", (why, rr.SRC_PG_MEMORY))
    return out


def plan_values(
    p: PlanRequest,
    groups: list[WorkerGroupPlan],
    training: TrainingPlan,
    rollout: RolloutPlan,
    knobs: dict[str, Any],
) -> dict[str, Any]:
    """The value the plan gives each planning key (what a config written from the plan holds)."""
    out: dict[str, Any] = {}
    for g in groups:
        prefix = GROUP_KEYS[g.role]
        out[f"{prefix}.num_workers"] = g.num_workers
        out[f"{prefix}.num_cpus_per_worker"] = g.num_cpus_per_worker
        out[f"{prefix}.cpu_memory_per_worker"] = g.cpu_memory_per_worker_bytes
        out[f"{prefix}.accelerator"] = g.accelerator
    out |= {
        "rollout.tensor_parallel_size": rollout.tensor_parallel_size,
        "rollout.expert_parallel_size": rollout.expert_parallel_size,
        "rollout.gpu_memory_utilization": rollout.gpu_memory_utilization,
        # the lengths before the context that is usually written as their sum
        "sample_params.max_tokens": p.max_response_len,
        "tokenize.max_length": p.max_prompt_len,
        "rollout.context_length": rollout.context_length,
        "trainer.sync_weights_interval": training.sync_weights_interval,
        "trainer.total_train_steps": training.total_train_steps,
        "trainer.train_batch_size": training.train_batch_size,
        "trainer.enable_evaluate": training.enable_evaluate,
        "sampler.prompt_repeat_k": training.prompt_repeat_k,
        "worker.pack_max_length": training.pack_max_length,
        "worker.sp_size": training.sp_size,
    }
    if training.enable_evaluate:
        out["trainer.evaluate_step"] = training.evaluate_step
    for name in ("checkpoint_interval", "hf_interval"):
        if getattr(training, name) is not None:
            out[f"trainer.{name}"] = getattr(training, name)
    out |= {f"strategy.{k}": v for k, v in knobs.items()}
    return out
