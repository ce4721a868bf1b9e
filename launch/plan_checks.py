"""What is wrong with a launch plan before it runs: an unsupported backend, a config the RL CLI cannot load, env
vars the config needs that the plan does not set, worker counts, and paths (shape, and optionally existence)."""

from __future__ import annotations

import os

from ..cluster.env import SRC_VLLM_TOPOLOGY
from ..cluster.findings import REF as REF_CLUSTER
from ..cluster.paths import check_path
from ..config_analysis.view import ConfigView
from ..core import Finding, PathKind, PathPolicy, Severity, dedupe_findings, sort_findings
from ..xtuner_rules import resources as rr
from ..xtuner_rules.ray_need import RayNeed
from .plan import PATH_ENV, LaunchRequest

REF_API = "xtuner-rl://references/api-reference"

SRC_CLI_OVERRIDES = "xtuner/v1/train/cli/rl.py:58-61"
SRC_CLI_BUILD = "xtuner/v1/train/cli/rl.py:62"
SRC_CONFIG_LOAD = "xtuner/v1/utils/config.py:13-29"
SRC_GPU_CHECK = "xtuner/v1/rl/utils/ray_accelerator_worker.py:106-107"


def plan_findings(
    params: LaunchRequest,
    view: ConfigView,
    env: dict[str, str],
    total: int,
    passed: int | None,
    policy: PathPolicy,
    need: RayNeed | None = None,
) -> list[Finding]:
    """Every check of the plan, blockers first, without duplicates."""
    findings = _backend_findings(params)
    findings += _config_findings(params, view)
    findings += _workers_findings(params, view, total, passed)
    if need is not None:
        findings += ray_need_findings(params, need)
    findings += _env_findings(params, view, env)
    findings += _path_shape_findings(params)
    if params.check_paths:
        findings += _check_path_findings(params, policy)
    return sort_findings(dedupe_findings(findings))


def _backend_findings(params: LaunchRequest) -> list[Finding]:
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
            source=SRC_VLLM_TOPOLOGY,
            owner="launch_command",
        )
    ]


def _config_findings(params: LaunchRequest, view: ConfigView) -> list[Finding]:
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
    if not view.read:
        return out
    if view.syntax_error:
        out.append(
            Finding(
                id="cmd.config_syntax_error",
                severity="blocker",
                category="config_load_error",
                title="the config is not valid Python",
                evidence=view.syntax_error,
                location=params.config,
                fix="Fix the syntax error; the CLI executes the file with importlib when it loads it.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source="xtuner/v1/utils/config.py:17-23",
                owner="config_edit",
            )
        )
        return out
    if view.facts.trainer == "missing":
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
    if view.facts.trainer == "unknown" and view.facts.other_trainer_call is not None:
        out.append(
            Finding(
                id="cmd.config_not_rl_trainer",
                severity="warning",
                category="config_load_error",
                title=f"`trainer` is built by {view.facts.other_trainer_call}, not an RL trainer config",
                evidence="The RL CLI expects RLColocateTrainerConfig or RLDisaggregatedTrainerConfig "
                "(xtuner/v1/train/rl_trainer.py:397, :485)",
                location=f"{params.config}:{view.facts.trainer_line}" if view.facts.trainer_line else params.config,
                fix="Use an RL config (trainer = RLColocateTrainerConfig(...)); SFT/pretrain configs use another CLI.",
                reference=f"{REF_CLUSTER}#the-config-file-must-define-trainer",
                source=SRC_CLI_BUILD,
                owner="config_edit",
            )
        )
    return out


def _env_findings(params: LaunchRequest, view: ConfigView, env: dict[str, str]) -> list[Finding]:
    out: list[Finding] = []
    if not view.read or view.syntax_error:
        return out
    by_name = {v: k for k, v in PATH_ENV.items()}
    for name, line in view.facts.required_env.items():
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


def _workers_findings(params: LaunchRequest, view: ConfigView, total_gpus: int, passed: int | None) -> list[Finding]:
    out: list[Finding] = []
    if view.facts.trainer == "disaggregated" and params.num_workers is not None:
        out.append(
            Finding(
                id="cmd.num_workers_ignored_disagg",
                severity="warning",
                category="resource_mismatch_num_workers",
                title="--num-workers is ignored for a disaggregated config; it is left out of the command",
                evidence=f"num_workers={params.num_workers}; the CLI only applies it when cfg.trainer has "
                "`resources` (RLDisaggregatedTrainerConfig has train_resources and rollout_resources)",
                location=f"{params.config}:{view.facts.trainer_line}" if view.facts.trainer_line else params.config,
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


def _path_shape_findings(params: LaunchRequest) -> list[Finding]:
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


def _check_path_findings(params: LaunchRequest, policy: PathPolicy) -> list[Finding]:
    """check_paths: each local path through the allowed-roots policy; problems are findings, never errors."""
    wanted: list[tuple[str, str, PathKind]] = [("config", params.config, "file")]
    optional: tuple[tuple[str, str | None, PathKind], ...] = (
        ("model_path", params.model_path, "dir"),
        ("data_path", params.data_path, "any"),
        ("eval_data_path", params.eval_data_path, "any"),
        ("work_dir", params.work_dir, "dir"),
    )
    wanted += [(name, value, kind) for name, value, kind in optional if value is not None]
    out: list[Finding] = []
    elsewhere = "If the launch runs on another machine, check it there instead."
    for name, value, kind in wanted:
        look = check_path(policy, value, what=name, kind=kind)
        if look.real is not None:
            continue
        code, message = look.code, look.message
        if name == "work_dir" and code == "path_not_found":
            continue  # the trainer creates its work dir
        severity: Severity
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
                f" Relative paths were checked against {policy.roots[0]}; the launch resolves them against its "
                "working directory."
            )
        )
        out.append(
            Finding(
                id=fid,
                severity=severity,
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


def ray_need_findings(params: LaunchRequest, need: RayNeed) -> list[Finding]:
    """Pinned ``ray start --num-cpus/--memory`` below what XTuner's placement-group check needs."""
    if not need.known:
        return []  # why is in ray_need.why_unknown and the summary
    out: list[Finding] = []
    nodes = params.nodes
    for fid, flag, pinned, needed, per_node, unit in (
        (
            "cmd.ray_cpus_pinned_short",
            "ray_num_cpus",
            params.ray_num_cpus,
            float(need.cpus),
            need.uniform_node_cpus,
            "CPUs",
        ),
        (
            "cmd.ray_memory_pinned_short",
            "ray_memory_gib",
            params.ray_memory_gib,
            need.memory_gib,
            need.uniform_node_memory_gib,
            "GiB",
        ),
    ):
        if pinned is None or pinned >= per_node:
            continue
        out.append(
            Finding(
                id=fid,
                severity="blocker",
                category="ray_resources_insufficient",
                title=f"{flag}={pinned:g} on each of {nodes} node(s) is below the {per_node:g} {unit} a node needs "
                f"(the worker bundles it holds, and {needed:g} {unit} in total for XTuner's placement-group check)",
                evidence=f"{need.arithmetic}. XTuner fails with 'Not enough available "
                f"{'CPUs' if unit == 'CPUs' else 'memory'} in Ray cluster, ... less than ...'",
                fix=f"Pass {flag}={per_node:g} (per node) or more, or leave it unset so Ray detects the machine; "
                "or lower num_cpus_per_worker / cpu_memory_per_worker in the config.",
                reference=f"{REF_CLUSTER}#resource-checks",
                source=rr.SRC_PG_CPU if unit == "CPUs" else rr.SRC_PG_MEMORY,
                owner="launch_command",
            )
        )
    return out
