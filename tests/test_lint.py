"""The tree is ruff clean (lint and format), as the style guide asks, and mypy finds no error in the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(RUFF is None, reason="ruff not installed")
@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args):
    p = subprocess.run([RUFF, *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(MYPY is None, reason="mypy not installed")
def test_mypy_is_clean(tmp_path):
    """mypy over the whole package with pyproject.toml's [tool.mypy] settings (and its excludes only) reports no
    error. The repository root is the package, so a link names it (as in test_api)."""
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(REPO, root / "xtuner_rl_mcp")
    config, cache = str(REPO / "pyproject.toml"), str(tmp_path / "cache")
    p = subprocess.run(
        [MYPY, "--config-file", config, "--cache-dir", cache, "--no-error-summary", "-p", "xtuner_rl_mcp"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]  # 2: mypy itself failed (config, crash)
    errors = [line for line in p.stdout.splitlines() if ": error:" in line]
    assert p.returncode == 0 and errors == [], "\n".join(errors) or p.stdout[-3000:]
