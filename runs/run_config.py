"""The run's own config, read statically, so the run is judged against what it was told to do.

XTuner's launch scripts copy the config to ``$WORK_DIR/config.py`` just before they start the trainer
(examples/v1/scripts/run_rl.sh:147; run_rl_submit.sh:119, run_rl_submit_npu.sh:109, run_rl_deterministic.sh:115);
the RL trainer itself writes no copy. The copy is the LAST launch's, so for an older experiment of the same work dir
it may describe another run; a ``config`` argument overrides it. The file is evaluated by the static config
evaluator with the run's own environment (``logs/env.json``, rl_trainer.py:652-661): never imported or executed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..config_analysis.field_values import field_val, lit
from ..config_analysis.values import Obj, Val, elements
from ..config_analysis.view import view_of_source
from ..core import PathPolicy, ToolInputError, read_guarded
from ..core.files import refusal
from .layout import RunLayout
from .models import ConfigValue, RunConfig

SRC_CONFIG_COPY = "examples/v1/scripts/run_rl.sh:147"
CONFIG_COPY_NAME = "config.py"
MAX_CONFIG_BYTES = 1_000_000
#: Trainer fields read (rl_trainer.py:346-354; defaults from XTuner's class table when the config leaves them out).
TRAINER_FIELDS = (
    "total_train_steps",
    "enable_evaluate",
    "enable_initial_evaluate",
    "evaluate_step",
    "sync_weights_interval",
    "train_batch_size",
)


def _trainer(name: str, source: str, env: dict[str, str] | None) -> Obj | str:
    """The evaluated module-level ``trainer = ...TrainerConfig(...)`` of the config view, or why there is none."""
    view = view_of_source(name, source, env)
    return view.trainer if isinstance(view.trainer, Obj) else view.plan_why_not


def _keep(out: RunConfig, key: str, obj: Obj, field: str, file_name: str) -> None:
    val, origin = field_val(obj, field)
    ok, value = lit(val)
    if not ok or not isinstance(value, bool | int | float | str | None):
        out.unresolved.append(f"{key}: `{val.expr}` is not resolved statically")
        return
    line = val.line or obj.kw_lines.get(field)  # where the value is written, e.g. `evaluate_step = 45`
    where = "XTuner default" if origin == "default" else f"{file_name}:{line}" if line else file_name
    out.values[key] = ConfigValue(value=value, where=where)


def _first_task(trainer: Obj) -> Obj | None:
    manager: Val = field_val(trainer, "agent_loop_manager_cfg")[0]
    if not isinstance(manager, Obj) or "tasks" not in manager.kwargs:
        return None
    tasks = manager.kwargs["tasks"]
    items = elements(tasks)
    first = tasks if items is None else (items[0] if items else None)
    return first if isinstance(first, Obj) else None


def analyse(path: Path, source: str, env: dict[str, str] | None) -> RunConfig:
    """What the run's config sets for the step count, evaluation, batch shape and response length."""
    out = RunConfig(path=str(path))
    trainer = _trainer(path.name, source, env)
    if isinstance(trainer, str):
        out.note = trainer
        return out
    for field in TRAINER_FIELDS:
        _keep(out, field, trainer, field, path.name)
    task = _first_task(trainer)
    sampler = field_val(task, "sampler_config")[0] if task is not None else None
    if isinstance(sampler, Obj):
        _keep(out, "prompt_repeat_k", sampler, "prompt_repeat_k", path.name)
    loop = field_val(task, "agent_loop_config")[0] if task is not None else None
    params = field_val(loop, "sample_params")[0] if isinstance(loop, Obj) else None
    if isinstance(params, Obj):
        _keep(out, "max_tokens", params, "max_tokens", path.name)
    if env is None:
        out.note = "logs/env.json was not read: values the config takes from the environment may be unresolved"
    return out


def read_run_config(named: str | None, lay: RunLayout, policy: PathPolicy) -> RunConfig:
    """The ``config`` argument (an error when it cannot be read), else ``<work_dir>/config.py`` when present (a
    refusal becomes the note), analysed with the run's environment (logs/env.json)."""
    if named is not None:
        if os.path.splitext(named)[1] != ".py":
            raise ToolInputError(
                "config_not_python", f"config {named!r} is not a .py file", "Pass the Python RL config the run loaded."
            )
        path = policy.check(named, kind="file", what="config")
    else:
        path = lay.work_dir / CONFIG_COPY_NAME
        if not policy.contains(lay.work_dir):  # an experiment dir given alone: its parent is not the caller's to probe
            return RunConfig(path=None, note="the work dir is outside the allowed roots; pass config to read one")
        if not os.path.lexists(path):
            return RunConfig(
                path=None,
                note=f"no {CONFIG_COPY_NAME} in the work dir (the launch scripts copy the config there, "
                f"{SRC_CONFIG_COPY}); pass config to judge eval and steps against it",
            )
    try:
        data = read_guarded(policy, path, what="config", limit=MAX_CONFIG_BYTES)
    except ToolInputError as exc:
        if named is not None:
            raise
        return RunConfig(path=None, note=f"{CONFIG_COPY_NAME} in the work dir {refusal(exc)}: not read")
    if b"\x00" in data:
        return RunConfig(path=str(path), note="the config holds NUL bytes: not a Python source file")
    out = analyse(path, data.decode("utf-8", errors="replace"), lay.env if lay.env_json is not None else None)
    later = [e for e in lay.experiments if e > lay.exp_dir.name]
    if named is None and later:
        stale = f"the copy is the last launch's, and experiment {later[-1]} started after this one"
        out.note = f"{out.note}; {stale}" if out.note else stale
    return out
