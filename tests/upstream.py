"""What the tests read from outside the package: XTuner's source at the commit the server is checked against (a
checkout at ``XTUNER_MIRROR``, tests skip where it is absent) and the benchmark scripts under ``bench/``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("XTUNER_MIRROR", "/work/.mirror/InternLM+xtuner/repo"))
COMMIT = "b934f46"


def mirror_available() -> bool:
    return (MIRROR / "HEAD").exists() or (MIRROR / ".git").exists()


def rl_example_configs() -> list[str]:
    """Every RL example config upstream: ``rl_*`` and the agentic / reasoning RL ones (the others are SFT and
    pretraining)."""
    if not mirror_available():
        return []
    out = subprocess.run(
        ["git", "-C", str(MIRROR), "ls-tree", "--name-only", "HEAD", "examples/v1/config/"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    return sorted(p for p in out if "rl_" in p.rsplit("/", 1)[-1])


def bench_module(name: str) -> types.ModuleType:
    """``bench/<name>.py`` loaded as module ``name`` (registered, so its dataclasses find their module)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
