"""build_rl_command: a complete, shell-safe launch plan for an XTuner V1 RL run. It writes text; it never runs it.

The plan follows XTuner main@b934f46: the RL CLI (``xtuner/v1/train/cli/rl.py``) connects to an already running Ray
cluster, backend selection comes only from ``XTUNER_USE_*`` env vars that Ray workers must inherit, and the CLI's
exit handler force-stops Ray on the node it ran on.
"""

from __future__ import annotations

import ast
import math
import os
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from ..core import (
    DEFAULT_LIST_CAP,
    Finding,
    RunContext,
    ToolInputError,
    ToolResult,
    ToolSpec,
    cap,
    count_severities,
    dedupe_findings,
    params_model_config,
    sort_findings,
)
from ..launch.shell import (
    check_env_name,
    check_program,
    check_value,
    export_lines,
    join_command,
    safe_path_arg,
)

Backend = Literal["lmdeploy", "sglang", "vllm"]
Entry = Literal["module", "script"]
TrainerKind = Literal["colocate", "disaggregated", "unknown", "missing"]

REF_CLUSTER = "xtuner-rl://references/cluster-and-backends"
REF_API = "xtuner-rl://references/api-reference"

SRC_BACKEND_FLAGS = "xtuner/v1/rl/rollout/worker.py:457-470"
SRC_VLLM = "xtuner/v1/rl/rollout/vllm.py:135-142"
SRC_CLI_OVERRIDES = "xtuner/v1/train/cli/rl.py:58-61"
SRC_CLI_BUILD = "xtuner/v1/train/cli/rl.py:62"
SRC_RAY_INIT = "xtuner/v1/train/cli/rl.py:45-46"
SRC_CLEANUP = "xtuner/v1/rl/utils/ray_utils.py:117-156"
SRC_CLI_MAIN = "xtuner/v1/train/cli/rl.py:69-71"
SRC_CONFIG_LOAD = "xtuner/v1/utils/config.py:13-29"
SRC_GPU_CHECK = "xtuner/v1/rl/utils/ray_accelerator_worker.py:106-107"
SRC_DISAGG = "xtuner/v1/train/rl_trainer.py:485-571"
SRC_RUN_RL = "examples/v1/scripts/run_rl.sh"

FLAG_NAMES: dict[str, str] = {
    "sglang": "XTUNER_USE_SGLANG",
    "vllm": "XTUNER_USE_VLLM",
    "lmdeploy": "XTUNER_USE_LMDEPLOY",
}

#: Per-backend variables the upstream launch script sets (``run_rl.sh:62-73``): (name, value or None=unset, line).
BACKEND_ENV: dict[str, list[tuple[str, str | None, int]]] = {
    "sglang": [
        ("PYTORCH_CUDA_ALLOC_CONF", None, 64),
        ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1", 65),
        ("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "False", 66),
    ],
    "lmdeploy": [("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 69)],
    "vllm": [("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 73)],
}

#: Env names the plan owns; ``extra_env`` may not set them (pass the matching parameter instead).
OWNED_ENV: dict[str, str] = {
    "XTUNER_USE_SGLANG": "backend",
    "XTUNER_USE_VLLM": "backend",
    "XTUNER_USE_LMDEPLOY": "backend",
    "WORK_DIR": "work_dir",
    "MODEL_PATH": "model_path",
    "DATA_PATH": "data_path",
    "EVAL_DATA_PATH": "eval_data_path",
    "WORLD_SIZE": "nodes",
    "RAY_ADDRESS": "(none: the plan unsets it so the CLI attaches to the cluster it starts)",
}

PATH_ENV = {
    "work_dir": "WORK_DIR",
    "model_path": "MODEL_PATH",
    "data_path": "DATA_PATH",
    "eval_data_path": "EVAL_DATA_PATH",
}

WAIT_INTERVAL_S = 2
MAX_CONFIG_BYTES = 1_000_000
_HOST_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")

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


class RayStart(BaseModel):
    head: str = Field(description="Command that starts the Ray head (run on the head node)")
    head_argv: list[str]
    worker: str | None = Field(default=None, description="Command each other node runs to join (multi-node only)")
    worker_argv: list[str] | None = None
    worker_script: str | None = Field(
        default=None, description="Bash script for each other node: the same exports, then joining the head"
    )
    expected_gpus: int = Field(description="GPUs the head's wait loop requires: nodes × gpus_per_node")


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


# --------------------------------------------------------------------------------------------------------
# Static look at the config
# --------------------------------------------------------------------------------------------------------


@dataclass
class ConfigFacts:
    """What a static read of the config file found."""

    read: bool = False
    why_not: str = ""
    trainer: TrainerKind = "unknown"
    trainer_line: int | None = None
    other_trainer_call: str | None = None  # `trainer = X(...)` with X no RL trainer config (and none named)
    required_env: dict[str, int] = field(default_factory=dict)  # os.environ["X"] -> first line
    syntax_error: str | None = None


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _bound_names(stmts: list[ast.stmt], out: dict[str, ast.AST | None], star: list[bool]) -> None:
    """Module-level name bindings (not inside functions or classes): name -> assigned value if simple."""

    def bind(target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            out[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                bind(elt, None)
        elif isinstance(target, ast.Starred):
            bind(target.value, None)

    for st in stmts:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                bind(t, st.value)
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)) and (not isinstance(st, ast.AnnAssign) or st.value):
            bind(st.target, st.value)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            for alias in st.names:
                if alias.name == "*":
                    star[0] = True
                else:
                    out[alias.asname or alias.name.split(".")[0]] = None
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[st.name] = None
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            bind(st.target, None)
            _bound_names(st.body + st.orelse, out, star)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
            _bound_names(st.body, out, star)
        elif isinstance(st, (ast.If, ast.While)):
            _bound_names(st.body + st.orelse, out, star)
        elif hasattr(st, "handlers") and hasattr(st, "finalbody"):  # try / try-except*
            _bound_names(st.body + st.orelse + st.finalbody, out, star)  # type: ignore[attr-defined]
            for handler in st.handlers:  # type: ignore[attr-defined]
                _bound_names(handler.body, out, star)
        elif type(st).__name__ == "Match":
            for case in st.cases:  # type: ignore[attr-defined]
                _bound_names(case.body, out, star)


def _required_env(tree: ast.Module) -> dict[str, int]:
    """Names read as ``os.environ["X"]`` (KeyError when unset), with the first line.

    The reads come from ``config_ast.collect_env_reads`` (shared with inspect_config). A name the file also probes
    with ``os.environ.get``, ``os.getenv`` or ``"X" in os.environ`` counts as guarded (e.g.
    ``int(os.environ["N"]) if os.environ.get("N") else None``) and is left out.
    """
    from ..config_analysis.evaluator import collect_env_reads

    found: dict[str, int] = {}
    guarded: set[str] = set()
    for read in collect_env_reads(tree):
        if read.name is None:
            continue
        if read.required:
            found.setdefault(read.name, read.line)
        else:
            guarded.add(read.name)
    for node in ast.walk(tree):  # "X" in os.environ
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            left, right = node.left, node.comparators[0]
            if (
                isinstance(left, ast.Constant)
                and isinstance(left.value, str)
                and isinstance(right, ast.Attribute)
                and right.attr == "environ"
            ):
                guarded.add(left.value)
    return {name: line for name, line in found.items() if name not in guarded}


def analyse_config_text(text: str) -> ConfigFacts:
    """Trainer kind and required env vars, from the config's source (never executed)."""
    facts = ConfigFacts(read=True)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        facts.syntax_error = f"line {exc.lineno}: {exc.msg}"
        return facts
    except (ValueError, RecursionError, MemoryError) as exc:
        facts.read, facts.why_not = False, f"config could not be parsed ({type(exc).__name__})"
        return facts
    names: dict[str, ast.AST | None] = {}
    star = [False]
    _bound_names(tree.body, names, star)
    facts.required_env = _required_env(tree)
    if "trainer" not in names:
        facts.trainer = "unknown" if star[0] else "missing"
        return facts
    value = names["trainer"]
    kind = _call_name(value) if value is not None else None
    if kind is None and isinstance(value, ast.Name):  # trainer = some_cfg
        kind = _call_name(names.get(value.id)) if names.get(value.id) is not None else None
    facts.trainer_line = getattr(value, "lineno", None)
    if kind and "RLColocateTrainerConfig" not in text and "RLDisaggregatedTrainerConfig" not in text:
        facts.other_trainer_call = kind
    if kind == "RLDisaggregatedTrainerConfig":
        facts.trainer = "disaggregated"
    elif kind == "RLColocateTrainerConfig":
        facts.trainer = "colocate"
    elif "RLDisaggregatedTrainerConfig(" in text and "RLColocateTrainerConfig(" not in text:
        facts.trainer = "disaggregated"
    elif "RLColocateTrainerConfig(" in text and "RLDisaggregatedTrainerConfig(" not in text:
        facts.trainer = "colocate"
    return facts


def _read_config(path: str, ctx: RunContext) -> ConfigFacts:
    if os.path.splitext(path)[1] != ".py":
        return ConfigFacts(why_not="config is not a .py file")
    try:
        real = ctx.paths.check(path, kind="file", what="config")
    except ToolInputError as exc:
        return ConfigFacts(why_not=exc.message)
    try:
        with open(real, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return ConfigFacts(why_not=f"config could not be read: {exc.strerror}")
    if len(data) > MAX_CONFIG_BYTES:
        return ConfigFacts(why_not=f"config is larger than {MAX_CONFIG_BYTES} bytes")
    if b"\x00" in data:
        return ConfigFacts(why_not="config contains NUL bytes (not a Python source file)")
    return analyse_config_text(data.decode("utf-8", errors="replace"))


# --------------------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------------------


def _validate(params: Params) -> None:
    check_value(params.config, "config", max_chars=4096)
    for name in PATH_ENV:
        value = getattr(params, name)
        if value is not None:
            check_value(value, name, max_chars=4096)
    check_program(params.python, "python")
    for key, value in params.extra_env.items():
        check_env_name(key)
        if key in OWNED_ENV:
            raise ToolInputError(
                "env_conflict",
                f"extra_env sets {key}, which the plan sets itself",
                f"Use the `{OWNED_ENV[key]}` parameter instead of extra_env[{key!r}].",
            )
        check_value(value, f"extra_env[{key}]", allow_empty=True)
    if params.head_address is not None:
        host = check_value(params.head_address, "head_address", max_chars=253)
        if host.startswith("-") or not set(host) <= _HOST_OK:
            raise ToolInputError(
                "invalid_head_address",
                f"head_address {host!r} is not a host name or IPv4 address",
                "Pass the head node's host name or IPv4 address (IPv6 is not supported here).",
            )
    if params.nodes > 1 and not params.head_address:
        raise ToolInputError(
            "head_address_required",
            f"nodes={params.nodes} needs head_address: the other nodes join the head at head_address:ray_port",
            "Pass head_address (the head node's host name or IP) or set nodes=1.",
        )


# --------------------------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------------------------


def _backend_findings(params: Params) -> list[Finding]:
    if params.backend != "vllm":
        return []
    allowed = params.allow_unsupported
    return [
        Finding(
            id="cmd.backend_vllm_unsupported",
            severity="warning" if allowed else "blocker",
            category="backend_unsupported",
            title="vLLM rollout cannot start at XTuner b934f46"
            + (" (allowed by allow_unsupported)" if allowed else ""),
            evidence="vLLMWorker.build_rollout_topology raises NotImplementedError "
            "('vLLM rollout topology has not been verified after topology refactor.')",
            fix="Use backend 'lmdeploy' or 'sglang'"
            + ("" if allowed else ", or pass allow_unsupported=true if you run a patched XTuner"),
            reference=f"{REF_CLUSTER}#backend-support",
            source=SRC_VLLM,
            owner="launch_command",
        )
    ]


def _config_findings(params: Params, facts: ConfigFacts) -> list[Finding]:
    out: list[Finding] = []
    suffix = os.path.splitext(params.config)[1]
    if suffix != ".py":
        what = "YAML configs load, but cfg.trainer is a plain mapping" if suffix in (".yaml", ".yml") else ""
        out.append(
            Finding(
                id="cmd.config_not_python",
                severity="blocker",
                category="config_load_error",
                title=f"config suffix {suffix or '(none)'!r}: the RL CLI needs a .py config",
                evidence=what
                or "Config.fromfile raises NotImplementedError('Only python/yaml type config are supported now!')",
                location=params.config,
                fix="Point config at a Python file that defines `trainer = RLColocateTrainerConfig(...)` "
                "or `RLDisaggregatedTrainerConfig(...)`.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source=SRC_CONFIG_LOAD,
                owner="config_edit",
            )
        )
    if not facts.read:
        return out
    if facts.syntax_error:
        out.append(
            Finding(
                id="cmd.config_syntax_error",
                severity="blocker",
                category="config_load_error",
                title="the config is not valid Python",
                evidence=facts.syntax_error,
                location=params.config,
                fix="Fix the syntax error; the CLI executes the file with importlib when it loads it.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source="xtuner/v1/utils/config.py:17-23",
                owner="config_edit",
            )
        )
        return out
    if facts.trainer == "missing":
        out.append(
            Finding(
                id="cmd.config_missing_trainer",
                severity="blocker",
                category="config_load_error",
                title="the config defines no module-level `trainer`",
                evidence="The CLI calls cfg.trainer.build(); without `trainer` it fails with "
                "TypeError: 'Config' object is not callable",
                location=params.config,
                fix="Add `trainer = RLColocateTrainerConfig(...)` (or RLDisaggregatedTrainerConfig) at module level.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source=SRC_CLI_BUILD,
                owner="config_edit",
            )
        )
    if facts.trainer == "unknown" and facts.other_trainer_call is not None:
        out.append(
            Finding(
                id="cmd.config_not_rl_trainer",
                severity="warning",
                category="config_load_error",
                title=f"`trainer` is built by {facts.other_trainer_call}, not an RL trainer config",
                evidence="The RL CLI expects RLColocateTrainerConfig or RLDisaggregatedTrainerConfig "
                "(xtuner/v1/train/rl_trainer.py:397, :485)",
                location=f"{params.config}:{facts.trainer_line}" if facts.trainer_line else params.config,
                fix="Use an RL config (trainer = RLColocateTrainerConfig(...)); SFT/pretrain configs use another CLI.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source=SRC_CLI_BUILD,
                owner="config_edit",
            )
        )
    return out


def _env_findings(params: Params, facts: ConfigFacts, env: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    if not facts.read or facts.syntax_error:
        return out
    by_name = {v: k for k, v in PATH_ENV.items()}
    for name, line in facts.required_env.items():
        if name in env:
            continue
        param = by_name.get(name)
        fix = f"Pass `{param}`." if param else f"Add {name} to extra_env (or export it in the launching shell)."
        out.append(
            Finding(
                id="cmd.config_env_var_unset",
                severity="warning",
                category="missing_env_var_or_path",
                title=f"the config reads os.environ[{name!r}] but the plan does not set it",
                evidence=f"KeyError: {name!r} while the CLI loads the config, unless {name} is already "
                "exported in the shell that runs the script",
                location=f"{params.config}:{line}",
                fix=fix,
                reference=f"{REF_CLUSTER}#env-vars-reach-ray-workers",
                source=SRC_CONFIG_LOAD,
                owner="launch_command",
            )
        )
    return out


def _workers_findings(params: Params, facts: ConfigFacts, total_gpus: int, passed: int | None) -> list[Finding]:
    out: list[Finding] = []
    if facts.trainer == "disaggregated" and params.num_workers is not None:
        out.append(
            Finding(
                id="cmd.num_workers_ignored_disagg",
                severity="warning",
                category="resource_mismatch_num_workers",
                title="--num-workers is ignored for a disaggregated config; it is left out of the command",
                evidence=f"num_workers={params.num_workers}; the CLI only applies it when cfg.trainer has "
                "`resources` (RLDisaggregatedTrainerConfig has train_resources and rollout_resources)",
                location=f"{params.config}:{facts.trainer_line}" if facts.trainer_line else params.config,
                fix="Edit train_resources.num_workers and rollout_resources.num_workers in the config "
                f"(together at most {total_gpus} GPUs).",
                reference=f"{REF_API}#rldisaggregatedtrainerconfig",
                source=SRC_CLI_OVERRIDES,
                owner="config_edit",
            )
        )
    if passed is not None and passed > total_gpus:
        out.append(
            Finding(
                id="cmd.num_workers_exceeds_gpus",
                severity="blocker",
                category="resource_mismatch_num_workers",
                title=f"num_workers={passed} exceeds the {total_gpus} GPUs of the planned cluster",
                evidence=f"nodes={params.nodes} × gpus_per_node={params.gpus_per_node} = {total_gpus}; XTuner "
                f"fails with 'Not enough available GPUS in Ray cluster, {total_gpus}.0 less than {passed}.'",
                fix=f"Set num_workers ≤ {total_gpus}, or add nodes/GPUs.",
                reference=f"{REF_CLUSTER}#resource-checks",
                source=SRC_GPU_CHECK,
                owner="launch_command",
            )
        )
    return out


def _path_shape_findings(params: Params) -> list[Finding]:
    out: list[Finding] = []
    for name in ("config", *PATH_ENV):
        value = getattr(params, name)
        if value and (value.startswith("~") or "$" in value):
            out.append(
                Finding(
                    id="cmd.path_not_expanded",
                    severity="warning",
                    category="missing_env_var_or_path",
                    title=f"{name} contains '~' or '$', which the quoted command passes literally",
                    evidence=f"{name}={value!r}: every value is single-quoted, so the shell expands nothing",
                    location=f"/{name}",
                    fix="Pass the expanded absolute path.",
                    reference=f"{REF_CLUSTER}#ray-preparation",
                    owner="launch_command",
                )
            )
    return out


def _check_path_findings(params: Params, ctx: RunContext) -> list[Finding]:
    """check_paths: each local path through the allowed-roots policy; problems are findings, never errors."""
    wanted: list[tuple[str, str, Literal["file", "dir", "any"]]] = [("config", params.config, "file")]
    for name, kind in (("model_path", "dir"), ("data_path", "any"), ("eval_data_path", "any"), ("work_dir", "dir")):
        value = getattr(params, name)
        if value is not None:
            wanted.append((name, value, kind))  # type: ignore[arg-type]
    out: list[Finding] = []
    elsewhere = "If the launch runs on another machine, check it there instead."
    for name, value, kind in wanted:
        try:
            ctx.paths.check(value, kind=kind, what=name)
            continue
        except ToolInputError as exc:
            code, message = exc.code, exc.message
        if name == "work_dir" and code == "path_not_found":
            continue  # the trainer creates its work dir
        if code == "path_outside_roots":
            severity, fid, title = "info", "cmd.path_not_checked", f"{name} is outside the allowed roots; not checked"
        elif code in ("path_not_file", "path_not_dir", "path_special_file"):
            severity, fid, title = "warning", "cmd.path_wrong_kind", f"{name} is not a {kind}"
        else:
            severity, fid, title = "warning", "cmd.path_missing", f"{name} was not found on this machine"
        relative = (
            ""
            if os.path.isabs(os.path.expanduser(value))
            else (
                f" Relative paths were checked against {ctx.paths.roots[0]}; the launch resolves them against its "
                "working directory."
            )
        )
        out.append(
            Finding(
                id=fid,
                severity=severity,  # type: ignore[arg-type]
                category="missing_env_var_or_path",
                title=title,
                evidence=message + "." + relative,
                location=f"/{name}",
                fix=f"Check {name}. {elsewhere}",
                reference=f"{REF_CLUSTER}#ray-preparation",
                owner="launch_command",
            )
        )
    return out


# --------------------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------------------


def _plan_env(params: Params) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Ordered exports, names to unset, and where each comes from."""
    env: dict[str, str] = {}
    unset: list[str] = []
    origin: dict[str, str] = {}
    flag = FLAG_NAMES[params.backend]
    for other in FLAG_NAMES.values():
        if other != flag:
            unset.append(other)
            origin[other] = (
                f"unset: a stale {other}=1 would win by precedence SGLang > vLLM > LMDeploy ({SRC_BACKEND_FLAGS})"
            )
    env[flag] = "1"
    origin[flag] = f"backend flag; only the exact value '1' counts ({SRC_BACKEND_FLAGS})"
    unset.append("RAY_ADDRESS")
    origin["RAY_ADDRESS"] = (
        f"unset: ray.init(address='auto') ({SRC_RAY_INIT}) would follow a stale RAY_ADDRESS to another cluster"
    )
    for name, value, line in BACKEND_ENV[params.backend]:
        if name in params.extra_env:
            continue
        if value is None:
            unset.append(name)
            origin[name] = f"unset for {params.backend}, as XTuner's launch script does ({SRC_RUN_RL}:{line})"
        else:
            env[name] = value
            origin[name] = f"set for {params.backend}, as XTuner's launch script does ({SRC_RUN_RL}:{line})"
    env["WORLD_SIZE"] = str(params.nodes)
    origin["WORLD_SIZE"] = (
        f"number of nodes, read by the example configs as NNODE (examples/v1/config/rl_grpo_gsm8k_judge.py:35; "
        f"{SRC_RUN_RL}:46)"
    )
    for pname, ename in PATH_ENV.items():
        value = getattr(params, pname)
        if value is not None:
            env[ename] = value
            origin[ename] = (
                f"`{pname}`; the example configs read os.environ[{ename!r}] while loading "
                "(examples/v1/config/rl_grpo_gsm8k_judge.py:29-32), even when --work-dir is passed"
            )
    for name, value in params.extra_env.items():
        env[name] = value
        origin[name] = "extra_env (caller)"
    return env, unset, origin


def _argv(params: Params, passed_workers: int | None) -> list[str]:
    if params.entry == "module":
        argv = [params.python, "-m", "xtuner.v1.train.cli.rl"]
    else:
        argv = [params.python, "xtuner/v1/train/cli/rl.py"]
    argv += ["--config", safe_path_arg(params.config)]
    if params.work_dir is not None:
        argv += ["--work-dir", safe_path_arg(params.work_dir)]
    if passed_workers is not None:
        argv += ["--num-workers", str(passed_workers)]
    return argv


def _wait_block(expected: int, timeout_s: int) -> list[str]:
    tries = max(1, math.ceil(timeout_s / WAIT_INTERVAL_S))
    return [
        f"# 3. Wait until Ray reports {expected} GPUs: at most {tries} checks, {WAIT_INTERVAL_S} s apart.",
        f"xtuner_rl_expected_gpus={expected}",
        f"xtuner_rl_max_checks={tries}",
        "xtuner_rl_check=0",
        "while true; do",
        "  xtuner_rl_check=$((xtuner_rl_check + 1))",
        "  xtuner_rl_seen=$(ray status 2>/dev/null"
        ' | awk \'$2 == "GPU" && !found { found = 1; split($1, p, "/"); print int(p[2]) }\')'
        ' || xtuner_rl_seen=""',
        '  if [ -n "$xtuner_rl_seen" ] && [ "$xtuner_rl_seen" -ge "$xtuner_rl_expected_gpus" ]; then',
        '    echo "Ray cluster shows $xtuner_rl_seen GPUs (need $xtuner_rl_expected_gpus)."',
        "    break",
        "  fi",
        '  if [ "$xtuner_rl_check" -ge "$xtuner_rl_max_checks" ]; then',
        '    echo "ERROR: Ray shows ${xtuner_rl_seen:-no} GPUs after $xtuner_rl_check checks;'
        ' need $xtuner_rl_expected_gpus. Start the other nodes or check ray status." >&2',
        "    exit 1",
        "  fi",
        f"  sleep {WAIT_INTERVAL_S}",
        "done",
    ]


def _header(title: str, params: Params, total: int) -> list[str]:
    return [
        "#!/usr/bin/env bash",
        f"# {title} — written by xtuner-rl-mcp build_rl_command for XTuner main@b934f46. Review before running.",
        f"# Backend {params.backend}; {params.nodes} node(s) × {params.gpus_per_node} GPUs = {total} GPUs.",
        "set -euo pipefail",
        "",
        "# 1. Environment, exported before `ray start` so that Ray workers on this node inherit it.",
    ]


def _build_script(params: Params, exports: list[str], head_argv: list[str], argv: list[str], total: int) -> str:
    lines = _header("XTuner RL launch, head node", params, total)
    lines += exports
    lines += [
        "",
        "# 2. Start the Ray head on this node (fails if a Ray head is already running here).",
        join_command(head_argv),
        "",
    ]
    lines += _wait_block(total, params.wait_timeout_s)
    lines += [
        "",
        "# 4. The RL run. When it exits, XTuner's exit handler runs `ray stop --force` on this node.",
        join_command(argv),
        "",
    ]
    return "\n".join(lines)


def _build_worker_script(params: Params, exports: list[str], worker_argv: list[str], total: int) -> str:
    lines = _header("XTuner RL launch, other nodes (run on each non-head node)", params, total)
    lines += exports
    lines += ["", "# 2. Join the Ray head (start the head first).", join_command(worker_argv), ""]
    return "\n".join(lines)


def _notes(params: Params, facts: ConfigFacts, total: int, passed: int | None) -> list[str]:
    notes = [
        "Nothing was executed: run `script` yourself on the head node.",
        "The env is exported before `ray start` because Ray workers inherit the raylet's environment, not the "
        "driver's; setting a backend flag only in the driver's shell fails inside the rollout actors.",
        f"When the RL CLI exits (normally, on error or on Ctrl-C/SIGTERM) its exit handler runs "
        f"`ray stop --force` on that node, stopping the head started by the script ({SRC_CLEANUP}; "
        f"registered in {SRC_CLI_MAIN}).",
        "The script does not stop an existing Ray instance; if `ray start --head` fails because one is running, "
        "stop it yourself first.",
        "Relative paths resolve against the directory the script is run from.",
    ]
    if params.nodes > 1:
        notes.append(
            f"Multi-node: run `ray_start.worker_script` on each of the other {params.nodes - 1} node(s) after the "
            f"head is up; the head's wait loop needs all {total} GPUs. Worker nodes keep their Ray running after "
            "the run; stop them yourself."
        )
    if params.entry == "script":
        notes.append(
            "entry=script: run from the XTuner repository root (the script path is relative) with XTuner "
            "installed (`pip install -e .`) or the repo root on PYTHONPATH."
        )
    if not facts.read:
        notes.append(f"The config was not analysed statically: {facts.why_not}.")
    if passed is None and facts.trainer == "disaggregated":
        notes.append(
            "Disaggregated config: --num-workers is not passed (the CLI ignores it); GPU counts come from "
            "train_resources and rollout_resources in the config."
        )
    elif passed is not None and facts.trainer == "unknown":
        notes.append(
            "The trainer type could not be determined statically; --num-workers only applies to "
            "RLColocateTrainerConfig and is ignored for RLDisaggregatedTrainerConfig."
        )
    return notes


def run(params: Params, ctx: RunContext) -> Result:
    """Validate, read the config statically, and assemble env, argv, Ray commands, script and findings."""
    _validate(params)
    total = params.nodes * params.gpus_per_node
    facts = _read_config(params.config, ctx)
    ctx.progress(1, 3, "config analysed")

    if facts.trainer == "disaggregated":
        passed: int | None = None
    else:
        passed = params.num_workers if params.num_workers is not None else total

    env, unset, origin = _plan_env(params)
    exports = export_lines(env, unset)
    argv = _argv(params, passed)
    head_argv = ["ray", "start", "--head", f"--port={params.ray_port}", f"--num-gpus={params.gpus_per_node}"]
    worker_argv = worker_script = None
    if params.nodes > 1:
        worker_argv = [
            "ray",
            "start",
            f"--address={params.head_address}:{params.ray_port}",
            f"--num-gpus={params.gpus_per_node}",
        ]
        worker_script = _build_worker_script(params, exports, worker_argv, total)
    script = _build_script(params, exports, head_argv, argv, total)

    findings = _backend_findings(params)
    findings += _config_findings(params, facts)
    findings += _workers_findings(params, facts, total, passed)
    findings += _env_findings(params, facts, env)
    findings += _path_shape_findings(params)
    if params.check_paths:
        findings += _check_path_findings(params, ctx)
    ctx.progress(2, 3, "findings collected")
    findings = sort_findings(dedupe_findings(findings))
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
        notes=_notes(params, facts, total, passed),
    )


SPEC = ToolSpec("build_rl_command", "Build an XTuner RL launch plan", DESCRIPTION, Params, Result, run)

__all__ = ["SPEC", "Params", "Result", "analyse_config_text", "run"]
