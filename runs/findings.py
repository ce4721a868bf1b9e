"""Findings about a run's health, in the shared Finding model, each pointing at its failure-mode catalog entry."""

from __future__ import annotations

from ..core import Finding
from .analysis import Inputs, eval_table, reward_means
from .models import Learning, Progress

#: Thresholds (the evidence always carries the measured value next to the threshold).
NO_SIGNAL_WARN_PCT = 50.0
TRUNCATED_WARN_PCT = 10.0
UNFORMATTED_WARN = 0.8  # share of GSM8K responses without '#### <number>' that explains all-zero rewards
ENTROPY_DROP = 0.2  # last window below this fraction of the first window
ENTROPY_FLOOR = 0.02
ASYNC_WARN_SHARE = 0.10  # of the samples trained per step
ASYNC_WARN_ABS = 10.0
EVAL_DROP = 0.05
EVAL_MIN_STEPS = 10
TRACKER_GRACE_S = 180.0  # jsonl flushes every 30 s (jsonl_writer.py:109), tensorboard every 120 s by default

FM = "xtuner-rl://failure-modes/"


def _f(
    fid: str,
    fm: str,
    category: str,
    severity: str,
    title: str,
    evidence: str,
    fix: str,
    source: str,
    location: str | None = None,
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,  # type: ignore[arg-type]
        fix=fix,
        reference=FM + fm,
        source=source,
        location=location,
    )


def run_findings(inp: Inputs, prog: Progress, learn: Learning) -> list[Finding]:
    out: list[Finding] = []
    out += _progress(prog)
    out += _rewards(inp, learn)
    out += _signal(learn)
    out += _truncation(learn)
    out += _entropy(learn)
    out += _samples(inp, learn)
    out += _eval(inp, prog, learn)
    out += _outputs(inp, prog)
    return out


def _progress(prog: Progress) -> list[Finding]:
    if prog.state != "stalled":
        return []
    return [
        _f(
            "run.stalled",
            "asyncio_hang_diagnostics",
            "other",
            "warning",
            f"Run looks stalled: nothing written for {prog.idle_s:.0f}s at step {prog.last_step}/{prog.total_steps}",
            "; ".join(prog.evidence),
            "Check whether the driver is alive (ps / ray job list). If it is, take a stack dump (py-spy dump --pid <driver>)"
            " or restart with XTUNER_ASYNCIO_DIAGNOSTICS=1 to get await-chain dumps; check for pending placement groups "
            "with probe_environment, and read the last lines of every rank log (diagnose_symptom).",
            "xtuner/v1/rl/utils/asyncio_diagnostics.py:210",
            prog.last_activity_file,
        )
    ]


def _rewards(inp: Inputs, learn: Learning) -> list[Finding]:
    rewards = list(reward_means(inp).values())
    maxima = [f.reward_max for f in inp.train if f.reward_max is not None]
    tracked_max = [v for s, v in inp.tracker.series("response/rewards/max").items() if s > 0]
    all_max = maxima or tracked_max
    if not rewards or not all_max or max(all_max) != 0:
        return []
    n_steps = len(all_max)
    gsm = sum(f.gsm8k_samples for f in inp.train)
    unformatted = sum(f.gsm8k_unformatted for f in inp.train)
    if gsm and unformatted / gsm >= UNFORMATTED_WARN:
        examples = [e for f in inp.train for e in f.unformatted_examples][:2]
        return [
            _f(
                "learn.judger_format_mismatch",
                "reward_always_zero",
                "data_format_other",
                "blocker",
                f"Every reward is 0 over {n_steps} step(s): {unformatted}/{gsm} GSM8K responses lack the '#### <answer>' "
                "form the judger requires",
                "Responses without '#### <number>' in their last 300 characters: "
                + " | ".join(repr(e) for e in examples),
                "Make the model answer as '#### <number>': keep the GSM8K instruction in every prompt (convert_gsm8k.py "
                "adds it), or switch to a judger for the format the model uses (e.g. DapoMathJudgerConfig for \\boxed{}); "
                "check that responses are not cut off before the answer (truncated_pct_last "
                f"{learn.truncated_pct_last}%).",
                "xtuner/v1/rl/judger/gsm8k.py:29-34",
            )
        ]
    return [
        _f(
            "learn.reward_all_zero",
            "reward_always_zero",
            "data_format_other",
            "blocker",
            f"Every reward is 0 over {n_steps} step(s): no sample earned a score, so GRPO has nothing to learn from",
            f"reward max 0 in every step read; mean {learn.reward_mean_last}; GSM8K-format responses: "
            f"{gsm - unformatted}/{gsm}",
            "Open a train_rollout_<step>.jsonl and compare the end of each response with its label; check the judger "
            "matches the data_source and the answer format, and that labels are strings normalised like the answers.",
            "xtuner/v1/train/rl_trainer.py:1461",
        )
    ]


def _signal(learn: Learning) -> list[Finding]:
    pct = learn.no_signal_groups_pct_last
    if pct is None or pct < NO_SIGNAL_WARN_PCT:
        return []
    zero = learn.all_zero_groups_pct_last or 0.0
    lean = "too hard (all 0)" if zero >= pct / 2 else "too easy (all solved)"
    k = learn.group_size
    return [
        _f(
            "learn.groups_no_signal",
            "grpo_groups_no_signal",
            "data_format_other",
            "warning",
            f"{pct:.0f}% of GRPO groups carry no signal: every sample of the prompt got the same reward",
            f"last {learn.window} step(s): {pct}% of groups have equal rewards ({zero}% all zero); samples per group "
            f"(prompt_repeat_k) = {k}; most such prompts look {lean}",
            f"Raise prompt_repeat_k (now {k}) so groups see both outcomes, filter the dataset to prompts of medium "
            "difficulty, or add a sample filter that drops equal-reward groups; a reward with partial credit "
            "(format_score) also breaks ties.",
            "xtuner/v1/train/rl_trainer.py:1107-1111",
        )
    ]


def _truncation(learn: Learning) -> list[Finding]:
    pct = learn.truncated_pct_last
    if pct is None or pct < TRUNCATED_WARN_PCT:
        return []
    return [
        _f(
            "learn.responses_truncated",
            "responses_truncated",
            "data_format_other",
            "warning",
            f"{pct:.0f}% of responses were cut off at the length limit (finish_reason 'length')",
            f"last {learn.window} step(s): {pct}% truncated (threshold {TRUNCATED_WARN_PCT:g}%); longest response "
            f"{learn.response_len_max} tokens, mean {learn.response_len_mean_last}",
            f"Raise SampleParams.max_tokens (max_response_length) above {learn.response_len_max} and keep "
            "RolloutConfig.context_length >= max prompt + max response; or reward shorter answers.",
            "xtuner/v1/data_proto/rl_data.py:35",
        )
    ]


def _entropy(learn: Learning) -> list[Finding]:
    first, last = learn.entropy_first, learn.entropy_last
    if first is None or last is None or first <= 0:
        return []
    if not (last < ENTROPY_FLOOR or last < ENTROPY_DROP * first):
        return []
    return [
        _f(
            "learn.entropy_collapse",
            "entropy_collapse",
            "other",
            "warning",
            f"Entropy collapsed from {first:.3f} to {last:.3f}: the policy stopped exploring",
            f"entropy/rollout mean of the first {learn.window} steps {first}, of the last {learn.window} {last} "
            f"(warn below {ENTROPY_DROP:g} x first or {ENTROPY_FLOOR})",
            "Lower the learning rate or raise the KL/entropy regularisation, use clip-higher (DAPO), check the "
            "rollout temperature is 1.0; resume from a checkpoint before the collapse.",
            "xtuner/v1/train/rl_trainer.py:1400-1401",
        )
    ]


def _samples(inp: Inputs, learn: Learning) -> list[Finding]:
    out: list[Finding] = []
    per_step = _samples_per_step(inp)
    for kind, v in learn.async_last.items():
        limit = max(ASYNC_WARN_ABS, ASYNC_WARN_SHARE * per_step) if per_step else ASYNC_WARN_ABS
        if v < limit:
            continue
        out.append(
            _f(
                f"async.{kind}_samples",
                "async_samples_piling_up",
                "staleness_or_partial_rollout",
                "warning",
                f"{kind.capitalize()} samples pile up: {v:.0f} per step over the last steps",
                f"async/{kind}_samples mean {v} per step (warn at {limit:.0f}: {ASYNC_WARN_SHARE:.0%} of "
                f"{per_step:.0f} trained samples or {ASYNC_WARN_ABS:.0f}); top errors: "
                + ("; ".join(f"{e.message} ({e.count})" for e in learn.top_errors[:2]) or "none recorded"),
                _ASYNC_FIX[kind],
                "xtuner/v1/train/rl_trainer.py:1360-1362",
            )
        )
    bad = {k: v for k, v in learn.status_counts.items() if k in ("failed", "aborted")}
    if sum(bad.values()) and not out:
        out.append(
            _f(
                "learn.samples_failed",
                "invalid_groups_skipped",
                "backend_runtime_error",
                "info",
                f"{sum(bad.values())} sample(s) failed or were aborted in the trajectory files read",
                f"status counts {bad}; top errors: "
                + ("; ".join(f"{e.message} ({e.count})" for e in learn.top_errors[:3]) or "none recorded"),
                "Read the error messages; rollout errors usually come from the inference server (diagnose_symptom on "
                "the logs) or the judger.",
                "xtuner/v1/train/rl_trainer.py:260-267",
            )
        )
    if learn.missing_labels:
        out.append(
            _f(
                "learn.missing_labels",
                "reward_missing_ground_truth",
                "reward_data_missing_ground_truth",
                "warning",
                f"{learn.missing_labels} train sample(s) have no label (reward_model.ground_truth)",
                f"{learn.missing_labels} of {learn.samples} samples read have label null or ''",
                "Fill reward_model.ground_truth for every line (check_reward_data finds them).",
                "xtuner/v1/train/rl_trainer.py:1445-1447",
            )
        )
    return out


_ASYNC_FIX = {
    "expired": "Samples exceed max_staleness before they are trained: raise max_staleness, lower "
    "over_sample_threshold, or sync weights more often; with partial rollout off, long responses expire first.",
    "aborted": "Rollouts are aborted at weight sync: enable partial rollout so aborted samples resume, or shorten "
    "responses; check tail_batch_trigger_size.",
    "failed": "Rollout requests fail: read the top error messages and the rollout worker logs (diagnose_symptom).",
}


def _samples_per_step(inp: Inputs) -> float:
    for tag in ("response/training_samples", "response/batch_size"):
        vals = [v for s, v in inp.tracker.series(tag).items() if s > 0]
        if vals:
            return sum(vals[-5:]) / len(vals[-5:])
    counts = [f.samples for f in inp.train]
    return sum(counts[-5:]) / len(counts[-5:]) if counts else 0.0


def _eval(inp: Inputs, prog: Progress, learn: Learning) -> list[Finding]:
    table = eval_table(inp)
    step = prog.last_step or 0
    if not table:
        if step < EVAL_MIN_STEPS:
            return []
        return [
            _f(
                "eval.never_ran",
                "eval_not_run",
                "eval_or_interval_config",
                "warning",
                f"No evaluation after {step} steps: no eval/* scalars and no eval_rollout files",
                f"last step {step}; eval_rollout files: {len(inp.layout.eval_files)}; tracker eval tags: none"
                + (
                    "; log: 'Final train step reached without scheduled evaluation'"
                    if inp.logs.final_without_eval
                    else ""
                ),
                "Set enable_evaluate=True with eval_agent_loop_manager_cfg and evaluator_config, and evaluate_step to a "
                f"multiple of sync_weights_interval no larger than total_train_steps ({prog.total_steps}); "
                "enable_initial_evaluate=True gives a step-0 baseline.",
                "xtuner/v1/train/rl_trainer.py:1760",
            )
        ]
    out: list[Finding] = []
    for name in ("accuracy", *[k for k in learn.eval_best if k != "accuracy"]):
        if name not in learn.eval_latest or name not in learn.eval_best:
            continue
        best, now = learn.eval_best[name], learn.eval_latest[name]
        if best - now >= EVAL_DROP:
            best_step = max((s for s, m in table.items() if m.get(name) == best), default=None)
            out.append(
                _f(
                    f"eval.{name}_dropped".replace("/", "_"),
                    "entropy_collapse",
                    "eval_or_interval_config",
                    "warning",
                    f"Eval {name} dropped from {best} (step {best_step}) to {now} (step {max(table)})",
                    f"eval {name} per step: " + ", ".join(f"{s}: {m.get(name)}" for s, m in list(table.items())[-6:]),
                    f"Keep the checkpoint/HF export nearest step {best_step}; look for entropy collapse, reward hacking "
                    "(train reward up while eval falls) or a too-high learning rate.",
                    "xtuner/v1/train/rl_trainer.py:1420-1422",
                )
            )
        break
    return out


def _outputs(inp: Inputs, prog: Progress) -> list[Finding]:
    lay = inp.layout
    out: list[Finding] = []
    steps_done = prog.last_step or 0
    quiet = prog.idle_s is None or prog.idle_s > TRACKER_GRACE_S or prog.state == "finished"
    if lay.tracker_format == "none" and steps_done >= 1 and quiet:
        out.append(
            _f(
                "output.tracker_missing",
                "tracker_output_missing",
                "debug_trace_output",
                "warning",
                f"No tracker output after {steps_done} step(s): logs/exp_tracking holds neither tracker.jsonl nor "
                "TensorBoard events",
                f"exp_tracking dir: {'present, empty' if lay.tracker_dir else 'missing'}; train trajectory files: "
                f"{len(lay.train_files)}",
                "The tracker writes under <exp_dir>/logs/exp_tracking; check the disk and the exp_tracker setting "
                "('tensorboard' needs torch.utils.tensorboard, i.e. the tensorboard package; or use 'jsonl').",
                "xtuner/v1/train/rl_trainer.py:610",
                str(lay.exp_dir / "logs" / "exp_tracking"),
            )
        )
    if lay.env.get("XTUNER_OTEL_ENABLED") == "1":
        size = lay.otel_trace_bytes
        unknown = lay.otel_path_unchecked and not size  # the trace may be there, outside the allowed roots
        if size == 0 and steps_done >= 1 and quiet and not unknown:
            named = lay.env.get("XTUNER_OTEL_JSONL_PATH", "<exp_dir>/otel/<run_id>/traces/traces.jsonl")
            out.append(
                _f(
                    "output.trace_missing",
                    "trace_output_missing",
                    "debug_trace_output",
                    "warning",
                    f"Tracing is enabled but no trace was written after {steps_done} step(s)",
                    f"env.json: XTUNER_OTEL_ENABLED=1, XTUNER_OTEL_JSONL_PATH={named}; trace files found: "
                    f"{len(lay.otel_traces)}, {size} bytes",
                    "The OpenTelemetry collector writes the spans there: check it is still running (otelcol-contrib on "
                    "PATH), set TraceConfig.enable_rollout_trace=True for rollout spans, and that the path is on a "
                    "disk the driver can write.",
                    "xtuner/v1/rl/trace/runtime.py:434-455",
                    named,
                )
            )
    return out
