"""diagnose_symptom on realistic failure text: tracebacks, Ray-wrapped errors, pydantic blocks, logs, hangs.

Each case is written the way the failure reaches a user: a full Python traceback through XTuner's real call
path (file names and lines from b934f46), Ray's wrappers and log prefixes, or XTuner's loguru log lines.
"""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import Finding, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.diagnosis.log_lines import clean_line
from xtuner_rl_mcp.diagnosis.probe_judging import judge_probes
from xtuner_rl_mcp.diagnosis.ranking import choose_verdict
from xtuner_rl_mcp.diagnosis.report_values import report_values
from xtuner_rl_mcp.knowledge.catalog import load_catalog
from xtuner_rl_mcp.operations.diagnose_symptom import Params, run

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"
X = "/mnt/xtuner/xtuner/v1"
SITE = "/opt/conda/lib/python3.12/site-packages"


def tb(*frames: tuple[str, int, str, str], exc: str, head: str = "") -> str:
    """A Python traceback as the interpreter prints it."""
    out = [head] if head else []
    out.append("Traceback (most recent call last):")
    for path, line, func, code in frames:
        out.append(f'  File "{path}", line {line}, in {func}')
        out.append(f"    {code}")
    out.append(exc)
    return "\n".join(out) + "\n"


def cli_frames(*more: tuple[str, int, str, str]) -> tuple[tuple[str, int, str, str], ...]:
    return (
        (f"{X}/train/cli/rl.py", 71, "<module>", "app(exit_on_error=False)"),
        (f"{SITE}/cyclopts/core.py", 1410, "__call__", "return command(*bound.args, **bound.kwargs)"),
        *more,
    )


def config_frames(code: str, line: int = 61) -> tuple[tuple[str, int, str, str], ...]:
    return cli_frames(
        (f"{X}/train/cli/rl.py", 57, "main", "cfg = Config.fromfile(config)"),
        (f"{X}/utils/config.py", 22, "fromfile", "spec.loader.exec_module(module)"),
        ("<frozen importlib._bootstrap_external>", 999, "exec_module", ""),
        ("/mnt/xtuner/examples/v1/config/rl_grpo_gsm8k_judge.py", line, "<module>", code),
    )


def build_frames(*more: tuple[str, int, str, str]) -> tuple[tuple[str, int, str, str], ...]:
    return cli_frames(
        (f"{X}/train/cli/rl.py", 62, "main", "trainer = cfg.trainer.build()"),
        (f"{X}/train/rl_trainer.py", 402, "build", "return RLColocateTrainer(self)"),
        *more,
    )


def ray_wrapped(inner_type: str, actor: str, frames: tuple[tuple[str, int, str, str], ...], exc: str) -> str:
    """How Ray re-raises an actor's exception in the driver."""
    if frames and isinstance(frames[0], str):  # a single frame written without the trailing comma
        frames = (frames,)  # type: ignore[assignment]
    body = tb(
        *frames,
        exc=exc,
        head=f"ray.exceptions.RayTaskError({inner_type}): ray::{actor} (pid=48211, ip=10.130.2.17, "
        f"actor_id=a1b2c3d4, repr=<xtuner.v1.rl.{actor.split('.')[0]} object at 0x7f3a>)",
    )
    driver = tb(
        *build_frames((f"{X}/train/rl_trainer.py", 1700, "fit", "self._rollout_step(step)")),
        (f"{SITE}/ray/_private/worker.py", 2858, "get", "raise value.as_instanceof_cause()"),
        exc="",
    ).rstrip("\n")
    return driver + "\n" + body


def pyd(cls: str, *details: tuple[str, str]) -> str:
    """A pydantic ValidationError block: (field or '', detail line)."""
    n = len(details)
    lines = [f"pydantic_core._pydantic_core.ValidationError: {n} validation error{'s' if n > 1 else ''} for {cls}"]
    for fld, det in details:
        if fld:
            lines.append(fld)
        lines.append(f"  {det}")
        lines.append("    For further information visit https://errors.pydantic.dev/2.14/v/value_error")
    return "\n".join(lines)


def xlog(level: str, msg: str, rank: int | None = None, ts: str = "2026-08-21 16:10:02") -> str:
    r = f"[RANK {rank}]" if rank is not None else ""
    return f"[XTuner]{r}[{ts}][{level}] {msg}"


@dataclass
class Case:
    name: str
    text: str
    top: str | None  # expected first finding (None: no finding)
    also: list[str] = field(default_factory=list)  # also present, in this order after `top`
    absent: list[str] = field(default_factory=list)
    verdict: str | None = None


WARN_NOISE = xlog("WARNING", "rollout_config.allow_over_concurrency_ratio is deprecated and no longer controls runtime")

CASES: list[Case] = [
    # ---------------------------------------------------------------- Ray / cluster / CLI
    Case(
        "ray_not_started",
        tb(
            *cli_frames((f"{X}/train/cli/rl.py", 46, "main", 'ray.init(address="auto")')),
            (
                f"{SITE}/ray/_private/worker.py",
                1608,
                "init",
                "bootstrap_address = services.canonicalize_bootstrap_address(address, _temp_dir)",
            ),
            (
                f"{SITE}/ray/_private/services.py",
                529,
                "canonicalize_bootstrap_address",
                "addr = get_ray_address_from_environment(addr, temp_dir)",
            ),
            exc="ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
            "setting `--address` flag or `RAY_ADDRESS` environment variable.",
        ),
        "ray_not_running",
    ),
    Case(
        "ray_gcs_timeout",
        "2026-08-21 16:02:23,441\tINFO worker.py:1693 -- Connecting to existing Ray cluster at address: 10.0.0.5:6379...\n"
        "[2026-08-21 16:03:23,512 E 51234 51234] gcs_rpc_client.h:179: Failed to connect to GCS at address "
        "10.0.0.5:6379 within 60 seconds.\n"
        + tb(
            (f"{SITE}/ray/_private/worker.py", 2300, "connect", "node.check_version_info()"),
            exc="ray.exceptions.RaySystemError: System error: Failed to get cluster ID from GCS server after 60 seconds",
        ),
        "ray_gcs_unreachable",
        absent=["ray_not_running"],
    ),
    Case(
        "ray_not_initialized_custom_script",
        tb(
            ("/home/u/my_train.py", 40, "<module>", "trainer = config.build()"),
            (
                f"{X}/rl/utils/ray_accelerator_worker.py",
                99,
                "validate_available_resources",
                "assert ray.is_initialized(), ...",
            ),
            exc="AssertionError: Ray must be initialized before creating AcceleratorResourcesConfig.",
        ),
        "ray_not_initialized",
    ),
    Case(
        "actor_died_only",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: TrainingWorker\n\tactor_id: 3b0c\n\tpid: 81502\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2. End of file.\n",
        "ray_actor_died",
    ),
    Case(
        "ray_oom_kill",
        xlog("INFO", "[Step 3/45] loss=0.02")
        + "\n(raylet) [2026-08-21 16:20:11,118 E 5123 5123] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 7a0f, IP: 10.0.0.5)\n"
        + tb(
            *build_frames(
                (
                    f"{X}/rl/trainer/controller.py",
                    285,
                    "fit",
                    "log_infos = ray.get(handles, timeout=TRAIN_RAY_GET_TIMEOUT)",
                )
            ),
            exc="ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        )
        + "Memory on the node (IP: 10.0.0.5, ID: 7a0f) where the task (actor ID: 9c1f, name=TrainingWorker.__init__) "
        "was running was 1901.23GB / 2003.40GB (0.949), which exceeds the memory usage threshold of 0.95.\n",
        "ray_node_out_of_memory",
        absent=["ray_actor_died"],
    ),
    Case(
        "config_without_trainer",
        tb(*build_frames()[:-1], exc="TypeError: 'Config' object is not callable"),
        "config_missing_trainer",
    ),
    Case(
        "config_json_suffix",
        tb(
            *cli_frames(
                (f"{X}/train/cli/rl.py", 57, "main", "cfg = Config.fromfile(config)"),
                (
                    f"{X}/utils/config.py",
                    28,
                    "fromfile",
                    'raise NotImplementedError("Only python/yaml type config are supported now!")',
                ),
            ),
            exc="NotImplementedError: Only python/yaml type config are supported now!",
        ),
        "config_file_unsupported",
    ),
    Case(
        "work_dir_env_missing",
        tb(
            *config_frames('work_dir = os.environ["WORK_DIR"]', 29),
            (f"{SITE}/../os.py", 714, "__getitem__", "raise KeyError(key) from None"),
            exc="KeyError: 'WORK_DIR'",
        ),
        "missing_env_var_in_config",
    ),
    Case(
        "data_file_missing",
        ray_wrapped(
            "FileNotFoundError",
            "DataloaderActor.__init__()",
            ((f"{X}/datasets/jsonl.py", 138, "count_tokens", 'with open(path, "rb") as f:'),),
            "FileNotFoundError: [Errno 2] No such file or directory: '/data/gsm8k/train.jsonl'",
        ),
        "path_not_found",
    ),
    Case(
        "asyncio_in_notebook",
        tb(
            ("/tmp/ipykernel_1/1.py", 3, "<module>", "trainer.fit()"),
            (f"{X}/rl/utils/async_utils.py", 131, "asyncio_run", "raise RuntimeError(...)"),
            exc="RuntimeError: asyncio_run does not support being called from a running event loop.",
        ),
        "asyncio_nested_event_loop",
    ),
    Case(
        "no_gpu_in_container",
        tb(
            *build_frames((f"{X}/rl/utils/ray_utils.py", 85, "get_accelerator", "raise NotImplementedError(")),
            exc="NotImplementedError: Supports only CUDA or NPU. If your device is CUDA or NPU, please make sure that "
            "your environmental settings are configured correctly.",
        ),
        "no_accelerator_detected",
    ),
    # ---------------------------------------------------------------- backend selection
    Case(
        "backend_flag_unset_at_config_load",
        tb(
            *config_frames("rollout_config = RolloutConfig("),
            exc=pyd(
                "RolloutConfig",
                (
                    "",
                    "Assertion failed, Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, "
                    "XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY to 1. [type=assertion_error, input_value={'env': 'gsm8k'}, input_type=dict]",
                ),
            ),
        ),
        "backend_flag_missing",
        absent=["config_validation_error"],
    ),
    Case(
        "backend_flag_unset_in_actor",
        ray_wrapped(
            "AssertionError",
            "RolloutController.__init__()",
            (
                (f"{X}/rl/rollout/controller.py", 60, "__init__", "self.backend = config.rollout_backend"),
                (
                    f"{X}/rl/rollout/worker.py",
                    467,
                    "rollout_backend",
                    'assert backend in ["sglang", "vllm", "lmdeploy"], (',
                ),
            ),
            "AssertionError: Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY to 1.",
        ),
        "backend_flag_missing",
    ),
    Case(
        "sglang_missing_chained",
        tb(
            (f"{X}/rl/rollout/worker.py", 76, "get_rollout_worker_base_cls", "from .sglang import SGLangWorker"),
            (f"{X}/rl/rollout/sglang.py", 9, "<module>", "from sglang.srt.server_args import ServerArgs"),
            exc="ModuleNotFoundError: No module named 'sglang'",
        )
        + "\nThe above exception was the direct cause of the following exception:\n\n"
        + tb(
            ("/home/u/launch.py", 20, "main", "raise RuntimeError('could not create rollout workers') from e"),
            exc="RuntimeError: could not create rollout workers",
        ),
        "backend_not_installed",
    ),
    Case(
        "lmdeploy_missing_env_check",
        tb(
            *build_frames((f"{X}/utils/env_check.py", 50, "get_rollout_engine_version", "import lmdeploy")),
            exc="ModuleNotFoundError: No module named 'lmdeploy'",
        ),
        "backend_not_installed",
        absent=["rl_dependency_missing"],
    ),
    Case(
        "vllm_missing_at_import",
        tb(
            *config_frames("from xtuner.v1.rl.rollout import RolloutConfig", 12),
            (f"{X}/rl/rollout/__init__.py", 10, "<module>", "from .vllm import vLLMWorker"),
            (f"{X}/rl/rollout/vllm.py", 11, "<module>", "from vllm.entrypoints.openai.api_server import run_server"),
            exc="ModuleNotFoundError: No module named 'vllm'",
        ),
        "backend_not_installed",
    ),
    Case(
        "cyclopts_missing",
        tb(
            (f"{X}/train/cli/rl.py", 6, "<module>", "from cyclopts import App, Group, Parameter"),
            exc="ModuleNotFoundError: No module named 'cyclopts'",
        ),
        "rl_dependency_missing",
        absent=["backend_not_installed"],
    ),
    Case(
        "vllm_topology",
        ray_wrapped(
            "NotImplementedError",
            "RolloutController.__init__()",
            ((f"{X}/rl/rollout/vllm.py", 142, "build_rollout_topology", "raise NotImplementedError(")),
            "NotImplementedError: vLLM rollout topology has not been verified after topology refactor.",
        ),
        "vllm_rollout_not_implemented",
    ),
    Case(
        "bad_lmdeploy_backend",
        ray_wrapped(
            "ValueError",
            "TrainingWorker.update_weights()",
            ((f"{X}/rl/weight_update/data.py", 29, "_resolve_rollout_backend", "raise ValueError("),),
            "ValueError: Unsupported rollout backend: 'trt'. Expected 'sglang', 'vllm', 'pytorch' or 'turbomind'.",
        ),
        "lmdeploy_backend_invalid",
        absent=["backend_flag_missing"],
    ),
    Case(
        "nccl_transport_turbomind",
        tb(
            *build_frames((f"{X}/rl/weight_update/data.py", 50, "check", "raise NotImplementedError(")),
            exc="NotImplementedError: NCCL weight transport is not supported for turbomind backend.",
        ),
        "weight_transport_unsupported",
    ),
    Case(
        "checkpoint_engine_not_installed",
        ray_wrapped(
            "ImportError",
            "TrainingWorker.init_weight_transport()",
            ((f"{X}/rl/weight_update/transport.py", 912, "__init__", "raise ImportError("),),
            "ImportError: Checkpoint Engine is not available. Please install the Checkpoint Engine package.",
        ),
        "checkpoint_engine_missing",
    ),
    Case(
        "fa3_missing",
        tb(
            *build_frames((f"{X}/ops/flash_attn/__init__.py", 31, "<module>", "raise ImportError(")),
            exc="ImportError: Import FlashAttention 3 failed No module named 'flash_attn_interface', Please install it manually.",
        ),
        "flash_attn3_missing",
        absent=["rl_dependency_missing"],
    ),
    Case(
        "context_length_unset",
        tb(
            *config_frames("rollout_config = RolloutConfig("),
            exc=pyd(
                "RolloutConfig",
                (
                    "",
                    "Value error, context_length must be set if rollout_max_batch_size_per_instance "
                    "is not provided. [type=value_error, input_value={'env': 'x'}, input_type=dict]",
                ),
            ),
        ),
        "rollout_context_length_missing",
    ),
    Case(
        "unknown_sglang_arg_warning",
        "\n".join(
            [
                xlog("INFO", "RolloutHealthManager started."),
                "(RolloutWorker pid=3, ip=10.0.0.5) "
                + xlog("WARNING", "Ignore unknown SGLang server arg: mem_fraction=0.8"),
                xlog("INFO", "[Step 1/45] loss=0.1", rank=0),
            ]
        ),
        "sglang_unknown_server_arg",
        verdict="warnings_only",
    ),
    # ---------------------------------------------------------------- config-type mismatches
    Case(
        "rollout_config_backend_field",
        tb(
            *config_frames("rollout_config = RolloutConfig(backend='lmdeploy', env='gsm8k')"),
            exc=pyd(
                "RolloutConfig",
                (
                    "backend",
                    "Extra inputs are not permitted [type=extra_forbidden, input_value='lmdeploy', input_type=str]",
                ),
            ),
        ),
        "config_extra_field",
    ),
    Case(
        "disagg_with_colocated_manager",
        tb(
            *config_frames("trainer = RLDisaggregatedTrainerConfig(", 140),
            exc=pyd(
                "RLDisaggregatedTrainerConfig",
                (
                    "agent_loop_manager_cfg",
                    "Input should be a valid dictionary or instance of DisaggAgentLoopManagerConfig "
                    "[type=model_type, input_value=AgentLoopManagerConfig(tasks=...), input_type=AgentLoopManagerConfig]",
                ),
            ),
        ),
        "config_type_mismatch",
    ),
    Case(
        "missing_hf_checkpoint",
        tb(
            *config_frames("agent_loop_config = SingleTurnAgentLoopConfig(", 90),
            exc=pyd(
                "SingleTurnAgentLoopConfig",
                ("hf_checkpoint", "Field required [type=missing, input_value={'sample_params': ...}, input_type=dict]"),
            ),
        ),
        "config_field_required",
    ),
    Case(
        "model_path_not_hf",
        tb(
            *build_frames(
                (
                    f"{SITE}/transformers/configuration_utils.py",
                    721,
                    "_get_config_dict",
                    "resolved_config_file = cached_file(",
                )
            ),
            exc="OSError: /models/Qwen3-8B-dcp does not appear to have a file named config.json. Checkout "
            "'https://huggingface.co//models/Qwen3-8B-dcp/tree/None' for available files.",
        ),
        "load_from_not_hf",
    ),
    # ---------------------------------------------------------------- rollout server lifecycle
    Case(
        "rollout_oom_sglang",
        ray_wrapped(
            "OutOfMemoryError",
            "RolloutWorker.init()",
            ((f"{SITE}/sglang/srt/model_executor/model_runner.py", 1410, "init_memory_pool", "raise RuntimeError("),),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.33 GiB of which 1.06 GiB is free.",
        ),
        "cuda_out_of_memory",
    ),
    Case(
        "server_start_timeout",
        "\n".join(
            [
                "(RolloutWorker pid=51, ip=10.0.0.5) "
                + xlog(
                    "ERROR",
                    "can't connect to server url http://10.0.0.5:25001/health_generate because All connection attempts failed",
                )
            ]
            * 3
        )
        + "\n"
        + ray_wrapped(
            "TimeoutError",
            "RolloutWorker.init()",
            (
                (
                    f"{X}/rl/rollout/worker.py",
                    1086,
                    "_launch_server",
                    'raise TimeoutError("Server failed to start within the timeout period.")',
                ),
            ),
            "TimeoutError: Server failed to start within the timeout period.",
        ),
        "rollout_server_start_timeout",
    ),
    Case(
        "server_task_died",
        ray_wrapped(
            "Exception",
            "RolloutWorker.init()",
            (
                (
                    f"{X}/rl/rollout/worker.py",
                    1124,
                    "_launch_server",
                    'raise Exception("Server task terminated unexpectedly.")',
                ),
            ),
            "Exception: Server task terminated unexpectedly.",
        ),
        "rollout_server_terminated",
    ),
    Case(
        "port_busy_uvicorn",
        "(RolloutWorker pid=77, ip=10.0.0.5) INFO:     Started server process [77]\n"
        "(RolloutWorker pid=77, ip=10.0.0.5) INFO:     Waiting for application startup.\n"
        "(RolloutWorker pid=77, ip=10.0.0.5) ERROR:    [Errno 98] error while attempting to bind on address "
        "('0.0.0.0', 25001): address already in use\n"
        "(RolloutWorker pid=77, ip=10.0.0.5) INFO:     Waiting for application shutdown.\n",
        "port_in_use",
    ),
    Case(
        "health_checks_failing",
        "\n".join(
            [
                xlog("ERROR", "Health check failed for server http://10.0.0.5:25001: ReadTimeout('')"),
                xlog("WARNING", "Worker 0 reached health check failure threshold: 3/3."),
                xlog("WARNING", "Rollout worker group ranks=[0, 1] failed health check. Marking as inactive."),
                xlog("WARNING", "RolloutController.generate timed out waiting for worker: session_id=91, timeout=2400"),
            ]
        ),
        "rollout_health_check_failed",
        also=["rollout_request_timeout"],
    ),
    Case(
        "nccl_watchdog",
        "(TrainingWorker pid=9, ip=10.0.0.6) [rank5]:[E821 16:30:00.123 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600012 milliseconds before timing out.\n"
        + tb(
            (f"{X}/rl/trainer/worker.py", 740, "fit", "loss.backward()"),
            exc="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        ),
        "nccl_error",
    ),
    # ---------------------------------------------------------------- data / reward / judger
    Case(
        "ground_truth_missing_ray",
        ray_wrapped(
            "AssertionError",
            "GSM8KJudger.judge()",
            ((f"{X}/rl/judger/native.py", 196, "judge_payload", 'assert payload["label"] is not None, ('),),
            "AssertionError: RolloutState must have reward_model with 'ground_truth' for judging. You should set reward_model in AgentLoop",
        ),
        "reward_missing_ground_truth",
    ),
    Case(
        "reward_model_keyerror",
        tb(
            ("/home/u/my_reward.py", 14, "compute", "gt = item['reward_model']['ground_truth']"),
            exc="KeyError: 'reward_model'",
        ),
        "reward_missing_ground_truth",
    ),
    Case(
        "prompt_missing",
        tb(
            (f"{X}/datasets/jsonl.py", 627, "_tokenize_by_offset", "tokenized = tokenize_fn(json.loads(line))"),
            (f"{X}/datasets/rl_tokenize_fn/text_tokenize_fn.py", 52, "__call__", 'message = item["prompt"]'),
            exc="KeyError: 'prompt'",
        ),
        "data_missing_prompt",
    ),
    Case(
        "data_source_missing",
        tb(
            (
                f"{X}/datasets/rl_tokenize_fn/text_tokenize_fn.py",
                76,
                "__call__",
                'assert data_source is not None, "data_source is required in item"',
            ),
            exc="AssertionError: data_source is required in item",
        ),
        "data_missing_data_source",
    ),
    Case(
        "prompt_longer_than_max_length",
        tb(
            (
                f"{X}/datasets/rl_tokenize_fn/text_tokenize_fn.py",
                71,
                "__call__",
                'assert num_tokens <= self.max_length, f"..."',
            ),
            exc="AssertionError: num_tokens 9120 > max_length 8192",
        ),
        "prompt_too_long",
    ),
    Case(
        "data_not_jsonl",
        tb(
            (f"{X}/datasets/jsonl.py", 627, "_tokenize_by_offset", "tokenized = tokenize_fn(json.loads(line))"),
            (
                "/usr/lib/python3.12/json/decoder.py",
                355,
                "raw_decode",
                'raise JSONDecodeError("Expecting value", s, err.value) from None',
            ),
            exc="json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        ),
        "data_json_decode_error",
    ),
    Case(
        "no_judger_score",
        xlog(
            "WARNING",
            "Missing reward score in item (rollout_id: 17) of completed group for task gsm8k. This item will be skipped in reward statistics.",
        )
        + "\n"
        + tb(
            *build_frames((f"{X}/train/rl_trainer.py", 1087, "_prepare_train_data", "assert ...")),
            exc="AssertionError: Reward is missing or does not contain 'score' key in data: {'acc': 1.0}",
        ),
        "reward_score_missing",
    ),
    Case(
        "composed_judger_unknown_branch",
        ray_wrapped(
            "ValueError",
            "ComposedJudger.judge()",
            ((f"{X}/rl/judger/composed.py", 70, "_select", "raise ValueError("),),
            "ValueError: Unknown judger branch from data_source: 'math', available=['openai/gsm8k']",
        ),
        "composed_judger_routing",
    ),
    Case(
        "mathruler_missing",
        tb(
            (
                f"{X}/rl/judger/geo3k.py",
                22,
                "<module>",
                "raise ImportError(\"Please install mathruler by 'pip install mathruler pylatexenc'\")",
            ),
            exc="ImportError: Please install mathruler by 'pip install mathruler pylatexenc'",
        ),
        "judger_dependency_missing",
    ),
    Case(
        "batch_judge_enabled",
        ray_wrapped(
            "NotImplementedError",
            "GSM8KJudger.batch_judge()",
            ((f"{X}/rl/judger/native.py", 189, "batch_judge", "raise NotImplementedError("),),
            "NotImplementedError: NativeJudger does not support batch_judge.",
        ),
        "judger_batch_unsupported",
    ),
    # ---------------------------------------------------------------- resources / placement
    Case(
        "not_enough_gpus",
        tb(
            *build_frames(
                (
                    f"{X}/rl/utils/ray_accelerator_worker.py",
                    106,
                    "validate_available_resources",
                    "assert available_gpus >= self.num_workers, (",
                )
            ),
            exc="AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.",
        ),
        "ray_not_enough_gpus",
    ),
    Case(
        "not_enough_cpus",
        tb(
            *build_frames(
                (
                    f"{X}/rl/utils/ray_accelerator_worker.py",
                    116,
                    "validate_available_resources",
                    "assert needed_cpu <= available_cpus, (",
                )
            ),
            exc="AssertionError: Not enough available CPUs in Ray cluster, 64.0 less than 106.",
        ),
        "ray_not_enough_cpus_or_memory",
    ),
    Case(
        "pg_ready_timeout",
        tb(
            *build_frames(
                (
                    f"{X}/rl/utils/ray_accelerator_worker.py",
                    307,
                    "build_placement_group",
                    "ray.get(pg.ready(), timeout=PG_READY_TIMEOUT)",
                ),
                (f"{SITE}/ray/_private/worker.py", 2961, "get", "raise GetTimeoutError("),
            ),
            exc="ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
        ),
        "placement_group_timeout",
    ),
    Case(
        "pending_placement_group_hang",
        "\n".join(
            [
                "2026-08-21 16:02:23,502\tINFO worker.py:2003 -- Connected to Ray cluster. View the dashboard at 127.0.0.1:8265",
                xlog("INFO", "Building placement group train with 16 bundles"),
                "(autoscaler +1m2s) Tip: use `ray status` to view detailed cluster status. To disable these messages, set RAY_SCHEDULER_EVENTS=0.",
                "(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, 'CPU': 12.0, 'memory': 17179869184.0}. "
                "This is likely due to all cluster resources being claimed by actors. Consider creating fewer actors or adding more nodes to this Ray cluster.",
                "(autoscaler +1m37s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, 'CPU': 12.0}. "
                "This is likely due to all cluster resources being claimed by actors.",
            ]
        ),
        "placement_group_pending",
        verdict="hang_suspected",
    ),
    Case(
        "judger_pool_no_room",
        tb(
            *build_frames((f"{X}/rl/utils/ray_cpu_worker.py", 443, "_check", "raise RuntimeError(")),
            exc="RuntimeError: Insufficient PG-external Ray resources for registered external CPU pools:\n"
            "CPU requested=9, available_outside_accelerator_pg=2, cluster_total=98, accelerator_pg_reserved=96",
        ),
        "external_cpu_pool_insufficient",
    ),
    Case(
        "tp_does_not_divide",
        ray_wrapped(
            "AssertionError",
            "RolloutController.__init__()",
            (
                (
                    f"{X}/rl/rollout/lmdeploy.py",
                    163,
                    "build_rollout_topology",
                    "assert num_workers % num_gpus_per_engine == 0, (",
                ),
            ),
            "AssertionError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.",
        ),
        "rollout_workers_not_divisible",
    ),
    Case(
        "sp_size_bad",
        ray_wrapped(
            "ParallelConfigException",
            "TrainingWorker.__init__()",
            ((f"{X}/rl/trainer/worker.py", 430, "__init__", "raise ParallelConfigException("),),
            "xtuner.v1.utils.ParallelConfigException: Found sp_size 3, world_size 8.sequence parallel size must be a divisor of world size.",
        ),
        "sp_size_not_divisor",
    ),
    Case(
        "stale_placement_group",
        tb(
            *build_frames((f"{X}/train/rl_trainer.py", 1924, "__init__", "raise RuntimeError(")),
            exc="RuntimeError: RLDisaggregatedTrainer requires distinct placement groups for train and rollout, but both "
            "resolved to the same placement group id=2f00. Please check placement-group naming and stale Ray cluster state.",
        ),
        "disagg_same_placement_group",
    ),
    # ---------------------------------------------------------------- staleness / async
    Case(
        "staleness_warning_only",
        "\n".join(
            [
                xlog(
                    "WARNING",
                    "max_staleness > 0, enable_partial_rollout is False, this will affect rollout efficiency "
                    "because not support tail_batch_max_tries logic now",
                ),
                xlog("INFO", "[Step 1/45] loss=0.1", rank=0),
            ]
        ),
        "staleness_without_partial_rollout",
        verdict="warnings_only",
    ),
    Case(
        "empty_batch_after_failed_requests",
        "\n".join(
            [
                xlog(
                    "WARNING",
                    "rollout request 7f3a to http://10.0.0.5:25001/generate failed due to server error "
                    "HTTPStatusError with 500 Internal Server Error",
                )
            ]
            * 5
        )
        + "\n"
        + xlog("WARNING", "[SyncProduceStrategy] All tasks are done but not enough samples collected.")
        + "\n"
        + tb(
            *build_frames((f"{X}/train/rl_trainer.py", 1736, "fit", "raise RuntimeError(")),
            exc="RuntimeError: RLColocateTrainer expects agent_loop_manager.produce_batch() to return non-empty rollout_states.",
        ),
        "not_enough_samples",
        also=["rollout_request_failed"],
    ),
    Case(
        "disagg_producer_died",
        tb(
            *build_frames((f"{X}/train/rl_trainer.py", 1977, "fit", "raise RuntimeError(")),
            exc="RuntimeError: Disaggregated background producer exited before training finished.",
        ),
        "disagg_expired_or_producer_exit",
    ),
    Case(
        "resume_wrong_buffer",
        tb(
            *build_frames((f"{X}/rl/replay_buffer.py", 681, "load_state_dict", "raise ValueError(")),
            exc="ValueError: Replay policy mismatch: expected AsyncReplayPolicy, got SyncReplayPolicy",
        ),
        "replay_buffer_resume_mismatch",
    ),
    Case(
        "zero_task_weights",
        tb(
            *build_frames((f"{X}/rl/agent_loop_manager/produce_utils.py", 382, "allocate", "raise ValueError(")),
            exc="ValueError: Sum of task weights must be positive.",
        ),
        "task_weights_invalid",
    ),
    Case(
        "save_during_rollout",
        tb(
            *build_frames((f"{X}/rl/agent_loop_manager/agent_loop_manager.py", 318, "save", "raise RuntimeError(")),
            exc="RuntimeError: Cannot save AgentLoopManager while pending rollout tasks still exist: {'gsm8k': 3}. "
            "Finish the current produce_batch before saving.",
        ),
        "checkpoint_while_rollout_pending",
    ),
    # ---------------------------------------------------------------- debug / trace / eval
    Case(
        "debug_dir_missing",
        tb(
            *config_frames("trainer = RLColocateTrainerConfig(", 150),
            exc=pyd(
                "RLColocateTrainerConfig",
                ("", "Value error, debug_rollout_dir must be provided when debug_train=True. [type=value_error]"),
            ),
        ),
        "debug_mode_config",
    ),
    Case(
        "otel_collector_missing",
        tb(
            *build_frames((f"{X}/rl/trace/runtime.py", 166, "_start_collector", "raise RuntimeError(")),
            exc="RuntimeError: XTuner OTel tracing requires `otelcol-contrib` or `otelcol` on PATH. Install an official "
            "OpenTelemetry Collector binary before enabling trace.",
        ),
        "otel_collector_missing",
    ),
    Case(
        "evaluate_step_not_multiple",
        tb(
            *config_frames("trainer = RLColocateTrainerConfig(", 150),
            exc=pyd(
                "RLColocateTrainerConfig",
                (
                    "",
                    "Value error, evaluate_step=5 must be a multiple of sync_weights_interval=2, "
                    "because evaluation only runs on weight-sync steps. [type=value_error]",
                ),
            ),
        ),
        "interval_not_multiple_of_sync",
    ),
    Case(
        "no_total_steps",
        tb(
            *config_frames("trainer = RLColocateTrainerConfig(", 150),
            exc=pyd(
                "RLColocateTrainerConfig",
                ("", "Value error, Either total_train_steps or total_epochs must be provided. [type=value_error]"),
            ),
        ),
        "total_steps_missing",
    ),
    Case(
        "eval_cfg_bare_assert",
        tb(
            *build_frames(
                (f"{X}/train/rl_trainer.py", 720, "_init_eval", "assert cfg.eval_agent_loop_manager_cfg is not None")
            ),
            exc="AssertionError",
        ),
        "eval_config_missing",
    ),
    Case(
        "eval_set_empty",
        tb(
            *build_frames((f"{X}/rl/evaluator.py", 168, "__init__", "assert total > 0, (")),
            exc="AssertionError: Total eval samples must be greater than 0 if eval sample num is not provided",
        ),
        "eval_samples_zero",
    ),
    Case(
        "stale_english_doc_command",
        "$ XTUNER_USE_FA3=1 XTUNER_USE_LMDEPLOY=1 python xtuner/v1/train/cli/grpo.py --model-path /models/qwen --data-path gsm8k.jsonl\n"
        "python: can't open file '/mnt/xtuner/xtuner/v1/train/cli/grpo.py': [Errno 2] No such file or directory\n",
        "legacy_cli_used",
    ),
    # ---------------------------------------------------------------- variants: Chinese, interleaving, wrappers
    Case(
        "chinese_around_english",
        "训练启动失败，报错如下：\n错误：ModuleNotFoundError: No module named 'sglang'\n请问是不是需要单独安装推理引擎？",
        "backend_not_installed",
    ),
    Case(
        "chinese_ground_truth",
        "跑 GSM8K 的时候 judger 报错了：\n(GSM8KJudger pid=31, ip=10.0.0.5) AssertionError: RolloutState must have reward_model "
        "with 'ground_truth' for judging. You should set reward_model in AgentLoop\n数据是我自己转换的。",
        "reward_missing_ground_truth",
    ),
    Case(
        "ray_dedup_and_rank_prefixes",
        "\n".join(
            f"(WorkerDict(rollout-{i}) pid=2431{i}, ip=10.0.0.5) [rank{i}]: {line} [repeated 7x across cluster]"
            for i, line in enumerate(
                [
                    "Traceback (most recent call last):",
                    f'  File "{X}/rl/rollout/worker.py", line 76, in get_rollout_worker_base_cls',
                    "    from .lmdeploy import LMDeployWorker",
                    "ModuleNotFoundError: No module named 'lmdeploy'",
                ]
            )
        ),
        "backend_not_installed",
    ),
    Case(
        "transformers_too_old",
        tb(
            *build_frames(
                (
                    f"{X}/utils/misc.py",
                    161,
                    "is_hf_model_path",
                    "AutoConfig.from_pretrained(path, trust_remote_code=True)",
                )
            ),
            exc="ValueError: The checkpoint you are trying to load has model type `qwen3_moe` but Transformers does not "
            "recognize this architecture. This could be because of an issue with the checkpoint, or because your "
            "version of Transformers is out of date.",
        ),
        "transformers_unknown_architecture",
    ),
    Case(
        "flash_attn_abi_mismatch",
        tb(
            (f"{X}/ops/flash_attn/__init__.py", 12, "<module>", "from flash_attn import flash_attn_varlen_func"),
            (
                f"{SITE}/flash_attn/flash_attn_interface.py",
                10,
                "<module>",
                "import flash_attn_2_cuda as flash_attn_gpu",
            ),
            exc=f"ImportError: {SITE}/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: "
            "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
        ),
        "binary_incompatible_package",
    ),
    Case(
        "illegal_memory_access_then_health",
        "(RolloutWorker pid=51, ip=10.0.0.5) [2026-08-21 16:40:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'(RolloutWorker pid=51, ip=10.0.0.5)   File "{SITE}/sglang/srt/managers/scheduler.py", line 2671, in run_scheduler_process\n'
        "(RolloutWorker pid=51, ip=10.0.0.5)     scheduler.event_loop_overlap()\n"
        "(RolloutWorker pid=51, ip=10.0.0.5) RuntimeError: CUDA error: an illegal memory access was encountered\n"
        + xlog(
            "ERROR",
            "Health check failed for server http://10.0.0.5:25001: ConnectError('All connection attempts failed')",
        ),
        "cuda_runtime_error",
        also=["rollout_health_check_failed"],
    ),
    Case(
        "disk_full_on_save",
        tb(
            *build_frames(
                (f"{X}/train/rl_trainer.py", 784, "_maybe_save_checkpoint", "self._save(cur_step)"),
                (f"{SITE}/torch/serialization.py", 943, "save", "_save(obj, opened_zipfile, pickle_module)"),
            ),
            exc="OSError: [Errno 28] No space left on device",
        ),
        "disk_full",
    ),
    Case(
        "runtime_env_setup",
        "ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.\n"
        "Could not create the actor because its associated runtime env failed to be created.\n",
        "ray_runtime_env_failed",
    ),
    Case(
        "driver_killed_by_oom_killer",
        xlog("INFO", "[Step 7/45] loss=0.02", rank=0)
        + "\n"
        + "run_rl.sh: line 140: 81500 Killed                  python xtuner/v1/train/cli/rl.py --config cfg.py\nKilled\n",
        "process_killed",
    ),
    Case(
        "cli_positional_config",
        "$ python xtuner/v1/train/cli/rl.py examples/v1/config/rl_grpo_gsm8k_judge.py\n"
        + tb(
            (f"{X}/train/cli/rl.py", 71, "<module>", "app(exit_on_error=False)"),
            (f"{SITE}/cyclopts/bind.py", 512, "create_bound_arguments", "raise MissingArgumentError(argument=arg)"),
            exc="cyclopts.exceptions.MissingArgumentError: Parameter --config requires an argument.",
        ),
        "cli_argument_error",
    ),
    Case(
        "config_from_newer_xtuner",
        tb(
            *config_frames("from xtuner.v1.rl.agent_loop_manager import DisaggTaskSpecConfig", 14),
            exc="ImportError: cannot import name 'DisaggTaskSpecConfig' from 'xtuner.v1.rl.agent_loop_manager' "
            "(/opt/conda/lib/python3.12/site-packages/xtuner/v1/rl/agent_loop_manager/__init__.py)",
        ),
        "config_import_mismatch",
    ),
    Case(
        "actor_pending_warning_hang",
        "\n".join(
            [
                xlog("INFO", "RolloutHealthManager started."),
                "2026-08-21 16:12:00,001\tWARNING worker.py:2052 -- The actor or task with ID ffffffffffffffff1c9d2e6f01000000 "
                "cannot be scheduled right now. It requires {GPU: 1.000000, CPU: 12.000000} for placement, however the "
                "cluster currently cannot provide the requested resources. The required resources may be added as "
                "autoscaling takes place or placement groups are scheduled. Otherwise, consider reducing the resource "
                "requirements of the task.",
            ]
        ),
        "placement_group_pending",
        verdict="hang_suspected",
    ),
    Case(
        "exception_group_from_asyncio",
        "  + Exception Group Traceback (most recent call last):\n"
        f'  |   File "{X}/rl/utils/async_utils.py", line 140, in asyncio_run\n'
        "  |     return loop.run_until_complete(coro)\n"
        "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        f'    |   File "{X}/rl/judger/native.py", line 196, in judge_payload\n'
        '    |     assert payload["label"] is not None, (\n'
        "    | AssertionError: RolloutState must have reward_model with 'ground_truth' for judging. You should set "
        "reward_model in AgentLoop\n"
        "    +------------------------------------\n",
        "reward_missing_ground_truth",
    ),
    # ---------------------------------------------------------------- mixed: two problems, right order
    Case(
        "mixed_specific_before_generic",
        ray_wrapped(
            "AssertionError",
            "GSM8KJudger.judge()",
            ((f"{X}/rl/judger/native.py", 196, "judge_payload", "assert ..."),),
            "AssertionError: RolloutState must have reward_model with 'ground_truth' for judging. You should set reward_model in AgentLoop",
        )
        + "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n",
        "reward_missing_ground_truth",
        also=["ray_actor_died"],
    ),
    Case(
        "mixed_blocker_before_warning",
        xlog(
            "WARNING",
            "max_staleness > 0, enable_partial_rollout is False, this will affect rollout efficiency because "
            "not support tail_batch_max_tries logic now",
        )
        + "\n"
        + tb(
            *build_frames(
                (f"{X}/rl/utils/ray_accelerator_worker.py", 106, "validate_available_resources", "assert ...")
            ),
            exc="AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.",
        ),
        "ray_not_enough_gpus",
        also=["staleness_without_partial_rollout"],
    ),
    Case(
        "mixed_two_runs_chronological",
        tb(*config_frames('work_dir = os.environ["WORK_DIR"]', 29), exc="KeyError: 'WORK_DIR'")
        + "\n$ export WORK_DIR=/work/run1 && python xtuner/v1/train/cli/rl.py --config cfg.py\n"
        + tb(
            *build_frames(
                (f"{X}/rl/utils/ray_accelerator_worker.py", 106, "validate_available_resources", "assert ...")
            ),
            exc="AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.",
        ),
        "missing_env_var_in_config",
        also=["ray_not_enough_gpus"],
    ),
    Case(
        "mixed_hang_and_error_prefers_error",
        "(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0}.\n"
        + tb(
            *build_frames(
                (f"{X}/rl/utils/ray_accelerator_worker.py", 116, "validate_available_resources", "assert ...")
            ),
            exc="AssertionError: Not enough available CPUs in Ray cluster, 64.0 less than 106.",
        ),
        "ray_not_enough_cpus_or_memory",
        also=["placement_group_pending"],
    ),
    # ---------------------------------------------------------------- negatives
    Case(
        "healthy_metrics", (FIXTURES / "healthy_run.log").read_text(encoding="utf-8"), None, verdict="no_known_failure"
    ),
    Case(
        "healthy_with_word_error_in_metrics",
        "\n".join(
            [
                xlog("INFO", "[Step 4/45] loss=0.02 error_rate=0.00 rewards/mean=0.61", rank=0),
                xlog("INFO", "eval/accuracy=0.74 eval/format_error=0.01"),
                '(RolloutWorker pid=3, ip=10.0.0.5) INFO:     10.0.0.5:43210 - "POST /generate HTTP/1.1" 200 OK',
            ]
        ),
        None,
        verdict="no_known_failure",
    ),
]


def _diag(text: str, **kw):
    return run(Params(text=text, **kw), RunContext())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_realistic_case(case: Case):
    res = _diag(case.text, max_findings=10)
    ids = [f.failure_mode_id for f in res.findings]
    blockers = [f for f in res.findings if f.severity == "blocker"]
    if case.top is None:
        assert blockers == [], ids
        assert res.unrecognized_errors == []
    else:
        assert ids and ids[0] == case.top, (ids, res.summary)
        pos = 0
        for other in case.also:
            assert other in ids, (other, ids)
            assert ids.index(other) > pos, ids
            pos = ids.index(other)
        top = res.findings[0]
        assert top.evidence and all(e.line >= 1 for e in top.evidence)
        assert top.reference == f"xtuner-rl://failure-modes/{case.top}"
        assert top.fix and top.cause and top.source
        assert res.summary.startswith(("Most likely", "Run looks stuck", "No fatal error"))
        assert case.top in res.summary
    # Absent as a cause read from the messages; a description lead may still list it, below the real cause.
    exact_ids = [f.failure_mode_id for f in res.findings if f.match != "description"]
    for other in case.absent:
        assert other not in exact_ids, (other, exact_ids)
        assert other not in ids or ids.index(other) > 0, (other, ids)
    if case.verdict:
        assert res.verdict == case.verdict


def test_case_count_and_catalog_coverage():
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    assert len(CASES) >= 50
    covered = {c.top for c in CASES} | {x for c in CASES for x in c.also}
    entries = {fm.id for fm in load_catalog().failure_mode}
    # the realistic cases here plus the catalog's own examples (tested in test_catalog) cover every entry
    assert len(covered & entries) >= 55


#: Cases whose only evidence is a line with neither an exception name nor a log level (a shell's "can't open
#: file"): found in exact mode (inputs up to 4 MiB) only.
MARKER_MODE_EXEMPT = {"legacy_cli_used", "legacy_cli_command"}


def _catalog_examples() -> list[tuple[str, str]]:
    from xtuner_rl_mcp.knowledge.catalog import load_catalog

    return [(fm.id, ex) for fm in load_catalog().failure_mode for ex in fm.examples]


def _as_log(fm_id: str, example: str) -> str:
    """Embed a catalog example the way it reaches a log: raised in a traceback, or logged by XTuner."""
    from xtuner_rl_mcp.knowledge.catalog import get_failure_mode

    fm = get_failure_mode(fm_id)
    assert fm is not None
    healthy = (FIXTURES / "healthy_run.log").read_text(encoding="utf-8")
    if re.match(r"^\s*[\w.]*(Error|Exception)\b", example) or (fm.severity == "blocker" and ":" in example[:40]):
        body = tb(
            *build_frames((f"{X}/rl/rollout/worker.py", 1086, "_launch_server", "raise ...")), exc=example.strip()
        )
    else:
        body = xlog("WARNING" if fm.severity != "blocker" else "ERROR", example.strip()) + "\n"
    return healthy + body + xlog("INFO", "shutting down", ts="2026-08-21 16:20:00") + "\n"


@pytest.mark.parametrize(("fm_id", "example"), _catalog_examples())
def test_every_catalog_entry_is_diagnosed_from_a_log(fm_id, example):
    """One case per catalog example: the example inside a realistic log is diagnosed as its entry."""
    res = _diag(_as_log(fm_id, example), max_findings=10)
    ids = [f.failure_mode_id for f in res.findings]
    assert fm_id in ids, (ids, example)
    if ids[0] != fm_id:  # only another reading of the very same message may outrank it
        from xtuner_rl_mcp.knowledge.catalog import get_failure_mode

        top = get_failure_mode(ids[0])
        assert top is not None and top.matches(example), (ids, example)


@pytest.mark.parametrize("fm_id", sorted({c.top for c in CASES if c.top} - MARKER_MODE_EXEMPT))
def test_top_case_text_matches_even_in_marker_mode(fm_id, monkeypatch):
    """Large logs are scanned for error/warning markers only: the realistic cases must still be found."""
    import xtuner_rl_mcp.diagnosis.log_scanner as scanner

    monkeypatch.setattr(scanner, "FULL_SCAN_MAX_BYTES", 0)
    case = next(c for c in CASES if c.top == fm_id)
    res = _diag(case.text)
    assert res.findings and res.findings[0].failure_mode_id == fm_id


def test_evidence_lines_point_at_the_source_text():
    case = next(c for c in CASES if c.name == "backend_flag_unset_at_config_load")
    res = _diag(case.text)
    lines = case.text.splitlines()
    for ev in res.findings[0].evidence:
        assert ev.text in clean_line(lines[ev.line - 1])[0]
    assert res.findings[0].evidence[0].kind == "detail"


def test_pydantic_detail_carries_the_field_name():
    case = next(c for c in CASES if c.name == "rollout_config_backend_field")
    res = _diag(case.text)
    ev = res.findings[0].evidence[0]
    assert ev.kind == "detail" and ev.context == "backend"


def test_confirm_with_is_filled_from_inputs(tmp_path):
    case = next(c for c in CASES if c.name == "prompt_missing")
    res = _diag(case.text, data_path="/data/train.jsonl", config_path="/cfg/rl.py")
    call = res.findings[0].confirm_with[0]
    assert call.tool == "check_reward_data"
    assert call.arguments == {"path": "/data/train.jsonl"} and call.missing == []
    res = _diag(case.text)
    call = res.findings[0].confirm_with[0]
    assert call.arguments == {} and call.missing == ["path"]


def test_backend_is_inferred_for_build_rl_command():
    text = "export XTUNER_USE_SGLANG=1\n" + tb(
        *config_frames('work_dir = os.environ["WORK_DIR"]', 29), exc="KeyError: 'WORK_DIR'"
    )
    res = _diag(text, config_path="/cfg/rl.py")
    calls = {c.tool: c for c in res.findings[0].confirm_with}
    assert calls["build_rl_command"].arguments == {"config": "/cfg/rl.py", "backend": "sglang"}


def test_unrecognized_errors_are_reported_not_dropped():
    text = tb(("/home/u/x.py", 3, "<module>", "1 / 0"), exc="ZeroDivisionError: division by zero")
    text += xlog("ERROR", "something nobody catalogued went wrong (code 17)") + "\n"
    text += xlog("ERROR", "something nobody catalogued went wrong (code 18)") + "\n"
    res = _diag(text)
    assert res.findings == [] and res.verdict == "no_known_failure"
    texts = [u.text for u in res.unrecognized_errors]
    assert "ZeroDivisionError: division by zero" in texts
    assert any(u.count == 2 for u in res.unrecognized_errors)  # numbers ignored when grouping
    assert "unrecognized" in res.summary


@pytest.mark.parametrize("name", ["eval_cfg_bare_assert", "driver_killed_by_oom_killer", "ray_gcs_timeout"])
def test_explained_lines_are_not_reported_as_unrecognized(name):
    """A bare exception line closing a traceback whose source line matched is explained, not unrecognized."""
    case = next(c for c in CASES if c.name == name)
    assert _diag(case.text).unrecognized_errors == []


def test_detail_controls_sizes():
    text = "\n".join(
        xlog("ERROR", f"Health check failed for server http://10.0.0.5:2500{i}: ReadTimeout('')") for i in range(9)
    )
    full = _diag(text, detail="full").findings[0]
    normal = _diag(text).findings[0]
    summ = _diag(text, detail="summary").findings[0]
    assert full.occurrences == normal.occurrences == 9
    assert len(full.evidence) == 9 and full.evidence_omitted == 0
    assert len(normal.evidence) == 3 and normal.evidence_omitted == 6
    assert normal.evidence[-1].line == 9  # the latest occurrence is kept
    assert len(summ.evidence) == 1


def test_route_names_where_the_fix_belongs():
    case = next(c for c in CASES if c.name == "ground_truth_missing_ray")
    res = _diag(case.text)
    assert [(r.area, r.failure_mode_ids) for r in res.route] == [("data_preparation", ["reward_missing_ground_truth"])]
    case = next(c for c in CASES if c.name == "not_enough_gpus")
    assert _diag(case.text).route == []


def test_sft_traceback_is_routed_to_sft_training():
    text = tb(
        (f"{X}/train/cli/sft.py", 80, "<module>", "main()"),
        (f"{X}/train/trainer.py", 900, "fit", "loss.backward()"),
        exc="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.",
    )
    res = _diag(text)
    assert res.findings[0].failure_mode_id == "cuda_out_of_memory"
    assert [r.area for r in res.route] == ["sft_training"]


def test_max_findings_caps_and_counts():
    case = next(c for c in CASES if c.name == "health_checks_failing")
    res = _diag(case.text, max_findings=1)
    assert len(res.findings) == 1 and res.findings_omitted >= 1


def test_interleaved_fixture_file(tmp_path):
    res = run(
        Params(log_path=str(FIXTURES / "interleaved_workers_oom.log")),
        RunContext(paths=PathPolicy.from_strings([FIXTURES])),
    )
    ids = [f.failure_mode_id for f in res.findings]
    assert ids[0] == "cuda_out_of_memory", ids
    assert "rollout_health_check_failed" in ids and "ray_actor_died" in ids
    assert ids.index("ray_actor_died") > ids.index("rollout_health_check_failed")
    assert {"model_backends"} <= {r.area for r in res.route}


def test_ansi_crlf_fixture_file():
    res = run(
        Params(log_path=str(FIXTURES / "ansi_crlf_backend_flag.log")),
        RunContext(paths=PathPolicy.from_strings([FIXTURES])),
    )
    assert res.findings[0].failure_mode_id == "backend_flag_missing"
    assert "\x1b" not in res.findings[0].evidence[0].text and "\r" not in res.findings[0].evidence[0].text


def test_backend_missing_fixture_file_and_chinese_text():
    ctx = RunContext(paths=PathPolicy.from_strings([FIXTURES]))
    res = run(Params(log_path=str(FIXTURES / "rl_backend_missing_sglang.log")), ctx)
    assert res.findings[0].failure_mode_id == "backend_not_installed"
    assert res.findings[0].evidence[0].line == 22
    res = run(Params(log_path=str(FIXTURES / "zh_question.txt")), ctx)
    assert res.findings[0].failure_mode_id == "backend_not_installed"
    assert res.findings[0].confirm_with[0].tool == "probe_environment"


def test_clean_line_prefixes():
    assert clean_line("(RolloutWorker pid=81232, ip=10.130.2.17) [XTuner][RANK 3][2026-08-21 16:10:02][ERROR] boom")[
        ::2
    ] == ("boom", "ERROR")
    assert clean_line("\x1b[31m2026-08-21 16:02:20.123 | WARNING  | xtuner.v1:fit:12 - hi\x1b[0m\r")[::2] == (
        "hi",
        "WARNING",
    )
    assert clean_line("E0821 16:02:20.123456 12345 core_worker.cc:123] bad thing")[::2] == ("bad thing", "ERROR")
    assert clean_line("2026-08-21 16:02:23,441\tINFO worker.py:1852 -- Connected")[::2] == ("Connected", "INFO")
    assert clean_line("ERROR:    [Errno 98] address already in use")[0] == "[Errno 98] address already in use"
    assert clean_line("(raylet) something")[0] == "something"
    assert clean_line("(ActorWorker(ref-3) pid=2, ip=1.2.3.4) ERROR:log_rank_3:boom [repeated 7x across cluster]")[
        ::2
    ] == (
        "boom",
        "ERROR",
    )
    assert clean_line("svc-1  | 2024-08-27 12:54:55 | ERROR | stderr | Traceback (most recent call last):")[0] == (
        "Traceback (most recent call last):"
    )
    assert clean_line("04/02 11:50:24 - mmengine - WARNING - hello")[::2] == ("hello", "WARNING")
    assert clean_line("[rank0]: KeyError: 'prompt'")[0] == "KeyError: 'prompt'"
    assert clean_line("2025-04-28 10:00:00,000 - lmdeploy - ERROR - engine.py:781 - Task <EngineMainLoop> failed")[
        ::2
    ] == ("Task <EngineMainLoop> failed", "ERROR")
    assert clean_line("[TM][WARNING] hello")[::2] == ("hello", "WARNING")
    assert clean_line("ERROR 08-21 16:02:25 [engine.py:123] boom")[::2] == ("boom", "ERROR")


# --------------------------------------------------------------------------------------------------------
# Files, directories, path policy, scale
# --------------------------------------------------------------------------------------------------------


def _ctx(*roots: Path) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings([str(r) for r in roots]))


def test_directory_input_reads_log_files_newest_first(tmp_path):
    logs = tmp_path / "work_dirs" / "20260821160000" / "logs"
    (logs / "rank0").mkdir(parents=True)
    old = logs / "exp.log"
    old.write_text(xlog("WARNING", "Ignore unknown SGLang server arg: mem_fraction=0.8") + "\n")
    new = logs / "rank0" / "worker.err"
    new.write_text(tb(*build_frames(), exc="TypeError: 'Config' object is not callable"))
    (logs / "notes.md").write_text("KeyError: 'WORK_DIR'\n")  # not a log suffix: ignored
    (logs / "ckpt.bin").write_bytes(os.urandom(1000))
    os.utime(old, (1_000_000, 1_000_000))
    res = run(Params(log_path=str(tmp_path / "work_dirs")), _ctx(tmp_path))
    assert res.scanned.sources == [str(new.resolve()), str(old.resolve())]
    ids = [f.failure_mode_id for f in res.findings]
    assert ids == ["config_missing_trainer", "sglang_unknown_server_arg"]
    assert res.findings[0].evidence[0].source == str(new.resolve())


def test_directory_symlink_out_of_roots_is_skipped(tmp_path):
    inside = tmp_path / "root"
    outside = tmp_path / "secret"
    inside.mkdir()
    outside.mkdir()
    (outside / "x.log").write_text("KeyError: 'WORK_DIR'\n")
    (inside / "link.log").symlink_to(outside / "x.log")
    (inside / "ok.log").write_text("AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.\n")
    res = run(Params(log_path=str(inside)), _ctx(inside))
    assert [f.failure_mode_id for f in res.findings] == ["ray_not_enough_gpus"]


def test_path_policy_errors(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    other = tmp_path / "other.log"
    other.write_text("x\n")
    with pytest.raises(ToolInputError) as e:
        run(Params(log_path=str(other)), _ctx(root))
    assert e.value.code == "path_outside_roots"
    with pytest.raises(ToolInputError) as e:
        run(Params(log_path=str(root / "missing.log")), _ctx(root))
    assert e.value.code == "path_not_found"
    fifo = root / "pipe.log"
    os.mkfifo(fifo)
    with pytest.raises(ToolInputError) as e:
        run(Params(log_path=str(fifo)), _ctx(root))
    assert e.value.code == "path_special_file"
    with pytest.raises(ToolInputError) as e:
        run(Params(), _ctx(root))
    assert e.value.code == "no_input"
    with pytest.raises(ToolInputError) as e:
        run(Params(text="   \n"), _ctx(root))
    assert e.value.code == "no_input"
    empty = root / "empty_dir"
    empty.mkdir()
    with pytest.raises(ToolInputError) as e:
        run(Params(log_path=str(empty)), _ctx(root))
    assert e.value.code == "no_log_files"


def test_binary_and_undecodable_bytes_are_tolerated(tmp_path):
    p = tmp_path / "mixed.log"
    p.write_bytes(os.urandom(200_000) + b"\n\xff\xfeKeyError: 'prompt'\x00\n" + os.urandom(1000))
    res = run(Params(log_path=str(p)), _ctx(tmp_path))
    assert "data_missing_prompt" in [f.failure_mode_id for f in res.findings]


def test_overlong_line_without_newline(tmp_path):
    p = tmp_path / "long.log"
    with open(p, "wb") as f:
        f.write(b"x" * (3 << 20))
        f.write(b" ModuleNotFoundError: No module named 'lmdeploy' ")
        f.write(b"y" * (2 << 20))
    res = run(Params(log_path=str(p)), _ctx(tmp_path))
    assert res.findings[0].failure_mode_id == "backend_not_installed"
    assert len(res.findings[0].evidence[0].text) <= 600


def test_large_file_streamed_with_bounded_memory(tmp_path):
    """~50 MB of healthy lines with the failure near the end: found, with memory far below the file size."""
    p = tmp_path / "big.log"
    healthy = (FIXTURES / "healthy_run.log").read_bytes()
    reps = (50 << 20) // len(healthy) + 1
    failure = tb(
        *build_frames((f"{X}/rl/utils/ray_accelerator_worker.py", 106, "v", "assert ...")),
        exc="AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.",
    ).encode()
    with open(p, "wb") as f:
        for _ in range(reps):
            f.write(healthy)
        f.write(failure)
        f.write(healthy[:500])
    size = p.stat().st_size
    assert size > 50 << 20
    tracemalloc.start()
    try:
        res = run(Params(log_path=str(p)), _ctx(tmp_path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.findings[0].failure_mode_id == "ray_not_enough_gpus"
    assert res.scanned.scan_mode == "markers" and res.scanned.bytes == size
    expected_line = healthy.count(b"\n") * reps + failure.count(b"\n")
    assert res.findings[0].evidence[0].line == expected_line
    assert peak < 40 << 20, peak  # a few chunks, not the file
    # the prefilter decoded only the marker lines (here the one WARNING line of each repeated block)
    assert res.scanned.candidate_lines <= res.scanned.lines // 12


def test_flood_of_error_lines_keeps_time_bounded_and_the_tail(tmp_path, monkeypatch):
    """Millions of distinct error lines: past a budget only the file's tail is matched; line numbers stay exact."""
    import xtuner_rl_mcp.diagnosis.log_scanner as scanner
    import xtuner_rl_mcp.diagnosis.sources as sources

    monkeypatch.setattr(scanner, "MAX_HANDLED_LINES", 2_000)
    monkeypatch.setattr(scanner, "TAIL_BYTES", 1 << 20)
    monkeypatch.setattr(sources, "CHUNK_BYTES", 256 << 10)
    p = tmp_path / "flood.log"
    n = 400_000
    with open(p, "w") as f:
        for i in range(n):
            f.write(f"ValueError: sample {i} rejected by custom filter {i * 7}\n")
        f.write("AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.\n")
    res = run(Params(log_path=str(p)), _ctx(tmp_path))
    assert res.findings[0].failure_mode_id == "ray_not_enough_gpus"
    assert res.findings[0].evidence[0].line == n + 1
    assert any("only counted" in note for note in res.scanned.notes)
    assert res.scanned.lines == n + 1


def test_progress_is_reported(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"info line\n" * 2_000_000)
    seen: list[float] = []
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]), progress=lambda d, t=None, m=None: seen.append(d))
    run(Params(log_path=str(p)), ctx)
    assert seen and seen[-1] == p.stat().st_size


def test_text_and_log_path_together(tmp_path):
    p = tmp_path / "a.log"
    p.write_text("AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.\n")
    res = run(Params(text="KeyError: 'WORK_DIR'", log_path=str(p)), _ctx(tmp_path))
    ids = {f.failure_mode_id for f in res.findings}
    assert ids == {"missing_env_var_in_config", "ray_not_enough_gpus"}
    assert res.scanned.sources == ["text", str(p.resolve())]


def test_probes_run_colleague_tools(tmp_path, shared_data):
    data = shared_data / "gsm8k_train_example_data.jsonl"
    case = next(c for c in CASES if c.name == "ground_truth_missing_ray")
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path, shared_data]))
    res = run(Params(text=case.text, data_path=str(data), run_probes=True), ctx)
    tools = {p.tool: p for p in res.probes}
    assert set(tools) == {"probe_environment", "check_reward_data"}
    assert tools["check_reward_data"].status == "ok" and tools["check_reward_data"].summary
    assert tools["probe_environment"].status in ("ok", "failed")
    # the real GSM8K samples carry ground truth: the probe does not confirm a missing-ground-truth diagnosis
    assert "reward_missing_ground_truth" not in tools["check_reward_data"].confirms


def test_probe_confirms_missing_ground_truth(tmp_path):
    data = tmp_path / "train.jsonl"
    rows = [{"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "openai/gsm8k"}] * 3
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    case = next(c for c in CASES if c.name == "ground_truth_missing_ray")
    res = run(Params(text=case.text, data_path=str(data), run_probes=True), _ctx(tmp_path))
    probe = next(p for p in res.probes if p.tool == "check_reward_data")
    assert probe.status == "ok"
    assert "reward_missing_ground_truth" in probe.confirms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("在 2 × 8 GPUs 的集群上 placement group 一直 pending", {"nodes": 2, "gpus_per_node": 8}),
        ("2x8 A100, Qwen3-8B with LMDeploy", {"nodes": 2, "gpus_per_node": 8, "params_b": 8, "backend": "lmdeploy"}),
        ("70B on 2 nodes x 8 GPUs", {"nodes": 2, "gpus_per_node": 8, "params_b": 70}),
        ("2机16卡 sglang 30B-A3B", {"nodes": 2, "gpus_per_node": 8, "params_b": 30, "backend": "sglang"}),
        ("两台 8 卡机器", {"nodes": 2, "gpus_per_node": 8}),
        ("Qwen2.5-7B-Instruct 单机8卡", {"nodes": 1, "gpus_per_node": 8, "params_b": 7}),
        ("ray start on 3 nodes, 8 GPUs per node", {"nodes": 3, "gpus_per_node": 8}),
        ("my run on 8 GPUs hangs at step 12, 80GB each", {}),
        ("lmdeploy or vllm?", {}),
    ],
)
def test_report_values(text, expected):
    assert report_values(text) == expected


def test_values_named_in_the_report_fill_confirm_with():
    res = _diag("2 × 8 GPUs 的集群上 placement group 一直 pending，训练卡住不动，用的 Qwen3-8B")
    pg = next(d for d in res.findings if d.failure_mode_id == "placement_group_pending")
    call = next(c for c in pg.confirm_with if c.tool == "choose_topology")
    assert call.arguments == {"nodes": 2, "gpus_per_node": 8, "params_b": 8} and call.missing == []
    # without the numbers, nodes stays a missing argument
    res = _diag("placement group 一直 pending，训练卡住不动")
    pg = next(d for d in res.findings if d.failure_mode_id == "placement_group_pending")
    assert next(c for c in pg.confirm_with if c.tool == "choose_topology").missing == ["nodes"]


def _probe_finding(fid: str, category: str, title: str, severity: str = "blocker") -> Finding:
    return Finding(id=fid, severity=severity, category=category, title=title, evidence="seen live", fix="do it")


def test_probe_blockers_decide_when_the_report_names_no_failure():
    catalog = load_catalog()
    probed = [
        ("probe_environment", _probe_finding("probe.backend_flag_missing", "backend_flag_missing_or_multiple", "x")),
        ("probe_environment", _probe_finding("probe.env_unset.WORK_DIR", "missing_env_var_or_path", "w", "warning")),
    ]
    out = judge_probes(catalog, [], probed, {}, "how do I launch this")
    assert [(d.failure_mode_id, d.match, d.severity) for d in out] == [("backend_flag_missing", "probe", "blocker")]
    assert out[0].evidence[0].source == "probe:probe_environment" and out[0].evidence[0].kind == "probe"
    assert out[0].fix == ["do it"] and "live check" in out[0].cause
    assert choose_verdict(out) == "blocker_found_by_probe"


def test_probe_blocker_confirms_a_suspected_cause_and_leads():
    catalog = load_catalog()
    res = _diag("reward stays 0 for every step and the accuracy never moves")
    assert res.verdict in ("suspected_from_description", "uncertain")  # wording only: no exact message
    gt = ("check_reward_data", _probe_finding("data.missing_ground_truth", "reward_data_missing_ground_truth", "g"))
    out = judge_probes(catalog, list(res.findings), [gt], {}, "")
    assert out[0].failure_mode_id == "reward_missing_ground_truth" and out[0].match == "probe"
    assert choose_verdict(out) == "blocker_found_by_probe"


def test_probe_blocker_the_run_got_past_is_not_its_cause():
    catalog = load_catalog()
    res = _diag("reward stays 0 for every step and the accuracy never moves")
    flag = ("probe_environment", _probe_finding("probe.backend_flag_missing", "backend_flag_missing_or_multiple", "f"))
    out = judge_probes(catalog, list(res.findings), [flag], {}, "")
    d = next(d for d in out if d.failure_mode_id == "backend_flag_missing")
    assert d.severity == "warning" and "got past config_load" in d.cause
    assert out[0].failure_mode_id != "backend_flag_missing"
    assert choose_verdict(out) in ("suspected_from_description", "uncertain")


def test_stopped_cluster_after_a_crash_is_xtuners_cleanup():
    catalog = load_catalog()
    down = ("probe_environment", _probe_finding("probe.ray_not_running", "ray_not_running", "No running Ray cluster"))
    crashed = _diag(next(c for c in CASES if c.name == "prompt_missing").text)
    out = judge_probes(catalog, list(crashed.findings), [down], {}, "")
    d = next(d for d in out if d.failure_mode_id == "ray_not_running")
    assert d.severity == "info" and "exit handler" in d.cause
    assert "xtuner/v1/rl/utils/ray_utils.py:117-156" in d.source and out[0].failure_mode_id != "ray_not_running"
    assert choose_verdict(out) == "failure_found"
    # a report about reaching Ray keeps it a blocker
    ray = _diag(next(c for c in CASES if c.name == "ray_not_started").text)
    out = judge_probes(catalog, list(ray.findings), [down], {}, "")
    assert out[0].failure_mode_id == "ray_not_running" and out[0].severity == "blocker"
    # "my run died" with nothing matched: the stop is cleanup too
    out = judge_probes(catalog, [], [down], {}, "my run died overnight")
    assert out[0].severity == "info"


def test_log_ray_not_running_next_to_another_failure_ranks_after_it():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"
    again = "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to."
    res = _diag(oom + "\n" + again + "\n")
    ids = [d.failure_mode_id for d in res.findings]
    assert ids.index("cuda_out_of_memory") < ids.index("ray_not_running")
    d = res.findings[ids.index("ray_not_running")]
    assert "exit handler" in d.cause and "xtuner/v1/train/cli/rl.py:69-71" in d.source
    assert res.verdict == "failure_found" and res.summary.startswith("Most likely cause: cuda_out_of_memory")


def test_run_probes_with_data_judges_text_and_probe_together(tmp_path):
    data = tmp_path / "train.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"{i}+1? ####"}], "data_source": "openai/gsm8k"} for i in range(3)]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]), environ={"XTUNER_USE_LMDEPLOY": "1"})
    res = run(Params(text="reward stays 0 for every step", data_path=str(data), run_probes=True), ctx)
    top = res.findings[0]
    assert top.failure_mode_id == "reward_missing_ground_truth" and top.match == "probe"
    assert any(e.source == "probe:check_reward_data" for e in top.evidence)
    assert res.verdict == "blocker_found_by_probe"
    assert res.summary.startswith("Live check found a blocker: reward_missing_ground_truth")


# --------------------------------------------------------------------------------------------------------
# Through the MCP server
# --------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_lists_the_tool(mcp_client):
    tools = {t.name: t for t in (await mcp_client.list_tools()).tools}
    tool = tools["diagnose_symptom"]
    props = tool.input_schema["properties"] if hasattr(tool, "input_schema") else tool.inputSchema["properties"]
    assert {"text", "log_path", "config_path", "data_path", "run_probes", "max_findings", "detail"} <= set(props)


@pytest.mark.anyio
async def test_mcp_call_with_text(mcp_client):
    case = next(c for c in CASES if c.name == "sglang_missing_chained")
    res = await mcp_client.call_tool("diagnose_symptom", {"text": case.text})
    assert not res.is_error if hasattr(res, "is_error") else not res.isError
    data = res.structured_content if hasattr(res, "structured_content") else res.structuredContent
    assert data["findings"][0]["failure_mode_id"] == "backend_not_installed"
    assert data["findings"][0]["reference"] == "xtuner-rl://failure-modes/backend_not_installed"


@pytest.mark.anyio
async def test_mcp_call_with_log_path_and_policy_error(mcp_client, tmp_path):
    p = tmp_path / "run.log"
    p.write_text("ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.\n")
    res = await mcp_client.call_tool("diagnose_symptom", {"log_path": str(p)})
    data = res.structured_content if hasattr(res, "structured_content") else res.structuredContent
    assert data["findings"][0]["failure_mode_id"] == "placement_group_timeout"
    bad = await mcp_client.call_tool("diagnose_symptom", {"log_path": "/etc/passwd"})
    assert bad.is_error if hasattr(bad, "is_error") else bad.isError
    text = bad.content[0].text
    assert "path_outside_roots" in text and "Traceback" not in text


# --------------------------------------------------------------------------------------------------------
# The message's numbers, recovery lines, and calls that run as suggested
# --------------------------------------------------------------------------------------------------------


def test_divisibility_fix_names_the_layouts_choose_topology_names():
    from xtuner_rl_mcp.xtuner_rules.resources import engine_layout_fix

    res = _diag("ValueError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.")
    top = res.findings[0]
    assert top.failure_mode_id == "rollout_workers_not_divisible"
    assert top.fix[0] == engine_layout_fix(6, 4, "TP", 8) + "."
    assert top.fix[0].startswith("use 4 or 8 rollout GPUs with TP 4, or TP 1/2/3/6 on 6")
    topo = next(c for c in top.confirm_with if c.tool == "choose_topology")
    assert topo.arguments["tensor_parallel_size"] == 4  # choose_topology then checks the layout the run asked for
    ep = _diag("ValueError: num_rollout_workers=8 must be divisible by expert_parallel_size=3.").findings[0]
    assert ep.fix[0] == engine_layout_fix(8, 3, "EP", 8) + "."


def test_interval_fix_is_the_one_inspect_config_gives():
    from xtuner_rl_mcp.xtuner_rules.intervals import interval_fix

    text = xlog("ERROR", "Value error, checkpoint_interval=7 must be a multiple of sync_weights_interval=3, because")
    top = _diag(text).findings[0]
    assert top.failure_mode_id == "interval_not_multiple_of_sync"
    assert top.fix[0] == interval_fix("checkpoint_interval", 7, 3) == "Use checkpoint_interval=6 (a multiple of 3)."


def test_resource_fix_carries_the_counts():
    top = _diag("AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.").findings[0]
    assert top.failure_mode_id == "ray_not_enough_gpus"
    assert "asks Ray for 8 GPUs and 4 are free" in top.fix[0] and "num_workers to 4" in top.fix[0]


def test_a_message_without_numbers_keeps_the_catalog_fix():
    top = _diag("AssertionError: Either tensor parallel size or engine parallel size must be 1.").findings[0]
    assert top.failure_mode_id == "rollout_workers_not_divisible"
    assert top.fix == list(load_catalog().by_id["rollout_workers_not_divisible"].fix)


_UNHEALTHY = (
    xlog("INFO", "RolloutHealthManager started.", ts="2026-08-21 16:02:24")
    + "\n"
    + xlog("ERROR", "Health check returned non-200 for server http://10.0.0.5:25001/health: status_code=503")
    + "\n"
    + xlog("WARNING", "Worker 3 reached health check failure threshold: 3/3.")
    + "\n"
)


def test_a_failure_that_recovered_is_no_longer_the_blocker():
    before = _diag(_UNHEALTHY)  # without the recovery line: a blocker that asks to restart the run
    assert before.findings[0].failure_mode_id == "rollout_health_check_failed"
    assert before.findings[0].severity == "blocker" and before.verdict == "failure_found"
    recovered = _UNHEALTHY + xlog("INFO", "Successfully restarted rollout worker group ranks=[2, 3].") + "\n"
    res = _diag(recovered)
    health = next(f for f in res.findings if f.failure_mode_id == "rollout_health_check_failed")
    assert health.severity == "warning" and health.confidence < before.findings[0].confidence
    assert health.fix[0].startswith("Nothing to do while the run keeps stepping")
    assert not (res.findings[0].severity == "blocker" and res.findings[0].failure_mode_id == health.failure_mode_id)
    assert res.verdict != "failure_found"


def test_a_recovery_said_in_chinese_counts_too():
    res = _diag(_UNHEALTHY + "后来 worker 自动重启成功了，训练继续在跑\n")
    health = next(f for f in res.findings if f.failure_mode_id == "rollout_health_check_failed")
    assert health.severity == "warning"


def test_a_recovery_before_the_failure_does_not_excuse_it():
    text = xlog("INFO", "Successfully restarted rollout worker group ranks=[2, 3].") + "\n" + _UNHEALTHY
    res = _diag(text)
    assert res.findings[0].failure_mode_id == "rollout_health_check_failed"
    assert res.findings[0].severity == "blocker"


#: Reports of the kinds users write, for the values the suggested calls are filled from.
_VALUE_TEXTS = [
    "",
    "2 × 8 GPUs, Qwen3-8B with SGLang",
    "两台 8 卡机器，70B 模型，lmdeploy",
    "单机8卡 vllm 0.5B",
    "ValueError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.",
    "ValueError: num_rollout_workers=8 must be divisible by expert_parallel_size=3.",
]


@pytest.mark.parametrize("text", _VALUE_TEXTS)
def test_every_suggested_call_is_valid_for_its_tool(text, tmp_path):
    """Every confirm_with call of every catalog entry, as diagnose_symptom fills it, validates against the named
    tool's Params; a call with missing arguments validates once those are given."""
    import importlib

    from xtuner_rl_mcp.diagnosis.ranking import diagnosis

    samples = {"path": str(tmp_path), "config": str(tmp_path / "c.py"), "nodes": 1, "backend": "lmdeploy"}
    values = {"nodes": None, **report_values(text)}
    checked = 0
    for fm in load_catalog().failure_mode:
        for call in diagnosis(fm, 0.5, [], 0, values, match="description").confirm_with:
            params = importlib.import_module(f"xtuner_rl_mcp.tools.{call.tool}").SPEC.params
            assert set(call.missing) <= set(params.model_fields), (fm.id, call)
            if not call.missing:
                params(**call.arguments)
            params(**call.arguments, **{m: samples.get(m, str(tmp_path)) for m in call.missing})
            checked += 1
    assert checked > 100


def test_close_leads_say_uncertain_and_how_to_separate_them():
    res = _diag("it hangs")
    assert res.verdict == "uncertain"
    first, second = res.findings[0], next(f for f in res.findings if f.category != res.findings[0].category)
    assert first.confidence - second.confidence < 0.05
    assert res.summary.startswith(f"Uncertain: {first.failure_mode_id}") and second.failure_mode_id in res.summary
    assert res.questions[0].startswith("Which does the log show")
    assert first.failure_mode_id in res.questions[0] and second.failure_mode_id in res.questions[0]


def test_a_clear_lead_is_not_called_uncertain():
    res = _diag("vLLM says no available memory for the cache blocks when I raise the batch size")
    assert res.verdict == "suspected_from_description"
    assert not res.summary.startswith("Uncertain")


def test_a_failure_that_comes_back_after_the_recovery_stays_a_blocker():
    """Even when only the first occurrence is shown as evidence (detail=summary), the latest one decides."""
    restarted = xlog("INFO", "Successfully restarted rollout worker group ranks=[2, 3].") + "\n"
    res = _diag(_UNHEALTHY + restarted + _UNHEALTHY, detail="summary")
    assert res.findings[0].failure_mode_id == "rollout_health_check_failed"
    assert res.findings[0].severity == "blocker"


# --- audit findings of issue 26: what users actually see -------------------------------------------------------


def test_missing_tensorboard_is_not_answered_with_switch_to_jsonl():
    """rl_trainer.py:21 imports the TensorBoard writer whatever exp_tracker says: the fix is installing tensorboard."""
    res = _diag(
        tb(
            *cli_frames((f"{X}/train/cli/rl.py", 12, "<module>", "from xtuner.v1.train.rl_trainer import RLTrainer")),
            exc="ModuleNotFoundError: No module named 'tensorboard'",
        )
    )
    top = res.findings[0]
    assert top.failure_mode_id == "exp_tracker_unsupported" and res.verdict == "failure_found"
    assert "even with exp_tracker" in top.fix[0] and "pip install" in top.fix[0]
    assert not any(re.search(r"jsonl.{0,10}(needs nothing|instead)", step) for step in top.fix)


def _dapo_validation_error(**fields) -> str:
    """The ValidationError pydantic prints for DapoMathJudgerConfig: a model with the same field types and the same
    assert statements in an after-validator as xtuner/v1/rl/judger/dapo_math.py:293-329 (b934f46)."""
    from pydantic import BaseModel, ValidationError, model_validator

    class DapoMathJudgerConfig(BaseModel):
        eos_token: list[str] | str
        enable_overlong_buffer: bool
        max_response_len: int | None = None
        overlong_buffer_len: int | None = None
        overlong_penalty_factor: float | None = None
        tokenizer: object = None

        @model_validator(mode="after")
        def _pack_extra_info(self):
            if isinstance(self.eos_token, str):
                assert self.eos_token.strip() != "", "eos_token string must not be empty"
            else:
                assert all(isinstance(e, str) and e.strip() != "" for e in self.eos_token), (
                    "All eos_token list elements must be non-empty strings"
                )
                assert len(self.eos_token) > 0, "eos_token list must not be empty"
            if self.enable_overlong_buffer:
                assert self.max_response_len is not None, "max_response_len is required."
                assert self.overlong_buffer_len is not None, "overlong_buffer_len is required."
                assert self.overlong_penalty_factor is not None, "overlong_penalty_factor is required."
                assert self.tokenizer is not None, "tokenizer is required."
            return self

    try:
        DapoMathJudgerConfig(**fields)
    except ValidationError as exc:
        return f"pydantic_core._pydantic_core.ValidationError: {exc}"
    raise AssertionError("the config was valid")


@pytest.mark.parametrize(
    "fields",
    [
        {"eos_token": "", "enable_overlong_buffer": False},
        {"eos_token": ["<|im_end|>", " "], "enable_overlong_buffer": False},
        {"eos_token": "<|im_end|>", "enable_overlong_buffer": True},
        {"eos_token": "<|im_end|>", "enable_overlong_buffer": True, "max_response_len": 8192},
        {"eos_token": "<|im_end|>", "enable_overlong_buffer": True, "max_response_len": 1, "overlong_buffer_len": 1},
    ],
)
def test_dapo_judger_validation_errors_as_pydantic_prints_them(fields):
    text = _dapo_validation_error(**fields)
    assert "Assertion failed, " in text and "AssertionError" not in text
    res = _diag(text)
    assert res.findings[0].failure_mode_id == "dapo_judger_config_incomplete"
    assert res.verdict == "failure_found" and res.findings[0].confidence >= 0.5


def test_a_missing_transformers_submodule_is_a_version_skew():
    """transformers is installed but moved or has not yet added the module: a version mismatch, not a missing
    package."""
    res = _diag("ModuleNotFoundError: No module named 'transformers.models.qwen2_5_vl'")
    assert res.findings[0].failure_mode_id == "transformers_version_mismatch"
    assert res.findings[0].category == "backend_not_installed"
    assert all(f.match == "description" for f in res.findings if f.failure_mode_id == "rl_dependency_missing")


# --- inference servers and their containers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "openai.NotFoundError: Error code: 404 - {'object': 'error', 'message': \"The model 'qwen3-8b' does not "
            "exist.\", 'code': 404, 'param': None, 'type': 'not_found_error'}",
            "served_model_name_mismatch",
        ),
        (
            "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'Logprobs(True)/top_logprobs(2) "
            "requested but not enabled logprobs_mode in engine configuration', 'code': 400}",
            "server_option_not_enabled",
        ),
        (
            "ValueError: The quantization method gptq_marlin is not supported for the current GPU. Minimum "
            "capability: 80. Current capability: 70.",
            "quantization_unsupported",
        ),
        (
            "node-3:4021:4021 [2] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment "
            "/dev/shm/nccl-Xk2P0q (size 9637888), error: No space left on device (28)\n"
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
            "unhandled system error, NCCL version 2.21.5\nncclSystemError: System call (e.g. socket, malloc) or "
            "external library call failed or device error.",
            "shared_memory_too_small",
        ),
        (
            "2026-08-21 16:02:20,441 - lmdeploy - WARNING - model.py:78 - Could not find qwen3-8b-sft in registered "
            "models. Register qwen3-8b-sft using the BaseChatTemplate.\n部署后输出全是乱码",
            "chat_template_missing",
        ),
    ],
)
def test_serving_and_container_messages_name_their_cause(text, expected):
    res = _diag(text)
    assert res.findings[0].failure_mode_id == expected, [f.failure_mode_id for f in res.findings]
    assert res.verdict == "failure_found"


def test_shm_is_not_mistaken_for_a_full_disk():
    res = _diag(
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-a1 (size 9637888), error: No space left "
        "on device (28)"
    )
    assert res.findings[0].failure_mode_id == "shared_memory_too_small"
    assert all(f.match == "description" for f in res.findings if f.failure_mode_id == "disk_full")
