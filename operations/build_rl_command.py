"""build_rl_command: a complete, shell-safe launch plan for an XTuner V1 RL run. It writes text; it never runs it.

The plan (env, argv, ``ray start`` lines) is rendered by :mod:`..launch.plan`, the scripts by :mod:`..launch.script`,
and checked by :mod:`..launch.plan_checks` against the config read once (:mod:`..config_analysis.view`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..cluster.env import Backend
from ..config_analysis.trainer_facts import TrainerKind
from ..config_analysis.view import ConfigView, read_view, unread_view
from ..core import RunContext, ToolInputError, ToolResult, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Finding, cap, count_severities
from ..launch import plan
from ..launch.plan import Entry, RayStart
from ..launch.plan_checks import plan_findings
from ..launch.script import build_script, build_worker_script, log_file_pattern
from ..launch.shell import export_lines, join_command
from ..xtuner_rules.ray_need import RayNeed


class Params(BaseModel):
    model_config = params_model_config()

    config: str = Field(description="RL config file (.py) defining a module-level `trainer`")
    backend: Backend = Field(description="vllm cannot start at b934f46")
    model_path: str | None = Field(default=None, description="→ MODEL_PATH")
    data_path: str | None = Field(default=None, description="Training JSONL → DATA_PATH")
    eval_data_path: str | None = Field(default=None, description="Eval JSONL → EVAL_DATA_PATH")
    work_dir: str | None = Field(default=None, description="--work-dir, → WORK_DIR")
    num_workers: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="--num-workers (colocated only); default nodes × gpus_per_node",
    )
    nodes: int = Field(default=1, ge=1, le=10_000)
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    head_address: str | None = Field(default=None, description="Host or IPv4; required when nodes > 1")
    ray_port: int = Field(default=6379, ge=1, le=65535)
    extra_env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra exports before `ray start`, in order; plan-set names, PATH, IFS, BASH*, ENV refused",
    )
    python: str = Field(default="python", description="Interpreter name or path, used as one word")
    entry: Entry = Field(
        default="module",
        description="module: -m xtuner.v1.train.cli.rl; script: xtuner/v1/train/cli/rl.py from the repo",
    )
    check_paths: bool = Field(default=False)
    allow_unsupported: bool = Field(default=False, description="vLLM blocker becomes a warning")
    wait_timeout_s: int = Field(default=600, ge=1, le=86_400, description="Script's wait for all GPUs to join Ray")
    ray_num_cpus: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Pin `ray start --num-cpus`; default Ray detects"
    )
    ray_memory_gib: float | None = Field(
        default=None, gt=0, le=1e6, description="Pin `ray start --memory`; default Ray detects"
    )


class Result(ToolResult):
    backend: Backend
    entry: Entry
    nodes: int
    gpus_per_node: int
    num_workers: int | None = Field(description="Value passed as --num-workers, or null when not passed")
    trainer_kind: TrainerKind = Field(description="Trainer type found statically in the config")
    env: dict[str, str] = Field(description="Variables to export before `ray start`, in order")
    unset: list[str] = Field(description="Variables to unset before `ray start`")
    env_origin: dict[str, str] = Field(description="Why each exported or unset variable is there")
    exports: str = Field(description="The unset/export lines, shell-quoted, for every node")
    argv: list[str] = Field(description="The RL command, one element per argument")
    command: str = Field(description="The RL command, one shell-quoted line (after exports and Ray start)")
    ray_start: RayStart
    script: str = Field(description="Complete bash launch script for the head node")
    ray_need: RayNeed = Field(description="What Ray must offer for XTuner's checks, from the config")
    log_file: str = Field(description="Where the script appends the output (timestamp filled at run time)")
    findings: list[Finding]
    findings_omitted: int = 0
    notes: list[str]


def run(params: Params, ctx: RunContext, view: ConfigView | None = None) -> Result:
    """Validate, read the config statically (or take the view a caller read), and assemble env, argv, Ray
    commands, script and findings."""
    plan.validate(params)
    total = params.nodes * params.gpus_per_node
    env, unset, origin = plan.plan_env(params)
    if view is None:
        view = read_config(params.config, ctx, env)
    ctx.progress(1, 3, "config analysed")

    passed = plan.workers_passed(params, view, total)
    need = view.ray_need(passed, params.nodes, params.gpus_per_node)
    exports = export_lines(env, unset)
    argv = plan.rl_argv(params, passed)
    head_argv, worker_argv = plan.ray_start_argv(params)
    worker_script = build_worker_script(params, exports, worker_argv, total) if worker_argv else None
    script = build_script(params, exports, head_argv, argv, total, need)

    findings = plan_findings(params, view, env, total, passed, ctx.paths, need)
    ctx.progress(2, 3, "findings collected")
    counts = count_severities(findings)
    shown, omitted = cap(findings, DEFAULT_LIST_CAP)
    summary = _summary(params, passed, need, findings, counts)
    ctx.progress(3, 3, "done")
    return Result(
        summary=summary,
        backend=params.backend,
        entry=params.entry,
        nodes=params.nodes,
        gpus_per_node=params.gpus_per_node,
        num_workers=passed,
        trainer_kind=view.facts.trainer,
        env=env,
        unset=unset,
        env_origin=origin,
        exports="\n".join(exports),
        argv=argv,
        command=join_command(argv),
        ray_start=RayStart(
            head=join_command(head_argv),
            head_argv=head_argv,
            worker=join_command(worker_argv) if worker_argv else None,
            worker_argv=worker_argv,
            worker_script=worker_script,
            expected_gpus=total,
            expected_cpus=need.cpus if need.known else None,
            expected_memory_gib=need.memory_gib if need.known else None,
        ),
        script=script,
        ray_need=need,
        log_file=log_file_pattern(params),
        findings=shown,
        findings_omitted=omitted,
        notes=plan.launch_notes(params, view, total, passed) + _need_notes(params, need),
    )


def read_config(raw: str, ctx: RunContext, env: dict[str, str]) -> ConfigView:
    """The config as the launch will evaluate it (with the plan's env); unreadable: a view saying why."""
    try:
        return read_view(raw, ctx.paths, env)
    except ToolInputError as exc:
        return unread_view(raw, exc.message)


def _summary(params: Params, passed: int | None, need: RayNeed, findings: list[Finding], counts: dict[str, int]) -> str:
    """The decision first (launch or not, and what Ray must offer), then the counts and the first blocker."""
    shape = f"{params.nodes} node(s) × {params.gpus_per_node} GPUs" + (
        f", --num-workers {passed}" if passed is not None else ""
    )
    if need.known:
        ray = f"Ray must offer {need.text()}"
        if params.nodes > 1:
            ray += (
                f" (each node holds {need.per_node_cpus} CPUs, {need.per_node_memory_gib:g} GiB of worker bundles; "
                f"the same ray start on every node needs {need.uniform_node_cpus} CPUs, "
                f"{need.uniform_node_memory_gib:g} GiB)"
            )
        ray += " — the script checks it before the run"
    else:
        ray = f"Ray CPUs/memory not computed ({need.why_unknown[:120]})"
    blockers = [f for f in findings if f.severity == "blocker"]
    if blockers:
        verdict = f"do not launch yet: {counts['blocker']} blocker(s), first: {blockers[0].title}"
    else:
        verdict = f"0 blocker(s), {counts['warning']} warning(s); review, then run `script` on the head node"
    return f"{params.backend} launch on {shape}: {ray}; {verdict}."


def _need_notes(params: Params, need: RayNeed) -> list[str]:
    """Why the resource check and the log file are in the script, with the numbers."""
    notes = [
        f"The script raises `ulimit -n` to 65536 before `ray start` and appends the run's output to "
        f"{log_file_pattern(params)}, as XTuner's examples/v1/scripts/run_rl.sh does (lines 40, 148-153)."
    ]
    if need.known:
        notes.append(
            f"XTuner's placement-group check needs {need.text()} free in Ray ({need.arithmetic}; "
            f"{need.source}). The script stops before the run if `ray status` shows less. To pin Ray's logical "
            f"resources pass ray_num_cpus={need.uniform_node_cpus} and ray_memory_gib="
            f"{need.uniform_node_memory_gib:g} (`ray start --num-cpus/--memory` on every node: each node holds "
            f"{need.per_node_cpus} CPUs, {need.per_node_memory_gib:g} GiB of worker bundles, and the checks' "
            "headroom and CPU pools are cluster-wide)."
        )
    return notes
