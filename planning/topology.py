"""The topology decision (colocated sync/async or disaggregated), its produce strategy and the worker-group split.

The decision guidance follows ``docs/zh_cn/rl/advanced_tutorial/rl_trainer.md`` (InternLM/xtuner@b934f46).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..core import Finding, ToolInputError
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_ASYNC, SRC_DISAGG_ASYNC, SRC_STALE, SRC_SYNC, WF
from .cluster_fit import ClusterShape
from .memory import TRAIN_MEMORY_HEADROOM, train_memory
from .models import Alternative, ModelInfo, PlanRequest, ProduceStrategyPlan, Topology

#: A run needs at least this many accelerators before we split them into train and rollout groups. Not an XTuner
#: rule: the upstream guide recommends disaggregation only when rollout is the bottleneck *and* there are spare
#: accelerators for it; below two full 8-GPU nodes each half is too small to be worth the extra transport.
MIN_ACCELERATORS_FOR_DISAGG = 16


class ConfigClasses(NamedTuple):
    """The XTuner config classes a topology is written with."""

    trainer: str
    agent_loop_manager: str
    task_spec: str
    replay_buffer: str


def config_classes(topology: Topology) -> ConfigClasses:
    disagg = topology == "disaggregated"
    return ConfigClasses(
        trainer="RLDisaggregatedTrainerConfig" if disagg else "RLColocateTrainerConfig",
        agent_loop_manager="DisaggAgentLoopManagerConfig" if disagg else "AgentLoopManagerConfig",
        task_spec="DisaggTaskSpecConfig" if disagg else "TaskSpecConfig",
        replay_buffer="SyncReplayBufferConfig" if topology == "colocated_sync" else "AsyncReplayBufferConfig",
    )


def decide_topology(
    p: PlanRequest, total: int, train_fits_half: bool
) -> tuple[Topology, list[str], list[Alternative], list[Finding]]:
    """Colocated sync by default; async for long tails or throughput; disaggregated for throughput at scale."""
    why: list[str] = []
    alts: dict[Topology, str] = {}
    findings: list[Finding] = []
    enough = total >= MIN_ACCELERATORS_FOR_DISAGG and train_fits_half
    disagg_no = (
        f"only {total} accelerators: splitting them into train and rollout groups leaves each side small; the "
        "upstream guide recommends disaggregation when rollout is the bottleneck and there are spare accelerators"
        if total < MIN_ACCELERATORS_FOR_DISAGG
        else "the training state would not fit on half of the accelerators, so they cannot be split"
        if not train_fits_half
        else "not needed for this priority: it adds a second placement group and NCCL weight transport"
    )
    if p.priority == "on_policy":
        why.append(
            "on_policy priority: every sample must come from the current weights, which a synchronous colocated "
            "run with sync_weights_interval=1 guarantees"
        )
        alts["colocated_async"] = "over-sampling and max_staleness trade on-policyness for rollout throughput"
        alts["disaggregated"] = (
            "its on-policy mode (no over-sampling, max_staleness=0, sync every step) is marked not yet supported "
            "in the upstream trainer guide; the background producer always runs ahead"
        )
        chosen: Topology = "colocated_sync"
        if p.long_tail_responses:
            findings.append(
                Finding(
                    id="topo.on_policy_long_tail",
                    severity="info",
                    category="staleness_or_partial_rollout",
                    title="Long-tail responses with strict on-policy: each step waits for its slowest response",
                    evidence="priority=on_policy, long_tail_responses=true",
                    fix="Accept the stall, cap max_response_len, or relax to priority=throughput "
                    "(colocated async with partial rollout).",
                    reference=f"{WF}#choosing-a-topology",
                    source=SRC_SYNC,
                    owner="config_edit",
                )
            )
    elif p.priority == "throughput" and enough:
        chosen = "disaggregated"
        why.append(
            f"throughput priority on {total} accelerators: rollout runs continuously on its own group while training "
            "uses the other, with weights pushed over NCCL at sync points"
        )
        alts["colocated_sync"] = "training and rollout take turns on the same GPUs, so each waits for the other"
        alts["colocated_async"] = (
            "keeps rollout busier than sync but still pauses generation for every training step; with this many "
            "accelerators a dedicated rollout group gives more throughput"
        )
    elif p.priority == "throughput" or p.long_tail_responses:
        chosen = "colocated_async"
        if p.long_tail_responses:
            why.append(
                "long-tail responses: a synchronous batch waits for its slowest response; asynchronous production "
                "over-samples and continues interrupted responses after the weight sync (partial rollout)"
            )
        if p.priority == "throughput":
            why.append("throughput priority: over-sampling keeps the rollout engines full between syncs")
        alts["colocated_sync"] = "the slowest responses would stall every step"
        alts["disaggregated"] = disagg_no
    else:
        chosen = "colocated_sync"
        why.append(
            "simplicity priority without long-tail responses: colocated training with the synchronous produce "
            "strategy is the upstream recommendation for a first RL run and for limited GPUs"
        )
        alts["colocated_async"] = "adds staleness knobs that only pay off with long-tail responses or throughput needs"
        alts["disaggregated"] = disagg_no
    if p.topology and p.topology != chosen:
        alts[chosen] = f"would have been chosen ({why[0]}), but topology={p.topology} was forced"
        why = [f"topology forced to {p.topology} by the caller"]
        chosen = p.topology
        if chosen == "disaggregated" and p.priority == "on_policy":
            findings.append(
                Finding(
                    id="topo.on_policy_disaggregated_unsupported",
                    severity="warning",
                    category="staleness_or_partial_rollout",
                    title="Disaggregated training has no strict on-policy mode upstream",
                    evidence="topology=disaggregated with priority=on_policy",
                    fix="Use colocated_sync for strict on-policy training.",
                    reference=f"{WF}#disaggregated",
                    source=SRC_DISAGG_ASYNC,
                    owner="config_edit",
                )
            )
    alternatives = [Alternative(topology=t, why_not=alts[t]) for t in alts if t != chosen]
    return chosen, why, alternatives, findings


def produce_plan(
    topology: Topology, p: PlanRequest, given: tuple[str, dict[str, Any]] | None = None
) -> ProduceStrategyPlan:
    """Strategy class and knobs; staleness = (max_staleness + 1) * sync_weights_interval (produce_utils.py:97-99).

    ``given``: the user's config strategy (class, knobs), kept when its class suits the topology.
    """
    kept = _kept_strategy(topology, p, given)
    if kept is not None:
        return kept
    if topology == "colocated_sync":
        return ProduceStrategyPlan(
            class_name="SyncProduceStrategyConfig",
            module="xtuner.v1.rl.agent_loop_manager",
            params={},
            effective_stale_threshold_steps=p.sync_weights_interval,
            eval_class_name="SyncProduceStrategyConfig",
            why=["synchronous: each step rolls out with the latest synced weights, then trains"],
            source=SRC_SYNC,
        )
    cls = "DisaggAsyncProduceStrategyConfig" if topology == "disaggregated" else "AsyncProduceStrategyConfig"
    src = SRC_DISAGG_ASYNC if topology == "disaggregated" else SRC_ASYNC
    if p.priority == "on_policy":
        # Forced async topology with strict on-policy wishes: no over-sampling, no staleness, no carry-over.
        return ProduceStrategyPlan(
            class_name=cls,
            module="xtuner.v1.rl.agent_loop_manager",
            params={
                "over_sample_threshold": 0.0,
                "enable_partial_rollout": False,
                "max_staleness": 0,
                "tail_batch_trigger_size": 0,
            },
            effective_stale_threshold_steps=p.sync_weights_interval,
            eval_class_name="SyncProduceStrategyConfig",
            why=[
                "on_policy: over_sample_threshold=0 and max_staleness=0 keep samples within the current sync period",
                "enable_partial_rollout=False: a response continued after a sync would mix two policies",
                "tail_batch_trigger_size=0: re-roll an expired group at once instead of discarding it",
            ],
            source=src,
        )
    # Partial rollout carries a response across a sync, which only survives when max_staleness > 0; upstream
    # advises against max_staleness > 0 without partial rollout (producer.py:357 warns about it).
    over = 0.5 if p.long_tail_responses else 0.2
    max_staleness = 1
    tail_trigger = max(1, p.train_batch_size // 4)
    knobs = {
        "over_sample_threshold": over,
        "enable_partial_rollout": True,
        "max_staleness": max_staleness,
        "tail_batch_trigger_size": tail_trigger,
    }
    return ProduceStrategyPlan(
        class_name=cls,
        module="xtuner.v1.rl.agent_loop_manager",
        params=knobs,
        effective_stale_threshold_steps=(max_staleness + 1) * p.sync_weights_interval,
        eval_class_name="SyncProduceStrategyConfig",
        why=[
            f"over_sample_threshold={over}: launch {over:g} x the batch in extra groups so engines stay busy"
            + (" (higher for long-tail responses)" if p.long_tail_responses else ""),
            "enable_partial_rollout=True: responses paused by a weight sync continue afterwards instead of restarting",
            "max_staleness=1: over-sampled groups and continued responses that cross one sync stay trainable "
            "(with 0 they expire at the next sync)",
            f"tail_batch_trigger_size={tail_trigger}: re-roll expired groups once a quarter of a "
            "batch has expired (-1 would discard them)",
        ],
        source=src,
    )


def _kept_strategy(
    topology: Topology, p: PlanRequest, given: tuple[str, dict[str, Any]] | None
) -> ProduceStrategyPlan | None:
    """The config's own strategy, when it is the class this topology needs."""
    if given is None:
        return None
    cls, knobs = given
    wanted = {
        "colocated_sync": "SyncProduceStrategyConfig",
        "colocated_async": "AsyncProduceStrategyConfig",
        "disaggregated": "DisaggAsyncProduceStrategyConfig",
    }[topology]
    if cls != wanted:
        return None
    ms = knobs.get("max_staleness", 0)
    ms = ms if isinstance(ms, int) and ms >= 0 else 0
    src = {"colocated_sync": SRC_SYNC, "colocated_async": SRC_ASYNC, "disaggregated": SRC_DISAGG_ASYNC}[topology]
    return ProduceStrategyPlan(
        class_name=cls,
        module="xtuner.v1.rl.agent_loop_manager",
        params=dict(knobs) if topology != "colocated_sync" else {},
        effective_stale_threshold_steps=(ms + 1) * p.sync_weights_interval,
        eval_class_name="SyncProduceStrategyConfig",
        why=["kept from your config: " + (", ".join(f"{k}={v}" for k, v in knobs.items()) or "class defaults")],
        source=src,
    )


def staleness_findings(topology: Topology, strategy: ProduceStrategyPlan, p: PlanRequest) -> list[Finding]:
    """How far samples may lag the trained weights, for the asynchronous topologies."""
    if topology == "colocated_sync":
        return []
    return [
        Finding(
            id="topo.effective_staleness",
            severity="info",
            category="staleness_or_partial_rollout",
            title=f"Samples may lag the trained weights by up to {strategy.effective_stale_threshold_steps} steps",
            evidence=f"(max_staleness {strategy.params.get('max_staleness', 0)} + 1) x sync_weights_interval "
            f"{p.sync_weights_interval}",
            fix="For fresher samples lower max_staleness to 0 (then also consider enable_partial_rollout=False)."
            if strategy.params.get("max_staleness", 0)
            else "max_staleness is already 0; for strictly on-policy samples use colocated_sync with "
            "sync_weights_interval=1.",
            reference=f"{WF}#effective-staleness",
            source=SRC_STALE,
        )
    ]


def split_disaggregated(
    p: PlanRequest, model: ModelInfo, total: int, per_node: int, engine: int, gpu_bytes: float, pack_max_length: int
) -> tuple[int, int]:
    """(rollout, train) accelerators: whole nodes when possible, rollout a multiple of the engine size."""
    if p.rollout_gpus:
        rollout = min(p.rollout_gpus, total - 1)
        return rollout, total - rollout
    share = 0.625 if p.long_tail_responses else 0.5
    unit = per_node if total >= 2 * per_node else max(engine, 1)
    units = total * share / unit
    # Long tails: round the rollout share up; otherwise to the nearest whole unit.
    rollout = max(unit, (math.ceil(units) if p.long_tail_responses else math.floor(units + 0.5)) * unit)
    rollout = min(rollout, total - unit) if total - unit >= 1 else rollout
    rollout -= rollout % engine if engine else 0
    rollout = max(rollout, engine)
    # Give training more when its state does not fit.
    while rollout - unit >= engine:
        tm = train_memory(model, total - rollout, pack_max_length, p.sp_size)
        if sum(tm.values()) <= TRAIN_MEMORY_HEADROOM * gpu_bytes:
            break
        rollout -= unit
    if rollout < 1 or total - rollout < 1:
        raise ToolInputError(
            "disaggregated_split_impossible",
            f"cannot split {total} accelerators into a training group and a rollout group of whole "
            f"{engine}-accelerator engines",
            "Use a colocated topology, a smaller tensor/expert parallel size, or more accelerators.",
        )
    return rollout, total - rollout


class GroupSplit(NamedTuple):
    """How the accelerators are used: rollout and train workers, idle ones, (role, workers) per placement group."""

    rollout: int
    train: int
    idle: int
    groups: list[tuple[str, int]]
    why: str | None


def split_groups(
    p: PlanRequest,
    model: ModelInfo,
    topology: Topology,
    shape: ClusterShape,
    engine: int,
    gpu_bytes: float,
    pack_max_length: int,
    want: dict[str, int] | None = None,
) -> GroupSplit:
    """One shared group (colocated, a multiple of the engine size) or a train and a rollout group.

    ``want``: workers per role the user's config asks for ('shared', 'train'); kept when the cluster has them.
    """
    total, per_node = shape.total, shape.per_node
    idle = 0
    why = None
    if topology == "disaggregated":
        if total < 2:
            raise ToolInputError(
                "disaggregated_needs_two_accelerators",
                f"topology=disaggregated needs at least 2 accelerators (one per group); the cluster has {total}",
                "Use topology colocated_sync, or add accelerators.",
            )
        rollout_n, train_n = split_disaggregated(p, model, total, per_node, engine, gpu_bytes, pack_max_length)
        if want and "train" in want:
            train_n = max(1, min(want["train"], train_n))
        idle = total - rollout_n - train_n
        why = f"split: {train_n} accelerators train, {rollout_n} roll out" + (
            " (rollout gets more for long-tail responses)" if p.long_tail_responses else ""
        )
        group_shape = [("train", train_n), ("rollout", rollout_n)]
    else:
        use = min(want.get("shared", total), total) if want else total
        train_n = rollout_n = use
        if use % engine:
            rollout_n = train_n = use - use % engine
        if train_n < 1:
            train_n = rollout_n = use
        idle = total - train_n
        group_shape = [("shared", train_n)]
    return GroupSplit(rollout_n, train_n, idle, group_shape, why)


def idle_finding(idle: int, total: int, tp: int, ep: int) -> Finding:
    engine = rr.num_gpus_per_engine(tp, ep)
    return Finding(
        id="topo.accelerators_left_idle",
        severity="warning",
        category="resource_mismatch_num_workers",
        title=f"{idle} accelerator(s) left idle so the rollout engines divide the workers evenly",
        evidence=f"{total} accelerators, engine size {engine} (tp={tp}, ep={ep})",
        fix=f"Use a multiple of {engine} accelerators to use them all, or accept the idle ones.",
        reference=f"{CB}#divisibility-rules",
        source=rr.SRC_LMDEPLOY_TP,
        owner="config_edit",
    )
