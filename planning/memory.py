"""Per-accelerator memory: FSDP training state, rollout weights and KV cache, and findings when they overflow."""

from __future__ import annotations

from ..core import Finding
from ..xtuner_rules import resources as rr
from .citations import CB, SRC_MAX_BATCH, SRC_OFFLOAD, WF
from .model_size import BYTES_BF16, MODEL_SIZE_HINT
from .models import MemoryEstimate, ModelInfo, PlanRequest, RolloutPlan, Topology

#: bf16 weights + bf16 grads + fp32 master weights + fp32 Adam m and v = 2 + 2 + 4 + 8 bytes per parameter.
TRAIN_BYTES_PER_PARAM = 16
#: Share of GPU memory the rollout weights may take per GPU before we grow the engine (the rest is KV cache).
ROLLOUT_WEIGHT_SHARE = 0.5
TRAIN_MEMORY_HEADROOM = 0.9
RUNTIME_RESERVE_GIB = 2.0
DEFAULT_GPU_MEMORY_GIB = {"GPU": 80.0, "NPU": 64.0}


def _gib(n: float) -> float:
    return round(n / rr.GIB, 2)


#: layers × hidden of public dense models over (params / 12)^(2/3), from their model cards (params in billions, layers,
#: hidden): a dense transformer has about 12 × layers × hidden² parameters, so layers × hidden ≈ f × (params / 12)^(2/3)
#: with f set by how deep the model is for its width. The spread of f is how far a params_b estimate may be off.
SHAPE_CALIBRATION = {
    "Qwen2.5-7B": (7.61, 28, 3584),  # f = 0.136, the lowest
    "Qwen3-32B": (32.8, 64, 5120),  # 0.168
    "Llama-3-8B": (8.03, 32, 4096),  # 0.171
    "Qwen3-8B": (8.19, 36, 4096),  # 0.190
    "Llama-3.1-405B": (405.9, 126, 16384),  # 0.197
    "Llama-3-70B": (70.6, 80, 8192),  # 0.201
    "Qwen3-0.6B": (0.596, 28, 1024),  # 0.212, the highest
}
#: f for the point estimate (the geometric mean over the calibration shapes) and its range, widened to round values.
SHAPE_FACTOR, SHAPE_FACTOR_RANGE = 0.19, (0.13, 0.22)


def layers_times_hidden(params_b: float, factor: float = SHAPE_FACTOR) -> float:
    """layers × hidden of a dense model with ``params_b`` billion parameters (see SHAPE_CALIBRATION)."""
    return factor * (params_b * 1e9 / 12) ** (2 / 3)


def train_memory(
    model: ModelInfo, train_workers: int, pack_max_length: int, sp_size: int, factor: float = SHAPE_FACTOR
) -> dict[str, float]:
    """Bytes per training accelerator; ``factor`` sets layers × hidden when config.json did not give them."""
    p = (model.params_total_b or 0.0) * 1e9
    weights = BYTES_BF16 * p / train_workers
    grads = BYTES_BF16 * p / train_workers
    optim = (TRAIN_BYTES_PER_PARAM - 2 * BYTES_BF16) * p / train_workers
    # Recomputed layers keep one bf16 hidden state per layer for the packed sequence; plus a fixed workspace.
    layer_width: float
    if model.hidden_size and model.num_layers:
        layer_width = model.num_layers * model.hidden_size
    else:
        layer_width = layers_times_hidden(model.params_total_b or 0.0, factor)
    acts = layer_width * pack_max_length * BYTES_BF16 / sp_size + RUNTIME_RESERVE_GIB * rr.GIB
    return {"weights": weights, "grads": grads, "optim": optim, "acts": acts}


def _rough_range(model: ModelInfo, train_n: int, pack_max_length: int, sp_size: int) -> tuple[float, float]:
    lo, hi = (sum(train_memory(model, train_n, pack_max_length, sp_size, f).values()) for f in SHAPE_FACTOR_RANGE)
    return _gib(lo), _gib(hi)


def _uncertainty(total: float, span: tuple[float, float]) -> str:
    return (
        f"rough: without config.json the activations take layers × hidden ≈ {SHAPE_FACTOR} × (params / 12)^(2/3) "
        f"(a dense transformer has ~12 × layers × hidden² parameters; the factor is {SHAPE_FACTOR_RANGE[0]}–"
        f"{SHAPE_FACTOR_RANGE[1]} over public model cards, Qwen2.5-7B to Qwen3-0.6B), so the training total "
        f"{total:g} GiB may be anywhere in {span[0]:g}–{span[1]:g} GiB; a MoE is counted as dense (its activations "
        "are smaller) and the KV cache is unknown. Pass model_path for the estimate from config.json."
    )


def rollout_weights_per_gpu(model: ModelInfo, tp: int, ep: int) -> float:
    p = (model.params_total_b or 0.0) * 1e9
    if ep > 1 and model.is_moe:
        expert = model.expert_params_b * 1e9
        return BYTES_BF16 * ((p - expert) + expert / ep)
    return BYTES_BF16 * p / tp


def kv_budget_per_gpu(weights: float, gpu_bytes: float, util: float, backend: str) -> float:
    # LMDeploy's cache_max_entry_count is a share of the memory left after weights; SGLang's mem_fraction_static
    # covers weights and cache together (lmdeploy.py:426,440 and sglang.py:399 pass gpu_memory_utilization through).
    # The split of the memory left after weights is the engines' own behaviour, stated here as an assumption.
    if backend == "lmdeploy":
        return util * (gpu_bytes - weights - RUNTIME_RESERVE_GIB * rr.GIB)
    return util * gpu_bytes - weights


def kv_bytes_per_token_per_gpu(model: ModelInfo, tp: int, ep: int) -> int | None:
    if not model.kv_cache_bytes_per_token:
        return None
    if ep > 1:
        return model.kv_cache_bytes_per_token  # attention is not split across EP ranks
    shards = min(tp, model.num_kv_heads or tp)
    return max(1, model.kv_cache_bytes_per_token // shards)


def estimate_memory(
    model: ModelInfo,
    p: PlanRequest,
    train_n: int,
    rollout: RolloutPlan,
    pack_max_length: int,
    gpu_gib: float,
    topology: Topology,
) -> MemoryEstimate:
    if model.source == "unknown":
        return MemoryEstimate(basis="unknown", what_to_pass=MODEL_SIZE_HINT, gpu_memory_gib=gpu_gib)
    gpu_bytes = gpu_gib * rr.GIB
    tm = train_memory(model, max(1, train_n), pack_max_length, p.sp_size)
    train_total = sum(tm.values())
    tp, ep = rollout.tensor_parallel_size, rollout.expert_parallel_size
    w = rollout_weights_per_gpu(model, tp, ep)
    budget = kv_budget_per_gpu(w, gpu_bytes, rollout.gpu_memory_utilization, p.backend)
    per_tok = kv_bytes_per_token_per_gpu(model, tp, ep)
    tokens = seqs = None
    if per_tok:
        tokens = (
            max(0, int(budget // per_tok)) * rollout.num_gpus_per_engine if ep > 1 else max(0, int(budget // per_tok))
        )
        seqs = tokens // rollout.context_length
    rollout_fits = budget > 0 and (seqs is None or seqs >= 1)
    assumptions = [
        "training: bf16 weights and grads, fp32 master weights and Adam m/v (16 bytes/parameter) sharded by FSDP "
        f"over {train_n} training workers",
        f"training activations: one bf16 hidden state per layer for a {pack_max_length}-token packed batch "
        f"(recomputation), divided by sp_size, plus {RUNTIME_RESERVE_GIB:g} GiB workspace",
        "rollout: bf16 weights split by TP (dense) or experts split by EP (MoE); KV cache bf16 K+V per layer",
        f"rollout KV budget: gpu_memory_utilization x {'memory left after weights' if p.backend == 'lmdeploy' else 'total memory, minus weights'}",
    ]
    peak = None
    if topology != "disaggregated":
        peak = round(max(train_total, w + max(budget, 0)) / rr.GIB, 2)
        assumptions.append(
            "colocated: training state is offloaded before rollout starts and rollout memory is released for "
            f"training ({SRC_OFFLOAD}), so the peak is the larger of the two"
        )
    span = uncertainty = None
    if model.source == "params_b":
        span = _rough_range(model, max(1, train_n), pack_max_length, p.sp_size)
        uncertainty = _uncertainty(_gib(train_total), span)
    return MemoryEstimate(
        basis=model.source,
        uncertainty=uncertainty,
        gpu_memory_gib=gpu_gib,
        train_weights_gib=_gib(tm["weights"]),
        train_grads_gib=_gib(tm["grads"]),
        train_optimizer_gib=_gib(tm["optim"]),
        train_activations_gib=_gib(tm["acts"]),
        train_total_gib=_gib(train_total),
        train_total_range_gib=span,
        train_fits=train_total <= TRAIN_MEMORY_HEADROOM * gpu_bytes,
        rollout_weights_gib=_gib(w),
        rollout_kv_budget_gib=_gib(max(budget, 0)),
        rollout_kv_tokens_per_engine=tokens,
        rollout_full_sequences_per_engine=seqs,
        rollout_fits=rollout_fits,
        colocated_peak_gib=peak,
        assumptions=assumptions,
    )


def memory_findings(
    m: MemoryEstimate, model: ModelInfo, rollout: RolloutPlan, engine_fits: bool, context_length: int
) -> list[Finding]:
    if m.basis == "unknown" or m.train_total_gib is None:
        return [_size_unknown_finding(rollout)]
    out: list[Finding] = []
    if not m.train_fits:
        share = m.train_total_gib / m.gpu_memory_gib if m.gpu_memory_gib else float("inf")
        over = share > 1.0  # beyond the device itself, not only beyond the headroom: it cannot fit
        rough = ""
        if m.train_total_range_gib is not None:
            lo, hi = m.train_total_range_gib
            rough = (
                f"; rough (params_b only): {lo:g}–{hi:g} GiB depending on the model's layers × hidden, "
                "model_path gives the estimate from config.json"
            )
        out.append(
            Finding(
                id="topo.train_memory_exceeds",
                severity="blocker" if over else "warning",
                category="resource_mismatch_num_workers",
                title=f"Training needs about {m.train_total_gib:g} GiB per accelerator; it has {m.gpu_memory_gib:g}",
                evidence=f"weights {m.train_weights_gib:g} + grads {m.train_grads_gib:g} + optimizer "
                f"{m.train_optimizer_gib:g} + activations {m.train_activations_gib:g} GiB = {share:.0%} of the "
                f"accelerator; rule: an estimate above {TRAIN_MEMORY_HEADROOM:.0%} is a warning (allocator and "
                f"communication buffers need the rest), above 100% a blocker{rough}",
                fix="Add training accelerators, lower max_response_len/pack_max_length, raise sp_size, or enable "
                "FSDPConfig(cpu_offload=True).",
                reference=f"{WF}#topologies",
                owner="config_edit",
            )
        )
    if not m.rollout_fits or not engine_fits:
        out.append(
            Finding(
                id="topo.rollout_memory_exceeds",
                severity="warning",
                category="resource_mismatch_num_workers",
                title=f"Rollout engine (tp={rollout.tensor_parallel_size}, ep={rollout.expert_parallel_size}) leaves "
                f"little or no KV cache: weights {m.rollout_weights_gib:g} GiB per accelerator",
                evidence=f"KV budget {m.rollout_kv_budget_gib:g} GiB per accelerator, "
                f"{m.rollout_full_sequences_per_engine} full {context_length}-token sequences per engine",
                fix="Use a larger engine (tensor_parallel_size, or expert_parallel_size for MoE) or accelerators "
                "with more memory.",
                reference=f"{CB}#divisibility-rules",
                owner="config_edit",
            )
        )
    elif (
        m.rollout_full_sequences_per_engine is not None
        and m.rollout_full_sequences_per_engine < rollout.rollout_max_batch_size_per_instance // 8
    ):
        out.append(
            Finding(
                id="topo.kv_cache_small",
                severity="info",
                category="resource_mismatch_num_workers",
                title=f"KV cache holds about {m.rollout_full_sequences_per_engine} full-length sequences per engine",
                evidence=f"XTuner sends up to {rollout.rollout_max_batch_size_per_instance} requests per engine for "
                f"context_length {context_length}; the engine will queue the rest",
                fix="Fine for correctness; for throughput use bigger engines or shorter max_response_len.",
                reference=f"{CB}#divisibility-rules",
                source=SRC_MAX_BATCH,
            )
        )
    if model.max_position_embeddings and context_length > model.max_position_embeddings:
        out.append(
            Finding(
                id="topo.context_exceeds_model",
                severity="warning",
                category="model_loading",
                title=f"context_length {context_length} exceeds the model's max_position_embeddings "
                f"{model.max_position_embeddings}",
                evidence="max_prompt_len + max_response_len",
                fix="Lower max_response_len or use a long-context variant of the model.",
                reference=f"{WF}#train-batch-size",
                owner="config_edit",
            )
        )
    return out


def _size_unknown_finding(rollout: RolloutPlan) -> Finding:
    return Finding(
        id="topo.model_size_unknown",
        severity="warning",
        category="resource_mismatch_num_workers",
        title="Memory not estimated and the rollout engine not sized: the model size is unknown",
        evidence=f"no model_path or params_b; the plan keeps tp={rollout.tensor_parallel_size}, "
        f"ep={rollout.expert_parallel_size} without checking that the weights and KV cache fit",
        fix=MODEL_SIZE_HINT[0].upper() + MODEL_SIZE_HINT[1:] + " to estimate memory and size the engine.",
        reference=f"{WF}#topologies",
    )
