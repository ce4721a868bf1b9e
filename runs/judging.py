"""Why GSM8K rewards are 0: the verdicts of XTuner's judger rule over the train samples read, and the one cause
they name -- the label format, the answer format, truncation, or a judge that scores correct answers 0 -- as
opposed to answers that are simply wrong (see ``trajectories.gsm8k_verdict``)."""

from __future__ import annotations

from .models import JudgeCheck, RewardCause
from .trajectories import FileStats, VerdictExample

#: A judge failure is named as the cause when it zeroes at least this share of the GSM8K samples read: those samples
#: would have scored (or at least been read) by the rule, whatever the model's accuracy on the rest.
CAUSE_MIN_SHARE = 0.10
#: Samples scored without a match beyond this share mean the run is judged by another rule: no cause is claimed.
MAX_UNMATCHED_SHARE = 0.05
#: The verdicts behind each cause; answer_format is any answer the rule cannot match that was not cut off.
CAUSE_VERDICTS: dict[RewardCause, tuple[str, ...]] = {
    "label_format": ("label_format",),
    "answer_format": ("no_answer", "answer_form"),
    "truncation": ("no_answer_truncated",),
    "judge_zero": ("judge_zero",),
}


def judge_check(files: list[FileStats]) -> JudgeCheck | None:
    """The verdict counts over ``files`` and the cause, when judge failures (not wrong answers) make the zeros."""
    verdicts: dict[str, int] = {}
    for f in files:
        for k, v in f.gsm8k_verdicts.items():
            verdicts[k] = verdicts.get(k, 0) + v
    samples = sum(verdicts.values())
    if not samples:
        return None
    zero = samples - verdicts.get("rewarded", 0) - verdicts.get("rewarded_unmatched", 0)
    per_cause = {c: sum(verdicts.get(v, 0) for v in vs) for c, vs in CAUSE_VERDICTS.items()}
    leading = max(per_cause, key=lambda c: per_cause[c])
    judged_elsewhere = verdicts.get("rewarded_unmatched", 0) > MAX_UNMATCHED_SHARE * samples
    cause: RewardCause | None = None
    if per_cause[leading] >= max(1.0, CAUSE_MIN_SHARE * samples) and not judged_elsewhere:
        cause = leading
    return JudgeCheck(
        samples=samples,
        verdicts=dict(sorted(verdicts.items(), key=lambda kv: -kv[1])),
        cause=cause,
        cause_samples=per_cause[cause] if cause else 0,
        zero_reward_samples=zero,
    )


def examples(files: list[FileStats], verdicts: tuple[str, ...], limit: int = 2) -> list[VerdictExample]:
    """Up to ``limit`` samples behind ``verdicts``, newest steps first."""
    out: list[VerdictExample] = []
    for f in sorted(files, key=lambda f: -f.step):
        for v in verdicts:
            out.extend(f.gsm8k_examples.get(v, []))
        if len(out) >= limit:
            break
    return out[:limit]
