"""Rules on RolloutConfig: context length, TP/EP, backend-only fields, weight transport."""

from __future__ import annotations

from ..xtuner_rules import resources as rr
from .field_values import field_val, lit, lit_field
from .rule_context import Ctx
from .values import Obj

# XTuner sources cited by these rules (all at b934f46).
SRC_CONTEXT_LEN = "xtuner/v1/rl/rollout/worker.py:510-513"
SRC_TP_EP = "xtuner/v1/rl/weight_update/data.py:114"
#: bind_train_rollout during trainer construction (colocated rl_trainer.py:1649, disaggregated :1897).
SRC_BIND = "xtuner/v1/train/rl_trainer.py:1649"
SRC_LMDEPLOY_PYTORCH_TP_EP = "xtuner/v1/rl/rollout/lmdeploy.py:406-408"
SRC_TRANSPORT = "xtuner/v1/rl/weight_update/data.py:42-54"
SRC_DISAGG_NCCL = "xtuner/v1/train/rl_trainer.py:1882-1886"
SRC_COLOC_IPC = "xtuner/v1/train/rl_trainer.py:1646-1647"
SRC_OVER_CONCURRENCY = "xtuner/v1/rl/rollout/worker.py:477-484"


def check_rollout(c: Ctx, t: Obj, r: Obj, mode: str, backend: str | None) -> None:
    """The RolloutConfig rules: engine sizes and fields first, then the engine layout and the weight transport."""
    check_rollout_fields(c, r)
    check_engine_layout(c, t, r, mode, backend)
    check_weight_transport(c, r, mode, backend)


def check_engine_layout(c: Ctx, t: Obj, r: Obj, mode: str, backend: str | None) -> None:
    """The rollout workers split into engines of num_gpus_per_engine (EP when > 1, else TP) GPUs each; LMDeploy and
    SGLang raise when they do not divide evenly (lmdeploy.py:160-166, :185-190; sglang.py:129-134)."""
    group = field_val(t, "resources" if mode == "colocated" else "rollout_resources")[0]
    if not isinstance(group, Obj):
        return
    (n_ok, n), (tp_ok, tp), (ep_ok, ep) = (
        lit_field(group, "num_workers"),
        lit_field(r, "tensor_parallel_size"),
        lit_field(r, "expert_parallel_size"),
    )
    if not (n_ok and tp_ok and ep_ok) or not all(isinstance(x, int) and x >= 1 for x in (n, tp, ep)):
        return
    engine = rr.num_gpus_per_engine(tp, ep)
    if n % engine == 0:
        return
    kind = "EP" if ep > 1 else "TP"
    size = "expert_parallel_size" if ep > 1 else "num_gpus_per_engine"
    fits = n - n % engine
    divisor = max(d for d in range(1, engine) if n % d == 0)
    # The engine size first: a colocated run's --num-workers replaces the config's worker count anyway.
    patch = c.set_value(r, "expert_parallel_size" if ep > 1 else "tensor_parallel_size", divisor)
    if patch is None and fits:
        patch = c.set_value(group, "num_workers", fits)
    cli = f" A colocated run's --num-workers replaces {group.cls}.num_workers." if mode == "colocated" else ""
    c.add(
        "config.rollout_workers_not_divisible",
        "blocker",
        "resource_mismatch_num_workers",
        f"{n} rollout workers do not split into engines of {engine} GPUs ({kind} {engine})",
        evidence=f"XTuner raises at rollout start: ValueError: num_rollout_workers={n} must be divisible by "
        f"{size}={engine}.",
        line=group.kw_line("num_workers"),
        fix=f"Either {rr.engine_layout_fix(n, engine, kind, limit=n)}.{cli}",
        anchor="rolloutconfig",
        source=rr.SRC_SGLANG_TP if backend == "sglang" else (rr.SRC_LMDEPLOY_EP if ep > 1 else rr.SRC_LMDEPLOY_TP),
        owner="config_edit",
        patch=patch,
    )


def check_rollout_fields(c: Ctx, r: Obj) -> None:
    """context_length (or a max batch size), TP with EP, vLLM-only and deprecated fields."""
    cl, _ = field_val(r, "context_length")
    mb, _ = field_val(r, "rollout_max_batch_size_per_instance")
    cl_ok, clv = lit(cl)
    mb_ok, mbv = lit(mb)
    if not cl_ok:
        c.skip("RolloutConfig context_length", cl)
    if not mb_ok:
        c.skip("RolloutConfig rollout_max_batch_size_per_instance", mb)
    if cl_ok and mb_ok and clv is None and mbv is None:
        c.add(
            "config.rollout_context_length_missing",
            "blocker",
            "config_load_error",
            "RolloutConfig has neither context_length nor rollout_max_batch_size_per_instance",
            evidence="XTuner raises at config load: 1 validation error for RolloutConfig — Assertion failed, "
            "context_length must be set if rollout_max_batch_size_per_instance is not provided.",
            line=r.line,
            fix="Set context_length=max_prompt_length + max_response_length on RolloutConfig.",
            anchor="rolloutconfig",
            source=SRC_CONTEXT_LEN,
        )
    tp_ok, tp = lit_field(r, "tensor_parallel_size")
    ep_ok, ep = lit_field(r, "expert_parallel_size")
    if tp_ok and ep_ok and isinstance(tp, int) and isinstance(ep, int) and tp > 1 and ep > 1:
        c.add(
            "config.rollout_tp_and_ep",
            "blocker",
            "config_load_error",
            f"RolloutConfig sets tensor_parallel_size={tp} and expert_parallel_size={ep}",
            evidence="XTuner fails while the trainer is built, when it binds train and rollout for weight updates "
            "(after the placement group and the rollout servers start): AssertionError: Either tensor parallel size "
            "or engine parallel size must be 1. With LMDeploy's pytorch engine the server launch fails earlier, on "
            f"a bare `assert ep_size == 1 or tp_size == 1` ({SRC_LMDEPLOY_PYTORCH_TP_EP}).",
            line=r.line,
            fix="Use either TP or EP for rollout, not both.",
            anchor="rolloutconfig",
            source=f"{SRC_TP_EP}; {SRC_BIND}",
        )
    dp_ok, dp = lit_field(r, "data_parallel_size")
    if dp_ok and isinstance(dp, int) and dp != 1:
        c.add(
            "config.vllm_only_field",
            "warning",
            "backend_unsupported",
            f"RolloutConfig.data_parallel_size={dp} is only read by the vLLM backend",
            evidence="data_parallel_size is used only in xtuner/v1/rl/rollout/vllm.py:167-170; LMDeploy and "
            "SGLang ignore it, and vLLM rollout cannot start at this XTuner version (NotImplementedError: vLLM "
            "rollout topology has not been verified after topology refactor.).",
            line=r.kw_line("data_parallel_size"),
            fix="Remove data_parallel_size (keep 1).",
            anchor="rolloutconfig",
            source="xtuner/v1/rl/rollout/vllm.py:167-170",
            patch=c.remove(r, "data_parallel_size"),
        )
    oc_ok, oc = lit_field(r, "allow_over_concurrency_ratio")
    if oc_ok and oc != 1.2:
        c.add(
            "config.deprecated_over_concurrency",
            "info",
            "config_load_error",
            "RolloutConfig.allow_over_concurrency_ratio is deprecated and ignored",
            evidence="XTuner warns: rollout_config.allow_over_concurrency_ratio is deprecated and no longer controls "
            "runtime rollout concurrency.",
            line=r.kw_line("allow_over_concurrency_ratio"),
            fix="Remove allow_over_concurrency_ratio.",
            anchor="rolloutconfig",
            source=SRC_OVER_CONCURRENCY,
            patch=c.remove(r, "allow_over_concurrency_ratio"),
        )


def check_weight_transport(c: Ctx, r: Obj, mode: str, backend: str | None) -> None:
    """weight_transport_type: a known transport, NCCL in disaggregated mode, checkpoint_engine only with SGLang."""
    wt, _ = field_val(r, "weight_transport_type")
    wt_ok, wtv = lit(wt)
    transport = "nccl" if mode == "disaggregated" else "ipc"
    if not wt_ok:
        c.skip("weight transport", wt)
        return
    if isinstance(wtv, str) and wtv.lower() not in ("ipc", "nccl", "checkpoint_engine"):
        c.add(
            "config.weight_transport_invalid",
            "blocker",
            "config_load_error",
            f"weight_transport_type={wtv!r} is not a transport XTuner knows",
            evidence=f"XTuner raises while the trainer binds train and rollout for weight updates: ValueError: "
            f"Unsupported weight_transport_type: "
            f"{wtv!r}. Expected 'ipc', 'nccl' or 'checkpoint_engine'.",
            line=r.kw_line("weight_transport_type"),
            fix="Use 'ipc' (colocated), 'nccl' (disaggregated) or leave it unset.",
            anchor="rolloutconfig",
            source=SRC_TRANSPORT,
            patch=c.set_value(r, "weight_transport_type", transport),
        )
        return
    if mode == "disaggregated" and wtv != "nccl":
        c.add(
            "config.disagg_transport_forced",
            "info",
            "config_load_error",
            f"Disaggregated mode will use NCCL weight transport (config says {wtv!r})",
            evidence="XTuner logs: Currently, disaggregated mode only support nccl as weight update transport. It "
            "will use NCCL for weight transport.",
            line=r.kw_line("weight_transport_type"),
            fix="Set weight_transport_type='nccl' to make this explicit.",
            anchor="rolloutconfig",
            source=SRC_DISAGG_NCCL,
            patch=c.set_value(r, "weight_transport_type", "nccl"),
        )
    if isinstance(wtv, str) and wtv.lower() == "checkpoint_engine" and backend and backend != "sglang":
        c.add(
            "config.checkpoint_engine_backend",
            "blocker",
            "backend_unsupported",
            f"checkpoint_engine weight transport with the {backend} backend",
            evidence="XTuner raises while the trainer binds train and rollout for weight updates: NotImplementedError: "
            "Checkpoint Engine weight "
            f"transport currently only supports sglang, got backend={backend!r}.",
            line=r.kw_line("weight_transport_type"),
            fix=f"Use weight_transport_type={transport!r} with {backend}, or switch to SGLang.",
            anchor="rolloutconfig",
            source=SRC_TRANSPORT,
            patch=c.set_value(r, "weight_transport_type", transport),
        )
