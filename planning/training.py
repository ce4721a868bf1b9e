"""The training side of a plan: packed length, batch and interval arithmetic, and the batch-shape findings."""

from __future__ import annotations

import math

from ..core import Finding
from .citations import SRC_GRPO_STD, SRC_INTERVALS, WF
from .models import PlanRequest, TrainingPlan


def _round_up(v: int, m: int) -> int:
    return ((v + m - 1) // m) * m


def plan_intervals(
    p: PlanRequest, findings: list[Finding], disabled: set[str] | frozenset[str] = frozenset()
) -> tuple[int, int | None, int | None]:
    """evaluate_step / checkpoint_interval / hf_interval as multiples of sync_weights_interval (rl_trainer.py:295-326);
    an interval in ``disabled`` (the user's config turns it off with -1/None) stays off (None)."""
    s = p.sync_weights_interval
    default = _round_up(max(1, math.ceil(p.total_train_steps / 5)), s)
    out: list[int | None] = []
    for name, given in (
        ("evaluate_step", p.evaluate_step if p.enable_evaluate else None),
        ("checkpoint_interval", p.checkpoint_interval),
        ("hf_interval", p.hf_interval),
    ):
        if name in disabled:
            out.append(None)
            continue
        v = given or default
        if v % s:
            fixed = _round_up(v, s)
            why = (
                "evaluation only runs on weight-sync steps."
                if name == "evaluate_step"
                else "checkpoint/HF saves only run on weight-sync steps."
            )
            findings.append(
                Finding(
                    id="topo.interval_rounded",
                    severity="warning",
                    category="eval_or_interval_config",
                    title=f"{name}={v} is not a multiple of sync_weights_interval={s}; using {fixed}",
                    evidence=f"XTuner rejects it: {name}={v} must be a multiple of sync_weights_interval={s}, "
                    f"because {why}",
                    location=name,
                    fix=interval_fix(name, v, s),
                    reference=f"{WF}#effective-staleness",
                    source=SRC_INTERVALS,
                    owner="config_edit",
                )
            )
            v = fixed
        out.append(v)
    return out[0] or default, out[1], out[2]


def interval_fix(name: str, value: int, sync: int) -> str:
    """'use evaluate_step 4 or 6 (multiples of sync_weights_interval=2), or sync_weights_interval 1/5 (divides 5)'."""
    below, above = (value // sync) * sync, _round_up(value, sync)
    steps = " or ".join(str(v) for v in dict.fromkeys(x for x in (below, above) if x >= 1))
    syncs = "/".join(str(d) for d in range(1, value + 1) if value % d == 0)
    return (
        f"Use {name} {steps} (multiples of sync_weights_interval={sync}), or sync_weights_interval {syncs} "
        f"(divides {value}); this plan uses {above}. Evaluation and saves only run on weight-sync steps."
    )


def pack_length(context_length: int) -> int:
    """pack_max_length: the context rounded up to a multiple of 1024, at least 16384."""
    return max(_round_up(context_length, 1024), 16384)


def plan_training(
    p: PlanRequest, train_n: int, pack_max_length: int, disabled: set[str] | frozenset[str] = frozenset()
) -> tuple[TrainingPlan, list[Finding]]:
    """The TrainingPlan with intervals rounded to the sync interval; findings for rounded intervals and batches."""
    findings: list[Finding] = []
    ev, ck, hf = plan_intervals(p, findings, disabled)
    training = TrainingPlan(
        num_workers=train_n,
        sp_size=p.sp_size,
        pack_max_length=pack_max_length,
        train_batch_size=p.train_batch_size,
        prompt_repeat_k=p.prompt_repeat_k,
        samples_per_step=p.train_batch_size * p.prompt_repeat_k,
        sync_weights_interval=p.sync_weights_interval,
        total_train_steps=p.total_train_steps,
        enable_evaluate=p.enable_evaluate,
        evaluate_step=ev,
        checkpoint_interval=ck,
        hf_interval=hf,
    )
    findings += batch_findings(p, train_n)
    return training, findings


def batch_findings(p: PlanRequest, train_n: int) -> list[Finding]:
    out: list[Finding] = []
    if p.prompt_repeat_k < 2:
        out.append(
            Finding(
                id="topo.prompt_repeat_k_too_small",
                severity="warning",
                category="other",
                title="prompt_repeat_k < 2: a GRPO group of one has no spread to compute an advantage from",
                evidence=f"prompt_repeat_k={p.prompt_repeat_k}; GRPO normalises rewards by the group's std",
                fix="Use prompt_repeat_k >= 2 (examples use 5).",
                reference=f"{WF}#train-batch-size",
                source=SRC_GRPO_STD,
                owner="config_edit",
            )
        )
    samples = p.train_batch_size * p.prompt_repeat_k
    if samples < train_n:
        out.append(
            Finding(
                id="topo.batch_smaller_than_workers",
                severity="info",
                category="other",
                title=f"{samples} samples per step for {train_n} training workers: some train on padding only",
                evidence="train_batch_size counts prompt groups; samples = train_batch_size x prompt_repeat_k",
                fix="Raise train_batch_size so that each worker gets at least one sample.",
                reference=f"{WF}#train-batch-size",
                owner="config_edit",
            )
        )
    return out
