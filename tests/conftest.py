"""Shared fixtures: a real in-memory MCP client in both protocol eras, sample-data locations."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Test workers share the machine's cores (``-n 2`` on two): numerical libraries keep to one thread each, or their
# own pools fight the other worker for the same cores (a report-model fit took 4x longer that way).
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

REPO = Path(__file__).resolve().parents[1]
#: Real XTuner GSM8K samples from the steering repo; tests that need them skip when absent.
SHARED_DATA = Path(os.environ.get("XTUNER_RL_SHARED", REPO.parent / "shared")) / "data" / "xtuner-gsm8k-example"
SAMPLES = REPO / "references" / "samples"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "gsm8k_train_example_data.jsonl").is_file():
        pytest.skip(f"real XTuner GSM8K samples not found under {SHARED_DATA}")
    return SHARED_DATA


def make_server(*roots: Path, specs=None, policy=None):
    """The full server over ``roots``; ``policy``: what the operator allowed at start (default: from the env)."""
    from xtuner_rl_mcp.core import PathPolicy
    from xtuner_rl_mcp.server.app import build_server

    return build_server(PathPolicy.from_strings([str(r) for r in roots] or [os.getcwd()]), specs=specs, policy=policy)


@pytest.fixture(params=["auto", "legacy"])
async def mcp_client(request, tmp_path):
    """A real MCP client bound to the full server; allowed roots: tmp_path, the samples and shared data."""
    from mcp import Client

    roots = [tmp_path, SAMPLES]
    if SHARED_DATA.is_dir():
        roots.append(SHARED_DATA)
    async with Client(make_server(*roots), mode=request.param, raise_exceptions=True) as client:
        yield client


PYTHON = sys.executable
from .ray_cluster import ray_cluster, ray_head  # noqa: E402, F401  (one shared session Ray cluster for all tests)
