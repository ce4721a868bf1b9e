"""Generate XTuner RL run directories the way XTuner's writers lay them out at b934f46, healthy or with planted
problems, for inspect_run's tests and benchmark.

What is written, and the writer code it follows (xtuner/v1/...):

* ``<work_dir>/.xtuner_rl_colocate_trainer``: the meta JSON, ``XTunerMeta.model_dump_json(indent=2)`` with one
  ``ExpInfo`` (train/trainer.py:120-131,155-157,226-244; train/rl_trainer.py:815-830, 1596);
* ``<work_dir>/<YYYYmmddHHMMSS>/`` the experiment dir (train/trainer.py:226-227);
* ``logs/rank_0.log`` in loguru's format ``[XTuner][RANK 0][time][LEVEL][RLTrainer] message`` (utils/logger.py:15-32,
  94-97) with the trainer's step messages (rl_trainer.py:940,946,1718; ``_log_step`` :1346-1348,1392-1393,1424-1428)
  and the training worker's entropy line (rl/trainer/worker.py:677,694,697);
* ``logs/env.json``: ``json.dump(os.environ, indent=2)`` (rl_trainer.py:652-661), with the trace variables the
  trace runtime exports when tracing is on (rl/trace/runtime.py:450-461, 569-571);
* ``logs/exp_tracking/tracker.jsonl``: ``json.dumps({**scalars, "step": step})`` per ``add_scalars`` call
  (_writer/jsonl_writer.py:13,29,65-67,70), or TensorBoard events written by a real writer library (tensorboardX,
  test-only) one ``add_scalar`` per tag (_writer/tb_writer.py:17,34-35); the scalars of ``_log_step``
  (rl_trainer.py:1346,1358-1363,1378,1400-1401,1421) and the step-0 initial eval (:886-887);
* ``train_rollout/train_rollout_<step>.jsonl``: a statistics line, then one compact JSON object per sample with the
  keys of ``_save_trajectories`` (rl_trainer.py:1449-1499); ``eval_rollout/eval_rollout_<step>.jsonl`` likewise
  (:1501-1565), written only at steps that evaluate (``train_step % evaluate_step == 0``, :1760; step 0 with the
  initial eval, :880-883);
* ``checkpoints/ckpt-step-<n>/train_state.json`` (rl_trainer.py:789-812), ``hf/hf-step-<n>/`` (:842-846);
* ``otel/<run_id>/traces/traces.jsonl`` when tracing is on (rl_trainer.py:648-649; rl/trace/runtime.py:434-441);
* ``<work_dir>/config.py``, the copy of the config the launch scripts make before they start the trainer
  (examples/v1/scripts/run_rl.sh:147), when asked for.

Rewards are the GSM8K judger's, computed from the text written: 1 when the last '#### <number>' within the last 300
characters of the response, ',' and '$' removed, equals the label as a string, else 0 (rl/judger/gsm8k.py:7,29-39,
70-77). The async/* scalars count groups left in the replay buffer (rl/agent_loop_manager/produce_utils.py:352-358).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

GSM8K_SOURCE = "openai/gsm8k"
#: XTuner's GSM8K judger, written out here on its own (gsm8k.py:7,29-39,70-77): the test data does not borrow the
#: rule from the code under test.
_JUDGE_TAIL = 300
_JUDGE_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
FILLER = (
    "Let me work through this step by step. First I read the question carefully and note the quantities. "
    "Then I combine them in the order the problem describes and check each intermediate result. "
)


@dataclass
class RunSpec:
    """One run to generate; every planted problem is off by default (a healthy run)."""

    steps: int = 12
    total_steps: int = 12
    groups: int = 8  # train_batch_size: prompts per step
    k: int = 4  # prompt_repeat_k: samples per prompt
    tracker: Literal["jsonl", "tensorboard", "none"] = "jsonl"
    evaluate_step: int | None = 4  # None: enable_evaluate=False
    initial_eval: bool = False
    eval_prompts: int = 8
    max_tokens: int = 512
    step_time_s: float = 60.0
    idle_s: float = 20.0  # how long ago the run last wrote
    checkpoint_interval: int | None = 4
    hf_interval: int | None = None
    response_chars: int = 300
    seed: int = 0
    config_copy: bool = False  # write <work_dir>/config.py as run_rl.sh does (and the env it reads into env.json)
    step_in_progress: bool = False  # the run has started step steps+1 and written nothing since
    # planted problems
    judger_format: bool = False  # answers as \boxed{} instead of '#### n': every reward 0
    label_suffix: str = ""  # labels written as '<n><suffix>' ('72.0') while correct answers say '#### <n>'
    judge_zero: bool = False  # the judge scores 0 even where the answer equals the label (e.g. extra_info score 0)
    correct_share: float | None = None  # share of right answers (default: rising from 0.25 to 0.7 over the run)
    equal_groups: bool = False  # each prompt's samples all get the same reward
    truncate_share: float = 0.0  # share of responses cut at max_tokens (finish_reason 'length') before '####'
    entropy_collapse: bool = False
    async_pile: int = 0  # expired groups left in the replay buffer grow by this many per step (aborted by half)
    eval_failed_share: float = 0.0  # eval samples that failed with an error_msg
    missing_labels: int = 0  # train samples per step without label
    trace_enabled: bool = False
    trace_written: bool = True
    log_error: str | None = None  # a last error line for rank_0.log
    accuracy_drop: bool = False  # eval accuracy falls at the end


def _judge(response: str, label: str) -> float:
    found = _JUDGE_RE.findall(response[-_JUDGE_TAIL:])
    return 1.0 if found and found[-1].replace(",", "").replace("$", "") == label else 0.0


def _exp_name(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y%m%d%H%M%S")


def _log_time(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


class _Gen:
    def __init__(self, work_dir: Path, spec: RunSpec, now: float) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.end = now - spec.idle_s
        self.start = self.end - spec.steps * spec.step_time_s - 120
        self.work_dir = work_dir
        self.exp = work_dir / _exp_name(self.start)
        self.logs = self.exp / "logs"
        self.log_lines: list[str] = []
        self.written: list[Path] = []

    # ---------------------------------------------------------------- samples
    def p_correct(self, step: int) -> float:
        s = self.spec
        return s.correct_share if s.correct_share is not None else 0.25 + 0.45 * step / max(1, s.total_steps)

    def response(self, number: str, correct: bool, truncated: bool) -> tuple[str, int]:
        s = self.spec
        body = (FILLER * (1 + s.response_chars // len(FILLER)))[: s.response_chars]
        if truncated:
            return body, s.max_tokens
        if s.judger_format:
            return f"{body} The answer is \\boxed{{{number}}}.", self.rng.randint(60, s.max_tokens // 2)
        answer = number if correct else str(int(number) + 1)
        return f"{body}\n#### {answer}", self.rng.randint(60, s.max_tokens // 2)

    def sample(self, step: int, gid: int, rid: int, group_correct: bool | None, *, evaluate: bool) -> dict:
        s = self.spec
        number = str(self.rng.randint(2, 999))
        label = number + s.label_suffix
        truncated = self.rng.random() < s.truncate_share
        correct = group_correct if group_correct is not None else self.rng.random() < self.p_correct(step)
        text, n = self.response(number, correct, truncated)
        reward = 0.0 if s.judge_zero else _judge(text, label)
        status, finish, error = "completed", ("length" if truncated else "stop"), None
        if evaluate and self.rng.random() < s.eval_failed_share:
            status, finish, error, text, n, reward = "failed", "error", f"Rollout request {rid} failed: 500", "", 0, 0.0
        item = {  # the key order of _save_trajectories (rl_trainer.py:1449-1477)
            "rollout_id": rid,
            "group_id": gid,
            "task_name": "train_task" if not evaluate else "eval_task",
            "data_source": GSM8K_SOURCE,
            "status": status,
            "finish_reason": finish,
            "error_msg": error,
            "prompt": [
                {
                    "role": "user",
                    "content": f'Question {gid}? Let\'s think step by step and output the final answer after "####".',
                }
            ],
            "label": label,
            "response": text,
            "reward": reward,
            "prompt_len": 48,
            "response_len": n,
            "reward_payload": {"score": reward},
            "agent": {
                "name": None,
                "selected": None,
                "status": None,
                "judgers": None,
                "finish_info": None,
                "tool_turns": None,
                "artifacts": None,
                "messages": None,
                "tools": None,
            },
        }
        return item

    def groups(self, step: int, n_groups: int, *, evaluate: bool) -> list[list[dict]]:
        s = self.spec
        out = []
        for g in range(n_groups):
            gid = step * 10_000 + g
            shared = (self.rng.random() < self.p_correct(step)) if s.equal_groups else None
            k = 1 if evaluate else s.k
            out.append([self.sample(step, gid, gid * 100 + i, shared, evaluate=evaluate) for i in range(k)])
        for i in range(min(s.missing_labels, len(out)) if not evaluate else 0):
            out[i][0]["label"] = None
        return out

    def write_trajectories(self, path: Path, groups: list[list[dict]]) -> dict:
        path.parent.mkdir(parents=True, exist_ok=True)
        items = [it for g in groups for it in g]
        rewards = [it["reward"] for it in items] or [0.0]
        lens = [it["response_len"] for it in items] or [0]
        mean = sum(rewards) / len(rewards)
        std = (sum((r - mean) ** 2 for r in rewards) / max(1, len(rewards) - 1)) ** 0.5
        summary = {
            "reward_mean": mean,
            "reward_std": std,
            "reward_max": max(rewards),
            "reward_min": min(rewards),
            "response_len_mean": sum(lens) / len(lens),
            "response_len_std": 0.0,
            "response_len_max": max(lens),
            "response_len_min": min(lens),
            "total_len": len(items),
        }
        with open(path, "w", encoding="utf-8") as f:  # rl_trainer.py:1483-1499
            json.dump(summary, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
            for it in items:
                json.dump(it, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")
        self.written.append(path)
        return {
            "mean": mean,
            "min": min(rewards),
            "max": max(rewards),
            "len_mean": sum(lens) / len(lens),
            "len_max": max(lens),
            "n": len(items),
        }

    # ---------------------------------------------------------------- logs
    def log(self, t: float, msg: str, level: str = "INFO", tag: str = "RLTrainer") -> None:
        self.log_lines.append(f"[XTuner][RANK 0][{_log_time(t)}][{level}][{tag}] {msg}")

    def entropy(self, step: int) -> float:
        frac = step / max(1, self.spec.total_steps)
        return 0.6 * math.exp(-6 * frac) if self.spec.entropy_collapse else 0.6 - 0.15 * frac

    def async_counts(self, step: int) -> dict[str, float]:
        """Groups per status left in the replay buffer after the step took its batch
        (rl/agent_loop_manager/produce_utils.py:352-358)."""
        pile = self.spec.async_pile * step
        return {
            "async/init_samples": 0,
            "async/completed_samples": 0,
            "async/aborted_samples": pile // 2,
            "async/expired_samples": pile,
            "async/failed_samples": 0,
            "async/filtered_samples": 0,
        }

    def accuracy(self, step: int) -> float:
        if self.spec.accuracy_drop and step >= self.spec.total_steps * 0.75:
            return 0.2
        return round(min(1.0, self.p_correct(step) + 0.05), 4)


def _timers(g: _Gen, step: int) -> dict[str, float]:
    t = g.spec.step_time_s
    return {"step": t, "produce_batch": 0.6 * t, "prepare_data": 0.02 * t, "training": 0.3 * t}


def _step(g: _Gen, step: int, t0: float, tracker_rows: list[tuple[int, dict]]) -> None:
    s = g.spec
    g.log(t0, f"Train step {step}/{s.total_steps} start")  # rl_trainer.py:1718
    groups = g.groups(step, s.groups, evaluate=False)
    g.log(t0 + 1, f"generate {sum(len(x) for x in groups)} samples for training")  # :940
    path = g.exp / "train_rollout" / f"train_rollout_{step}.jsonl"
    st = g.write_trajectories(path, groups)
    g.log(t0 + 2, f"Train step {step} train trajectories saved to {path}")  # :946
    ent = g.entropy(step)
    g.log(t0 + 3, f"Rollout {step}: avg entropy: {ent:.4f}, avg rollout entropy: {ent:.4f}", tag="TrainingWorker")
    timers = _timers(g, step)
    data = {
        "batch_size": st["n"],
        "rewards/mean": st["mean"],
        "rewards/min": st["min"],
        "rewards/max": st["max"],
        "advantages/min": -1.0 if st["max"] > st["min"] else 0.0,
        "advantages/max": 1.0 if st["max"] > st["min"] else 0.0,
        "response_len/mean": st["len_mean"],
        "response_len/max": float(st["len_max"]),
        "prompt_len/mean": 48.0,
    }
    scalars: dict[str, float] = {f"time/{k}": v for k, v in timers.items()}  # :1346
    scalars.update(g.async_counts(step))  # :1358-1363
    scalars.update({f"response/{k}": v for k, v in data.items()})  # :1378
    scalars.update({"entropy/rollout": ent, "entropy/train": ent})  # :1400-1401
    scalars["train_metrics/worker_0/step_avg_loss"] = 0.01
    eval_info: dict[str, float] = {}
    if s.evaluate_step and step % s.evaluate_step == 0:
        eval_info = _evaluate(g, step)
        timers["evaluation"] = 0.1 * s.step_time_s  # timer("evaluation", ...) inside the step, :1761
        scalars["time/evaluation"] = timers["evaluation"]
        scalars.update({f"eval/{k}": v for k, v in eval_info.items()})  # :1421
    timing = "\n".join(f" - {k:<25}: {v:.2f}s" for k, v in timers.items())
    stats = "\n".join(f"- {k:<25}: {v:.4f}" for k, v in data.items())
    g.log(
        t0 + s.step_time_s,
        f"Train step {step}/{s.total_steps}\nTrain step {step} finished and timing listed:\n"
        f"{timing} \nTrain step {step} data statistics:\n{stats} ",
    )  # :1347-1348,1392-1393,1424-1426
    if eval_info:
        g.log(t0 + s.step_time_s, "Eval: " + " ".join(f"{k}: {v:.4f}" for k, v in eval_info.items()))  # :1427-1428
    tracker_rows.append((step, scalars))
    if s.checkpoint_interval and step % s.checkpoint_interval == 0:
        ck = g.exp / "checkpoints" / f"ckpt-step-{step}"  # :792
        ck.mkdir(parents=True, exist_ok=True)
        (ck / "train_state.json").write_text(json.dumps({"cur_step": step}))  # :810-812
    if s.hf_interval and (step % s.hf_interval == 0 or step == s.total_steps):
        (g.exp / "hf" / f"hf-step-{step}").mkdir(parents=True, exist_ok=True)  # :842-846


def _evaluate(g: _Gen, step: int) -> dict[str, float]:
    groups = g.groups(step, g.spec.eval_prompts, evaluate=True)
    acc = g.accuracy(step)
    done = [it for grp in groups for it in grp if it["status"] == "completed"]
    for i, it in enumerate(done):  # exactly the planned accuracy; failed samples score 0 (:1507)
        it["reward"] = 1.0 if i < round(acc * len(done)) else 0.0
        it["reward_payload"] = {"score": it["reward"]}
    g.write_trajectories(g.exp / "eval_rollout" / f"eval_rollout_{step}.jsonl", groups)
    items = [it for grp in groups for it in grp]
    return {"accuracy": sum(1 for it in items if it["reward"] > 0) / len(items)}  # rl/evaluator.py:20-28


def _write_env(g: _Gen) -> None:
    env = {"WORK_DIR": str(g.work_dir), "XTUNER_USE_LMDEPLOY": "1", "PYTHONPATH": "/opt/xtuner"}
    if g.spec.config_copy:  # what run_rl.sh exports for the config to read (run_rl.sh:54-56)
        env.update({"MODEL_PATH": "/models/Qwen3-8B", "DATA_PATH": "/data/gsm8k/train.jsonl"})
        env["EVAL_DATA_PATH"] = "/data/gsm8k/test.jsonl"
    if g.spec.trace_enabled:  # rl/trace/runtime.py:434-461
        run_id = f"{datetime.fromtimestamp(g.start).strftime('%Y%m%d-%H%M%S')}-4242-0a1b2c3d"
        traces = g.exp / "otel" / run_id / "traces" / "traces.jsonl"
        traces.parent.mkdir(parents=True, exist_ok=True)
        traces.touch()
        if g.spec.trace_written:
            traces.write_text('{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"rollout"}]}]}]}\n')
        env.update(
            {
                "XTUNER_OTEL_ENABLED": "1",
                "XTUNER_OTEL_OUTPUT_DIR": str(g.exp / "otel"),
                "XTUNER_OTEL_RUN_ID": run_id,
                "XTUNER_OTEL_RUN_DIR": str(traces.parent.parent),
                "XTUNER_OTEL_JSONL_PATH": str(traces),
                "XTUNER_TRACE_ENABLE_ROLLOUT": "1",
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            }
        )
        g.written.append(traces)
    g.logs.mkdir(parents=True, exist_ok=True)
    with (g.logs / "env.json").open("w") as f:
        json.dump(env, f, indent=2)


#: The config a GSM8K GRPO run loads, in the shape of examples/v1/config/rl_grpo_gsm8k_judge.py (our own text).
CONFIG_TEMPLATE = """\
import os
from pathlib import Path

from xtuner.v1.data_proto.rl_data import SampleParams
from xtuner.v1.datasets.config import DataloaderConfig, DatasetConfig
from xtuner.v1.datasets.rl_tokenize_fn import RLTextTokenizeFnConfig
from xtuner.v1.model import get_model_config_from_hf
from xtuner.v1.rl.agent_loop import SingleTurnAgentLoopConfig
from xtuner.v1.rl.agent_loop_manager import AgentLoopManagerConfig, SamplerConfig, SyncProduceStrategyConfig
from xtuner.v1.rl.agent_loop_manager import TaskSpecConfig
from xtuner.v1.rl.evaluator import EvaluatorConfig
from xtuner.v1.rl.judger import GSM8KJudgerConfig
from xtuner.v1.rl.rollout.worker import RolloutConfig
from xtuner.v1.rl.trainer import WorkerConfig
from xtuner.v1.rl.utils import AcceleratorResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig

work_dir = os.environ["WORK_DIR"]
model_path = os.environ["MODEL_PATH"]
data_path = os.environ["DATA_PATH"]
eval_data_path = os.environ["EVAL_DATA_PATH"]

total_train_steps = {total_steps}
evaluate_step = {evaluate_step}
train_batch_size = int(os.environ.get("TRAIN_BATCH_SIZE", {groups}))
prompt_repeat_k = {k}
max_prompt_length = 512
max_response_length = {max_tokens}

resources = AcceleratorResourcesConfig(accelerator="GPU", num_workers=8, num_cpus_per_worker=12)
rollout_config = RolloutConfig(
    env="gsm8k_grpo",
    device=resources.accelerator,
    model_path=model_path,
    context_length=max_prompt_length + max_response_length,
)
judger_config = GSM8KJudgerConfig(judger_name="openai/gsm8k")
train_worker_cfg = WorkerConfig(model_cfg=get_model_config_from_hf(Path(model_path)), load_from=model_path)
tokenize_fn = RLTextTokenizeFnConfig(max_length=max_prompt_length)
train_set = DatasetConfig(name="gsm8k", anno_path=data_path)
eval_set = DatasetConfig(name="gsm8k", anno_path=eval_data_path)
train_data = DataloaderConfig(dataset_config_list=[{{"dataset": train_set, "tokenize_fn": tokenize_fn}}])
eval_data = DataloaderConfig(dataset_config_list=[{{"dataset": eval_set, "tokenize_fn": tokenize_fn}}])
train_params = SampleParams(max_tokens=max_response_length, temperature=1.0)
eval_params = SampleParams(max_tokens=max_response_length, temperature=0.0, top_k=1)
agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="train_task",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=train_params),
        judger_config=judger_config,
        produce_strategy_config=SyncProduceStrategyConfig(),
        sampler_config=SamplerConfig(dataloader_cfg=train_data, prompt_repeat_k=prompt_repeat_k),
    ),
)
eval_agent_loop_manager_cfg = AgentLoopManagerConfig(
    tasks=TaskSpecConfig(
        task_name="eval_task",
        agent_loop_config=SingleTurnAgentLoopConfig(hf_checkpoint=model_path, sample_params=eval_params),
        judger_config=judger_config,
        sampler_config=SamplerConfig(dataloader_cfg=eval_data, prompt_repeat_k=1),
    ),
)

trainer = RLColocateTrainerConfig(
    resources=resources,
    train_worker_cfg=train_worker_cfg,
    rollout_config=rollout_config,
    tokenizer_path=model_path,
    agent_loop_manager_cfg=agent_loop_manager_cfg,
    eval_agent_loop_manager_cfg=eval_agent_loop_manager_cfg,
    evaluator_config=EvaluatorConfig(),
    load_from=model_path,
    total_train_steps=total_train_steps,
    train_batch_size=train_batch_size,
    enable_evaluate={enable_evaluate},
    evaluate_step=evaluate_step,
    work_dir=work_dir,
)
"""


def _write_config(g: _Gen) -> None:
    s = g.spec
    text = CONFIG_TEMPLATE.format(
        total_steps=s.total_steps,
        evaluate_step=s.evaluate_step or 1,
        groups=s.groups,
        k=s.k,
        max_tokens=s.max_tokens,
        enable_evaluate=s.evaluate_step is not None,
    )
    (g.work_dir / "config.py").write_text(text, encoding="utf-8")  # run_rl.sh:147


def _write_tracker(g: _Gen, rows: list[tuple[int, dict]]) -> None:
    kind = g.spec.tracker
    out = g.logs / "exp_tracking"
    if kind == "none":
        return
    out.mkdir(parents=True, exist_ok=True)
    if kind == "jsonl":
        with open(out / "tracker.jsonl", "a", encoding="utf-8") as f:
            for step, scalars in rows:
                item = dict(scalars)
                item["step"] = step
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
        g.written.append(out / "tracker.jsonl")
        return
    from tensorboardX import SummaryWriter  # test-only: a real event-file writer

    w = SummaryWriter(logdir=str(out))
    for step, scalars in rows:
        for tag, v in scalars.items():
            w.add_scalar(tag, v, step)
    w.close()
    g.written.extend(out.glob("events.out.tfevents*"))


def generate(work_dir: Path, spec: RunSpec | None = None, now: float | None = None) -> Path:
    """Write one run under ``work_dir``; return its experiment directory. File times end ``spec.idle_s`` ago."""
    spec = spec or RunSpec()
    g = _Gen(Path(work_dir), spec, time.time() if now is None else now)
    g.logs.mkdir(parents=True, exist_ok=True)
    _write_env(g)
    g.log(g.start, "Start RL training")  # rl_trainer.py:1694
    rows: list[tuple[int, dict]] = []
    if spec.initial_eval and spec.evaluate_step:
        acc = _evaluate(g, 0)
        rows.append((0, {f"eval/{k}": v for k, v in acc.items()}))  # :886-887
        g.log(g.start + 60, f"Initial rollout evaluate scores {acc} and start training")  # :885
    for step in range(1, spec.steps + 1):
        _step(g, step, g.start + 120 + (step - 1) * spec.step_time_s, rows)
    if spec.steps >= spec.total_steps and not (spec.evaluate_step and spec.total_steps % spec.evaluate_step == 0):
        g.log(g.end, "Final train step reached without scheduled evaluation; skip rollout worker onload.")  # :1811
    if spec.step_in_progress:
        step = spec.steps + 1
        g.log(g.end, f"Train step {step}/{spec.total_steps} start")  # :1718
        g.log(
            g.end,
            f"[Step {step}] start to generate rollout experience for train step {step} with model step {step - 1}",
        )  # :1722-1723
    if spec.log_error:
        g.log(g.end, spec.log_error, level="ERROR")
    (g.logs / "rank_0.log").write_text("\n".join(g.log_lines) + "\n", encoding="utf-8")
    g.written.append(g.logs / "rank_0.log")
    _write_tracker(g, rows)
    _write_meta(g)
    if spec.config_copy:
        _write_config(g)
    _age(g)
    return g.exp


def _write_meta(g: _Gen) -> None:
    ckpts = sorted((g.exp / "checkpoints").glob("ckpt-step-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    meta = {
        "exps": [
            {
                "history": [
                    {
                        "begin": 0,
                        "timestamp": g.exp.name,
                        "git_info": {
                            "commit": "b934f46",
                            "staged": str(g.exp / "git-info-begin-0" / "staged.diff"),
                            "unstaged": str(g.exp / "git-info-begin-0" / "unstaged.diff"),
                        },
                    }
                ],
                "exp_dir": str(g.exp),
                "hf_checkpoint_list": [],
                "checkpoint_list": [str(p) for p in ckpts],
                "snap_checkpoint_list": [],
                "cur_step": 0,
                "cur_epoch": 0,
                "consumed_tokens": 0,
                "consumed_samples": 0,
            }
        ]
    }
    (g.work_dir / ".xtuner_rl_colocate_trainer").write_text(json.dumps(meta, indent=2))


def _age(g: _Gen) -> None:
    """Set every file's time to when the run wrote it last (``idle_s`` ago)."""
    for root, _dirs, files in os.walk(g.exp):
        for name in files:
            os.utime(Path(root) / name, (g.end, g.end))


#: The run shipped in references/samples/run_reward_zero, which server/demo.py inspects: every answer in \\boxed{},
#: so every reward is 0. Regenerate it from the repository root with ``python tests/run_dir_generator.py``.
DEMO_DIR = Path("references/samples/run_reward_zero")
DEMO_SPEC = RunSpec(
    steps=6,
    total_steps=6,
    groups=4,
    k=4,
    evaluate_step=3,
    checkpoint_interval=3,
    judger_format=True,
    response_chars=160,
)
DEMO_NOW = datetime(2026, 8, 21, 8, 13, 20).timestamp()


def append_steps_like(exp: Path, target_bytes: int) -> int:
    """Copy the train trajectory files of ``exp`` into more steps until they hold ``target_bytes`` (benchmark)."""
    src = sorted((exp / "train_rollout").glob("train_rollout_*.jsonl"))
    total = sum(p.stat().st_size for p in src)
    step = len(src)
    i = 0
    while total < target_bytes and src:
        step += 1
        data = src[i % len(src)].read_bytes()
        (exp / "train_rollout" / f"train_rollout_{step}.jsonl").write_bytes(data)
        total += len(data)
        i += 1
    return total


if __name__ == "__main__":
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    generate(DEMO_DIR, DEMO_SPEC, DEMO_NOW)
