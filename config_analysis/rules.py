"""The rules behind inspect_config: XTuner's validation, applied to a statically evaluated config.

:func:`analyse` parses and evaluates the config (never executing it), then applies the rules by area — fields
(:mod:`.rules_fields`), environment (:mod:`.rules_env`), trainer (:mod:`.rules_intervals`,
:mod:`.rules_trainer`), rollout (:mod:`.rules_rollout`), tasks (:mod:`.rules_tasks`), resources
(:mod:`.rules_resources`) — and collects the settings (:mod:`.settings`). Every rule cites the XTuner ``path:line``
at ``InternLM/xtuner@b934f46`` it predicts, and quotes the message XTuner would raise or log.
"""

from __future__ import annotations

from typing import TypedDict

from ..core import Finding, dedupe_findings, sort_findings
from ..xtuner_rules import classes as xc
from .env_fixes import EnvFileUse, EnvFixer
from .env_reads import EnvRead
from .field_values import field_val
from .patches import SourcePatcher
from .report import REF, CPUPool, ResourcePool, Setting, TaskInfo
from .rule_context import SRC_CONFIG_PY, Ctx, describe_unres
from .rules_env import backend_from_env, check_backend_env, check_env
from .rules_fields import check_objects
from .rules_intervals import check_trainer_validator
from .rules_resources import check_pg_strategies, collect_resources
from .rules_rollout import check_rollout
from .rules_tasks import check_dapo_judgers, data_paths, describe_tasks
from .rules_trainer import check_evaluation, check_losses, check_trace
from .settings import collect_settings
from .values import Coll, Lit, Obj, Val
from .view import ConfigView

__all__ = ["Analysis", "analyse", "data_paths", "not_python_finding"]

SRC_CLI_BUILD = "xtuner/v1/train/cli/rl.py:62"


class Analysis(TypedDict, total=False):
    """What the rules found in a config: the pieces of inspect_config's result. ``findings``, ``trainer_found`` and
    ``mode`` are always there; the rest only as far as the config could be read (the trainer's part with a
    trainer object)."""

    findings: list[Finding]
    trainer_found: bool
    mode: str
    backend: str | None
    env_reads: list[EnvRead]
    settings: list[Setting]
    unchecked: list[str]
    trainer_class: str
    tasks: list[TaskInfo]
    trace_enabled: bool | None
    resources: list[ResourcePool]
    cpu_pools: list[CPUPool]


def load_error(fid: str, title: str, evidence: str, location: str, fix: str, source: str = SRC_CONFIG_PY) -> Finding:
    """A blocker raised while XTuner loads the config file, before any rule on its contents can apply."""
    return Finding(
        id=fid,
        severity="blocker",
        category="config_load_error",
        title=title,
        evidence=evidence,
        location=location,
        fix=fix,
        reference=REF + "baserltrainerconfig",
        source=source,
        owner="config_edit",
    )


def not_python_finding(real: str, suffix: str) -> Finding:
    """XTuner compares Path.suffix with ".py" exactly (xtuner/v1/utils/config.py:17): other files never load."""
    return load_error(
        "config.not_python",
        "Only Python (.py) configs work for XTuner RL",
        "A YAML config loads as a plain mapping, so cfg.trainer.build is an empty addict Config and the "
        "run fails with TypeError: 'Config' object is not callable."
        if suffix in ("yaml", "yml")
        else "XTuner raises NotImplementedError: Only python/yaml type config are supported now!",
        real.rsplit("/", 1)[-1],
        "Write the config as a .py file that builds `trainer = RLColocateTrainerConfig(...)`.",
        "xtuner/v1/utils/config.py:17-28",
    )


def analyse(view: ConfigView, patch_path: str | None = None, env_file: EnvFileUse | None = None) -> Analysis:
    """Apply XTuner's rules to a config read once (:mod:`.view`); returns the pieces of a Result (used by preflight
    too). Runs inside the class table the view was evaluated with. Fixes that are an exact edit carry a diff whose
    header names ``patch_path`` (default the file name); with ``env_file`` (the launch env file the planned env was
    read from), fixes of the environment are diffs of that file."""
    name = view.name
    if view.syntax is not None:
        f = load_error(
            "config.syntax_error",
            f"The config is not valid Python: {view.syntax.message}",
            f"line {view.syntax.line}: {view.syntax.text}",
            f"{name}:{view.syntax.line}",
            "Fix the syntax error; XTuner executes the file to load it.",
        )
        return {"findings": [f], "trainer_found": False, "mode": "unknown"}
    if view.evaluation is None:
        f = load_error(
            "config.syntax_error",
            "The config cannot be parsed",
            view.unread_reason,
            name,
            "Simplify the file; XTuner executes it to load it.",
        )
        return {"findings": [f], "trainer_found": False, "mode": "unknown"}
    ev = view.evaluation
    env_fix = EnvFixer(view, env_file) if env_file is not None else None
    c = Ctx(
        view.path or name,
        ev,
        dict(view.env) if view.env is not None else None,
        SourcePatcher.of(view, patch_path),
        env_fix,
    )
    env = c.env
    check_env(c)
    check_objects(c)
    check_losses(c)
    check_pg_strategies(c)
    check_dapo_judgers(c)
    backend, flags_on = backend_from_env(env)
    check_backend_env(c, [o for o in ev.objects if o.cls == "RolloutConfig"], backend, flags_on)
    out: Analysis = {"backend": backend, "env_reads": ev.env_reads}
    trainer = view.trainer
    out["trainer_found"] = trainer is not None
    if isinstance(trainer, Obj):
        out.update(trainer_rules(c, trainer, backend))
    else:
        check_not_a_trainer(c, trainer)
        out["mode"] = "unknown"
    out["findings"] = sort_findings(dedupe_findings(c.findings))
    out["settings"] = c.settings
    out["unchecked"] = c.unchecked
    return out


def check_not_a_trainer(c: Ctx, trainer: Val | None) -> None:
    """`trainer` is missing, a plain value or unresolved: the CLI's cfg.trainer.build() cannot work (or be checked)."""
    if trainer is None:
        c.add(
            "config.missing_trainer",
            "blocker",
            "config_load_error",
            "The config defines no module-level variable named `trainer`",
            evidence="The RL CLI loads the file with Config.fromfile and calls cfg.trainer.build(); a missing key "
            "is an empty addict Config, so the run fails with TypeError: 'Config' object is not callable.",
            line=None,
            fix="Assign the trainer config to a module-level variable named exactly `trainer`, e.g. "
            "`trainer = RLColocateTrainerConfig(...)`.",
            anchor="baserltrainerconfig",
            source=f"{SRC_CLI_BUILD}; {SRC_CONFIG_PY}",
        )
    elif isinstance(trainer, Lit | Coll):
        c.add(
            "config.trainer_not_config",
            "blocker",
            "config_load_error",
            "`trainer` is a plain value, not a trainer config object",
            evidence=f"`trainer = {trainer.expr}`: addict turns it into a Config, so cfg.trainer.build() fails "
            "with TypeError: 'Config' object is not callable.",
            line=c.ev.bound_at.get("trainer"),
            fix="Use `trainer = RLColocateTrainerConfig(...)` (or RLDisaggregatedTrainerConfig).",
            anchor="baserltrainerconfig",
            source=SRC_CLI_BUILD,
        )
    else:
        c.add(
            "config.trainer_unresolved",
            "warning",
            "config_load_error",
            "`trainer` cannot be resolved statically, so the trainer checks were skipped",
            evidence=describe_unres(trainer),
            line=c.ev.bound_at.get("trainer"),
            fix="Assign `trainer = RLColocateTrainerConfig(...)` unconditionally at module level.",
            anchor="baserltrainerconfig",
            source=SRC_CLI_BUILD,
        )


def trainer_rules(c: Ctx, trainer: Obj, backend: str | None) -> Analysis:
    """The rules on a trainer config object, in XTuner's order; returns the trainer's part of the result."""
    out: Analysis = {"trainer_class": trainer.cls}
    mode = {xc.COLOCATED_TRAINER: "colocated", xc.DISAGGREGATED_TRAINER: "disaggregated"}.get(trainer.cls, "unknown")
    out["mode"] = mode
    if mode == "unknown":
        c.add(
            "config.trainer_class_unknown",
            "warning",
            "config_load_error",
            f"`trainer` is a {trainer.cls}, not an RL trainer config",
            evidence="The RL CLI expects RLColocateTrainerConfig or RLDisaggregatedTrainerConfig.",
            line=trainer.line,
            fix="Use RLColocateTrainerConfig or RLDisaggregatedTrainerConfig.",
            anchor="baserltrainerconfig",
            source=SRC_CLI_BUILD,
        )
        return out
    check_trainer_validator(c, trainer)
    check_evaluation(c, trainer)
    r, _ = field_val(trainer, "rollout_config")
    if isinstance(r, Obj):
        check_rollout(c, trainer, r, mode, backend)
    out["tasks"] = describe_tasks(c, trainer, mode)
    out["trace_enabled"] = check_trace(c, trainer)
    collect_settings(c, trainer, mode)
    out["resources"], out["cpu_pools"] = collect_resources(c, trainer, mode)
    return out
