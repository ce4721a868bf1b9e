"""Rules on the planned launch env: required env vars, casts that fail on load, XTUNER_USE_* backend flags."""

from __future__ import annotations

from .rule_context import SRC_CONFIG_PY, Ctx
from .values import Obj

BACKEND_FLAGS = ("XTUNER_USE_SGLANG", "XTUNER_USE_VLLM", "XTUNER_USE_LMDEPLOY")  # precedence order
FLAG_VLLM = "XTUNER_USE_VLLM"

# XTuner sources cited by these rules (all at b934f46).
SRC_BACKEND = "xtuner/v1/rl/rollout/worker.py:457-470"
SRC_VLLM = "xtuner/v1/rl/rollout/vllm.py:135-142"


def check_env(c: Ctx) -> None:
    if c.env is not None:
        reported: set[str] = set()
        lookups = sorted(c.ev.env_lookups, key=lambda x: x[4])  # unconditional reads first
        for name, line, required, supplied, conditional in lookups:
            if required and not supplied and name not in reported:
                reported.add(name)
                when = " if that branch runs" if conditional else ""
                fix, note, patch = missing_fix(c, name)
                c.add(
                    "config.env_var_missing",
                    "warning" if conditional else "blocker",
                    "missing_env_var_or_path",
                    f"The config requires env var {name}, which the planned env does not set",
                    evidence=f"`os.environ[{name!r}]` at line {line}: XTuner's Config.fromfile executes the file, "
                    f"so loading fails with KeyError: '{name}'{when}.{note}",
                    line=line,
                    fix=fix,
                    patch=patch,
                    anchor="baserltrainerconfig",
                    source=SRC_CONFIG_PY,
                    owner="environment",
                )
    for line, expr, err in c.ev.invalid_casts:
        patch = c.noted(c.env_fix.cast(c.ev, line, expr)) if c.env_fix is not None else None
        where = "".join(c.env_fix.where(n) for n, ln, *_ in c.ev.env_lookups if ln == line) if c.env_fix else ""
        c.add(
            "config.invalid_value_cast",
            "blocker",
            "config_load_error",
            f"`{expr}` fails while the config loads",
            evidence=f"{err} (line {line}){where}; Config.fromfile executes the file.",
            line=line,
            fix="Fix the value (often an env var holding a non-number).",
            patch=patch,
            anchor="baserltrainerconfig",
            source=SRC_CONFIG_PY,
            owner="environment",
        )


def missing_fix(c: Ctx, name: str) -> tuple[str, str, str | None]:
    """(fix, evidence note, patch) for a required variable the planned env lacks. A value the server cannot know
    is never invented: only a variable the launch script sets but never exports gets a patch (``export``)."""
    fix = f"Export {name}=... in the launch environment (before `ray start` when workers need it)."
    fixer = c.env_fix
    if fixer is None:
        return fix, "", None
    env_file = fixer.file
    set_only = env_file.shell_only.get(name)
    if set_only is not None and set_only.value is not None:
        note = f" {env_file.name}:{set_only.line} sets {name} but never exports it, so Python does not see it."
        return f"Export it: `export {name}=...` ({env_file.name}:{set_only.line}).", note, fixer.export(name)
    note = f" {env_file.name} does not set it."
    return f"Add `export {name}=<value>` to {env_file.name}, before the launch commands.", note, None


def backend_from_env(env: dict[str, str] | None) -> tuple[str | None, list[str]]:
    if env is None:
        return None, []
    on = [f for f in BACKEND_FLAGS if env.get(f, "0") == "1"]
    names = {"XTUNER_USE_SGLANG": "sglang", "XTUNER_USE_VLLM": "vllm", "XTUNER_USE_LMDEPLOY": "lmdeploy"}
    return (names[on[0]] if on else None), on


def check_backend_env(c: Ctx, rollout_objs: list[Obj], backend: str | None, flags_on: list[str]) -> None:
    """RolloutConfig reads XTUNER_USE_* when it is constructed, i.e. while XTuner loads the config file."""
    if c.env is None or not rollout_objs:
        return
    line = rollout_objs[0].line
    fixer = c.env_fix
    where = "".join(fixer.where(f) for f in flags_on) if fixer is not None else ""
    unknown = sorted(set(BACKEND_FLAGS) & fixer.view.env_unknown) if fixer is not None else []
    if backend is None and unknown:  # set in the env file, but in a branch or from a command: not knowable
        c.unchecked.append(
            f"backend flag: {', '.join(unknown)} set in {fixer.file.name if fixer else 'the env file'}"
            " to a value not known statically"
        )
        return
    if backend is None:
        c.add(
            "config.backend_flag_needed",
            "info",
            "backend_flag_missing_or_multiple",
            "No rollout backend flag in the supplied env: RolloutConfig reads XTUNER_USE_* while the config loads",
            evidence="XTuner raises at config load: 1 validation error for RolloutConfig — Assertion failed, "
            "Unsupported rollout backend: . Please set XTUNER_USE_SGLANG, XTUNER_USE_VLLM, or XTUNER_USE_LMDEPLOY "
            "to 1.",
            line=line,
            fix="Export exactly one of XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1 before `ray start` and in the "
            'launch shell (value must be exactly "1").',
            anchor="rolloutconfig",
            source=SRC_BACKEND,
            owner="backend_install",
            patch=fixer.backend_needed() if fixer is not None else None,
        )
    elif len(flags_on) > 1:
        c.add(
            "config.backend_flags_multiple",
            "warning",
            "backend_flag_missing_or_multiple",
            f"Several backend flags are set ({', '.join(flags_on)}); {backend} wins",
            evidence="RolloutConfig.rollout_backend checks SGLANG, then VLLM, then LMDEPLOY and takes the first "
            f"flag equal to '1'{where}.",
            line=line,
            fix="Set only the flag of the backend you installed.",
            anchor="rolloutconfig",
            source=SRC_BACKEND,
            owner="backend_install",
            patch=fixer.backend_multiple(flags_on) if fixer is not None else None,
        )
    if backend == "vllm":
        c.add(
            "config.vllm_backend_unsupported",
            "blocker",
            "backend_unsupported",
            "vLLM rollout cannot start at this XTuner version",
            evidence="XTuner raises when rollout workers start: NotImplementedError: vLLM rollout topology has not "
            f"been verified after topology refactor{fixer.where(FLAG_VLLM) if fixer is not None else ''}.",
            line=line,
            fix="Use XTUNER_USE_LMDEPLOY=1 or XTUNER_USE_SGLANG=1 instead.",
            anchor="rolloutconfig",
            source=SRC_VLLM,
            owner="backend_install",
            patch=fixer.backend_instead_of_vllm() if fixer is not None else None,
        )
