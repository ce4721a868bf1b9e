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
from ..launch.script import build_script, build_worker_script
from ..launch.shell import export_lines, join_command

DESCRIPTION = """\
Writes a complete, shell-safe launch plan for an XTuner V1 RL (GRPO) run: the env to export (exactly one \
XTUNER_USE_* flag, the other two unset), the RL CLI argv and one quoted command line, `ray start` commands for the \
head and the other nodes, and a bash script that exports before `ray start`, waits until Ray shows every GPU, then \
runs the CLI. Checks the config statically (trainer defined, colocated vs disaggregated, env vars it reads) and \
reports problems as findings. Never executes anything.
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
    exports = export_lines(env, unset)
    argv = plan.rl_argv(params, passed)
    head_argv, worker_argv = plan.ray_start_argv(params)
    worker_script = build_worker_script(params, exports, worker_argv, total) if worker_argv else None
    script = build_script(params, exports, head_argv, argv, total)

    findings = plan_findings(params, facts, env, total, passed, ctx.paths)
    ctx.progress(2, 3, "findings collected")
    counts = count_severities(findings)
    shown, omitted = cap(findings, DEFAULT_LIST_CAP)

    verdict = "do not launch yet" if counts["blocker"] else "review, then run `script` on the head node"
    summary = (
        f"{params.backend} launch plan, {params.nodes} node(s) × {params.gpus_per_node} GPUs"
        f"{f', --num-workers {passed}' if passed is not None else ''}: {counts['blocker']} blocker(s), "
        f"{counts['warning']} warning(s); {verdict}."
    )
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
        ),
        script=script,
        findings=shown,
        findings_omitted=omitted,
        notes=plan.launch_notes(params, facts, total, passed),
    )


SPEC = ToolSpec("build_rl_command", "Build an XTuner RL launch plan", DESCRIPTION, Params, Result, run)
