"""engine='ray' against a REAL local Ray cluster (the shared session fixture from tests/ray_cluster.py)."""

from __future__ import annotations

import time

import pytest
from xtuner_rl_mcp.core import PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations.check_reward_data import Params, run

from .ray_cluster import dead_address
from .test_check_reward_data import GOOD, _corpus_lines

pytestmark = pytest.mark.ray


def _ctx(root, environ=None, events=None) -> RunContext:
    def progress(done, total=None, message=None):
        if events is not None:
            events.append((done, total))

    return RunContext(paths=PathPolicy.from_strings([root]), progress=progress, environ=environ or {})


def test_ray_engine_matches_local(ray_cluster, tmp_path):
    ray = pytest.importorskip("ray")
    (tmp_path / "big.jsonl").write_bytes(b"".join(_corpus_lines(30_000)))  # ~9.8 MB: split into byte ranges
    (tmp_path / "small.jsonl").write_bytes(GOOD + b"{oops\n" + GOOD)
    events: list = []
    common = {"path": str(tmp_path), "max_examples_per_code": 30, "detail": "full"}
    remote = run(Params(engine="ray", ray_address=ray_cluster.gcs_address, **common), _ctx(tmp_path, events=events))
    local = run(Params(**common), _ctx(tmp_path))
    assert remote.engine == "ray" and remote.workers == len(ray_cluster.nodes)
    assert not ray.is_initialized()  # the driver connection is closed again
    assert (remote.lines, remote.valid, remote.invalid, remote.bytes) == (
        local.lines,
        local.valid,
        local.invalid,
        local.bytes,
    )
    assert remote.errors_by_code == local.errors_by_code and remote.errors_by_code["invalid_json"] >= 1
    assert [(e.file, e.line, e.code, e.schema_error) for e in remote.examples] == [
        (e.file, e.line, e.code, e.schema_error) for e in local.examples
    ]
    assert remote.stats == local.stats
    assert [f.id for f in remote.findings] == [f.id for f in local.findings]
    total = sum(f.bytes for f in local.files)
    assert events and events[-1] == (total, total) and len(events) >= 4  # start, ranges ..., done


def test_ray_address_from_environment(ray_cluster, tmp_path):
    (tmp_path / "d.jsonl").write_bytes(GOOD * 3)
    r = run(Params(path="d.jsonl", engine="ray"), _ctx(tmp_path, {"RAY_ADDRESS": ray_cluster.gcs_address}))
    assert r.ok and r.engine == "ray" and r.valid == 3


def test_ray_errors_are_structured_and_fast(tmp_path):
    (tmp_path / "d.jsonl").write_bytes(GOOD)
    cases = [
        ({}, "ray_address_required"),
        ({"ray_address": "http://127.0.0.2:8265"}, "ray_address_invalid"),
        ({"ray_address": "auto"}, "ray_address_invalid"),
        ({"ray_address": dead_address()}, "ray_unreachable"),
        ({"ray_address": "192.0.2.1:6379"}, "ray_address_not_allowed"),  # TEST-NET: refused before any packet
    ]
    for extra, code in cases:
        t0 = time.monotonic()
        with pytest.raises(ToolInputError) as e:
            run(Params(path="d.jsonl", engine="ray", **extra), _ctx(tmp_path))
        assert e.value.code == code, extra
        assert time.monotonic() - t0 < 10


def test_ray_task_is_shipped_by_value():
    """Workers need msgspec only: the task pickles without any reference to this package."""
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from xtuner_rl_mcp.scanners.ray_scan import _ray_task_function

    payload = cloudpickle.dumps(_ray_task_function())
    assert b"xtuner_rl_mcp.tools" not in payload and b"scan_ranges_remote" in payload
    assert b"xtuner_rl_mcp.scanners" not in payload


@pytest.mark.anyio
async def test_ray_engine_through_mcp(ray_cluster, mcp_client, tmp_path):
    """Through the server: the scan runs on a worker thread, which must be able to drive Ray."""
    (tmp_path / "d.jsonl").write_bytes(GOOD * 2 + b"[]\n")
    r = await mcp_client.call_tool(
        "check_reward_data", {"path": "d.jsonl", "engine": "ray", "ray_address": ray_cluster.gcs_address}
    )
    assert not r.is_error, r.content[0].text
    out = r.structured_content
    assert out["engine"] == "ray" and out["errors_by_code"] == {"not_an_object": 1} and out["valid"] == 2
