"""Where planning findings point: reference-guide anchors and XTuner source lines (InternLM/xtuner@b934f46)."""

from __future__ import annotations

WF = "xtuner-rl://references/workflows"
CB = "xtuner-rl://references/cluster-and-backends"

SRC_COLOCATE = "xtuner/v1/train/rl_trainer.py:397"
SRC_DISAGG = "xtuner/v1/train/rl_trainer.py:485"
SRC_SYNC = "xtuner/v1/rl/agent_loop_manager/producer.py:151"
SRC_ASYNC = "xtuner/v1/rl/agent_loop_manager/producer.py:185"
SRC_DISAGG_ASYNC = "xtuner/v1/rl/agent_loop_manager/disagg_producer.py:245"
SRC_STALE = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:97-99"
SRC_INTERVALS = "xtuner/v1/train/rl_trainer.py:295-326"
SRC_NCCL = "xtuner/v1/train/rl_trainer.py:1882-1886"
SRC_OFFLOAD = "xtuner/v1/train/rl_trainer.py:1643-1645"
SRC_MAX_BATCH = "xtuner/v1/rl/rollout/worker.py:510-520"
SRC_NPU_NODE = "xtuner/v1/rl/rollout/worker.py:500-501"
SRC_GRPO_STD = "xtuner/v1/rl/advantage/grpo.py:26-29"
