"""The paste-ready XTuner GRPO Python config a topology plan is written as (imports, resources, tasks, trainer)."""

from __future__ import annotations

from ..planning.models import PlanRequest, ProduceStrategyPlan, RolloutPlan, Topology, TrainingPlan, WorkerGroupPlan
from ..planning.topology import ConfigClasses, config_classes
from ..xtuner_rules import resources as rr
from .entry_point import RL_ENTRY_POINT


def _mem_expr(n_bytes: int) -> str:
    if n_bytes % rr.GIB == 0:
        return f"{n_bytes // rr.GIB} * 1024**3"
    return str(n_bytes)


def build_snippet(
    topology: Topology,
    p: PlanRequest,
    groups: list[WorkerGroupPlan],
    rollout: RolloutPlan,
    training: TrainingPlan,
    strategy: ProduceStrategyPlan,
    accelerator: str,
    is_moe: bool,
    nodes: int,
) -> str:
    cls = config_classes(topology)
    L = _docstring(topology, p, rollout, nodes)
    L += _imports(p, cls, strategy)
    L += _settings(p, training)
    L += _resources(groups, accelerator)
    L += _rollout_and_judger(p, rollout, accelerator)
    L += _train_worker(p, is_moe)
    L += _tasks(p, cls, strategy)
    L += _trainer(p, cls, topology == "disaggregated")
    return "\n".join(L)


def _docstring(topology: Topology, p: PlanRequest, rollout: RolloutPlan, nodes: int) -> list[str]:
    env_flag = f"XTUNER_USE_{rollout.backend.upper()}=1"
    return [
        f'"""XTuner GRPO config: {topology.replace("_", " ")} on {nodes} node(s), written by xtuner-rl-mcp.',
        "",
        "Before `ray start` on every node: export WORK_DIR, MODEL_PATH, DATA_PATH"
        + (", EVAL_DATA_PATH" if p.enable_evaluate else "")
        + f" and {env_flag}.",
        f"Run: python -m {RL_ENTRY_POINT} --config <this file>",
        "The judger is GSM8K's; replace judger_config for other data.",
        '"""',
        "",
    ]


def _imports(p: PlanRequest, cls: ConfigClasses, strategy: ProduceStrategyPlan) -> list[str]:
    manager_imports = sorted(
        {cls.agent_loop_manager, cls.task_spec, "SamplerConfig", strategy.class_name}
        | ({"AgentLoopManagerConfig", "TaskSpecConfig", "SyncProduceStrategyConfig"} if p.enable_evaluate else set())
    )
    util_imports = ["AcceleratorResourcesConfig"] + (["CPUResourcesConfig"] if p.judger_cpu_workers else [])
    L = [
        "import os",
        "from pathlib import Path",
        "",
        "from xtuner.v1.config import AdamWConfig, FSDPConfig, LRConfig",
        "from xtuner.v1.data_proto.rl_data import SampleParams",
        "from xtuner.v1.datasets.config import DataloaderConfig, DatasetConfig",
        "from xtuner.v1.datasets.rl_tokenize_fn import RLTextTokenizeFnConfig",
        "from xtuner.v1.model import get_model_config_from_hf",
        "from xtuner.v1.rl.advantage import GRPOAdvantageConfig",
        "from xtuner.v1.rl.agent_loop import SingleTurnAgentLoopConfig",
        "from xtuner.v1.rl.agent_loop_manager import " + ", ".join(manager_imports),
    ]
    if p.enable_evaluate:
        L.append("from xtuner.v1.rl.evaluator import EvaluatorConfig")
    L += [
        "from xtuner.v1.rl.judger import GSM8KJudgerConfig",
        "from xtuner.v1.rl.loss import GRPOLossConfig",
        f"from xtuner.v1.rl.replay_buffer import {cls.replay_buffer}",
        "from xtuner.v1.rl.rollout.worker import RolloutConfig",
        "from xtuner.v1.rl.trainer import WorkerConfig",
        "from xtuner.v1.rl.utils import " + ", ".join(util_imports),
        f"from xtuner.v1.train.rl_trainer import {cls.trainer}",
    ]
    return L


def _interval(steps: int | None) -> str:
    """An interval as XTuner takes it: -1 turns it off (xtuner/v1/train/rl_trainer.py:309-310)."""
    return str(steps) if steps is not None else "-1  # off"


def _settings(p: PlanRequest, training: TrainingPlan) -> list[str]:
    L = [
        "",
        "# Paths come from the environment so the same file runs anywhere.",
        'work_dir = os.environ["WORK_DIR"]',
        'model_path = os.environ["MODEL_PATH"]',
        'data_path = os.environ["DATA_PATH"]',
    ]
    if p.enable_evaluate:
        L.append('eval_data_path = os.environ["EVAL_DATA_PATH"]')
    L += [
        "",
        f"max_prompt_length = {p.max_prompt_len}",
        f"max_response_length = {p.max_response_len}",
        f"pack_max_length = {training.pack_max_length}  # >= prompt + response",
        f"prompt_repeat_k = {p.prompt_repeat_k}",
        f"train_batch_size = {p.train_batch_size}  # prompt groups per step",
        f"total_train_steps = {p.total_train_steps}",
        f"sync_weights_interval = {p.sync_weights_interval}",
        "# evaluation and saves run only on weight-sync steps: keep these multiples of sync_weights_interval",
        f"evaluate_step = {training.evaluate_step}",
        f"checkpoint_interval = {_interval(training.checkpoint_interval)}",
        f"hf_interval = {_interval(training.hf_interval)}",
        "",
    ]
    return L


def _resources(groups: list[WorkerGroupPlan], accelerator: str) -> list[str]:
    L: list[str] = []
    for g in groups:
        var = "resources" if g.role == "shared" else f"{g.role}_resources"
        L += [
            f"{var} = AcceleratorResourcesConfig(",
            f'    accelerator="{accelerator}",',
            f"    num_workers={g.num_workers},",
            f"    num_cpus_per_worker={g.num_cpus_per_worker:g},",
            f"    cpu_memory_per_worker={_mem_expr(g.cpu_memory_per_worker_bytes)},",
            ")",
        ]
    return L


def _rollout_and_judger(p: PlanRequest, rollout: RolloutPlan, accelerator: str) -> list[str]:
    L = [
        "",
        "rollout_config = RolloutConfig(",
        '    env="grpo",',
        f'    device="{accelerator}",',
        "    model_path=model_path,",
        '    dtype="bfloat16",',
        f"    tensor_parallel_size={rollout.tensor_parallel_size},",
        f"    expert_parallel_size={rollout.expert_parallel_size},",
        f"    gpu_memory_utilization={rollout.gpu_memory_utilization},",
        "    context_length=max_prompt_length + max_response_length,",
        f'    weight_transport_type="{rollout.weight_transport_type}",',
        ")",
        "",
    ]
    if p.judger_cpu_workers:
        L += [
            "judger_config = GSM8KJudgerConfig(",
            '    judger_name="openai/gsm8k",',
            f"    cpu_resources=CPUResourcesConfig(num_workers={p.judger_cpu_workers}, num_cpus_per_worker=1),",
            ")",
        ]
    else:
        L.append('judger_config = GSM8KJudgerConfig(judger_name="openai/gsm8k")')
    return L


def _train_worker(p: PlanRequest, is_moe: bool) -> list[str]:
    L = [
        "",
        "model_cfg = get_model_config_from_hf(Path(model_path))",
    ]
    if is_moe:
        L += [
            "# RL fine-tuning of a MoE: drop the pre-training auxiliary losses",
            'if hasattr(model_cfg, "balancing_loss_cfg"):',
            "    model_cfg.balancing_loss_cfg = None",
            'if hasattr(model_cfg, "z_loss_cfg"):',
            "    model_cfg.z_loss_cfg = None",
        ]
    L += [
        "train_worker_cfg = WorkerConfig(",
        "    model_cfg=model_cfg,",
        "    load_from=model_path,",
        "    optim_cfg=AdamWConfig(lr=1e-6, foreach=False, weight_decay=0.1),",
        '    lr_cfg=LRConfig(lr_type="constant", warmup_ratio=0, lr_min=1e-6),',
        "    fsdp_cfg=FSDPConfig(torch_compile=False, cpu_offload=False, ep_size=1),",
        "    loss_cfg=GRPOLossConfig(",
        '        policy_loss_cfg=dict(loss_type="vanilla", cliprange_low=0.2, cliprange_high=0.28),',
        "        use_kl_loss=False,",
        '        mode="chunk",',
        "        chunk_size=512,",
        "    ),",
        f"    sp_size={p.sp_size},",
        "    optimizer_steps=1,",
        "    pack_max_length=pack_max_length,",
        ")",
        "",
        "",
    ]
    return L


def _tasks(p: PlanRequest, cls: ConfigClasses, strategy: ProduceStrategyPlan) -> list[str]:
    L = [
        "def make_sampler(anno_path, repeat_k):",
        '    dataset = DatasetConfig(name="grpo", anno_path=anno_path)',
        "    tokenize_fn = RLTextTokenizeFnConfig(max_length=max_prompt_length)",
        "    loader = DataloaderConfig(",
        '        dataset_config_list=[{"dataset": dataset, "tokenize_fn": tokenize_fn}],',
        "        pack_max_length=pack_max_length,",
        '        collator="fake_collator",',
        '        pack_level="none",',
        "    )",
        "    return SamplerConfig(dataloader_cfg=loader, prompt_repeat_k=repeat_k)",
        "",
        "",
        "train_task = " + cls.task_spec + "(",
        '    task_name="train_task",',
        "    agent_loop_config=SingleTurnAgentLoopConfig(",
        "        hf_checkpoint=model_path,",
        "        sample_params=SampleParams(max_tokens=max_response_length, temperature=1.0, top_p=1.0, top_k=0),",
        "    ),",
        "    judger_config=judger_config,",
    ]
    knobs = ", ".join(f"{k}={v!r}" for k, v in strategy.params.items())
    L += [
        f"    produce_strategy_config={strategy.class_name}({knobs}),",
        "    sampler_config=make_sampler(data_path, prompt_repeat_k),",
        ")",
        f"agent_loop_manager_cfg = {cls.agent_loop_manager}(tasks=train_task)",
        "",
    ]
    if p.enable_evaluate:
        L += [
            "# Evaluation always uses the colocated-style manager with the synchronous strategy.",
            "eval_agent_loop_manager_cfg = AgentLoopManagerConfig(",
            "    tasks=TaskSpecConfig(",
            '        task_name="eval_task",',
            "        agent_loop_config=SingleTurnAgentLoopConfig(",
            "            hf_checkpoint=model_path,",
            "            sample_params=SampleParams(max_tokens=max_response_length, temperature=0.0, top_k=1),",
            "        ),",
            "        judger_config=judger_config,",
            "        produce_strategy_config=SyncProduceStrategyConfig(),",
            "        sampler_config=make_sampler(eval_data_path, 1),",
            "    ),",
            ")",
            "evaluator_config = EvaluatorConfig(compute_metric_func=None)",
            "",
        ]
    return L


def _trainer(p: PlanRequest, cls: ConfigClasses, disagg: bool) -> list[str]:
    L = [f"trainer = {cls.trainer}("]
    if disagg:
        L += ["    train_resources=train_resources,", "    rollout_resources=rollout_resources,"]
    else:
        L.append("    resources=resources,")
    L += [
        "    train_worker_cfg=train_worker_cfg,",
        "    rollout_config=rollout_config,",
        "    tokenizer_path=model_path,",
        "    load_from=model_path,",
        f"    replay_buffer_config={cls.replay_buffer}(),",
        "    agent_loop_manager_cfg=agent_loop_manager_cfg,",
    ]
    if p.enable_evaluate:
        L += [
            "    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,",
            "    evaluator_config=evaluator_config,",
            "    enable_evaluate=True,",
            "    evaluate_step=evaluate_step,",
        ]
    else:
        L.append("    enable_evaluate=False,")
    L += [
        "    advantage_estimator_config=GRPOAdvantageConfig(eps=1e-8),",
        "    train_batch_size=train_batch_size,",
        "    total_train_steps=total_train_steps,",
        "    sync_weights_interval=sync_weights_interval,",
        "    checkpoint_interval=checkpoint_interval,",
        "    hf_interval=hf_interval,",
        "    work_dir=work_dir,",
        ")",
        "",
    ]
    return L
