"""Findings about a run's health, in the shared Finding model, each pointing at its failure-mode catalog entry."""

from __future__ import annotations

from ..core import Finding
from ..core.findings import Category, Owner, Severity
from ..xtuner_rules.data_contract import CODES
from . import judging
from .analysis import Inputs, eval_table, reward_means
from .models import JudgeCheck, Learning, Progress, RewardCause
from .trajectories import VerdictExample

#: Thresholds (the evidence always carries the measured value next to the threshold).
NO_SIGNAL_WARN_PCT = 50.0
TRUNCATED_WARN_PCT = 10.0
QUOTE_CHARS = 80  # of a response's end quoted next to its label
ENTROPY_DROP = 0.2  # last window below this fraction of the first window
ENTROPY_FLOOR = 0.02
#: async/{expired,aborted,failed}_samples are groups left in the replay buffer after a step took its batch:
#: xtuner/v1/rl/agent_loop_manager/produce_utils.py:352-358 fills them from ReplayBuffer.count_statuses, which counts
#: stored items, one per group (xtuner/v1/rl/replay_buffer.py:534-541,644-655). Compared with the groups a step
#: trains, never with its samples.
ASYNC_WARN_SHARE = 0.5  # of the groups trained per step
ASYNC_WARN_MIN_GROUPS = 4.0
EVAL_DROP = 0.05
EVAL_MIN_STEPS = 10
TRACKER_GRACE_S = 180.0  # jsonl flushes every 30 s (jsonl_writer.py:109), tensorboard every 120 s by default

FM = "xtuner-rl://failure-modes/"


def _f(
    fid: str,
    fm: str,
    category: Category,
    severity: Severity,
    title: str,
    evidence: str,
    fix: str,
    source: str,
    location: str | None = None,
    owner: Owner | None = None,
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,
        category=category,
        title=title,
        evidence=evidence,
        fix=fix,
        reference=FM + fm,
        source=source,
        location=location,
        owner=owner,
    )


def run_findings(inp: Inputs, prog: Progress, learn: Learning) -> list[Finding]:
    """Every health finding; the cause of zero rewards, when the judger's rule names one, comes first."""
    out: list[Finding] = []
    out += _rewards(inp, learn)
    out += _progress(prog)
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


def _steps_all_zero(inp: Inputs) -> int:
    """How many steps were read when no sample of any of them scored above 0 (else 0)."""
    maxima = [f.reward_max for f in inp.train if f.reward_max is not None]
    tracked_max = [v for s, v in inp.tracker.series("response/rewards/max").items() if s > 0]
    all_max = maxima or tracked_max
    if not reward_means(inp) or not all_max or max(all_max) != 0:
        return 0
    return len(all_max)


def _rewards(inp: Inputs, learn: Learning) -> list[Finding]:
    n_steps = _steps_all_zero(inp)
    check = learn.judge_check
    if check is not None and check.cause is not None:
        return [_cause(inp, learn, check, check.cause, n_steps)]
    if not n_steps:
        return []
    judged = (
        f"; XTuner's GSM8K rule re-applied: {_verdicts(check)} -- the answers are read and differ from the labels: "
        + _quote(judging.examples(inp.train, ("wrong",)))
        if check is not None
        else ""
    )
    return [
        _f(
            "learn.reward_all_zero",
            "reward_always_zero",
            "data_format_other",
            "blocker",
            f"Every reward is 0 over {n_steps} step(s): no sample earned a score, so GRPO has nothing to learn from",
            f"reward max 0 in every step read; mean {learn.reward_mean_last}{judged}",
            "The judge reads the answers and finds them wrong: start from an easier dataset or a stronger model, and "
            "check a few responses by hand."
            if check is not None
            else "Open a train_rollout_<step>.jsonl and compare the end of each response with its label; check the "
            "judger matches the data_source and the answer format, and that labels are strings normalised like the "
            "answers.",
            "xtuner/v1/train/rl_trainer.py:1461",
        )
    ]


def _verdicts(check: JudgeCheck | None) -> str:
    if check is None:
        return ""
    return f"{check.samples} samples: " + ", ".join(f"{k} {v}" for k, v in check.verdicts.items())


def _quote(examples: list[VerdictExample]) -> str:
    return " | ".join(
        f"label {e.label} vs response '…{e.tail[-QUOTE_CHARS:]}' -> judged answer {e.answer!r}" for e in examples
    )


#: (finding id, what to call it, owner, category, XTuner source) per cause.
_CAUSE_META: dict[RewardCause, tuple[str, str, Owner, Category, str]] = {
    "label_format": (
        "learn.reward_zero_label_format",
        "label format",
        "data_preparation",
        "data_format_other",
        "xtuner/v1/rl/judger/gsm8k.py:34-39,74",
    ),
    "answer_format": (
        "learn.reward_zero_answer_format",
        "answer format",
        "data_preparation",
        "data_format_other",
        "xtuner/v1/rl/judger/gsm8k.py:29-36",
    ),
    "truncation": (
        "learn.reward_zero_truncation",
        "truncation",
        "config_edit",
        "data_format_other",
        "xtuner/v1/data_proto/rl_data.py:35",
    ),
    "judge_zero": ("learn.reward_zero_judge", "judge", "config_edit", "other", "xtuner/v1/rl/judger/gsm8k.py:70-77"),
}


def _cause(inp: Inputs, learn: Learning, check: JudgeCheck, cause: RewardCause, n_steps: int) -> Finding:
    """The cause of the zero rewards as the first finding: what the judger's rule shows, quoted, and its fix."""
    n, total = check.cause_samples, check.samples
    ex = judging.examples(inp.train, judging.CAUSE_VERDICTS[cause])
    first = ex[0] if ex else None
    scope = f"every reward is 0 over {n_steps} step(s)" if n_steps else f"{n} of {total} samples score 0 for it"
    cfg = inp.config
    if cause == "label_format":
        code = (first.label_code if first else None) or "gsm8k_ground_truth_noncanonical"
        title = (
            f"Label format: labels like {first.label if first else '?'} never equal the judged answer "
            f"{first.answer if first else '?'!r} (exact string match), so {scope}"
        )
        fix = (
            f"{CODES[code][4]} Rewrite reward_model.ground_truth in the train and eval data (check_reward_data finds "
            f"every such line, code {code}, and prints a fix command) and restart: {n} answers were right and would "
            "have scored."
        )
    elif cause == "answer_format":
        unmarked = check.verdicts.get("no_answer", 0)
        written = f"{first.answer!r} for the label {first.label}" if first else "?"
        title = (
            f"Answer format: {unmarked}/{total} responses end without '#### <number>' in their last 300 characters "
            f"(they were not cut off), so {scope}"
            if unmarked * 2 >= n
            else f"Answer format: the model writes the label's number in another form ({written}), so {scope}"
        )
        fix = (
            "Make the model answer as '#### <number>': keep the GSM8K instruction in every prompt (convert_gsm8k.py "
            'adds it: output the final answer after "####"), or switch to a judger for the format the model uses '
            "(e.g. DapoMathJudgerConfig for \\boxed{}). The labels are not the problem."
        )
    elif cause == "truncation":
        limit = cfg.get("max_tokens")
        where = f"; SampleParams.max_tokens = {limit} at {cfg.where('max_tokens')}" if limit is not None else ""
        title = (
            f"Truncation: {n}/{total} responses were cut at the length limit ({learn.response_len_max} tokens"
            f"{where}) before they wrote '#### <number>', so {scope}"
        )
        fix = (
            f"Raise SampleParams.max_tokens (max_response_length) above {learn.response_len_max} and keep "
            "RolloutConfig.context_length >= longest prompt + max response; or ask for shorter reasoning in the "
            "prompt. Neither the labels nor the answer format are the cause: the rule never saw these answers."
        )
    else:
        title = f"Judge: {n} responses whose '#### <number>' equals the label scored 0, so {scope}"
        fix = (
            "The data and the answers agree; the judge does not credit them. Check the judger config: "
            "GSM8KJudgerConfig's extra_info (score 1, format_score 0 by default), a custom reward_handler, or a "
            "judger_name that sends these samples to another judger (data_source 'openai/gsm8k')."
        )
    fid, _name, owner, category, source = _CAUSE_META[cause]
    return _f(
        fid,
        "reward_always_zero",
        category,
        "blocker" if n_steps else "warning",
        title,
        f"XTuner's GSM8K rule (last '#### <number>' in the last 300 characters, ',' and '$' removed, equal to the "
        f"label as a string) re-applied to {_verdicts(check)}; e.g. {_quote(ex)}",
        fix,
        source,
        owner=owner,
    )


def _signal(learn: Learning) -> list[Finding]:
    pct = learn.no_signal_groups_pct_last
    if pct is None or pct < NO_SIGNAL_WARN_PCT:
        return []
    zero = learn.all_zero_groups_pct_last or 0.0
    k = learn.group_size
    cause = _zeroing_cause(learn.judge_check)
    if cause is not None and zero >= pct / 2:
        fid, name = _CAUSE_META[cause][:2]
        lean = f"the judge cannot credit the answers ({name}), so the prompts only look hard"
        fix = (
            f"Fix the {name} first ({fid}): the groups are all 0 because of it, and more samples per prompt or "
            "easier prompts would score 0 the same way."
        )
    else:
        lean = "too hard (all 0)" if zero >= pct / 2 else "too easy (all solved)"
        fix = (
            f"Raise prompt_repeat_k (now {k}) so groups see both outcomes, filter the dataset to prompts of medium "
            "difficulty, or add a sample filter that drops equal-reward groups; a reward with partial credit "
            "(format_score) also breaks ties."
        )
    return [
        _f(
            "learn.groups_no_signal",
            "grpo_groups_no_signal",
            "data_format_other",
            "warning",
            f"{pct:.0f}% of GRPO groups carry no signal: every sample of the prompt got the same reward",
            f"last {learn.window} step(s): {pct}% of groups have equal rewards ({zero}% all zero); samples per group "
            f"(prompt_repeat_k) = {k}; most such prompts: {lean}",
            fix,
            "xtuner/v1/train/rl_trainer.py:1107-1111",
        )
    ]


def _zeroing_cause(check: JudgeCheck | None) -> RewardCause | None:
    """The judge failure behind all-zero groups: no sample was credited, or it makes half the zeros (else wrong
    answers dominate and the prompts may well be hard)."""
    if check is None or check.cause is None:
        return None
    if not check.verdicts.get("rewarded") or check.cause_samples * 2 >= check.zero_reward_samples:
        return check.cause
    return None


def _truncation(learn: Learning) -> list[Finding]:
    pct = learn.truncated_pct_last
    if pct is None or pct < TRUNCATED_WARN_PCT:
        return []
    if learn.judge_check is not None and learn.judge_check.cause == "truncation":
        return []  # the cause finding says it, first
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
    groups, groups_from = _groups_per_step(inp)
    for kind, v in learn.async_last.items():
        limit = max(ASYNC_WARN_MIN_GROUPS, ASYNC_WARN_SHARE * groups) if groups else ASYNC_WARN_MIN_GROUPS
        if v < limit:
            continue
        counted = "groups" if kind != "failed" else "groups (plus failed samples discarded in the window)"
        against = f", against {groups:.0f} groups trained per step" if groups else ""
        out.append(
            _f(
                f"async.{kind}_samples",
                "async_samples_piling_up",
                "staleness_or_partial_rollout",
                "warning",
                f"{kind.capitalize()} groups pile up in the replay buffer: {v:.0f} left after each step{against}",
                f"async/{kind}_samples counts {counted} still in the replay buffer after the step took its batch, not "
                "samples per step (xtuner/v1/rl/agent_loop_manager/produce_utils.py:352-358, "
                f"xtuner/v1/rl/replay_buffer.py:644-655); mean {v} over the last steps, warn at {limit:.0f} = "
                f"max({ASYNC_WARN_MIN_GROUPS:.0f}, {ASYNC_WARN_SHARE:.0%} of {groups:.0f} groups per step from "
                f"{groups_from}); top errors: "
                + ("; ".join(f"{e.message} ({e.count})" for e in learn.top_errors[:2]) or "none recorded"),
                _ASYNC_FIX[kind],
                "xtuner/v1/train/rl_trainer.py:1358-1363",
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


def _groups_per_step(inp: Inputs) -> tuple[float, str]:
    """Groups a step trains: the newest trajectory files' group count, else the config's train_batch_size (prompt
    groups per step: produce_batch takes that many stored groups, rl_trainer.py:1728,
    replay_buffer.py:638-641); (0, 'unknown') without either."""
    files = sorted(inp.train, key=lambda f: f.step)[-5:]
    if files and any(f.groups for f in files):
        return sum(f.groups for f in files) / len(files), "the trajectory files"
    configured = inp.config.count("train_batch_size")
    if configured is not None:
        return float(configured), f"train_batch_size at {inp.config.where('train_batch_size')}"
    return 0.0, "unknown"


def _eval(inp: Inputs, prog: Progress, learn: Learning) -> list[Finding]:
    table = eval_table(inp)
    step = prog.last_step or 0
    if not table:
        return _no_eval(inp, prog, step)
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


def _no_eval(inp: Inputs, prog: Progress, step: int) -> list[Finding]:
    """No evaluation found: judged against the run's config when it was read (an eval is due at every multiple of
    evaluate_step, rl_trainer.py:1760, and at step 0 with enable_initial_evaluate, :701,1708), else after
    EVAL_MIN_STEPS steps."""
    cfg = inp.config
    enabled, every = cfg.get("enable_evaluate"), cfg.count("evaluate_step")
    if enabled is False:
        return [
            _f(
                "eval.disabled",
                "eval_not_run",
                "eval_or_interval_config",
                "info",
                f"Evaluation is off in the run's config (enable_evaluate=False at {cfg.where('enable_evaluate')})",
                f"config {cfg.path}; last step {step}; no eval/* scalars and no eval_rollout files",
                "Set enable_evaluate=True with eval_agent_loop_manager_cfg and evaluator_config to see held-out "
                "accuracy per evaluate_step.",
                "xtuner/v1/train/rl_trainer.py:1760",
            )
        ]
    scheduled = enabled is True and every is not None
    if enabled is True and every is not None:
        initial = cfg.get("enable_initial_evaluate") is True
        due = step // every + int(initial)
        if not due:
            return []
        expected = (
            f"the config evaluates every {every} step(s) (evaluate_step at {cfg.where('evaluate_step')})"
            + (" and before training (enable_initial_evaluate)" if initial else "")
            + f": {due} evaluation(s) due by step {step}"
        )
    elif step < EVAL_MIN_STEPS:
        return []
    else:
        why = cfg.note or "; ".join(cfg.unresolved[:2]) or "enable_evaluate/evaluate_step not read"
        expected = f"the run's evaluation schedule is unknown ({why}), so this warns after {EVAL_MIN_STEPS} steps"
    return [
        _f(
            "eval.never_ran",
            "eval_not_run",
            "eval_or_interval_config",
            "warning",
            f"No evaluation after {step} steps: no eval/* scalars and no eval_rollout files",
            f"last step {step}; {expected}; eval_rollout files: {len(inp.layout.eval_files)}; tracker eval tags: none"
            + ("; log: 'Final train step reached without scheduled evaluation'" if inp.logs.final_without_eval else ""),
            "Evaluation was due but did not run: check the rank logs around those steps for an eval error "
            "(diagnose_symptom), and that eval_agent_loop_manager_cfg and evaluator_config are set."
            if scheduled
            else "Set enable_evaluate=True with eval_agent_loop_manager_cfg and evaluator_config, and evaluate_step to "
            f"a multiple of sync_weights_interval no larger than total_train_steps ({prog.total_steps}); "
            "enable_initial_evaluate=True gives a step-0 baseline.",
            "xtuner/v1/train/rl_trainer.py:1760",
        )
    ]


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
