"""Rules on the trainer config besides its interval validator: evaluation components, tracing, the policy loss."""

from __future__ import annotations

from .field_values import field_val, lit, lit_field
from .rule_context import Ctx, env_note
from .values import Coll, Lit, Obj, Unres, coll_get

# XTuner sources cited by these rules (all at b934f46).
SRC_EVAL_MANAGER = "xtuner/v1/train/rl_trainer.py:720"
SRC_EVALUATOR = "xtuner/v1/train/rl_trainer.py:734"
SRC_OTELCOL = "xtuner/v1/rl/trace/runtime.py:164-169"
SRC_OTEL_PKG = "xtuner/v1/rl/trace/otel_utils.py:19-29"
SRC_LOSS_KEYS = "xtuner/v1/rl/loss/loss_fn.py:51-55,66"
SRC_LOSS_TYPE = "xtuner/v1/rl/loss/loss_fn.py:45-47"


def check_evaluation(c: Ctx, t: Obj) -> None:
    """enable_evaluate=True needs an eval manager and an evaluator; the asserts fire only after workers start."""
    ev_val, _ = field_val(t, "enable_evaluate")
    ok, enabled = lit(ev_val)
    if not ok:
        c.skip("evaluation components", ev_val)
        return
    if not enabled:
        return
    default_note = " (enable_evaluate defaults to True)" if "enable_evaluate" not in t.kwargs else env_note(ev_val)
    for fname, fid, src, what in (
        (
            "eval_agent_loop_manager_cfg",
            "config.eval_manager_missing",
            SRC_EVAL_MANAGER,
            "eval_agent_loop_manager_cfg=AgentLoopManagerConfig(tasks=TaskSpecConfig(task_name='eval_task', ...))",
        ),
        ("evaluator_config", "config.evaluator_missing", SRC_EVALUATOR, "evaluator_config=EvaluatorConfig()"),
    ):
        v, _ = field_val(t, fname)
        okv, py = lit(v)
        if isinstance(v, Unres):
            c.skip(f"{fname} present", v)
        elif okv and py is None:
            c.add(
                fid,
                "blocker",
                "eval_or_interval_config",
                f"Evaluation is enabled{default_note} but {fname} is not set",
                evidence=f"XTuner fails with a bare `AssertionError` (no message) at {src.split(':')[0]}:"
                f"{src.split(':')[1]} (`assert cfg.{fname} is not None`) inside trainer build — after the "
                "placement groups, training workers and rollout servers have started.",
                line=t.kw_line(fname),
                fix=f"Add {what} to the trainer, or set enable_evaluate=False.",
                anchor="evaluatorconfig" if fname == "evaluator_config" else "baserltrainerconfig",
                source=src,
            )


def check_trace(c: Ctx, t: Obj) -> bool | None:
    tr, _ = field_val(t, "trace_config")
    if not isinstance(tr, Obj):
        c.skip("trace", tr)
        return None
    ok, enabled = lit_field(tr, "enabled")
    if not ok:
        c.skip("trace", field_val(tr, "enabled")[0])
        return None
    if enabled:
        c.add(
            "config.trace_needs_otel",
            "warning",
            "debug_trace_output",
            "Tracing is enabled: the driver needs an OpenTelemetry Collector binary and the OTel Python packages",
            evidence="Without them XTuner raises at trainer start: RuntimeError: XTuner OTel tracing requires "
            "`otelcol-contrib` or `otelcol` on PATH. Install an official OpenTelemetry Collector binary before "
            f"enabling trace. ({SRC_OTELCOL}); then RuntimeError: XTuner OTel tracing requires the official "
            "OpenTelemetry OTLP gRPC trace exporter. Install `opentelemetry-exporter-otlp-proto-grpc` before "
            f"enabling trace. ({SRC_OTEL_PKG})",
            line=tr.line,
            fix="Install otelcol-contrib (or otelcol) on PATH and `pip install opentelemetry-sdk "
            "opentelemetry-exporter-otlp-proto-grpc`, or set TraceConfig(enabled=False).",
            anchor="traceconfig",
            source=SRC_OTELCOL,
            owner="environment",
        )
        vok, viewer = lit_field(tr, "xtuner_viewer_enabled")
        if vok and viewer:
            c.add(
                "config.trace_viewer",
                "warning",
                "debug_trace_output",
                "The trace viewer runs `python -m recipe.trace.viewer.server`: launch from the XTuner repo root",
                evidence="If the viewer process exits early (`recipe` not importable, port busy) XTuner raises "
                "RuntimeError: XTuner trace viewer failed to start: exit_code=... Manual command: ...",
                line=tr.kw_line("xtuner_viewer_enabled"),
                fix="Run from the XTuner checkout (PYTHONPATH includes it) or set xtuner_viewer_enabled=False.",
                anchor="traceconfig",
                source="xtuner/v1/rl/trace/runtime.py:344-347",
                owner="environment",
            )
    return bool(enabled)


def check_losses(c: Ctx) -> None:
    for obj in c.ev.objects:
        if obj.cls != "GRPOLossConfig" or "policy_loss_cfg" not in obj.kwargs:
            continue
        pl = obj.kwargs["policy_loss_cfg"]
        if not isinstance(pl, Coll | Lit):
            c.skip("policy_loss_cfg keys", pl)
            continue
        lt = coll_get(pl, "loss_type")
        lt_ok, ltv = lit(lt) if lt is not None else (True, "vanilla")
        keys = (
            [k.value for k in (pl.keys or []) if isinstance(k, Lit)] if isinstance(pl, Coll) else list(pl.value or {})
        )
        if lt_ok and ltv == "vanilla":
            missing = [k for k in ("cliprange_low", "cliprange_high") if k not in keys]
            if missing:
                c.add(
                    "config.policy_loss_missing_key",
                    "blocker",
                    "config_load_error",
                    f"policy_loss_cfg lacks {', '.join(missing)} (required by the vanilla policy loss)",
                    evidence=f"XTuner raises at the first train step: ValueError: Missing required key '{missing[0]}' "
                    f"in config. Available keys: {keys}",
                    line=obj.kw_line("policy_loss_cfg"),
                    fix="Add cliprange_low=0.2, cliprange_high=0.28 to policy_loss_cfg.",
                    anchor="advantage-and-loss",
                    source=SRC_LOSS_KEYS,
                )
        elif lt_ok and isinstance(ltv, str) and "." not in ltv:
            c.add(
                "config.policy_loss_unknown",
                "blocker",
                "config_load_error",
                f"Unknown policy loss type {ltv!r}",
                evidence=f"XTuner raises at the first train step: ValueError: Unsupported loss mode: {ltv}. Supported "
                "modes are: ['vanilla']",
                line=obj.kw_line("policy_loss_cfg"),
                fix="Use loss_type='vanilla' or a dotted import path to your own loss function.",
                anchor="advantage-and-loss",
                source=SRC_LOSS_TYPE,
            )
