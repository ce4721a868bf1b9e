"""Demo XTuner V1 RL config: GRPO on GSM8K, colocated trainer, asynchronous rollout production.

Written for xtuner-rl-mcp's demo in the style of XTuner's own GSM8K examples (same classes, same env-var style);
it is analysed statically by the `inspect_config` tool and is never executed by this project.

Needs in the launch environment: MODEL_PATH, DATA_PATH, EVAL_DATA_PATH, WORK_DIR, plus exactly one rollout backend
flag (XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1) exported before `ray start`.
Optional: WORLD_SIZE (number of nodes, default 1), TRAIN_BATCH_SIZE (prompt groups per step, default 32).
"""

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
    SamplerConfig,
    TaskSpecConfig,
)
from xtuner.v1.rl.evaluator import EvaluatorConfig
from xtuner.v1.rl.judger import GSM8KJudgerConfig
from xtuner.v1.rl.loss import GRPOLossConfig
from xtuner.v1.rl.replay_buffer import AsyncReplayBufferConfig
from xtuner.v1.rl.rollout.worker import RolloutConfig
from xtuner.v1.rl.trainer import WorkerConfig
from xtuner.v1.rl.utils import AcceleratorResourcesConfig, CPUResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig

# --- paths and knobs from the environment -------------------------------------------------------------
work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
train_data_path = os.environ["DATA_PATH"]
eval_data_path = os.environ["EVAL_DATA_PATH"]
num_nodes = int(os.environ.get("WORLD_SIZE", "1"))

# --- run shape -----------------------------------------------------------------------------------------
run_name = "gsm8k_grpo_async_demo"
steps = 30
eval_every = 10
groups_per_step = int(os.environ.get("TRAIN_BATCH_SIZE", "32"))
samples_per_prompt = 8
prompt_tokens = 1024
response_tokens = 2048
packed_tokens = 16 * 1024

# --- accelerators: one shared pool for training and rollout ----------------------------------------------
resources = AcceleratorResourcesConfig(
    accelerator="GPU",
    num_workers=8 * num_nodes,
    num_cpus_per_worker=12,
    cpu_memory_per_worker=16 * 1024**3,
)

# --- rollout engine (the backend itself is chosen by the XTUNER_USE_* flag) -----------------------------
rollout_config = RolloutConfig(
    env=run_name,
    device=resources.accelerator,
    model_path=model_path,
    dtype="bfloat16",
    tensor_parallel_size=1,
    expert_parallel_size=1,
    gpu_memory_utilization=0.8,
    context_length=prompt_tokens + response_tokens,
    weight_transport_type="ipc",
)

# --- reward: GSM8K rule-based judger in one CPU actor ----------------------------------------------------
judger = GSM8KJudgerConfig(
    judger_name="openai/gsm8k",
    cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
)

# --- policy training ---------------------------------------------------------------------------------------
policy_model = get_model_config_from_hf(Path(model_path))
train_worker_cfg = WorkerConfig(
    model_cfg=policy_model,
    load_from=model_path,
    optim_cfg=AdamWConfig(lr=1e-6, foreach=False, weight_decay=0.1),
    loss_cfg=GRPOLossConfig(
        policy_loss_cfg=dict(
            cliprange_low=0.2,
            cliprange_high=0.28,
            loss_type="vanilla",
            clip_ratio_c=10.0,
            log_prob_diff_min=-20.0,
            log_prob_diff_max=20.0,
        ),
        use_kl_loss=False,
        mode="chunk",
        chunk_size=512,
    ),
    lr_cfg=LRConfig(lr_type="constant", warmup_ratio=0, lr_min=1e-6),
    fsdp_cfg=FSDPConfig(torch_compile=False, cpu_offload=False, ep_size=1),
    optimizer_steps=1,
    pack_max_length=packed_tokens,
)


def gsm8k_sampler(anno_path, repeat_k):
    """Sampler over one GSM8K JSONL file (prompt, data_source, reward_model.ground_truth per line)."""
    return SamplerConfig(
        dataloader_cfg=DataloaderConfig(
            dataset_config_list=[
                {
                    "dataset": DatasetConfig(name=run_name, anno_path=anno_path),
                    "tokenize_fn": RLTextTokenizeFnConfig(max_length=prompt_tokens),
                }
            ],
            pack_max_length=packed_tokens,
            collator="fake_collator",
            pack_level="none",
        ),
        prompt_repeat_k=repeat_k,
    )


# --- training rollouts: asynchronous, with partial rollout and over-sampling ---------------------------------
train_loop = SingleTurnAgentLoopConfig(
    hf_checkpoint=model_path,
    sample_params=SampleParams(max_tokens=response_tokens, temperature=1.0, top_p=1.0, top_k=0),
)
train_manager = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="gsm8k_train",
        agent_loop_config=train_loop,
        judger_config=judger,
        produce_strategy_config=AsyncProduceStrategyConfig(
            over_sample_threshold=0.5,
            enable_partial_rollout=True,
            max_staleness=1,
            tail_batch_trigger_size=16,
        ),
        sampler_config=gsm8k_sampler(train_data_path, samples_per_prompt),
    ),
)

# --- evaluation: greedy decoding, one sample per prompt --------------------------------------------------------
eval_manager = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="gsm8k_eval",
        agent_loop_config=SingleTurnAgentLoopConfig(
            hf_checkpoint=model_path,
            sample_params=SampleParams(max_tokens=response_tokens, temperature=0.0, top_k=1, top_p=1.0),
        ),
        judger_config=judger,
        sampler_config=gsm8k_sampler(eval_data_path, 1),
    ),
)

# --- the object XTuner's RL CLI builds: cfg.trainer.build().fit() ----------------------------------------------
trainer = RLColocateTrainerConfig(
    resources=resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    load_from=model_path,
    replay_buffer_config=AsyncReplayBufferConfig(),
    agent_loop_manager_cfg=train_manager,
    eval_agent_loop_manager_cfg=eval_manager,
    evaluator_config=EvaluatorConfig(),
    advantage_estimator_config=GRPOAdvantageConfig(eps=1e-8),
    total_train_steps=steps,
    train_batch_size=groups_per_step,
    sync_weights_interval=1,
    enable_evaluate=True,
    evaluate_step=eval_every,
    checkpoint_interval=10,
    hf_interval=30,
    work_dir=work_dir,
    seed=42,
)
