"""What inspect_run reports about a run, besides its findings: progress, learning signals, the run's config,
outputs, series."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RunState = Literal["running", "finished", "stalled", "failed", "not_started"]
Trend = Literal["rising", "flat", "falling", "unknown"]
StepTimeTrend = Literal["steady", "slowing", "speeding_up", "unknown"]
TrackerFormat = Literal["jsonl", "tensorboard", "none"]
#: Why GSM8K rewards are 0, when XTuner's judger rule says it is not the model's answers.
RewardCause = Literal["label_format", "answer_format", "truncation", "judge_zero"]


class ConfigValue(BaseModel):
    value: bool | int | float | str | None
    where: str = Field(description="'<file>:<line>' where the config sets it, or 'XTuner default'")


class RunConfig(BaseModel):
    """The run's config as the static evaluator reads it with the run's env.json (never executed)."""

    path: str | None = Field(
        description="The 'config' argument, else <work_dir>/config.py (the copy XTuner's launch scripts make)"
    )
    values: dict[str, ConfigValue] = Field(
        default_factory=dict,
        description="total_train_steps, enable_evaluate, enable_initial_evaluate, evaluate_step, "
        "sync_weights_interval, train_batch_size, prompt_repeat_k, max_tokens (first train task)",
    )
    unresolved: list[str] = Field(default_factory=list, description="Values the static read could not resolve")
    note: str = Field(default="", description="Why nothing or not everything was read")

    def get(self, name: str) -> bool | int | float | str | None:
        value = self.values.get(name)
        return value.value if value is not None else None

    def count(self, name: str) -> int | None:
        """The value when it is a positive integer (a step count, an interval, a batch size), else None."""
        value = self.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def where(self, name: str) -> str:
        value = self.values.get(name)
        return value.where if value is not None else "not read"


class JudgeCheck(BaseModel):
    """XTuner's GSM8K judger rule re-applied to the train samples read: the last '#### <number>' in the response's
    last 300 characters, ',' and '$' removed, equal to the label as a string (xtuner/v1/rl/judger/gsm8k.py:29-39,
    70-77)."""

    samples: int = Field(description="GSM8K train samples judged")
    verdicts: dict[str, int] = Field(
        description="rewarded: answer = label; wrong: another number; label_format: same number, label written "
        "'72.0'/72/'1,000'; answer_form: same number written otherwise; no_answer(_truncated): no '#### n' in the "
        "tail (cut at the length limit); judge_zero: answer = label yet 0; rewarded_unmatched: scored without a match"
    )
    cause: RewardCause | None = Field(description="What makes the zero rewards, when it is not wrong answers")
    cause_samples: int = Field(description="Zero-reward samples the cause explains")
    zero_reward_samples: int


class Progress(BaseModel):
    """Where the run is and whether it still moves."""

    state: RunState = Field(
        description="finished: last step = total_steps; failed: logs end in a blocker; stalled: idle over "
        "stall_threshold_s; not_started: no step started yet"
    )
    last_step: int | None = Field(description="Newest finished train step (tracker, trajectories or logs)")
    total_steps: int | None = Field(description="From 'Train step n/total' log lines, else the config")
    percent_done: float | None = None
    step_time_s: float | None = Field(description="Median time/step of the last 10 steps, seconds")
    step_time_first_s: float | None = Field(description="Median time/step of the first 10 steps, seconds")
    step_time_trend: StepTimeTrend
    eta_s: float | None = Field(description="Remaining steps x step_time_s, when running")
    last_activity: str | None = Field(description="Newest log, tracker or trajectory write (UTC ISO 8601)")
    last_activity_file: str | None = None
    idle_s: float | None = Field(description="Seconds since last_activity")
    stall_threshold_s: float | None = Field(
        description="Idle time after which an unfinished run counts as stalled: from its own step times, or the "
        "first-step grace while none is known"
    )
    last_log_line: str | None = Field(description="Newest timestamped line of the rank logs")
    checkpoints: list[int] = Field(description="Steps with checkpoints/ckpt-step-<n> (newest last)")
    checkpoints_omitted: int = 0
    hf_exports: list[int] = Field(description="Steps with hf/hf-step-<n> (newest last)")
    hf_exports_omitted: int = 0
    evidence: list[str] = Field(description="What the state was decided from")


class ErrorCount(BaseModel):
    message: str = Field(description="error_msg with digits replaced by N (first line, 200 chars)")
    count: int


class Learning(BaseModel):
    """Whether the run learns, from trajectories and tracker."""

    trajectory_files: int = Field(description="train_rollout_<step>.jsonl files present")
    steps_scanned: int = Field(description="Train trajectory files read (newest + evenly spread when capped)")
    trajectory_files_omitted: int
    bytes_scanned: int
    samples: int = Field(description="Train samples read")
    unreadable_lines: int
    window: int = Field(description="Newest scanned steps the *_last figures average")
    reward_mean_first: float | None
    reward_mean_last: float | None
    reward_trend: Trend
    reward_std_last: float | None
    no_signal_groups_pct_last: float | None = Field(
        description="Share of GRPO groups (2+ samples) with all-equal rewards: zero advantage"
    )
    all_zero_groups_pct_last: float | None
    truncated_pct_last: float | None = Field(description="Share of responses with finish_reason 'length'")
    response_len_mean_last: float | None
    response_len_max: int | None
    group_size: int | None = Field(description="Most common samples per group (prompt_repeat_k)")
    missing_labels: int = Field(description="Samples with null or empty reward_model.ground_truth")
    status_counts: dict[str, int] = Field(description="Sample status over train and eval files read")
    top_errors: list[ErrorCount]
    top_errors_omitted: int
    entropy_first: float | None
    entropy_last: float | None
    judge_check: JudgeCheck | None = Field(default=None, description="When GSM8K samples were read")
    async_last: dict[str, float] = Field(
        default_factory=dict,
        description="Last-window mean of async/{aborted,expired,failed}_samples: GROUPS left in the replay buffer "
        "after each step's batch was taken (failed adds samples discarded in the window), not samples per step",
    )
    eval_steps: list[int] = Field(description="Steps with eval metrics (tracker eval/* or eval_rollout files)")
    eval_next_step: int | None = Field(
        default=None, description="Next step the config schedules an evaluation at (multiples of evaluate_step)"
    )
    eval_latest: dict[str, float] = Field(description="Metrics of the newest eval step")
    eval_best: dict[str, float] = Field(description="Best value of each metric over the eval steps")


class Outputs(BaseModel):
    """What the run wrote where."""

    exp_dir: str
    work_dir: str
    experiments: list[str] = Field(description="Experiment directories in the work dir, oldest first")
    rank_logs: int
    env_json: bool
    tracker: TrackerFormat
    tracker_path: str | None
    tracker_records: int
    train_trajectory_files: int
    eval_trajectory_files: int
    trace_enabled: bool = Field(description="env.json has XTUNER_OTEL_ENABLED=1 (set from TraceConfig)")
    otel_trace_files: list[str]
    otel_trace_bytes: int
    sandbox_trace_files: dict[str, int] = Field(description="$WORK_DIR/trace/{fates,spans,llm_calls}.*.jsonl counts")
    notes: list[str] = Field(default_factory=list)


class RemoteLogs(BaseModel):
    """Worker logs from the Ray nodes via the dashboard's log API."""

    address: str
    dashboard_url: str | None
    nodes: int
    files: list[str] = Field(description="node_ip:filename of each log read")
    files_omitted: int
    bytes: int
    errors: list[str]
    elapsed_s: float


class Picture(BaseModel):
    mime_type: str = "image/png"
    bytes: int
    width_px: int
    height_px: int
    curves: list[str] = Field(description="Series drawn, one panel each")
    note: str = Field(default="", description="Why no picture, when none was made")
