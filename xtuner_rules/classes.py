"""The RL config classes a user writes in an XTuner config file, as data (no XTuner import).

Every row was read from ``InternLM/xtuner@b934f46``: the class's ``path:line``, its base classes, its pydantic
``extra`` setting (``"forbid"`` means unknown keyword arguments fail with ``Extra inputs are not permitted``), and
each field with its line, annotation, and whether it is required or its default. Field sets are complete for the
listed classes (inherited fields come from the listed bases), so unknown keyword arguments can be detected
statically. Defaults are stored as Python values when they are literals, else as the source text of the default
(``default_expr``), which the static evaluator treats as a known-but-not-literal value.

Other tools may reuse :func:`get`, :func:`fields_of`, :func:`forbids_extra` and :func:`is_subclass`.

The table is pluggable: :func:`use_table` makes other rows (``cluster.xtuner_install`` reads them from the user's
own XTuner with ``ast``) the ones every lookup here answers from, for the duration of a ``with`` block (a context
variable, so concurrent tool calls do not see each other's table).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

MISSING: Any = object()
_MISSING = MISSING


@dataclass(frozen=True)
class F:
    """One pydantic field: name, line in the class's file, annotation text, and default (if any)."""

    name: str
    line: int
    type: str
    default: Any = _MISSING
    default_expr: str | None = None

    @property
    def required(self) -> bool:
        return self.default is _MISSING and self.default_expr is None

    @property
    def has_literal_default(self) -> bool:
        return self.default is not _MISSING


@dataclass(frozen=True)
class C:
    """One config class: where it is defined, its bases among the listed classes, ``extra`` and own fields."""

    name: str
    path: str
    line: int
    bases: tuple[str, ...] = ()
    extra: str | None = None  # the class's own model_config extra setting; None = inherited / pydantic default
    fields: tuple[F, ...] = ()
    end_line: int | None = None  # last line of the class body (known for rows read from a tree)

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}"


_CLASSES: tuple[C, ...] = (
    C(
        "BaseRLTrainerConfig",
        "xtuner/v1/train/rl_trainer.py",
        329,
        bases=(),
        extra="forbid",
        fields=(
            F("train_worker_cfg", 338, "WorkerConfig"),
            F("rollout_config", 339, "RolloutConfig"),
            F("tokenizer_path", 340, "str | Path"),
            F(
                "replay_buffer_config",
                341,
                "SyncReplayBufferConfig | AsyncReplayBufferConfig",
                default_expr="SyncReplayBufferConfig()",
            ),
            F("agent_loop_manager_cfg", 342, "AgentLoopManagerConfig | DisaggAgentLoopManagerConfig"),
            F("eval_agent_loop_manager_cfg", 343, "AgentLoopManagerConfig | None", default=None),
            F("evaluator_config", 344, "EvaluatorConfig | None", default=None),
            F("load_from", 345, "str | Path"),
            F("total_train_steps", 346, "int | None", default=None),
            F("total_epochs", 347, "int | None", default=None),
            F("train_batch_size", 348, "int"),
            F("advantage_estimator_config", 349, "BaseAdvantageConfig", default_expr="GRPOAdvantageConfig()"),
            F("sync_weights_interval", 350, "int", default=1),
            F("enable_evaluate", 352, "bool", default=True),
            F("enable_initial_evaluate", 353, "bool", default=False),
            F("evaluate_step", 354, "int", default=1),
            F("work_dir", 355, "Path | str | None", default=None),
            F("auto_resume", 356, "bool", default=False),
            F("load_checkpoint_cfg", 357, "LoadCheckpointConfig", default_expr="LoadCheckpointConfig()"),
            F("checkpoint_interval", 358, "int | None", default=-1),
            F("checkpoint_maxkeep", 359, "int | None", default=-1),
            F("hf_interval", 360, "int | None", default=-1),
            F("hf_max_keep", 361, "int | None", default=-1),
            F("checkpoint_no_save_optimizer", 362, "bool", default=False),
            F("checkpoint_no_save_replay_buffer", 363, "bool", default=False),
            F("log_dir", 364, "Path | str | None", default=None),
            F("seed", 365, "int", default=42),
            F("debug_rollout", 366, "bool", default=False),
            F("debug_rollout_dir", 367, "Path | str | None", default=None),
            F("debug_train", 368, "bool", default=False),
            F("skip_checkpoint_validation", 369, "bool", default=False),
            F("exp_tracker", 370, "Literal['tensorboard', 'jsonl']", default="tensorboard"),
            F("trace_config", 371, "TraceConfig", default_expr="TraceConfig()"),
        ),
    ),
    C(
        "RLColocateTrainerConfig",
        "xtuner/v1/train/rl_trainer.py",
        397,
        bases=("BaseRLTrainerConfig",),
        extra=None,
        fields=(
            F("agent_loop_manager_cfg", 478, "AgentLoopManagerConfig"),
            F("resources", 479, "AcceleratorResourcesConfig"),
        ),
    ),
    C(
        "RLDisaggregatedTrainerConfig",
        "xtuner/v1/train/rl_trainer.py",
        485,
        bases=("BaseRLTrainerConfig",),
        extra=None,
        fields=(
            F("agent_loop_manager_cfg", 569, "DisaggAgentLoopManagerConfig"),
            F("train_resources", 570, "AcceleratorResourcesConfig"),
            F("rollout_resources", 571, "AcceleratorResourcesConfig"),
        ),
    ),
    C(
        "WorkerConfig",
        "xtuner/v1/rl/trainer/worker.py",
        90,
        bases=(),
        extra="forbid",
        fields=(
            F("model_cfg", 138, "TransformerConfig | BaseComposeConfig"),
            F("optim_cfg", 139, "OptimConfig"),
            F("loss_cfg", 140, "BaseRLLossConfig"),
            F("lr_cfg", 141, "LRConfig"),
            F("fsdp_cfg", 142, "FSDPConfig"),
            F("load_from", 143, "str | Path"),
            F("optimizer_steps", 144, "int", default=1),
            F("sp_size", 145, "int", default=1),
            F("pack_max_length", 146, "int"),
            F("ref_load_from", 147, "str | Path | None", default=None),
            F("ref_model_fsdp_cfg", 148, "FSDPConfig | None", default=None),
            F("log_dir", 149, "str | Path | None", default=None),
            F("update_weight_bucket_size_in_gb", 150, "float", default=0.5),
            F("seed", 151, "None | int", default=None),
            F("profile_step", 152, "list[int] | int | None", default=None),
            F("profile_time", 153, "bool", default=True),
            F("profile_memory", 154, "bool", default=False),
            F("free_rollout_routed_experts_in_worker", 155, "bool", default=True),
            F("offload_rollout_routed_experts", 156, "bool", default=False),
            F("sft_dataloader_cfg", 159, "DataloaderConfig | None", default=None),
            F("sft_global_batch_size", 160, "int", default=-1),
            F("rollout_steps_per_sft", 161, "int", default=1),
            F("sft_loss_cfg", 162, "CELossConfig", default_expr="CELossConfig()"),
        ),
    ),
    C(
        "RolloutConfig",
        "xtuner/v1/rl/rollout/worker.py",
        88,
        bases=(),
        extra="forbid",
        fields=(
            F("env", 155, "str", default=""),
            F("device", 159, "str", default="GPU"),
            F("model_path", 160, "str | Path"),
            F("model_name", 161, "str | None", default=None),
            F("tokenizer_path", 164, "str | None", default=None),
            F("api_key", 167, "Optional[Union[List[str], str]]", default=None),
            F("gpus_per_node", 174, "int", default=8),
            F("dtype", 175, "str", default="bfloat16"),
            F("gpu_memory_utilization", 179, "float", default=0.85),
            F("random_seed", 182, "int", default=1024),
            F("rollout_cross_node_comm", 184, "bool", default=False),
            F("dist_port_base", 191, "int", default=25000),
            F("weight_transport_type", 198, "Optional[str]", default=None),
            F("weight_update_host", 210, "Optional[str]", default=None),
            F("weight_update_port", 220, "Optional[int]", default=30000),
            F("checkpoint_name_prefix", 230, "str", default="xtuner-rl"),
            F("checkpoint_engine_timeout", 237, "float", default=300.0),
            F("checkpoint_engine_sync_after_register", 244, "bool", default=True),
            F("rollout_max_batch_size_per_instance", 254, "Optional[int]", default=None),
            F("allow_over_concurrency_ratio", 261, "float", default=1.2),
            F("tensor_parallel_size", 271, "int", default=1),
            F("data_parallel_size", 278, "int", default=1),
            F("expert_parallel_size", 285, "int", default=1),
            F("enable_chunked_prefill", 293, "bool", default=False),
            F("chunked_prefill_size", 300, "int", default=128),
            F("skip_load_weights", 307, "bool", default=False),
            F("enable_return_routed_experts", 314, "bool", default=False),
            F("launch_server_method", 321, "Literal['ray', 'multiprocessing']", default="ray"),
            F("rollout_timeout", 328, "float", default=1200.0),
            F("session_server_timeout", 335, "float", default=1200.0),
            F("context_length", 342, "Optional[int]", default=None),
            F("enable_float8", 349, "bool", default=False),
            F("extra_rollout_config", 356, "dict", default={}),
            F("max_retry_per_worker", 363, "Optional[int]", default=None),
            F("max_retry_per_sample", 370, "int", default=1),
            F("max_prefill_token_num", 377, "Optional[int]", default=None),
            F("router_n_groups", 384, "Optional[int]", default=None),
            F("fp32_lm_head", 391, "bool", default=False),
            F("enable_prefix_caching", 398, "bool", default=False),
            F("worker_log_dir", 405, "Path", default_expr="Path.cwd() / 'work_dir'"),
            F("health_check_interval_seconds", 406, "float", default=30.0),
            F("health_check_timeout_seconds", 418, "float", default=15.0),
            F("health_check_failure_threshold", 428, "int", default=3),
            F("enable_proxy", 435, "bool", default=False),
            F(
                "routed_proxy_url",
                442,
                "str",
                default="http://s-20260104203038-22bhb.ailab-evalservice.pjh-service.org.cn",
            ),
            F(
                "routed_proxy_admin_url",
                449,
                "str",
                default="http://s-20260104203038-22bhb-decode.ailab-evalservice.svc:4000",
            ),
        ),
    ),
    C(
        "AgentLoopManagerConfig",
        "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py",
        89,
        bases=(),
        extra="forbid",
        fields=(F("tasks", 120, "list[TaskSpecConfig] | TaskSpecConfig"),),
    ),
    C(
        "TaskSpecConfig",
        "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py",
        41,
        bases=(),
        extra="forbid",
        fields=(
            F("task_name", 81, "str"),
            F("weight", 82, "float", default=1.0),
            F("agent_loop_config", 83, "AgentLoopConfig"),
            F("judger_config", 84, "JudgerConfig | ComposedJudgerConfig | None", default=None),
            F("produce_strategy_config", 85, "ProduceStrategyConfig", default_expr="SyncProduceStrategyConfig()"),
            F("sampler_config", 86, "SamplerConfig"),
        ),
    ),
    C(
        "DisaggAgentLoopManagerConfig",
        "xtuner/v1/rl/agent_loop_manager/disagg_agent_loop_manager.py",
        57,
        bases=(),
        extra="forbid",
        fields=(F("tasks", 62, "list[DisaggTaskSpecConfig] | DisaggTaskSpecConfig"),),
    ),
    C(
        "DisaggTaskSpecConfig",
        "xtuner/v1/rl/agent_loop_manager/disagg_agent_loop_manager.py",
        44,
        bases=(),
        extra="forbid",
        fields=(
            F("task_name", 49, "str"),
            F("weight", 50, "float", default=1.0),
            F("agent_loop_config", 51, "AgentLoopConfig"),
            F("judger_config", 52, "JudgerConfig | ComposedJudgerConfig | None", default=None),
            F(
                "produce_strategy_config",
                53,
                "DisaggProduceStrategyConfig",
                default_expr="DisaggAsyncProduceStrategyConfig()",
            ),
            F("sampler_config", 54, "SamplerConfig"),
        ),
    ),
    C(
        "SamplerConfig",
        "xtuner/v1/rl/agent_loop_manager/sampler.py",
        21,
        bases=(),
        extra="forbid",
        fields=(
            F("dataloader_cfg", 46, "DataloaderConfig"),
            F("prompt_repeat_k", 47, "int", default=1),
        ),
    ),
    C(
        "ProduceStrategyConfig",
        "xtuner/v1/rl/agent_loop_manager/producer.py",
        123,
        bases=(),
        extra="forbid",
        fields=(
            F("is_valid_sample_fn", 139, "IsValidSampleFn", default_expr="default_is_valid_sample_fn"),
            F("should_continue_fn", 140, "ShouldContinueFn", default_expr="default_should_continue_fn"),
        ),
    ),
    C(
        "SyncProduceStrategyConfig",
        "xtuner/v1/rl/agent_loop_manager/producer.py",
        151,
        bases=("ProduceStrategyConfig",),
        extra=None,
        fields=(),
    ),
    C(
        "AsyncProduceStrategyConfig",
        "xtuner/v1/rl/agent_loop_manager/producer.py",
        185,
        bases=("ProduceStrategyConfig",),
        extra=None,
        fields=(
            F("over_sample_threshold", 231, "float", default=0.0),
            F("enable_partial_rollout", 232, "bool", default=False),
            F("max_staleness", 233, "int", default=0),
            F("max_token_staleness", 234, "int | None", default=None),
            F("tail_batch_trigger_size", 235, "int", default=-1),
        ),
    ),
    C(
        "DisaggProduceStrategyConfig",
        "xtuner/v1/rl/agent_loop_manager/disagg_producer.py",
        229,
        bases=(),
        extra="forbid",
        fields=(
            F("is_valid_sample_fn", 233, "IsValidSampleFn", default_expr="default_is_valid_sample_fn"),
            F("should_continue_fn", 234, "ShouldContinueFn", default_expr="default_should_continue_fn"),
        ),
    ),
    C(
        "DisaggAsyncProduceStrategyConfig",
        "xtuner/v1/rl/agent_loop_manager/disagg_producer.py",
        245,
        bases=("DisaggProduceStrategyConfig",),
        extra=None,
        fields=(
            F("over_sample_threshold", 276, "float", default=0.0),
            F("enable_partial_rollout", 277, "bool", default=False),
            F("max_staleness", 278, "int", default=0),
            F("max_token_staleness", 279, "int | None", default=None),
            F("tail_batch_trigger_size", 280, "int", default=-1),
        ),
    ),
    C(
        "SyncReplayBufferConfig",
        "xtuner/v1/rl/replay_buffer.py",
        693,
        bases=(),
        extra="forbid",
        fields=(),
    ),
    C(
        "AsyncReplayBufferConfig",
        "xtuner/v1/rl/replay_buffer.py",
        716,
        bases=(),
        extra="forbid",
        fields=(),
    ),
    C(
        "EvaluatorConfig",
        "xtuner/v1/rl/evaluator.py",
        121,
        bases=(),
        extra="forbid",
        fields=(
            F("eval_sample_ratio", 149, "float", default=0),
            F("eval_sample_num", 153, "int", default=0),
            F("compute_metric_func", 158, "ComputeMetricProtocol | None", default=None),
        ),
    ),
    C(
        "AcceleratorResourcesConfig",
        "xtuner/v1/rl/utils/ray_accelerator_worker.py",
        26,
        bases=(),
        extra="forbid",
        fields=(
            F("accelerator", 64, "AcceleratorType", default="GPU"),
            F("num_workers", 67, "int"),
            F("num_cpus_per_worker", 68, "float", default=12),
            F("cpu_memory_per_worker", 69, "int", default=16 * 1024**3),
            F("num_accelerators_per_node", 72, "int", default=8),
            F("num_accelerators_per_worker", 73, "float", default=1),
            F("pg_pack_strategy", 77, "str", default="PACK"),
        ),
    ),
    C(
        "CPUResourcesConfig",
        "xtuner/v1/rl/utils/ray_cpu_worker.py",
        28,
        bases=(),
        extra="forbid",
        fields=(
            F("num_workers", 57, "int", default=1),
            F("num_cpus_per_worker", 58, "float", default=1),
            F("cpu_memory_per_worker", 59, "int", default=1024**3),
            F("pg_pack_strategy", 62, "str", default="SPREAD"),
        ),
    ),
    C(
        "TraceConfig",
        "xtuner/v1/rl/trace/runtime.py",
        109,
        bases=(),
        extra="forbid",
        fields=(
            F("enabled", 118, "bool", default=False),
            F("output_dir", 119, "Path | str | None", default=None),
            F("service_name", 120, "str", default="xtuner-rollout"),
            F("xtuner_viewer_enabled", 121, "bool", default=False),
            F("xtuner_viewer_host", 122, "str", default="127.0.0.1"),
            F("xtuner_viewer_port", 123, "int", default=18080),
            F("xtuner_viewer_jaeger_query_url", 124, "str | None", default=None),
            F("enable_rollout_trace", 125, "bool", default=False),
        ),
    ),
    C(
        "SampleParams",
        "xtuner/v1/data_proto/rl_data.py",
        25,
        bases=(),
        extra="forbid",
        fields=(
            F("n", 27, "int", default=1),
            F("top_k", 28, "int", default=0),
            F("top_p", 29, "float", default=1.0),
            F("temperature", 30, "float", default=1.0),
            F("repetition_penalty", 31, "float", default=1.0),
            F("presence_penalty", 32, "float", default=0.0),
            F("frequency_penalty", 33, "float", default=0.0),
            F("min_tokens", 34, "int", default=0),
            F("max_tokens", 35, "int", default=2048),
            F("stops", 36, "list[str]", default=[]),
            F("stop_token_ids", 37, "list[int]", default=[]),
            F("skip_special_tokens", 38, "bool", default=True),
            F("sampling_seed", 39, "int | None", default=None),
            F("stream", 40, "bool", default=False),
            F("return_logprob", 41, "bool", default=True),
            F("top_logprobs", 42, "int", default=1),
            F("return_token_ids", 43, "bool", default=True),
            F("include_stop_str_in_output", 44, "bool", default=True),
            F("no_stop_trim", 45, "bool", default=True),
            F("spaces_between_special_tokens", 46, "bool", default=False),
            F("return_routed_experts", 47, "bool", default=True),
        ),
    ),
    C(
        "AgentLoopConfig",
        "xtuner/v1/rl/agent_loop/agent_loop.py",
        34,
        bases=(),
        extra="forbid",
        fields=(
            F("hf_checkpoint", 36, "str"),
            F("sample_params", 37, "SampleParams | None", default=None),
            F("cpu_resources", 38, "CPUResourcesConfig | None", default=None),
            F("enable_batch_judge", 39, "bool", default=False),
            F("requires_rollout_proxy", 40, "bool", default=False),
        ),
    ),
    C(
        "SingleTurnAgentLoopConfig",
        "xtuner/v1/rl/agent_loop/single_turn_agent_loop.py",
        9,
        bases=("AgentLoopConfig",),
        extra=None,
        fields=(),
    ),
    C(
        "GSM8KToolAgentLoopConfig",
        "xtuner/v1/rl/agent_loop/gsm8k_with_tool.py",
        18,
        bases=("AgentLoopConfig",),
        extra=None,
        fields=(F("max_turns", 19, "int"),),
    ),
    C(
        "JudgerConfig",
        "xtuner/v1/rl/judger/native.py",
        307,
        bases=(),
        extra="forbid",
        fields=(
            F("judger_name", 338, "str"),
            F("reward_handler", 339, "Callable | str | None", default=None),
            F("request_timeout", 340, "float", default=30.0),
            F("extra_info", 341, "dict", default={}),
            F("cpu_resources", 342, "CPUResourcesConfig | None", default=None),
        ),
    ),
    C(
        "GSM8KJudgerConfig",
        "xtuner/v1/rl/judger/gsm8k.py",
        80,
        bases=("JudgerConfig",),
        extra=None,
        fields=(
            F("judger_name", 103, "str", default="openai/gsm8k"),
            F("extra_info", 104, "dict", default={"score": 1, "format_score": 0}),
            F("reward_handler", 105, "Callable | str", default_expr="compute_reward"),
        ),
    ),
    C(
        "GEO3KJudgerConfig",
        "xtuner/v1/rl/judger/geo3k.py",
        38,
        bases=("JudgerConfig",),
        extra=None,
        fields=(
            F("judger_name", 41, "str", default="hiyouga/geometry3k"),
            F("extra_info", 42, "dict", default={"format_score": 0.1, "use_boxed": True}),
            F("reward_handler", 43, "Callable | str", default_expr="compute_reward"),
        ),
    ),
    C(
        "DapoMathJudgerConfig",
        "xtuner/v1/rl/judger/dapo_math.py",
        293,
        bases=("JudgerConfig",),
        extra=None,
        fields=(
            F("eos_token", 294, "List[str] | str"),
            F("enable_overlong_buffer", 295, "bool"),
            F("score", 296, "int", default=1),
            F("format_score", 297, "int", default=0),
            F("max_response_len", 298, "Optional[int]", default=None),
            F("overlong_buffer_len", 299, "Optional[int]", default=None),
            F("overlong_penalty_factor", 300, "Optional[float]", default=None),
            F("tokenizer", 301, "Any", default=None),
            F("reward_handler", 302, "Callable | str", default_expr="compute_reward"),
            F("extra_info", 303, "dict", default={}),
        ),
    ),
    C(
        "CompassVerifierV2Config",
        "xtuner/v1/rl/judger/compass_verifier_v2.py",
        120,
        bases=("JudgerConfig",),
        extra="forbid",
        fields=(
            F("hosts", 123, "list[str]"),
            F("judger_name", 124, "str", default="compass_verifier_v2"),
            F("request_timeout", 125, "float", default=30.0),
            F("max_retries", 126, "int", default=3),
            F("thinking_finish_words", 127, "list[str]", default=["<conclude>", "**Final Answer**", "</think>"]),
        ),
    ),
    C(
        "ComposedJudgerConfig",
        "xtuner/v1/rl/judger/composed.py",
        177,
        bases=(),
        extra="forbid",
        fields=(
            F("branches", 210, "dict[str, JudgerConfigLike]"),
            F("merge_fn", 216, "JudgerMergeFn | None", default=None),
        ),
    ),
    C(
        "BaseAdvantageConfig",
        "xtuner/v1/rl/advantage/config.py",
        12,
        bases=(),
        extra="forbid",
        fields=(),
    ),
    C(
        "GRPOAdvantageConfig",
        "xtuner/v1/rl/advantage/config.py",
        21,
        bases=("BaseAdvantageConfig",),
        extra=None,
        fields=(F("eps", 28, "float", default=1e-08),),
    ),
    C(
        "GRPOLossConfig",
        "xtuner/v1/rl/loss/grpo_loss.py",
        23,
        bases=("BaseRLLossConfig",),
        extra=None,
        fields=(),
    ),
    C(
        "BaseRLLossConfig",
        "xtuner/v1/rl/loss/base_loss.py",
        27,
        bases=("CELossConfig",),
        extra=None,
        fields=(
            F("policy_loss_cfg", 83, "dict[str, Any]"),
            F("use_kl_loss", 84, "bool", default=False),
            F("kl_loss_coef", 85, "float", default=0.001),
            F("kl_loss_type", 86, "Literal['kl', 'k1', 'abs', 'mse', 'k2', 'low_var_kl', 'k3'] | None", default=None),
            F("rollout_is", 87, "RolloutImportanceSampling", default_expr="RolloutImportanceSampling()"),
        ),
    ),
    C(
        "CELossConfig",
        "xtuner/v1/loss/ce_loss.py",
        22,
        bases=("BaseLossConfig",),
        extra=None,
        fields=(
            F("mode", 35, "Literal['eager', 'chunk', 'liger']", default="eager"),
            F("loss_reduction", 36, "Literal['token', 'sample', 'square']", default="token"),
        ),
    ),
    C(
        "BaseLossConfig",
        "xtuner/v1/loss/base_loss_ctx.py",
        98,
        bases=(),
        extra="forbid",
        fields=(
            F("ignore_idx", 100, "int", default=-100),
            F("mode", 101, "Literal['eager', 'chunk']", default="eager"),
            F("chunk_size", 102, "int | None", default=1024),
        ),
    ),
    C(
        "DatasetConfig",
        "xtuner/v1/datasets/config.py",
        42,
        bases=(),
        extra="forbid",
        fields=(
            F("anno_path", 44, "str | Path"),
            F("cache_dir", 45, "str | Path | None", default=None),
            F("cache_tag", 46, "str | None", default=None),
            F("name", 47, "str", default="default"),
            F("class_name", 48, "str", default="JsonlDataset"),
            F("sample_ratio", 49, "float", default=1.0),
            F("enable_sequential_sampler", 50, "bool", default=False),
            F("enable_mmap_shared", 51, "bool", default=False),
            F("media_root", 52, "str | None", default=""),
            F("disable_filter", 53, "bool", default=False),
        ),
    ),
    C(
        "RLTextTokenizeFnConfig",
        "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py",
        104,
        bases=(),
        extra="forbid",
        fields=(
            F("max_length", 106, "int | None", default=None),
            F("tools_schema", 107, "list | None", default=None),
        ),
    ),
    C(
        "LoadCheckpointConfig",
        "xtuner/v1/train/trainer.py",
        383,
        bases=(),
        extra="forbid",
        fields=(
            F("checkpoint_path", 385, "str | Path | None", default=None),
            F("load_optimizer_states", 386, "bool", default=True),
            F("load_optimizer_args", 387, "bool", default=True),
            F("load_dataset", 388, "bool", default=True),
            F("load_scheduler", 389, "bool", default=True),
            F("offload_optimizer_first_step", 390, "bool", default=False),
        ),
    ),
)

CLASSES: dict[str, C] = {c.name: c for c in _CLASSES}

#: Trainer config classes the RL CLI can build (``cfg.trainer.build()``, xtuner/v1/train/cli/rl.py:62).
COLOCATED_TRAINER = "RLColocateTrainerConfig"
DISAGGREGATED_TRAINER = "RLDisaggregatedTrainerConfig"
TRAINER_CLASSES = (COLOCATED_TRAINER, DISAGGREGATED_TRAINER)

#: Judger configs that build a NativeJudger, whose batch_judge raises (xtuner/v1/rl/judger/native.py:188-189).
NATIVE_JUDGERS = ("JudgerConfig", "GSM8KJudgerConfig", "GEO3KJudgerConfig", "DapoMathJudgerConfig")
#: CompassVerifierV2 has no batch support either (xtuner/v1/rl/judger/compass_verifier_v2.py:66-67).
NO_BATCH_JUDGERS = (*NATIVE_JUDGERS, "CompassVerifierV2Config")

#: Agent loops that score inside the loop (own judger), so a task judger is not required
#: (xtuner/v1/rl/agent_loop/__init__.py:27-39; fact dossier section 5).
SELF_JUDGING_AGENT_LOOPS = ("AgentInLocalhostLoopConfig", "AgentInSandboxLoopConfig")

#: Produce strategies by trainer mode (xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:85,
#: disagg_agent_loop_manager.py:53).
COLOCATED_STRATEGIES = ("SyncProduceStrategyConfig", "AsyncProduceStrategyConfig")
DISAGG_STRATEGIES = ("DisaggAsyncProduceStrategyConfig",)

#: Placement-group strategies Ray accepts (AcceleratorResourcesConfig validator, ray_accelerator_worker.py:82-86).
VALID_PG_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


_ACTIVE: ContextVar[dict[str, C] | None] = ContextVar("xtuner_class_table", default=None)


def table() -> dict[str, C]:
    """The rows lookups answer from: a table made active by :func:`use_table`, else the built-in one."""
    return _ACTIVE.get() or CLASSES


@contextmanager
def use_table(rows: dict[str, C] | None) -> Iterator[None]:
    """Answer every lookup in this module from ``rows`` inside the block (None: the built-in table)."""
    token = _ACTIVE.set(rows)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def get(name: str) -> C | None:
    return table().get(name)


def lineage(name: str) -> list[C] | None:
    """The class and all its bases, most-derived first; None if any class in the chain is not listed."""
    out: list[C] = []
    todo = [name]
    rows = table()
    while todo:
        c = rows.get(todo.pop(0))
        if c is None:
            return None
        out.append(c)
        todo.extend(c.bases)
    return out


def fields_of(name: str) -> dict[str, F] | None:
    """All fields of a class including inherited ones (a subclass's definition wins); None if unknown."""
    chain = lineage(name)
    if chain is None:
        return None
    merged: dict[str, F] = {}
    for c in reversed(chain):
        for f in c.fields:
            merged[f.name] = f
    return merged


def field_owner(name: str, field: str) -> C | None:
    """The class (in the chain) whose definition of ``field`` applies."""
    for c in lineage(name) or []:
        if any(f.name == field for f in c.fields):
            return c
    return None


def extra_owner(name: str) -> C | None:
    """The class in the chain whose model_config sets ``extra`` (the one that applies)."""
    for c in lineage(name) or []:
        if c.extra is not None:
            return c
    return None


def forbids_extra(name: str) -> bool:
    """True if unknown keyword arguments fail (own or inherited ``extra="forbid"``)."""
    for c in lineage(name) or []:
        if c.extra is not None:
            return c.extra == "forbid"
    return False


def is_subclass(name: str, base: str) -> bool:
    return any(c.name == base for c in lineage(name) or [])
