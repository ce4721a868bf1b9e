"""BaseRLTrainerConfig's interval validator in XTuner's order: debug flags, steps/epochs, interval multiples."""

from __future__ import annotations

from typing import Any

from ..core.findings import Category
from ..xtuner_rules.intervals import interval_fix, nearest_multiple
from .field_values import field_val, lit
from .rule_context import Ctx, env_note
from .values import Obj

# XTuner sources cited by these rules (all at b934f46).
SRC_VALIDATOR = "xtuner/v1/train/rl_trainer.py:373-394"
SRC_INTERVALS = "xtuner/v1/train/rl_trainer.py:295-326"
SRC_DEBUG_ROLLOUT = "xtuner/v1/train/rl_trainer.py:1621"
SRC_DEBUG_TRAIN = "xtuner/v1/train/rl_trainer.py:1637"

#: The trainer fields the validator reads.
VALIDATED_FIELDS = (
    "debug_rollout",
    "debug_train",
    "debug_rollout_dir",
    "total_train_steps",
    "total_epochs",
    "sync_weights_interval",
    "checkpoint_interval",
    "hf_interval",
    "enable_evaluate",
    "evaluate_step",
)


class TrainerFields:
    """The validated fields of one trainer config, and what the validator rules share to read and report them."""

    def __init__(self, c: Ctx, t: Obj) -> None:
        self.c = c
        self.t = t
        self.vals = {n: field_val(t, n)[0] for n in VALIDATED_FIELDS}
        self.got = {n: lit(v) for n, v in self.vals.items()}

    def val(self, n: str) -> Any:
        return self.got[n][1]

    def known(self, *names: str, rule: str) -> bool:
        for n in names:
            if not self.got[n][0]:
                self.c.skip(rule, self.vals[n])
                return False
        return True

    def line(self, n: str) -> int:
        return self.t.kw_line(n)

    def bad(
        self,
        fid: str,
        title: str,
        msg: str,
        n: str,
        fix: str,
        anchor: str = "interval-validation",
        cat: Category = "eval_or_interval_config",
        src: str = SRC_VALIDATOR,
        patch: str | None = None,
    ) -> None:
        self.c.add(
            fid,
            "blocker",
            cat,
            title,
            evidence=f"XTuner raises at config load (ValidationError): {msg}" + env_note(self.vals[n]),
            line=self.line(n),
            fix=fix,
            anchor=anchor,
            source=src,
            patch=patch,
        )


def check_trainer_validator(c: Ctx, t: Obj) -> None:
    """BaseRLTrainerConfig._validate_sync_intervals, in XTuner's order (rl_trainer.py:373-394, 295-326)."""
    tf = TrainerFields(c, t)
    check_debug_flags(tf)
    check_steps(tf)
    check_intervals(tf)


def check_debug_flags(tf: TrainerFields) -> None:
    """debug_rollout and debug_train: not both, each needs debug_rollout_dir, and either means no training run."""
    if tf.known("debug_rollout", "debug_train", rule="debug flags"):
        if tf.val("debug_rollout") and tf.val("debug_train"):
            tf.bad(
                "config.debug_flags_conflict",
                "debug_rollout and debug_train are both on",
                "debug_rollout and debug_train cannot be enabled at the same time.",
                "debug_train",
                "Run debug_rollout first (it records rollouts), then a separate run with debug_train.",
                "baserltrainerconfig",
                "debug_trace_output",
                "xtuner/v1/train/rl_trainer.py:375-376",
            )
        if tf.known("debug_rollout_dir", rule="debug_rollout_dir"):
            for flag in ("debug_rollout", "debug_train"):
                if tf.val(flag) and tf.val("debug_rollout_dir") is None:
                    tf.bad(
                        "config.debug_dir_missing",
                        f"{flag}=True without debug_rollout_dir",
                        f"debug_rollout_dir must be provided when {flag}=True.",
                        flag,
                        "Set debug_rollout_dir to a directory (rollouts are saved/replayed there).",
                        "baserltrainerconfig",
                        "debug_trace_output",
                        "xtuner/v1/train/rl_trainer.py:377-380",
                    )
        for flag, src, text in (
            (
                "debug_rollout",
                SRC_DEBUG_ROLLOUT,
                "Debug rollout mode is enabled. Only rollout workers will be started.",
            ),
            (
                "debug_train",
                SRC_DEBUG_TRAIN,
                "Debug train mode is enabled. Only training workers will be started and "
                "rollout weights will not be synchronized.",
            ),
        ):
            if tf.val(flag):
                tf.c.add(
                    f"config.{flag}_on",
                    "warning",
                    "debug_trace_output",
                    f"{flag} is on: this is not a training run",
                    evidence=f"XTuner logs: {text}" + env_note(tf.vals[flag]),
                    line=tf.line(flag),
                    fix=f"Set {flag}=False for a real training run.",
                    anchor="baserltrainerconfig",
                    source=src,
                    patch=tf.c.set_value(tf.t, flag, False),
                )


def check_steps(tf: TrainerFields) -> None:
    """total_train_steps or total_epochs must be given (unless debug_train), and positive."""
    debug_train = tf.got["debug_train"][1] if tf.got["debug_train"][0] else False
    if tf.known("total_train_steps", "total_epochs", rule="steps/epochs present"):
        if not debug_train and tf.val("total_train_steps") is None and tf.val("total_epochs") is None:
            tf.bad(
                "config.steps_missing",
                "Neither total_train_steps nor total_epochs is set",
                "Either total_train_steps or total_epochs must be provided.",
                "total_train_steps",
                "Set total_train_steps=<n> (or total_epochs=<n>) on the trainer config.",
                "baserltrainerconfig",
                src="xtuner/v1/train/rl_trainer.py:381-382",
            )
        for n, src in (("total_train_steps", "383-384"), ("total_epochs", "385-386")):
            v = tf.val(n)
            if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
                tf.bad(
                    f"config.{n}_not_positive",
                    f"{n}={v} is not positive",
                    f"{n} must be positive, got {v}.",
                    n,
                    f"Set {n} to a positive integer.",
                    "baserltrainerconfig",
                    src=f"xtuner/v1/train/rl_trainer.py:{src}",
                )


def check_intervals(tf: TrainerFields) -> None:
    """sync_weights_interval is positive; checkpoint, HF and evaluation intervals are multiples of it."""
    if not tf.known("sync_weights_interval", rule="interval multiples"):
        return
    s = tf.val("sync_weights_interval")
    if not isinstance(s, int) or isinstance(s, bool):
        return
    if s <= 0:
        tf.bad(
            "config.sync_interval_not_positive",
            f"sync_weights_interval={s} is not positive",
            f"sync_weights_interval must be positive, got {s}.",
            "sync_weights_interval",
            "Set sync_weights_interval to 1 or more.",
            src="xtuner/v1/train/rl_trainer.py:302-303",
            patch=tf.c.set_value(tf.t, "sync_weights_interval", 1),
        )
        return
    for n in ("checkpoint_interval", "hf_interval"):
        if not tf.known(n, rule=f"{n} multiple of sync_weights_interval"):
            continue
        v = tf.val(n)
        if v is None or v == -1 or not isinstance(v, int):
            continue
        if v <= 0:
            tf.bad(
                "config.interval_not_positive",
                f"{n}={v} is neither positive nor -1/None",
                f"{n} must be positive or -1/None to disable it, got {v}.",
                n,
                f"Set {n}=-1 to disable, or a positive multiple of {s}.",
                src="xtuner/v1/train/rl_trainer.py:309-312",
                patch=tf.c.set_value(tf.t, n, -1),
            )
        elif v % s:
            tf.bad(
                "config.interval_not_multiple",
                f"{n}={v} is not a multiple of sync_weights_interval={s}",
                f"{n}={v} must be a multiple of sync_weights_interval={s}, because checkpoint/HF saves only run on "
                "weight-sync steps.",
                n,
                interval_fix(n, v, s),
                src="xtuner/v1/train/rl_trainer.py:313-317",
                patch=tf.c.set_value(tf.t, n, nearest_multiple(v, s)),
            )
    check_evaluate_step(tf, s)


def check_evaluate_step(tf: TrainerFields, s: int) -> None:
    """With evaluation enabled, evaluate_step is positive and a multiple of sync_weights_interval ``s``."""
    if tf.known("enable_evaluate", "evaluate_step", rule="evaluate_step multiple of sync_weights_interval"):
        if tf.val("enable_evaluate"):
            e = tf.val("evaluate_step")
            if e is None or (isinstance(e, int) and e <= 0):
                tf.bad(
                    "config.evaluate_step_not_positive",
                    f"evaluate_step={e} with evaluation enabled",
                    f"evaluate_step must be positive when evaluation is enabled, got {e}.",
                    "evaluate_step",
                    "Set evaluate_step to a positive multiple of sync_weights_interval, or enable_evaluate=False.",
                    src="xtuner/v1/train/rl_trainer.py:319-321",
                    patch=tf.c.set_value(tf.t, "evaluate_step", s),
                )
            elif isinstance(e, int) and e % s:
                origin = (
                    "XTuner's default evaluate_step=1" if "evaluate_step" not in tf.t.kwargs else f"evaluate_step={e}"
                )
                tf.bad(
                    "config.evaluate_step_not_multiple",
                    f"{origin} is not a multiple of sync_weights_interval={s}",
                    f"evaluate_step={e} must be a multiple of sync_weights_interval={s}, because evaluation only runs "
                    "on weight-sync steps.",
                    "evaluate_step" if "evaluate_step" in tf.t.kwargs else "sync_weights_interval",
                    interval_fix("evaluate_step", e, s),
                    src="xtuner/v1/train/rl_trainer.py:322-326",
                    patch=tf.c.set_value(tf.t, "evaluate_step", nearest_multiple(e, s)),
                )
