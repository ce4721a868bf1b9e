"""What inspect_run reports about a run, besides its findings: progress, learning signals, outputs, series."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RunState = Literal["running", "finished", "stalled", "failed", "not_started"]
Trend = Literal["rising", "flat", "falling", "unknown"]


class Progress(BaseModel):
    """Where the run is and whether it still moves."""

    state: RunState = Field(
        description="finished: last step = total_steps; failed: logs end in a blocker; stalled: idle over "
        "stall_threshold_s; not_started: no step yet"
    )
    last_step: int | None = Field(description="Newest finished train step (tracker, trajectories or logs)")
    total_steps: int | None = Field(description="From 'Train step n/total' log lines")
    percent_done: float | None = None
    step_time_s: float | None = Field(description="Median time/step of the last 10 steps, seconds")
    step_time_first_s: float | None = Field(description="Median time/step of the first 10 steps, seconds")
    step_time_trend: Literal["steady", "slowing", "speeding_up", "unknown"]
    eta_s: float | None = Field(description="Remaining steps x step_time_s, when running")
    last_activity: str | None = Field(description="Newest log, tracker or trajectory write (UTC ISO 8601)")
    last_activity_file: str | None = None
    idle_s: float | None = Field(description="Seconds since last_activity")
    stall_threshold_s: float | None = Field(description="Idle time after which an unfinished run counts as stalled")
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
    async_last: dict[str, float] = Field(
        default_factory=dict, description="Last-window mean of async/{aborted,expired,failed}_samples per step"
    )
    eval_steps: list[int] = Field(description="Steps with eval metrics (tracker eval/* or eval_rollout files)")
    eval_latest: dict[str, float] = Field(description="Metrics of the newest eval step")
    eval_best: dict[str, float] = Field(description="Best value of each metric over the eval steps")


class Outputs(BaseModel):
    """What the run wrote where."""

    exp_dir: str
    work_dir: str
    experiments: list[str] = Field(description="Experiment directories in the work dir, oldest first")
    rank_logs: int
    env_json: bool
    tracker: Literal["jsonl", "tensorboard", "none"]
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
