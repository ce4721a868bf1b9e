"""The key settings the report lists, each with its value and where it comes from (literal, default, env)."""

from __future__ import annotations

from typing import Any

from .field_values import field_val, json_value, origin_of
from .report import Setting
from .rule_context import Ctx
from .values import Obj, Unres


def add_setting(c: Ctx, name: str, obj: Obj, fname: str, *, effective: Any = None) -> None:
    v, origin = field_val(obj, fname)
    line = obj.kw_lines.get(fname, v.line if fname in obj.kwargs else obj.line)
    value = json_value(v)
    if origin == "default" and effective is not None:
        value = effective
    c.settings.append(
        Setting(
            name=name,
            value=value,
            origin=origin,
            expression=v.expr if fname in obj.kwargs else None,
            reason=v.reason if isinstance(v, Unres) else None,
            env_vars=list(v.env),
            location=c.loc(line),
        )
    )


def collect_settings(c: Ctx, t: Obj, mode: str) -> None:
    for f in (
        "total_train_steps",
        "total_epochs",
        "train_batch_size",
        "sync_weights_interval",
        "enable_evaluate",
        "enable_initial_evaluate",
        "evaluate_step",
        "checkpoint_interval",
        "hf_interval",
        "debug_rollout",
        "debug_train",
        "debug_rollout_dir",
        "work_dir",
        "load_from",
        "tokenizer_path",
        "seed",
        "auto_resume",
    ):
        add_setting(c, f"trainer.{f}", t, f)
    rb, _ = field_val(t, "replay_buffer_config")
    c.settings.append(
        Setting(
            name="trainer.replay_buffer_config",
            value=json_value(rb),
            origin=origin_of(rb) if "replay_buffer_config" in t.kwargs else "default",
            location=c.loc(rb.line),
        )
    )
    r, _ = field_val(t, "rollout_config")
    if isinstance(r, Obj):
        for f in (
            "tensor_parallel_size",
            "expert_parallel_size",
            "context_length",
            "rollout_max_batch_size_per_instance",
            "gpu_memory_utilization",
            "dtype",
            "enable_return_routed_experts",
        ):
            add_setting(c, f"rollout.{f}", r, f)
        add_setting(
            c,
            "rollout.weight_transport_type",
            r,
            "weight_transport_type",
            effective="ipc" if mode == "colocated" else "nccl" if mode == "disaggregated" else None,
        )
    w, _ = field_val(t, "train_worker_cfg")
    if isinstance(w, Obj):
        for f in ("optimizer_steps", "sp_size", "pack_max_length"):
            add_setting(c, f"train_worker.{f}", w, f)
