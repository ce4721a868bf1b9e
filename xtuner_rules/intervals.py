"""XTuner's interval rule (rl_trainer.py:313-326): checkpoint/HF saves and evaluation run only on weight-sync steps,
so their intervals must be multiples of ``sync_weights_interval``; the fix names the multiple to use."""

from __future__ import annotations


def nearest_multiple(value: int, sync_weights_interval: int) -> int:
    """The multiple of ``sync_weights_interval`` to use instead of ``value``: the one just below (at least one)."""
    return max(sync_weights_interval, value - value % sync_weights_interval)


def interval_fix(name: str, value: int, sync_weights_interval: int) -> str:
    """The fix for ``name=value`` that is not a multiple of ``sync_weights_interval``, with the number to use."""
    use = nearest_multiple(value, sync_weights_interval)
    if name == "evaluate_step":
        return f"Set evaluate_step to a multiple of {sync_weights_interval} (e.g. {use}), or enable_evaluate=False."
    return f"Use {name}={use} (a multiple of {sync_weights_interval})."
