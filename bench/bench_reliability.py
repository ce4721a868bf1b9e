"""Reliability: run the hostile-input suite (tests/test_hostile_*.py) once and count what it covered."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import PY, REPO, log

# ------------------------------------------------------------------------------------------------------------
# Reliability: the hostile-input suite, run and counted
# ------------------------------------------------------------------------------------------------------------


def bench_reliability(fuzz_examples: int, out: Path) -> dict[str, Any]:
    """Run tests/test_hostile_*.py once and report what it covered and how it went."""
    import xml.etree.ElementTree as ET

    sys.path.insert(0, str(REPO))
    from tests.test_hostile_corpus import build_corpus
    from tests.test_hostile_jsonrpc import hostile_frames

    with tempfile.TemporaryDirectory(prefix="hostile-count-") as tmp:
        corpus = build_corpus(Path(tmp))
        corpus_names = sorted(corpus)
        for p in (corpus["permission_000"], corpus["file_in_unreadable_dir"].parent):
            p.chmod(0o700)
    frames = list(hostile_frames())
    junit = out / "hostile-junit.xml"
    env = dict(os.environ, XTUNER_RL_FUZZ_EXAMPLES=str(fuzz_examples))
    log(f"reliability: hostile suite, {fuzz_examples} fuzz examples per tool")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:randomly", f"--junitxml={junit}", *sorted(
            str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_hostile_*.py")
        )],
        cwd=REPO, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    per_file: dict[str, dict[str, int]] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("classname", "").split(".")[-1]
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "xfailed" if "xfail" in (child.get("type", "") + child.get("message", "")) else "skipped"
            per_file.setdefault(name, {}).setdefault(outcome, 0)
            per_file[name][outcome] += 1
    return {
        "command": f"XTUNER_RL_FUZZ_EXAMPLES={fuzz_examples} python -m pytest tests/test_hostile_*.py",
        "wall_s": wall,
        "returncode": proc.returncode,
        "summary_line": (proc.stdout.strip().splitlines() or [""])[-1],
        "per_file": per_file,
        "jsonrpc_frames": len(frames),
        "corpus_files": len(corpus_names),
        "corpus_members": corpus_names,
        "fuzz_examples_per_tool": fuzz_examples,
    }
