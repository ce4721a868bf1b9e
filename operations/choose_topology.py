"""choose_topology: pick colocated sync / colocated async / disaggregated for an XTuner GRPO run and size it.

One call turns cluster shape, model size and run goals into a topology decision with reasons, the config classes
to use, worker/CPU/memory sizing that passes XTuner's own Ray checks (``resource_rules``), rollout TP/EP that
satisfies the engine divisibility rules, a per-GPU memory estimate, a paste-ready config and a Mermaid diagram.
Planned from the user's ``config``, the paste-ready config is that file with only the values the plan must force
changed, each listed with its rule (``planning/config_report.py``); without a model size the memory estimate is
left unknown and the rest is planned.

The engines live in ``planning/`` (topology decision, engine and group sizing, Ray fit, memory) and ``launch/``
(config skeleton, diagram); this module is the tool's face. Sources (InternLM/xtuner@b934f46) are cited next to
each rule; the decision guidance follows ``docs/zh_cn/rl/advanced_tutorial/rl_trainer.md``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..config_analysis.patches import patch_label
from ..config_analysis.view import read_view
from ..core import RunContext, ToolInputError, ToolResult, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Detail, Finding, cap, dedupe_findings, sort_findings
from ..launch.config_skeleton import build_snippet
from ..launch.diagram import build_diagram
from ..planning.citations import WF
from ..planning.cluster_fit import ClusterShape, resolve_cluster
from ..planning.config_plan import ConfigReading, request_updates
from ..planning.config_report import ConfigPlanReport, config_report
from ..planning.model_size import load_model_info
from ..planning.models import (
    Alternative,
    Backend,
    ClusterFit,
    MemoryEstimate,
    ModelInfo,
    Priority,
    ProduceStrategyPlan,
    ResourcesPlan,
    RolloutPlan,
    Topology,
    TrainingPlan,
)
from ..planning.topology import config_classes
from ..planning.topology_plan import TopologyPlan, plan_topology
from ..xtuner_rules import resources as rr

# --------------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------------


class Params(BaseModel):
    model_config = params_model_config()

    config: str | None = Field(
        default=None,
        max_length=4096,
        description="Your RL config (.py) to plan from",
    )
    nodes: int | None = Field(
        default=None, ge=1, le=4096, description="Machines with accelerators; not with use_cluster"
    )
    gpus_per_node: int | None = Field(default=None, ge=1, le=64, description="Default 8 (GPU) or 16 (NPU, forced)")
    accelerator: Literal["GPU", "NPU"] = Field(default="GPU")
    cpus_per_node: float | None = Field(default=None, gt=0, le=100000, description="Ray CPUs; enables the fit check")
    memory_gib_per_node: float | None = Field(
        default=None, gt=0, le=1e6, description="Ray `memory` (not RAM); enables the fit check"
    )
    use_cluster: bool = Field(default=False, description="Read nodes, CPUs, memory from live Ray")
    ray_address: str | None = Field(
        default=None, max_length=512, description="For use_cluster; default RAY_ADDRESS or local"
    )
    ray_timeout_s: float = Field(default=10.0, ge=0.5, le=60, description="Bound for the use_cluster probe")
    model_path: str | None = Field(
        default=None, max_length=4096, description="HF model dir (size, layers, heads, experts)"
    )
    params_b: float | None = Field(
        default=None, gt=0, le=10000, description="Billions (rough); neither: no memory estimate"
    )
    max_prompt_len: int = Field(default=1024, ge=1, le=2_000_000)
    max_response_len: int = Field(default=4096, ge=1, le=2_000_000)
    pack_max_length: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Default: context rounded up, >= 16384"
    )
    prompt_repeat_k: int = Field(default=8, ge=1, le=1024, description="GRPO group size")
    train_batch_size: int = Field(default=64, ge=1, le=1_000_000, description="Prompt groups per step")
    priority: Priority = Field(
        default="simplicity",
        description="simplicity: easiest; throughput: busy rollout; on_policy: never stale",
    )
    long_tail_responses: bool = Field(default=False, description="A few responses far longer (stall sync rollout)")
    backend: Backend = Field(default="lmdeploy")
    topology: Topology | None = Field(default=None, description="Force instead of choosing")
    rollout_gpus: int | None = Field(default=None, ge=1, description="Disaggregated: rollout share, rest train")
    tensor_parallel_size: int | None = Field(default=None, ge=1, le=256, description="Force rollout TP")
    expert_parallel_size: int | None = Field(default=None, ge=1, le=1024, description="Force rollout EP")
    sp_size: int = Field(default=1, ge=1, le=1024, description="Training sequence parallel")
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=4096, description="Default 80 (GPU), 64 (NPU)")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, lt=1, description="Rollout engine share; default 0.8"
    )
    sync_weights_interval: int = Field(
        default=1, ge=1, le=100000, description="Steps per weight sync; intervals below round up to a multiple"
    )
    total_train_steps: int = Field(default=100, ge=1, le=10_000_000)
    enable_evaluate: bool = Field(default=True)
    evaluate_step: int | None = Field(default=None, ge=1)
    checkpoint_interval: int | None = Field(default=None, ge=1)
    hf_interval: int | None = Field(default=None, ge=1, description="Steps between HF saves")
    judger_cpu_workers: int = Field(
        default=1, ge=0, le=1024, description="1-CPU judger actors outside GPU groups; 0 = in the driver"
    )
    detail: Detail = Field(
        default="normal",
        description="Failing fit rows/rules only (summary: no snippet, diagram); full: all",
    )


# --------------------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------------------


class Result(ToolResult):
    topology: Topology
    rationale: list[str]
    alternatives: list[Alternative]
    trainer_config_class: str
    agent_loop_manager_class: str
    task_spec_class: str
    produce_strategy: ProduceStrategyPlan
    replay_buffer_class: str
    resources: ResourcesPlan
    ray_requirements: rr.RayRequirements
    cluster_fit: ClusterFit
    rollout: RolloutPlan
    training: TrainingPlan
    model: ModelInfo
    memory: MemoryEstimate
    config_snippet: str
    diagram: str
    from_config: ConfigPlanReport | None = Field(
        default=None,
        description="With `config`: every value kept, changed (rule), added, from env or assumed; staleness; patch",
    )
    findings: list[Finding]
    findings_omitted: int = 0


# --------------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------------


def run(params: Params, ctx: RunContext) -> Result:
    ctx.progress(0, 4, "reading model")
    model = load_model_info(params, ctx)
    reading = None
    if params.config is not None and params.nodes is not None and not params.use_cluster:
        params, reading = _read_config(params, ctx, params.nodes)  # its accelerator decides the node shape
    shape, early = resolve_cluster(params, ctx)
    if params.config is not None and reading is None:
        params, reading = _read_config(params, ctx, shape.nodes)
    plan = plan_topology(params, model, shape, early, ctx, reading)
    ctx.progress(3, 4, "writing config")
    snippet, diagram = _render(params, model, shape, plan)
    report = None
    if reading is not None:
        label = patch_label(reading.view.path, ctx.paths.roots, reading.view.name)
        report, snippet = config_report(reading, plan, params, snippet, label, ctx.limits.check)
        plan.findings += [_not_written(reading, text) for text in report.not_applied]
    if params.detail == "summary":
        snippet = diagram = ""
    findings = sort_findings(dedupe_findings(plan.findings))
    blockers = [f for f in findings if f.severity == "blocker"]
    findings, omitted = cap(findings, DEFAULT_LIST_CAP)
    cluster_fit = _cluster_fit(plan, shape, params.detail)
    summary = _summary(plan, shape, blockers, report)
    ctx.progress(4, 4, "done")
    cls = config_classes(plan.topology)
    return Result(
        summary=summary,
        topology=plan.topology,
        rationale=plan.rationale,
        alternatives=plan.alternatives,
        trainer_config_class=cls.trainer,
        agent_loop_manager_class=cls.agent_loop_manager,
        task_spec_class=cls.task_spec,
        produce_strategy=plan.strategy,
        replay_buffer_class=cls.replay_buffer,
        resources=plan.resources,
        ray_requirements=plan.ray_requirements,
        cluster_fit=cluster_fit,
        rollout=plan.rollout,
        training=plan.training,
        model=model,
        memory=plan.memory,
        config_snippet=snippet,
        diagram=diagram,
        from_config=report,
        findings=findings,
        findings_omitted=omitted,
    )


def _read_config(params: Params, ctx: RunContext, nodes: int) -> tuple[Params, ConfigReading]:
    """The user's config read once with the plan's environment (WORLD_SIZE = its nodes), and the request it sets."""
    assert params.config is not None
    env = {"WORLD_SIZE": str(nodes)}
    view = read_view(params.config, ctx.paths, env)
    if view.plan_why_not:
        raise ToolInputError(
            "config_unreadable",
            f"config {params.config!r}: {view.plan_why_not}",
            "Fix the config (inspect_config explains), or plan without `config`.",
        )
    upd, reading = request_updates(view, env, set(params.model_fields_set), params.model_dump())
    return params.model_copy(update=upd), reading


def _not_written(reading: ConfigReading, text: str) -> Finding:
    return Finding(
        id="topo.config_value_not_written",
        severity="warning",
        category="other",
        title=f"A value the plan needs could not be written into {reading.view.name}",
        evidence=text,
        location=reading.view.name,
        fix="Edit it by hand as stated; the plan's figures assume the value it names.",
        reference=f"{WF}#topologies",
        owner="config_edit",
    )


def _render(params: Params, model: ModelInfo, shape: ClusterShape, plan: TopologyPlan) -> tuple[str, str]:
    """A new paste-ready config for the plan (replaced by the user's edited file when planning from one) and the
    Mermaid diagram."""
    groups = plan.resources.groups
    snippet = build_snippet(
        plan.topology,
        params,
        groups,
        plan.rollout,
        plan.training,
        plan.strategy,
        shape.accelerator,
        model.is_moe,
        shape.nodes,
    )
    diagram = build_diagram(
        plan.topology,
        shape.nodes,
        shape.per_node,
        groups,
        plan.ray_requirements.external_pools,
        plan.rollout,
        shape.accelerator,
        shape.cpus_per_node,
    )
    return snippet, diagram


def _cluster_fit(plan: TopologyPlan, shape: ClusterShape, detail: Detail) -> ClusterFit:
    """Fit rows to show; unless detail is full, passing rows and passing rollout rules are left out (counted)."""
    shown_rows = plan.fit_rows
    rows_omitted = 0
    if detail != "full":
        # Passing checks are implied by fits=True / no blocker; 'full' lists them too.
        shown_rows = [r for r in plan.fit_rows if not r.ok]
        rows_omitted = len(plan.fit_rows) - len(shown_rows)
        kept = [r for r in plan.rollout.rules if not r.ok]
        plan.rollout.rules_omitted = len(plan.rollout.rules) - len(kept)
        plan.rollout.rules = kept
    return ClusterFit(source=shape.source, fits=plan.fits, rows=shown_rows, rows_omitted=rows_omitted)


def _summary(plan: TopologyPlan, shape: ClusterShape, blockers: list[Finding], report: ConfigPlanReport | None) -> str:
    """The topology and its numbers first, then the Ray need and fit, then what the user's config keeps."""
    topology, acc = plan.topology, shape.accelerator
    train_n, rollout_n = plan.training.num_workers, plan.rollout_workers
    tp, ep = plan.rollout.tensor_parallel_size, plan.rollout.expert_parallel_size
    trainer_cls = config_classes(topology).trainer
    layout = (
        f"{train_n} train + {rollout_n} rollout {acc} workers"
        if topology == "disaggregated"
        else f"{train_n} shared {acc} workers"
    )
    req = plan.ray_requirements
    need = f"Ray needs {req.accelerators_total:g} {acc}s, {req.min_cluster_cpus:g} CPUs, {req.min_cluster_memory_gib:g} GiB"
    fit_txt = {None: "fit not checked", True: "fits the cluster", False: "does NOT fit the cluster"}[plan.fits]
    text = (
        f"{topology} with {trainer_cls}, {layout}, rollout tp={tp} ep={ep}, {plan.strategy.class_name} "
        f"(staleness ≤ {plan.strategy.effective_stale_threshold_steps} step(s)); {need}, {fit_txt}"
    )
    text += _memory_words(plan)
    if report is not None:
        text += _config_words(report)
    text += f"; {len(blockers)} blocker(s)"
    if blockers:
        text += f", first: {blockers[0].title}"
    return text


def _memory_words(plan: TopologyPlan) -> str:
    m = plan.memory
    if m.basis == "unknown":
        return "; memory not estimated (pass model_path or params_b)"
    if m.train_total_range_gib is not None:
        lo, hi = m.train_total_range_gib
        return f"; training memory ~{m.train_total_gib:g} GiB per accelerator (rough, {lo:g}–{hi:g}: params_b only)"
    return ""


def _config_words(report: ConfigPlanReport) -> str:
    """What planning from the config kept and changed, the first change, and the env the numbers depend on."""
    if report.snippet_basis == "skeleton":
        text = f"; from {report.config}: a new config ({report.basis_why.split(':', 1)[0]})"
    else:
        text = (
            f"; from {report.config}: {len(report.kept)} value(s) kept, {len(report.changed)} changed, "
            f"{len(report.added)} added"
        )
        first = (report.changed + report.added)[:1]
        if first:
            text += f" ({first[0]})"
    depends = [e for e in report.environment if e.plan_depends and e.value_source == "set by the plan"]
    if depends:
        text += "; depends on " + ", ".join(f"{e.name}={e.plan_value}" for e in depends) + " at launch"
    return text
