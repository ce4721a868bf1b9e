"""The training environment's Python: found from a path or a venv/conda prefix, and asked what it has installed.

The server usually runs in a Python of its own (``uvx``, a dedicated venv) that has no XTuner, torch or backend, so
its own packages say little about the run. Given the interpreter the run uses, :func:`probe_python` runs
:mod:`.probe_child` in it — ``python -I`` (isolated: no user site, no ``PYTHON*`` variables, no working directory on
``sys.path``), stdin closed after the request, a hard timeout, output capped — and reads back what it found. Nothing
is imported there beyond the standard library.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from pydantic import BaseModel, Field

from ..core import ToolInputError

CHILD_SOURCE = (Path(__file__).with_name("probe_child.py")).read_text(encoding="utf-8")
MAX_OUTPUT = 1024 * 1024
#: Executable names accepted as a Python interpreter (what venv, conda and distributions install).
PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")


class XtunerInstall(BaseModel):
    """Which XTuner an environment has, told by its files (``__version__`` is 0.2.0 with or without V1)."""

    location: str = Field(description="Directory of the xtuner package")
    v1_rl: bool = Field(description="The V1 RL files exist (CLI, RL trainer, rollout worker)")
    v1_rl_files: dict[str, bool] = Field(default_factory=dict, description="Each V1 RL file checked, and found")
    install_kind: str = Field(description="editable | site_packages | source_on_path")
    source_url: str | None = Field(default=None, description="PEP 610 direct_url of the install, if recorded")
    git_commit: str | None = Field(default=None, description="Commit of the checkout (or of a pip VCS install)")
    git_ref: str | None = None
    commit_from: str | None = Field(default=None, description="git_checkout | pip_vcs_url")


class PythonEnv(BaseModel):
    """The interpreter whose packages were probed."""

    target: str = Field(description="server: this server's Python; training: the one given")
    executable: str
    python_version: str = ""
    prefix: str = ""
    is_venv: bool = False
    is_conda: bool = False
    scripts_dir: str = Field(default="", description="Directory of the interpreter (venv bin/, where `ray` lives)")


def resolve_python(python: str | None, prefix: str | None) -> Path | None:
    """The interpreter to probe: ``python`` itself, or ``<prefix>/bin/python`` (``Scripts\\python.exe`` on Windows)."""
    if python is None and prefix is None:
        return None
    if python is not None and prefix is not None:
        raise ToolInputError("python_and_prefix", "give either python or python_prefix, not both", "Pass one of them.")
    if prefix is not None:
        root = Path(os.path.expanduser(prefix))
        if not root.is_dir():
            raise ToolInputError(
                "python_prefix_not_found",
                f"python_prefix {prefix!r} is not a directory",
                "Pass the venv or conda environment directory ($VIRTUAL_ENV or $CONDA_PREFIX of the training shell).",
            )
        candidates = [root / "bin" / "python", root / "bin" / "python3", root / "Scripts" / "python.exe"]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise ToolInputError(
                "python_not_in_prefix",
                f"no bin/python or bin/python3 under {prefix!r}",
                "Pass the interpreter itself with python=<path>.",
            )
        return _checked(found)
    return _checked(Path(os.path.expanduser(python or "")))


def _checked(path: Path) -> Path:
    """Only a regular executable file named like a Python interpreter is ever run."""
    if not PYTHON_NAME.match(path.name):
        raise ToolInputError(
            "python_not_interpreter",
            f"{str(path)!r} is not named like a Python interpreter (python, python3, python3.11)",
            "Pass the training environment's interpreter, e.g. /opt/venv/bin/python.",
        )
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ToolInputError(
            "python_not_found",
            f"{str(path)!r} is not an executable file",
            "Check the path (`which python` in the training shell).",
        )
    return path


def probe_python(python: Path, packages: list[tuple[str, tuple[str, ...], str | None]], timeout: float) -> dict:
    """Run the probe in ``python``; returns its report, or {"error": why} when it could not answer."""
    request = json.dumps({"packages": [[n, list(d), m] for n, d, m in packages]})
    try:
        out = subprocess.run(
            [str(python), "-I", "-c", CHILD_SOURCE],
            input=request,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
            cwd="/",
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{python} did not answer within {timeout:g}s"}
    except OSError as exc:
        return {"error": f"{python} could not run: {exc}"}
    if out.returncode != 0:
        tail = (out.stderr or "").strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        return {"error": f"{python} failed: {tail[0][:300]}"}
    try:
        data = json.loads(out.stdout[:MAX_OUTPUT])
    except ValueError:
        return {"error": f"{python} answered something that is not the probe's JSON"}
    return data if isinstance(data, dict) else {"error": "unexpected probe answer"}
