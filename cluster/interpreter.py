"""The training environment's interpreter, run only when the operator allowed it, and what it may say back.

By default nothing in a training environment is run (:mod:`.training_env` reads its files). When the operator
started the server with ``--allow-python PATH`` (``OperatorPolicy.interpreters``: exact resolved paths) and the
environment's interpreter resolves to one of them, :func:`run_locator` may run it to confirm what was read: the
resolved binary itself (a real ELF or Mach-O file; a ``#!`` script is refused), with ``-I -S`` (isolated, and no
``site``, so no ``.pth`` line of the environment runs), fed :mod:`.probe_child` with the site-packages directories
to search, under :func:`..core.run_bounded` (own session, process group killed at the end, output capped while it
streams, memory limit, the call's deadline) and a minimal environment (no credential of the server's reaches it).
Its answer is untrusted input: :class:`ChildAnswer` validates types and sizes, and an answer that does not name
the interpreter that was run as its executable is not used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core import OperatorPolicy, PathPolicy, ToolInputError, open_guarded, run_bounded
from ..core.limits import CallLimits

CHILD_SOURCE = (Path(__file__).with_name("probe_child.py")).read_text(encoding="utf-8")
MAX_ANSWER_BYTES = 256 * 1024
#: First bytes of a native executable: ELF, Mach-O (32/64-bit, both byte orders) and universal Mach-O.
NATIVE_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xfe\xed\xfa\xcf",
    b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
)
#: What the child gets as its environment: nothing of the server's (tokens, Ray credentials, PYTHON* settings).
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


class XtunerInstall(BaseModel):
    """Which XTuner an environment has, told by its files (``__version__`` is 0.2.0 with or without V1)."""

    location: str = Field(description="Directory of the xtuner package")
    v1_rl: bool | None = Field(description="The V1 RL files exist (null: not read, outside the allowed roots)")
    v1_rl_files: dict[str, bool] = Field(default_factory=dict, description="Each V1 RL file checked, and found")
    install_kind: str = Field(description="editable | site_packages | source_on_path")
    found_by: str = Field(default="", description="What pointed at it (a site-packages dir, .pth, finder, egg-link)")
    source_url: str | None = Field(default=None, description="PEP 610 direct_url of the install, if recorded")
    git_commit: str | None = Field(default=None, description="Commit of the checkout (or of a pip VCS install)")
    git_ref: str | None = None
    commit_from: str | None = Field(default=None, description="git_checkout | pip_vcs_url")
    outside_roots: bool = Field(
        default=False, description="Found outside the allowed roots, so its files were not read"
    )


class PythonEnv(BaseModel):
    """The Python environment whose packages were reported."""

    target: Literal["server", "training"] = Field(description="server: this server's Python; training: the one given")
    learned_from: Literal["read", "run"] = Field(
        default="read", description="read: its files, statically; run: its interpreter was also run (operator-allowed)"
    )
    executable: str
    python_version: str = ""
    prefix: str = ""
    is_venv: bool = False
    is_conda: bool = False
    scripts_dir: str = Field(default="", description="The environment's bin/ (where its `ray` lives)")
    site_packages: list[str] = Field(default_factory=list, description="Directories read for packages")
    notes: list[str] = Field(default_factory=list, description="What was not read or run, and why")


class ChildPackage(BaseModel):
    """One package row of the child's answer."""

    model_config = ConfigDict(strict=True, extra="ignore")

    name: str = Field(pattern=r"^[\w.-]{1,100}$")
    version: str | None = Field(default=None, pattern=r"^[\w.+!-]{1,100}$")
    distribution: str | None = Field(default=None, pattern=r"^[\w.-]{1,200}$")
    module_found: bool | None = None


class ChildAnswer(BaseModel):
    """What the child may say: checked for types and sizes, nothing else it prints is used."""

    model_config = ConfigDict(strict=True, extra="ignore")

    executable: str = Field(max_length=4096)
    python_version: str = Field(pattern=r"^\d{1,2}\.\d{1,3}\.\d{1,4}$")
    packages: list[ChildPackage] = Field(max_length=100)
    xtuner_location: str | None = Field(default=None, pattern=r"^/[^\x00]{0,4095}$")


class RunOutcome(BaseModel):
    """A run of the interpreter: its validated answer, or why there is none."""

    interpreter: str
    answer: ChildAnswer | None = None
    error: str = ""


def environment_interpreter(prefix: Path, policy: OperatorPolicy) -> tuple[Path | None, str]:
    """The resolved interpreter of the environment at ``prefix`` when the operator allowed it, else (None, why)."""
    candidates = [prefix / "bin" / "python", prefix / "bin" / "python3", prefix / "Scripts" / "python.exe"]
    present = [c for c in candidates if os.path.lexists(c)]
    if not present:
        return None, f"no bin/python or bin/python3 in {prefix}, so nothing to run"
    allowed = set(policy.interpreters)
    for candidate in present:
        real = Path(os.path.realpath(candidate))
        if real in allowed:
            return real, ""
    shown = Path(os.path.realpath(present[0]))
    return None, (
        f"not run: {present[0]} (resolved {shown}) is not an interpreter the operator allowed; "
        f"start the server with --allow-python {shown} to let it run"
    )


def check_native_binary(interpreter: Path, policy: OperatorPolicy) -> None:
    """Refuse anything but a regular native executable (a ``#!`` script would run its first line's program)."""
    allowed = PathPolicy(roots=tuple(policy.interpreters))
    with open_guarded(allowed, interpreter, what="interpreter") as fh:
        head = fh.read(4)
    if head[:2] == b"#!" or head not in NATIVE_MAGIC:
        raise ToolInputError(
            "interpreter_not_native",
            f"{interpreter} is not a native executable (ELF or Mach-O); a script is never run",
            "Allow the real interpreter binary with --allow-python (`python -c 'import sys; print(sys.executable)'`).",
        )
    if not os.access(interpreter, os.X_OK):
        raise ToolInputError("interpreter_not_executable", f"{interpreter} is not executable")


def run_locator(
    interpreter: Path,
    packages: list[tuple[str, tuple[str, ...], str | None]],
    search_paths: list[str],
    timeout: float,
    limits: CallLimits,
) -> RunOutcome:
    """Run the locator in ``interpreter`` (already allowed and checked) over ``search_paths``; never raises."""
    request = json.dumps({"packages": [[n, list(d), m] for n, d, m in packages], "paths": search_paths})
    done = run_bounded(
        [str(interpreter), "-I", "-S", "-c", CHILD_SOURCE],
        timeout=timeout,
        input=request.encode("utf-8"),
        env=CHILD_ENV,
        output_cap=MAX_ANSWER_BYTES,
        limits=limits,
    )
    outcome = RunOutcome(interpreter=str(interpreter))
    if done.error:
        outcome.error = done.error
    elif done.cancelled:
        outcome.error = "the call was cancelled while the interpreter ran"
    elif done.timed_out:
        outcome.error = f"{interpreter} did not answer within {timeout:g}s (stopped)"
    elif done.truncated:
        outcome.error = f"{interpreter} printed more than {MAX_ANSWER_BYTES:,} bytes (stopped)"
    elif done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        outcome.error = f"{interpreter} failed: {tail[0][:300]}"
    else:
        outcome.answer, outcome.error = _validated(done.stdout, interpreter)
    return outcome


def _validated(stdout: bytes, interpreter: Path) -> tuple[ChildAnswer | None, str]:
    try:
        answer = ChildAnswer.model_validate(json.loads(stdout.decode("utf-8")))
    except (ValueError, ValidationError):
        return None, f"{interpreter} answered something that is not the locator's answer; ignored"
    if answer.executable != str(interpreter):
        return None, f"{interpreter} reported another executable ({answer.executable[:200]!r}); answer ignored"
    return answer, ""
