"""build_rl_command: a complete, shell-safe launch plan for an XTuner V1 RL run. It writes text; it never runs it.

The plan (env, argv, ``ray start`` lines) is rendered by :mod:`..launch.plan`, the scripts by :mod:`..launch.script`,
and checked by :mod:`..launch.plan_checks` against a static read of the config (:mod:`..launch.config_facts`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..cluster.env import Backend
from ..core import RunContext, ToolResult, ToolSpec, params_model_config
from ..core.findings import DEFAULT_LIST_CAP, Finding, cap, count_severities
from ..launch import plan
from ..launch.config_facts import TrainerKind, read_config
from ..launch.plan import Entry, RayStart
from ..launch.plan_checks import plan_findings
from ..launch.ray_need import RayNeed, need_from_text, need_text
from ..launch.script import build_script, build_worker_script, log_file_pattern
from ..launch.shell import export_lines, join_command

DESCRIPTION = """\
Writes a complete, shell-safe launch plan for an XTuner V1 RL (GRPO) run: the env to export (exactly one \
XTUNER_USE_* flag, the other two unset), the RL CLI argv and one quoted command line, `ray start` commands for the \
head and the other nodes, and a bash script that raises `ulimit -n`, exports before `ray start`, waits until Ray \
shows every GPU and the CPUs/memory XTuner needs (computed from the config, in the summary), then runs the CLI with \
a log file. Checks the config statically and reports problems as findings. Never executes anything.
Use when: you need the command or script to launch an RL run (single or multi-node) after planning and checks.
Not for: checking a live Ray cluster (use probe_environment), validating reward data (use check_reward_data), or \
a whole go/no-go (use preflight)."""


class Params(BaseModel):
    model_config = params_model_config()

    config: str = Field(description="Path of the RL Python config; it must define a module-level `trainer`")
    backend: Backend = Field(description="Rollout backend: lmdeploy, sglang or vllm (vllm cannot start at b934f46)")
    model_path: str | None = Field(
        default=None, description="Model directory, exported as MODEL_PATH (omitted: not exported)"
    )
    data_path: str | None = Field(default=None, description="Training data (JSONL), exported as DATA_PATH")
    eval_data_path: str | None = Field(default=None, description="Evaluation data (JSONL), exported as EVAL_DATA_PATH")
    work_dir: str | None = Field(
        default=None, description="Output directory: passed as --work-dir and exported as WORK_DIR"
    )
    num_workers: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Training workers (--num-workers, colocated configs only); default nodes × gpus_per_node",
    )
    nodes: int = Field(default=1, ge=1, le=10_000, description="Number of nodes in the Ray cluster")
    gpus_per_node: int = Field(default=8, ge=1, le=1024, description="GPUs Ray advertises on each node")
    head_address: str | None = Field(
        default=None, description="Host name or IPv4 address of the head node; required when nodes > 1"
    )
    ray_port: int = Field(default=6379, ge=1, le=65535, description="Ray head (GCS) port")
    extra_env: dict[str, str] = Field(
        default_factory=dict,
        description="More variables to export before `ray start`, in order; may override the per-backend defaults. "
        "Refused: names the plan sets itself (XTUNER_USE_*, WORK_DIR, MODEL_PATH, DATA_PATH, EVAL_DATA_PATH, "
        "WORLD_SIZE, RAY_ADDRESS) and names that change how bash runs the script (PATH, IFS, BASH*, ENV, ...)",
    )
    python: str = Field(
        default="python",
        description="Python interpreter: a plain name (python3) or a path (/opt/venv/bin/python), used as one word",
    )
    entry: Entry = Field(
        default="module",
        description="module: python -m xtuner.v1.train.cli.rl; script: python xtuner/v1/train/cli/rl.py "
        "(run from the XTuner repo root)",
    )
    check_paths: bool = Field(
        default=False,
        description="Check that the local paths exist with the right kind (inside the server's allowed roots)",
    )
    allow_unsupported: bool = Field(
        default=False, description="Downgrade the vLLM blocker to a warning (it fails at this XTuner commit)"
    )
    wait_timeout_s: int = Field(
        default=600, ge=1, le=86_400, description="How long the script waits for all GPUs to join the Ray cluster"
    )
    ray_num_cpus: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Pin `ray start --num-cpus` on every node (default: Ray detects)"
    )
    ray_memory_gib: float | None = Field(
        default=None, gt=0, le=1e6, description="Pin `ray start --memory` (GiB) on every node (default: Ray detects)"
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
    env_origin: dict[str, str] = Field(description="Why each exported or unset variable is there, with its source")
    exports: str = Field(description="The unset/export lines, shell-quoted, for every node")
    argv: list[str] = Field(description="The RL command, one element per argument")
    command: str = Field(description="The RL command as one shell-quoted line (run after the exports and Ray start)")
    ray_start: RayStart
    script: str = Field(description="Complete bash launch script for the head node")
    ray_need: RayNeed = Field(description="GPUs, CPUs and memory Ray must offer for XTuner's checks, from the config")
    log_file: str = Field(description="Where the script appends the run's output (timestamp filled in at run time)")
    findings: list[Finding]
    findings_omitted: int = 0
    notes: list[str]


def run(params: Params, ctx: RunContext) -> Result:
    """Validate, read the config statically, and assemble env, argv, Ray commands, script and findings."""
    plan.validate(params)
    total = params.nodes * params.gpus_per_node
    facts = read_config(params.config, ctx.paths)
    ctx.progress(1, 3, "config analysed")

    passed = plan.workers_passed(params, facts, total)
    env, unset, origin = plan.plan_env(params)
    name = params.config.rsplit("/", 1)[-1]
    need = need_from_text(
        name, facts.text if not facts.syntax_error else None, env, passed, params.nodes, params.gpus_per_node
    )
    exports = export_lines(env, unset)
    argv = plan.rl_argv(params, passed)
    head_argv, worker_argv = plan.ray_start_argv(params)
    worker_script = build_worker_script(params, exports, worker_argv, total) if worker_argv else None
    script = build_script(params, exports, head_argv, argv, total, need)

    findings = plan_findings(params, facts, env, total, passed, ctx.paths, need)
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
        trainer_kind=facts.trainer,
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
        notes=plan.launch_notes(params, facts, total, passed) + _need_notes(params, need),
    )


def _summary(params: Params, passed: int | None, need: RayNeed, findings: list[Finding], counts: dict[str, int]) -> str:
    """The decision first (launch or not, and what Ray must offer), then the counts and the first blocker."""
    shape = f"{params.nodes} node(s) × {params.gpus_per_node} GPUs" + (
        f", --num-workers {passed}" if passed is not None else ""
    )
    if need.known:
        ray = f"Ray must offer {need_text(need)}"
        if params.nodes > 1:
            ray += f" ({need.per_node_cpus} CPUs, {need.per_node_memory_gib:g} GiB per node)"
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
            f"XTuner's placement-group check needs {need_text(need)} free in Ray ({need.arithmetic}; "
            f"{need.source}). The script stops before the run if `ray status` shows less. To pin Ray's logical "
            f"resources pass ray_num_cpus={need.per_node_cpus} and ray_memory_gib={need.per_node_memory_gib:g} "
            "(per node; `ray start --num-cpus/--memory`)."
        )
    return notes


SPEC = ToolSpec("build_rl_command", "Build an XTuner RL launch plan", DESCRIPTION, Params, Result, run)
