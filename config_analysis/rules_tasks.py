"""Rules on the train and eval tasks (task sets, judgers, produce strategies, samplers) and their report rows."""

from __future__ import annotations

from typing import Any

from ..core.findings import Severity
from ..xtuner_rules import classes as xc
from .field_values import field_val, json_field, json_value, lit, lit_field
from .report import TaskInfo
from .rule_context import Ctx
from .values import Lit, Obj, Unres, Val, coll_get, elements

# XTuner sources cited by these rules (all at b934f46).
SRC_TASKS_EMPTY = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:131-132"
SRC_TASKS_DUP = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:136-138"
SRC_TASKS_WEIGHT = "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:191-192"
SRC_BATCH_JUDGE = "xtuner/v1/rl/judger/native.py:188-189"
SRC_COMPASS_BATCH = "xtuner/v1/rl/judger/compass_verifier_v2.py:66-67"
SRC_NO_REWARD = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:182-183"
SRC_REWARD_ASSERT = "xtuner/v1/train/rl_trainer.py:1087-1088"
SRC_EVAL_REWARD = "xtuner/v1/rl/evaluator.py:37-40"
SRC_GRPO_STD = "xtuner/v1/rl/advantage/grpo.py:26-29"
SRC_STALENESS = "xtuner/v1/rl/agent_loop_manager/producer.py:356-359"
SRC_TOKEN_STALE = "xtuner/v1/rl/agent_loop_manager/producer.py:243-252"
SRC_STALE_THRESHOLD = "xtuner/v1/rl/agent_loop_manager/produce_utils.py:97-99"


def tasks_of(c: Ctx, manager: Val, role: str) -> list[Obj]:
    if not isinstance(manager, Obj):
        return []
    tv = manager.kwargs.get("tasks")
    if tv is None:
        return []
    items = elements(tv)
    if items is None:
        items = [tv]
        if isinstance(tv, Unres):
            c.skip(f"{role} tasks", tv)
            return []
    src_sfx = "disagg_agent_loop_manager.py" if manager.cls.startswith("Disagg") else "agent_loop_manager.py"
    if not items and isinstance(elements(tv), list):
        c.add(
            "config.tasks_empty",
            "blocker",
            "config_load_error",
            f"{manager.cls}(tasks=[]) has no task",
            evidence=f"XTuner raises at build: {manager.cls} requires at least one task config.",
            line=manager.line,
            fix="Add at least one task spec.",
            anchor="agentloopmanagerconfig",
            source=SRC_TASKS_EMPTY
            if src_sfx == "agent_loop_manager.py"
            else "xtuner/v1/rl/agent_loop_manager/disagg_agent_loop_manager.py:73-74",
        )
    return [i for i in items if isinstance(i, Obj)]


def describe_tasks(c: Ctx, t: Obj, mode: str) -> list[TaskInfo]:
    infos: list[TaskInfo] = []
    train_mgr, _ = field_val(t, "agent_loop_manager_cfg")
    eval_mgr, _ = field_val(t, "eval_agent_loop_manager_cfg")
    evaluator, _ = field_val(t, "evaluator_config")
    metric_func = field_val(evaluator, "compute_metric_func")[0] if isinstance(evaluator, Obj) else None
    custom_metric = isinstance(evaluator, Obj) and not (isinstance(metric_func, Lit) and metric_func.value is None)
    adv, _ = field_val(t, "advantage_estimator_config")
    grpo = isinstance(adv, Obj) and adv.cls == "GRPOAdvantageConfig"
    enabled_ok, eval_enabled = lit_field(t, "enable_evaluate")
    for role, mgr in (("train", train_mgr), ("eval", eval_mgr)):
        tasks = tasks_of(c, mgr, role)
        check_task_set(c, mgr, tasks, role)
        for task in tasks:
            infos.append(task_info(c, task, role))
            check_task(
                c,
                task,
                role,
                mode,
                custom_metric=custom_metric,
                grpo=grpo,
                eval_used=(not enabled_ok) or bool(eval_enabled),
            )
    return infos


def check_task_set(c: Ctx, mgr: Val, tasks: list[Obj], role: str) -> None:
    if not isinstance(mgr, Obj) or not tasks:
        return
    names = [lit_field(tk, "task_name") for tk in tasks]
    seen: set[Any] = set()
    for (ok, name), tk in zip(names, tasks, strict=True):
        if ok and name in seen:
            c.add(
                "config.duplicate_task_name",
                "blocker",
                "config_load_error",
                f"Task name {name!r} is used twice in the {role} manager",
                evidence=f"XTuner raises at build: Duplicate task_name found in {mgr.cls}: {name}",
                line=tk.line,
                fix="Give every task a unique task_name.",
                anchor="taskspecconfig",
                source=SRC_TASKS_DUP,
            )
        seen.add(name)
    weights = [lit_field(tk, "weight") for tk in tasks]
    if all(ok for ok, _ in weights) and all(isinstance(w, int | float) and w == 0 for _, w in weights):
        c.add(
            "config.task_weights_zero",
            "blocker",
            "config_load_error",
            f"All {role} task weights are 0",
            evidence=f"XTuner raises at build: At least one task weight must be positive for "
            f"{mgr.cls.replace('Config', '')}.",
            line=mgr.line,
            fix="Give at least one task a weight > 0.",
            anchor="taskspecconfig",
            source=SRC_TASKS_WEIGHT,
        )
    for (ok, w), tk in zip(weights, tasks, strict=True):
        if ok and isinstance(w, int | float) and w < 0:
            c.add(
                "config.task_weight_negative",
                "blocker",
                "config_load_error",
                f"Task weight {w} is negative",
                evidence=f"XTuner raises at config load: 1 validation error for {tk.cls}\nweight\n  Input should be "
                "greater than or equal to 0 [type=greater_than_equal]",
                line=tk.kw_line("weight"),
                fix="Use a weight >= 0.",
                anchor="taskspecconfig",
                source="xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py:82",
            )


def task_info(c: Ctx, task: Obj, role: str) -> TaskInfo:
    loop, _ = field_val(task, "agent_loop_config")
    judger, _ = field_val(task, "judger_config")
    strategy, _ = field_val(task, "produce_strategy_config")
    sampler, _ = field_val(task, "sampler_config")
    rep = None
    paths: list[Any] = []
    if isinstance(sampler, Obj):
        rep = json_field(sampler, "prompt_repeat_k")
        paths = data_paths(sampler)
    return TaskInfo(
        manager=role,
        task_name=json_field(task, "task_name"),
        spec_class=task.cls,
        weight=json_field(task, "weight"),
        agent_loop=loop.cls if isinstance(loop, Obj) else None,
        judger=judger.cls if isinstance(judger, Obj) else (None if isinstance(judger, Lit) else "unresolved"),
        judger_name=json_field(judger, "judger_name") if isinstance(judger, Obj) else None,
        produce_strategy=strategy.cls if isinstance(strategy, Obj) else None,
        prompt_repeat_k=rep,
        data_paths=paths,
        location=c.loc(task.line),
    )


def data_paths(sampler: Obj) -> list[Any]:
    out: list[Any] = []
    dl = sampler.kwargs.get("dataloader_cfg")
    if not isinstance(dl, Obj):
        return out
    for entry in elements(dl.kwargs.get("dataset_config_list") or Lit(0, "", value=[])) or []:
        ds = coll_get(entry, "dataset")
        if isinstance(ds, Obj) and "anno_path" in ds.kwargs:
            v = ds.kwargs["anno_path"]
            out.append(json_value(v) if not isinstance(v, Unres) else f"<unresolved: {v.expr}>")
    return out


def check_task(c: Ctx, task: Obj, role: str, mode: str, *, custom_metric: bool, grpo: bool, eval_used: bool) -> None:
    name = json_field(task, "task_name")
    loop, _ = field_val(task, "agent_loop_config")
    judger, _ = field_val(task, "judger_config")
    self_judging = isinstance(loop, Obj) and loop.cls in xc.SELF_JUDGING_AGENT_LOOPS
    ok, jv = lit(judger)
    if ok and jv is None and not self_judging and (role == "train" or eval_used):
        check_missing_judger(c, task, role, name, custom_metric=custom_metric)
    if isinstance(loop, Obj) and isinstance(judger, Obj):
        bj_ok, bj = lit_field(loop, "enable_batch_judge")
        if bj_ok and bj and judger.cls in xc.NO_BATCH_JUDGERS:
            native = judger.cls in xc.NATIVE_JUDGERS
            msg = (
                "NativeJudger does not support batch_judge."
                if native
                else "CompassVerifierV2 does not support batch_judge."
            )
            c.add(
                "config.batch_judge_unsupported",
                "blocker",
                "config_load_error",
                f"Task {name!r}: enable_batch_judge=True with {judger.cls}, which cannot judge in batches",
                evidence=f"XTuner raises during rollout: NotImplementedError: {msg}",
                line=loop.kw_line("enable_batch_judge"),
                fix="Remove enable_batch_judge=True (per-sample judging works with every judger).",
                anchor="judgers",
                source=SRC_BATCH_JUDGE if native else SRC_COMPASS_BATCH,
                patch=c.remove(loop, "enable_batch_judge"),
            )
    strategy, _ = field_val(task, "produce_strategy_config")
    if isinstance(strategy, Obj) and role == "train":
        check_strategy(c, strategy, name)
    sampler, _ = field_val(task, "sampler_config")
    if grpo and role == "train" and isinstance(sampler, Obj):
        rk_ok, rk = lit_field(sampler, "prompt_repeat_k")
        if rk_ok and isinstance(rk, int) and rk < 2:
            c.add(
                "config.grpo_single_sample_group",
                "warning",
                "config_load_error",
                f"Train task {name!r}: prompt_repeat_k={rk} with GRPO advantages",
                evidence="GRPO normalises each group by its standard deviation (rewards.std() + eps); with one "
                "sample per group the std is NaN, so advantages are NaN or zero (inferred from the code).",
                line=sampler.kw_line("prompt_repeat_k"),
                fix="Use prompt_repeat_k >= 2 (the GSM8K examples use 5).",
                anchor="samplerconfig",
                source=SRC_GRPO_STD,
            )


def check_missing_judger(c: Ctx, task: Obj, role: str, name: Any, *, custom_metric: bool) -> None:
    """A task without judger_config gets no reward: training asserts; evaluation asserts with the default metric."""
    if role == "train":
        c.add(
            "config.task_missing_judger",
            "blocker",
            "reward_data_missing_ground_truth",
            f"Train task {name!r} has no judger_config: its samples get no reward",
            evidence="XTuner warns `Missing reward score in item (rollout_id: ...) of completed group for task "
            f"{name}. This item will be skipped in reward statistics.` ({SRC_NO_REWARD}) and then training "
            "fails with `AssertionError: Reward is missing or does not contain 'score' key in data: ...` "
            f"({SRC_REWARD_ASSERT}).",
            line=task.line,
            fix="Add judger_config=... to this task (e.g. GSM8KJudgerConfig() for GSM8K data, "
            "DapoMathJudgerConfig(...) for math), or a ComposedJudgerConfig routing by data_source.",
            anchor="judgers",
            source=SRC_REWARD_ASSERT,
        )
    else:
        sev: Severity = "warning" if custom_metric else "blocker"
        c.add(
            "config.eval_task_missing_judger",
            sev,
            "eval_or_interval_config",
            f"Eval task {name!r} has no judger_config: its samples get no reward",
            evidence=(
                "With the default metric XTuner fails with a bare `AssertionError` in _reward_score "
                f"({SRC_EVAL_REWARD}) at the first evaluation."
                if not custom_metric
                else "The custom compute_metric_func will see `reward` = None for these samples."
            ),
            line=task.line,
            fix="Add judger_config=... to the eval task (usually the same judger as training).",
            anchor="judgers",
            source=SRC_EVAL_REWARD,
        )


def check_strategy(c: Ctx, s: Obj, task_name: Any) -> None:
    if s.cls not in ("AsyncProduceStrategyConfig", "DisaggAsyncProduceStrategyConfig"):
        return
    src_file = "producer.py" if s.cls.startswith("Async") else "disagg_producer.py"
    vals = {
        n: lit_field(s, n)
        for n in ("max_staleness", "max_token_staleness", "tail_batch_trigger_size", "enable_partial_rollout")
    }
    bounds = {"max_staleness": 0, "max_token_staleness": 0, "tail_batch_trigger_size": -1}
    for n, lo in bounds.items():
        ok, v = vals[n]
        if ok and isinstance(v, int) and v < lo:
            c.add(
                "config.strategy_bound",
                "blocker",
                "staleness_or_partial_rollout",
                f"{s.cls}.{n}={v} is below {lo}",
                evidence=f"XTuner raises at config load: 1 validation error for {s.cls}\n{n}\n  Input should be "
                f"greater than or equal to {lo} [type=greater_than_equal]",
                line=s.kw_line(n),
                fix=f"Use {n} >= {lo}.",
                anchor="produce-strategies",
                source=f"xtuner/v1/rl/agent_loop_manager/{src_file}:{(xc.fields_of(s.cls) or {})[n].line}",
                patch=c.set_value(s, n, lo),
            )
    (ms_ok, ms), (mt_ok, mt) = vals["max_staleness"], vals["max_token_staleness"]
    pr_ok, pr = vals["enable_partial_rollout"]
    tb_ok, tb = vals["tail_batch_trigger_size"]
    if ms_ok and pr_ok and isinstance(ms, int) and ms > 0 and not pr:
        c.add(
            "config.staleness_without_partial_rollout",
            "warning",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: max_staleness={ms} with enable_partial_rollout=False",
            evidence="XTuner warns: max_staleness > 0, enable_partial_rollout is False, this will affect rollout "
            "efficiency because not support tail_batch_max_tries logic now",
            line=s.kw_line("max_staleness"),
            fix="Enable enable_partial_rollout=True with max_staleness > 0, or keep max_staleness=0.",
            patch=c.set_value(s, "enable_partial_rollout", True),
            anchor="produce-strategies",
            source=SRC_STALENESS
            if src_file == "producer.py"
            else "xtuner/v1/rl/agent_loop_manager/disagg_producer.py:355-358",
        )
    if mt_ok and ms_ok and isinstance(mt, int) and isinstance(ms, int) and mt > ms:
        c.add(
            "config.token_staleness_above_staleness",
            "warning",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: max_token_staleness={mt} > max_staleness={ms}",
            evidence="XTuner warns: max_token_staleness is greater than max_staleness; token-level masking will "
            "not take effect before the group expires.",
            line=s.kw_line("max_token_staleness"),
            fix="Keep max_token_staleness <= max_staleness.",
            anchor="produce-strategies",
            source=SRC_TOKEN_STALE,
            patch=c.set_value(s, "max_token_staleness", ms),
        )
    if mt_ok and tb_ok and mt is not None and tb == -1:
        c.add(
            "config.token_staleness_discards",
            "info",
            "staleness_or_partial_rollout",
            f"Task {task_name!r}: token-expired groups will be discarded (tail_batch_trigger_size=-1)",
            evidence="XTuner warns: Token-expired groups will be terminally discarded because "
            "tail_batch_trigger_size=-1 disables rerollout.",
            line=s.kw_line("max_token_staleness"),
            fix="Set tail_batch_trigger_size >= 0 to re-roll expired groups.",
            anchor="produce-strategies",
            source=SRC_TOKEN_STALE,
        )


def check_dapo_judgers(c: Ctx) -> None:
    """DapoMathJudgerConfig's after-validator (xtuner/v1/rl/judger/dapo_math.py:305-329), run at config load."""
    for obj in c.ev.objects:
        if obj.cls != "DapoMathJudgerConfig" or obj.splat:
            continue
        eos_ok, eos = lit_field(obj, "eos_token") if "eos_token" in obj.kwargs else (False, None)
        if eos_ok and isinstance(eos, str) and not eos.strip():
            c.add(
                "config.dapo_judger_invalid",
                "blocker",
                "config_load_error",
                "DapoMathJudgerConfig.eos_token is empty",
                evidence="XTuner raises at config load: 1 validation error for DapoMathJudgerConfig — Assertion "
                "failed, eos_token string must not be empty",
                line=obj.kw_line("eos_token"),
                fix="Pass the model's EOS token string (e.g. from the tokenizer).",
                anchor="judgers",
                source="xtuner/v1/rl/judger/dapo_math.py:307-308",
            )
        ob_ok, overlong = (
            lit_field(obj, "enable_overlong_buffer") if "enable_overlong_buffer" in obj.kwargs else (False, None)
        )
        if not (ob_ok and overlong):
            continue
        for i, name in enumerate(("max_response_len", "overlong_buffer_len", "overlong_penalty_factor", "tokenizer")):
            v, _ = field_val(obj, name)
            ok, py = lit(v)
            if ok and py is None:
                c.add(
                    "config.dapo_judger_invalid",
                    "blocker",
                    "config_load_error",
                    f"DapoMathJudgerConfig(enable_overlong_buffer=True) without {name}",
                    evidence=f"XTuner raises at config load: 1 validation error for DapoMathJudgerConfig — "
                    f"Assertion failed, {name} is required.",
                    line=obj.line,
                    fix=f"Pass {name}=... or set enable_overlong_buffer=False.",
                    anchor="judgers",
                    source=f"xtuner/v1/rl/judger/dapo_math.py:{326 + i}",
                )
                break
