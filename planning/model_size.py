"""Model size from an HF config.json (or a bare parameter count): parameters, MoE shape and KV bytes per token."""

from __future__ import annotations

import json
from typing import Any

from ..core import RunContext, ToolInputError, open_guarded
from .models import ModelInfo, PlanRequest

MAX_CONFIG_JSON_BYTES = 2 * 1024 * 1024
BYTES_BF16 = 2
#: What enables the memory estimate and the engine sizing when neither model_path nor params_b was given.
MODEL_SIZE_HINT = (
    "pass model_path (an HF model directory: the estimate uses its config.json) or params_b (total parameters in "
    "billions: a rough estimate)"
)


def _int(cfg: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = cfg.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and v > 0:
            return v
        if isinstance(v, float) and v > 0 and v.is_integer():
            return int(v)
    return None


def estimate_from_config(cfg: dict[str, Any]) -> ModelInfo | None:
    """Estimate parameter counts from an HF config dict; None when the core sizes are missing."""
    notes: list[str] = []
    arch = None
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        arch = archs[0][:200]
    if not _int(cfg, "hidden_size", "d_model", "n_embd") and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
        notes.append("sizes read from text_config (vision tower not counted)")
    hidden = _int(cfg, "hidden_size", "d_model", "n_embd")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    vocab = _int(cfg, "vocab_size")
    if not (hidden and layers and vocab):
        return None
    heads = _int(cfg, "num_attention_heads", "n_head") or max(1, hidden // 128)
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _int(cfg, "head_dim") or max(1, hidden // heads)
    inter = _int(cfg, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    n_experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    top_k = _int(cfg, "num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")
    moe_inter = _int(cfg, "moe_intermediate_size") or inter
    shared_inter = _int(cfg, "shared_expert_intermediate_size")
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts")
    tied = bool(cfg.get("tie_word_embeddings", False))

    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    dense_mlp = 3 * hidden * inter
    moe_layers = 0
    if n_experts and n_experts > 1:
        dense_first = _int(cfg, "first_k_dense_replace") or 0
        mlp_only = cfg.get("mlp_only_layers")
        n_mlp_only = len(mlp_only) if isinstance(mlp_only, list) else 0
        moe_layers = max(0, layers - dense_first - n_mlp_only)
    expert_mlp = 3 * hidden * moe_inter
    shared = 0
    if shared_inter:
        shared = 3 * hidden * shared_inter
    elif n_shared:
        shared = n_shared * expert_mlp
    experts = n_experts or 0  # more than one whenever there are MoE layers
    per_moe_layer_total = attn + experts * expert_mlp + shared + hidden * experts if moe_layers else 0
    per_moe_layer_active = attn + (top_k or 1) * expert_mlp + shared + hidden * experts if moe_layers else 0
    dense_layers = layers - moe_layers
    embed = vocab * hidden * (1 if tied else 2)
    total = embed + dense_layers * (attn + dense_mlp) + moe_layers * per_moe_layer_total
    active = embed + dense_layers * (attn + dense_mlp) + moe_layers * per_moe_layer_active
    expert_params = moe_layers * experts * expert_mlp
    if n_experts and not top_k:
        notes.append("experts per token not found; active size assumes 1")
    max_pos = _int(cfg, "max_position_embeddings", "n_positions")
    return ModelInfo(
        source="config.json",
        architecture=arch,
        params_total_b=round(total / 1e9, 3),
        params_active_b=round(active / 1e9, 3),
        is_moe=bool(moe_layers),
        num_experts=n_experts if moe_layers else None,
        experts_per_token=top_k if moe_layers else None,
        expert_params_b=round(expert_params / 1e9, 3),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        kv_cache_bytes_per_token=2 * layers * kv_heads * head_dim * BYTES_BF16,
        notes=notes,
    )


def load_model_info(params: PlanRequest, ctx: RunContext) -> ModelInfo:
    """Model size from config.json (through the path policy) or params_b; ``source="unknown"`` without either (the
    plan is made without memory figures and says what to pass)."""
    if params.model_path:
        model_dir = ctx.paths.check(params.model_path, kind="dir", what="model_path")
        cfg_path = model_dir / "config.json"
        with open_guarded(ctx.paths, cfg_path, what="model_path/config.json") as fh:
            data = fh.read(MAX_CONFIG_JSON_BYTES + 1)
        if len(data) > MAX_CONFIG_JSON_BYTES:
            raise ToolInputError(
                "config_too_large", f"{cfg_path} is larger than {MAX_CONFIG_JSON_BYTES} bytes; not a model config"
            )
        try:
            cfg = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ToolInputError(
                "config_json_invalid",
                f"{cfg_path} is not valid JSON: {str(exc)[:200]}",
                "Point model_path at an HF model directory, or pass params_b.",
            ) from None
        if not isinstance(cfg, dict):
            raise ToolInputError("config_json_invalid", f"{cfg_path} is not a JSON object")
        info = estimate_from_config(cfg)
        if info is not None:
            if params.params_b:
                info.notes.append(f"params_b={params.params_b} given; config.json estimate used for the layout")
            return info
        if params.params_b:
            out = _from_params_b(params.params_b)
            out.notes.append("config.json lacks hidden_size/num_hidden_layers/vocab_size; used params_b")
            return out
        raise ToolInputError(
            "model_size_unknown",
            f"cannot estimate the model size from {cfg_path}: hidden_size, num_hidden_layers or vocab_size missing",
            "Pass params_b (total parameters in billions).",
        )
    if params.params_b:
        return _from_params_b(params.params_b)
    return ModelInfo(source="unknown", notes=[MODEL_SIZE_HINT])


def _from_params_b(params_b: float) -> ModelInfo:
    return ModelInfo(
        source="params_b",
        params_total_b=params_b,
        params_active_b=params_b,
        notes=["no config.json: dense model assumed; KV cache size unknown"],
    )
