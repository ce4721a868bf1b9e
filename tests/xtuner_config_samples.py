"""Realistic XTuner RL configs for tests, shaped like the upstream examples (our own text, not copies).

``COLOCATED_SYNC`` follows examples/v1/config/rl_grpo_gsm8k_judge.py (sync strategy, tracing on), ``COLOCATED_ASYNC``
rl_grpo_gsm8k_async.py, ``DISAGGREGATED`` rl_disagg_single.py (env-driven knobs), ``MULTI_TASK``
rl_multi_task_gsm8k_dapo_math.py (two weighted tasks). Tests mutate them with :func:`mutate`.
"""

from __future__ import annotations

from pathlib import Path

IMPORTS = """\
import os
from pathlib import Path

from xtuner.v1.config import AdamWConfig, FSDPConfig, LRConfig
from xtuner.v1.data_proto.rl_data import SampleParams
from xtuner.v1.datasets.config import DataloaderConfig, DatasetConfig
from xtuner.v1.datasets.rl_tokenize_fn import RLTextTokenizeFnConfig
from xtuner.v1.model import get_model_config_from_hf
from xtuner.v1.rl.advantage import GRPOAdvantageConfig
from xtuner.v1.rl.agent_loop import SingleTurnAgentLoopConfig
from xtuner.v1.rl.agent_loop_manager import (
    AgentLoopManagerConfig,
    AsyncProduceStrategyConfig,
    DisaggAgentLoopManagerConfig,
    DisaggAsyncProduceStrategyConfig,
    DisaggTaskSpecConfig,
    SamplerConfig,
    SyncProduceStrategyConfig,
    TaskSpecConfig,
)
from xtuner.v1.rl.evaluator import EvaluatorConfig
from xtuner.v1.rl.judger import DapoMathJudgerConfig, GSM8KJudgerConfig
from xtuner.v1.rl.loss import GRPOLossConfig
from xtuner.v1.rl.replay_buffer import AsyncReplayBufferConfig, SyncReplayBufferConfig
from xtuner.v1.rl.rollout.worker import RolloutConfig
from xtuner.v1.rl.trace import TraceConfig
from xtuner.v1.rl.trainer import WorkerConfig
from xtuner.v1.rl.utils import AcceleratorResourcesConfig, CPUResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig, RLDisaggregatedTrainerConfig
"""

WORKER = """
lr_cfg = LRConfig(lr_type="constant", warmup_ratio=0, lr_min=1e-6)
fsdp_cfg = FSDPConfig(torch_compile=False, cpu_offload=False, ep_size=1)
model_cfg = get_model_config_from_hf(Path(model_path))
if hasattr(model_cfg, "z_loss_cfg"):
    model_cfg.z_loss_cfg = None
optim_cfg = AdamWConfig(lr=1e-6, foreach=False, weight_decay=0.1)
loss_cfg = GRPOLossConfig(
    policy_loss_cfg=dict(
        cliprange_high=0.28,
        cliprange_low=0.2,
        loss_type=os.environ.get("LOSS_TYPE", "vanilla"),
        clip_ratio_c=10.0,
    ),
    ignore_idx=-100,
    use_kl_loss=False,
    mode=os.environ.get("LOSS_MODE", "chunk"),
    chunk_size=512,
)
train_worker_cfg = WorkerConfig(
    model_cfg=model_cfg,
    load_from=model_path,
    optim_cfg=optim_cfg,
    loss_cfg=loss_cfg,
    lr_cfg=lr_cfg,
    fsdp_cfg=fsdp_cfg,
    sp_size=int(os.environ.get("SP_SIZE", "1")),
    optimizer_steps=1,
    pack_max_length=pack_max_length,
)
"""

SAMPLERS = """
tokenize_cfg = RLTextTokenizeFnConfig(max_length=max_prompt_length)
train_dataloader = DataloaderConfig(
    dataset_config_list=[{"dataset": DatasetConfig(name=experiment, anno_path=data_path), "tokenize_fn": tokenize_cfg}],
    pack_max_length=pack_max_length,
    collator="fake_collator",
    pack_level="none",
)
train_sampler = SamplerConfig(dataloader_cfg=train_dataloader, prompt_repeat_k=prompt_repeat_k)
eval_dataloader = DataloaderConfig(
    dataset_config_list=[
        {"dataset": DatasetConfig(name=experiment, anno_path=eval_data_path, sample_ratio=1.0), "tokenize_fn": tokenize_cfg}
    ],
    pack_max_length=pack_max_length,
    collator="fake_collator",
    pack_level="none",
)
eval_sampler = SamplerConfig(dataloader_cfg=eval_dataloader, prompt_repeat_k=1)
train_params = SampleParams(max_tokens=max_response_length, top_k=0, top_p=1.0, temperature=1.0, min_tokens=0)
eval_params = SampleParams(max_tokens=max_response_length, top_k=1, top_p=1.0, temperature=0.0, min_tokens=0)
train_loop = SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=train_params)
eval_loop = SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=eval_params)
"""

ENV_HEAD = """
work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
data_path = os.environ["DATA_PATH"]
eval_data_path = os.environ["EVAL_DATA_PATH"]
NNODE = int(os.environ.get("WORLD_SIZE", "1"))
"""

COLOCATED_SYNC = (
    IMPORTS
    + ENV_HEAD
    + """
experiment = "grpo_gsm8k_sync"
total_train_steps = 45
evaluate_step = 45
train_batch_size = int(os.environ.get("TRAIN_BATCH_SIZE", 64))
prompt_repeat_k = 5
max_prompt_length = 512
max_response_length = 1024
pack_max_length = 32 * 1024
enable_trace = True

resources = AcceleratorResourcesConfig(
    accelerator="GPU",
    num_workers=8 * NNODE,
    num_cpus_per_worker=12,
    cpu_memory_per_worker=16 * 1024**3,
)
rollout_config = RolloutConfig(
    env=experiment,
    device=resources.accelerator,
    model_path=model_path,
    dtype="bfloat16",
    tensor_parallel_size=1,
    expert_parallel_size=1,
    gpu_memory_utilization=0.8,
    context_length=max_prompt_length + max_response_length,
)
judger_config = GSM8KJudgerConfig(
    judger_name="openai/gsm8k",
    cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
)
"""
    + WORKER
    + SAMPLERS
    + """
agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="train_task",
        agent_loop_config=train_loop,
        judger_config=judger_config,
        produce_strategy_config=SyncProduceStrategyConfig(),
        sampler_config=train_sampler,
    ),
)
eval_agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="eval_task",
        agent_loop_config=eval_loop,
        judger_config=judger_config,
        sampler_config=eval_sampler,
    ),
)
evaluator_config = EvaluatorConfig(compute_metric_func=None)
trace_config = TraceConfig(
    enabled=enable_trace,
    service_name="grpo-gsm8k-rollout",
    xtuner_viewer_enabled=False,
    enable_rollout_trace=True,
)

trainer = RLColocateTrainerConfig(
    resources=resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    replay_buffer_config=SyncReplayBufferConfig(),
    agent_loop_manager_cfg=agent_loop_manager_cfg,
    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,
    evaluator_config=evaluator_config,
    load_from=model_path,
    total_train_steps=total_train_steps,
    train_batch_size=train_batch_size,
    advantage_estimator_config=GRPOAdvantageConfig(eps=1e-8),
    enable_evaluate=True,
    enable_initial_evaluate=False,
    evaluate_step=evaluate_step,
    work_dir=work_dir,
    seed=123,
    debug_rollout=False,
    trace_config=trace_config,
)
"""
)

COLOCATED_ASYNC = (
    IMPORTS
    + ENV_HEAD
    + """
experiment = "grpo_gsm8k_async"
total_train_steps = 45
evaluate_step = 45
train_batch_size = int(os.environ.get("TRAIN_BATCH_SIZE", 64 * 1))
prompt_repeat_k = 5
max_prompt_length = 2048
max_response_length = 8192
pack_max_length = 10 * 1024

resources = AcceleratorResourcesConfig(
    accelerator="GPU",
    num_workers=8 * NNODE,
    num_cpus_per_worker=12,
    cpu_memory_per_worker=32 * 1024**3,
)
rollout_config = RolloutConfig(
    env=experiment,
    device=resources.accelerator,
    model_path=model_path,
    dtype="bfloat16",
    tensor_parallel_size=1,
    expert_parallel_size=1,
    gpu_memory_utilization=0.8,
    context_length=max_response_length + max_prompt_length,
    weight_transport_type="ipc",
)
train_judger = GSM8KJudgerConfig(
    judger_name="openai/gsm8k",
    cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
)
eval_judger = GSM8KJudgerConfig(
    judger_name="openai/gsm8k",
    cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
)
"""
    + WORKER
    + SAMPLERS
    + """
produce_strategy_config = AsyncProduceStrategyConfig(
    over_sample_threshold=0.8,
    enable_partial_rollout=True,
    max_staleness=0,
    tail_batch_trigger_size=64,
)
agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="train_task",
        agent_loop_config=train_loop,
        judger_config=train_judger,
        produce_strategy_config=produce_strategy_config,
        sampler_config=train_sampler,
    ),
)
eval_agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="eval_task",
        agent_loop_config=eval_loop,
        judger_config=eval_judger,
        sampler_config=eval_sampler,
    ),
)
evaluator_config = EvaluatorConfig(compute_metric_func=None)

trainer = RLColocateTrainerConfig(
    resources=resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    replay_buffer_config=AsyncReplayBufferConfig(),
    agent_loop_manager_cfg=agent_loop_manager_cfg,
    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,
    evaluator_config=evaluator_config,
    load_from=model_path,
    total_train_steps=total_train_steps,
    train_batch_size=train_batch_size,
    advantage_estimator_config=GRPOAdvantageConfig(eps=1e-8),
    enable_evaluate=True,
    enable_initial_evaluate=False,
    evaluate_step=evaluate_step,
    work_dir=work_dir,
    seed=123,
    debug_rollout=False,
)
"""
)

DISAGGREGATED = (
    IMPORTS
    + """
work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
data_path = os.environ["DATA_PATH"]
eval_data_path = os.environ["EVAL_DATA_PATH"]

experiment = "disagg_grpo_gsm8k"
total_train_steps = int(os.environ.get("TOTAL_TRAIN_STEPS", "16"))
evaluate_step = int(os.environ.get("EVALUATE_STEP", str(total_train_steps)))
train_batch_size = int(os.environ.get("TRAIN_BATCH_SIZE", str(32)))
sync_weights_interval = int(os.environ.get("SYNC_WEIGHTS_INTERVAL", "1"))
over_sample_threshold = float(os.environ.get("OVER_SAMPLE_THRESHOLD", "0.0"))
partial_rollout = os.environ.get("PARTIAL_ROLLOUT", "0") == "1"
max_staleness = int(os.environ.get("MAX_STALENESS", "0"))
prompt_repeat_k = int(os.environ.get("PROMPT_REPEAT_K", "4"))
max_prompt_length = int(os.environ.get("MAX_PROMPT_LENGTH", "512"))
max_response_length = int(os.environ.get("MAX_RESPONSE_LENGTH", "1024"))
pack_max_length = int(os.environ.get("PACK_MAX_LENGTH", str(32 * 1024)))
enable_evaluate = os.environ.get("ENABLE_EVALUATE", "1") == "1"

train_resources = AcceleratorResourcesConfig(
    accelerator=os.environ.get("ACCELERATOR", "GPU"),
    num_workers=int(os.environ.get("TRAIN_NUM_WORKERS", "4")),
    num_cpus_per_worker=float(os.environ.get("TRAIN_CPUS_PER_WORKER", "12")),
)
rollout_resources = AcceleratorResourcesConfig(
    accelerator=os.environ.get("ACCELERATOR", "GPU"),
    num_workers=int(os.environ.get("ROLLOUT_NUM_WORKERS", "4")),
)
rollout_config = RolloutConfig(
    env=experiment,
    device=rollout_resources.accelerator,
    model_path=model_path,
    tensor_parallel_size=int(os.environ.get("ROLLOUT_TP_SIZE", "1")),
    gpu_memory_utilization=float(os.environ.get("ROLLOUT_GPU_MEMORY_UTILIZATION", "0.8")),
    context_length=max_response_length + max_prompt_length,
)
judger_config = GSM8KJudgerConfig(judger_name="openai/gsm8k")
"""
    + WORKER
    + SAMPLERS
    + """
produce_strategy_config = DisaggAsyncProduceStrategyConfig(
    over_sample_threshold=over_sample_threshold,
    enable_partial_rollout=partial_rollout,
    max_staleness=max_staleness,
)
agent_loop_manager_cfg = DisaggAgentLoopManagerConfig(
    tasks=DisaggTaskSpecConfig(
        task_name="train_task",
        agent_loop_config=train_loop,
        judger_config=judger_config,
        produce_strategy_config=produce_strategy_config,
        sampler_config=train_sampler,
    ),
)
eval_agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="eval_task",
        agent_loop_config=eval_loop,
        judger_config=judger_config,
        sampler_config=eval_sampler,
    ),
)
evaluator_config = EvaluatorConfig(compute_metric_func=None)

trainer = RLDisaggregatedTrainerConfig(
    train_resources=train_resources,
    rollout_resources=rollout_resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    replay_buffer_config=AsyncReplayBufferConfig(),
    agent_loop_manager_cfg=agent_loop_manager_cfg,
    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,
    evaluator_config=evaluator_config,
    load_from=model_path,
    train_batch_size=train_batch_size,
    total_train_steps=total_train_steps,
    sync_weights_interval=sync_weights_interval,
    enable_evaluate=enable_evaluate,
    enable_initial_evaluate=True,
    evaluate_step=evaluate_step,
    work_dir=work_dir,
    seed=int(os.environ.get("SEED", "123")),
)
"""
)

MULTI_TASK = (
    IMPORTS
    + """
work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
data_path = os.environ["GSM8K_DATA_PATH"]
eval_data_path = os.environ["GSM8K_EVAL_DATA_PATH"]
dapo_data_path = os.environ["DAPO_DATA_PATH"]
gsm8k_weight = float(os.environ.get("GSM8K_TASK_WEIGHT", "1.0"))
dapo_weight = float(os.environ.get("DAPO_TASK_WEIGHT", "1.0"))

experiment = "multi_task"
prompt_repeat_k = 5
max_prompt_length = 2048
max_response_length = 8192
pack_max_length = 32768

resources = AcceleratorResourcesConfig(accelerator="GPU", num_workers=8, num_cpus_per_worker=12)
rollout_config = RolloutConfig(
    env=experiment,
    device=resources.accelerator,
    model_path=model_path,
    context_length=max_response_length + max_prompt_length,
    rollout_max_batch_size_per_instance=2048,
)
gsm8k_judger = GSM8KJudgerConfig()
dapo_judger = DapoMathJudgerConfig(
    judger_name="dapo_math",
    cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
    eos_token="<|im_end|>",
    enable_overlong_buffer=False,
)
"""
    + WORKER
    + SAMPLERS
    + """
dapo_sampler = SamplerConfig(
    dataloader_cfg=DataloaderConfig(
        dataset_config_list=[
            {"dataset": DatasetConfig(name="dapo", anno_path=dapo_data_path), "tokenize_fn": tokenize_cfg}
        ],
        pack_max_length=pack_max_length,
        collator="fake_collator",
        pack_level="none",
    ),
    prompt_repeat_k=8,
)
agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=[
        TaskSpecConfig(
            task_name="train_task:dapo_math",
            weight=dapo_weight,
            agent_loop_config=train_loop,
            judger_config=dapo_judger,
            produce_strategy_config=SyncProduceStrategyConfig(),
            sampler_config=dapo_sampler,
        ),
        TaskSpecConfig(
            task_name="train_task:gsm8k",
            weight=gsm8k_weight,
            agent_loop_config=train_loop,
            judger_config=gsm8k_judger,
            produce_strategy_config=SyncProduceStrategyConfig(),
            sampler_config=train_sampler,
        ),
    ],
)
eval_agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=[
        TaskSpecConfig(
            task_name="eval_task:gsm8k",
            agent_loop_config=eval_loop,
            judger_config=gsm8k_judger,
            sampler_config=eval_sampler,
        ),
    ],
)


def compute_metric(samples):
    return {"accuracy": sum(s.reward["score"] > 0 for s in samples) / len(samples)}


trainer = RLColocateTrainerConfig(
    resources=resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    agent_loop_manager_cfg=agent_loop_manager_cfg,
    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,
    evaluator_config=EvaluatorConfig(compute_metric_func=compute_metric),
    load_from=model_path,
    train_batch_size=128,
    total_train_steps=50,
    evaluate_step=5,
    work_dir=work_dir,
)
"""
)

ENV = {
    "WORK_DIR": "/runs/w",
    "MODEL_PATH": "/models/qwen",
    "DATA_PATH": "/data/train.jsonl",
    "EVAL_DATA_PATH": "/data/val.jsonl",
}
MULTI_ENV = {
    "WORK_DIR": "/runs/w",
    "MODEL_PATH": "/models/qwen",
    "GSM8K_DATA_PATH": "/data/gsm8k.jsonl",
    "GSM8K_EVAL_DATA_PATH": "/data/gsm8k_val.jsonl",
    "DAPO_DATA_PATH": "/data/dapo.jsonl",
}


def mutate(text: str, *pairs: tuple[str, str]) -> str:
    """Replace each ``old`` (which must occur exactly once) with ``new``."""
    for old, new in pairs:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def write(dir_: Path, name: str, text: str) -> Path:
    p = dir_ / name
    p.write_text(text, encoding="utf-8")
    return p
