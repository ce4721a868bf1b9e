"""probe_environment and cluster/ against real things: files in tmp_path, a real 2-node Ray cluster
(CPU-only, 8 fake GPUs per node) started by the session fixture, real placement groups held by driver processes,
dead and black-hole addresses, a token-auth head. Every Ray probe is also checked to leave no process or file."""

from __future__ import annotations

import importlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xtuner_rl_mcp.cluster import ray as rc
from xtuner_rl_mcp.cluster.env import NO_BACKEND_MESSAGE
from xtuner_rl_mcp.cluster.fit import Expected, evaluate_fit, fit_findings, requirements
from xtuner_rl_mcp.cluster.packages import check_packages
from xtuner_rl_mcp.cluster.ray_address import RayAccess
from xtuner_rl_mcp.cluster.ray_findings import ray_findings
from xtuner_rl_mcp.core import OperatorPolicy, PathPolicy, RunContext
from xtuner_rl_mcp.operations.probe_environment import Params, run

from .ray_cluster import (
    GIB,
    HEAD_IP,
    NodeSpec,
    RayCluster,
    cluster_jobs,
    dead_address,
    free_port,
    hold_placement_group,
    snapshot,
    start_ray_cluster,
)

GPU_PER_NODE = 8
#: Probe budget for a live cluster: generous, because other test runs may load this machine (the dead-address
#: tests hold the tool to its contract with short budgets).
LIVE = 30.0


def _ctx(*roots: Path, environ: dict[str, str] | None = None) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings([str(r) for r in roots]), environ=environ or {})


def _ids(result) -> set[str]:
    return {f.id for f in result.findings}


def _by_id(result, fid: str):
    return next(f for f in result.findings if f.id == fid)


def _probe(ctx: RunContext, **kw):
    if "ray_address" in kw or "env" in kw:
        kw.setdefault("timeout_s", LIVE)
    return run(Params(**kw), ctx)


def _no_side_effects(cluster: RayCluster, fn):
    """Run ``fn`` and assert the cluster's processes and temp-dir entries are exactly as before."""
    before = snapshot(cluster)
    out = fn()
    time.sleep(0.5)  # let anything the probe might have spawned show up
    after = snapshot(cluster)
    assert after.processes == before.processes, after.processes ^ before.processes
    assert after.files == before.files, after.files ^ before.files
    assert after.jobs == before.jobs, after.jobs ^ before.jobs  # no driver job registered
    assert before.jobs == cluster_jobs(cluster)  # the job list is readable at all (sanity)
    return out


# --------------------------------------------------------------------------------------------------------
# Env evaluation (planned environment via the `env` override)
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "effective", "ignored"),
    [
        ({}, None, []),
        ({"XTUNER_USE_LMDEPLOY": "1"}, "lmdeploy", []),
        ({"XTUNER_USE_LMDEPLOY": "1", "XTUNER_USE_SGLANG": "1"}, "sglang", ["lmdeploy"]),
        (
            {"XTUNER_USE_LMDEPLOY": "1", "XTUNER_USE_VLLM": "1", "XTUNER_USE_SGLANG": "1"},
            "sglang",
            ["vllm", "lmdeploy"],
        ),
        ({"XTUNER_USE_LMDEPLOY": "true", "XTUNER_USE_SGLANG": " 1"}, None, []),
    ],
)
def test_backend_flags_by_xtuner_precedence(tmp_path, env, effective, ignored):
    r = _probe(_ctx(tmp_path), checks=["env"], env=env)
    assert r.env is not None and r.env.evaluated == "override"
    assert r.env.effective_backend == effective
    assert r.env.ignored_backends == ignored
    ids = _ids(r)
    if effective is None:
        f = _by_id(r, "probe.backend_flag_missing")
        assert f.severity == "blocker" and NO_BACKEND_MESSAGE in f.evidence
        assert f.source == "xtuner/v1/rl/rollout/worker.py:457-470"
    else:
        assert "probe.backend_flag_missing" not in ids
    if ignored:
        f = _by_id(r, "probe.backend_flags_multiple")
        assert f.severity == "warning" and effective in f.title and all(b in f.title for b in ignored)
    for name, value in env.items():
        if value != "1":
            assert f"probe.backend_flag_not_one.{name}" in ids


def test_vllm_flag_is_unsupported_and_http_ray_address_is_flagged(tmp_path):
    r = _probe(_ctx(tmp_path), checks=["env"], env={"XTUNER_USE_VLLM": "1", "RAY_ADDRESS": "http://10.0.0.1:8265"})
    assert _by_id(r, "probe.backend_vllm_unsupported").category == "backend_unsupported"
    f = _by_id(r, "probe.ray_address_is_dashboard")
    assert f.severity == "blocker" and r.env.ray_address_kind == "dashboard"
    assert r.env.xtuner_vars == {"XTUNER_USE_VLLM": "1"}


@pytest.mark.parametrize(("value", "flagged"), [("1", True), ("True", True), ("true", False), ("0", False)])
def test_deterministic_needs_the_string_true(tmp_path, value, flagged):
    r = _probe(_ctx(tmp_path), checks=["env"], env={"XTUNER_USE_LMDEPLOY": "1", "XTUNER_DETERMINISTIC": value})
    assert ("probe.deterministic_flag_not_true" in _ids(r)) is flagged
    assert r.env.xtuner_vars["XTUNER_DETERMINISTIC"] == value


def test_env_paths_set_exists_kind_and_outside_roots(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    data = tmp_path / "train.jsonl"
    data.write_text("{}\n")
    env = {
        "XTUNER_USE_LMDEPLOY": "1",
        "WORK_DIR": str(tmp_path / "work"),  # not created yet: fine, XTuner creates it
        "MODEL_PATH": str(model),
        "DATA_PATH": str(data),
        "EVAL_DATA_PATH": "/etc/hostname",  # outside the allowed roots
    }
    r = _probe(_ctx(tmp_path), checks=["env"], env=env)
    paths = {p.name: p for p in r.env.paths}
    assert (paths["MODEL_PATH"].exists, paths["MODEL_PATH"].kind) == (True, "dir")
    assert (paths["DATA_PATH"].exists, paths["DATA_PATH"].kind) == (True, "file")
    assert paths["WORK_DIR"].set and paths["WORK_DIR"].exists is False
    assert paths["EVAL_DATA_PATH"].checkable is False and paths["EVAL_DATA_PATH"].exists is None
    assert not any(f.severity == "blocker" for f in r.findings), r.findings

    r2 = _probe(_ctx(tmp_path), checks=["env"], env={"XTUNER_USE_LMDEPLOY": "1", "DATA_PATH": str(tmp_path / "no")})
    assert _by_id(r2, "probe.env_path_missing.DATA_PATH").severity == "blocker"
    assert _by_id(r2, "probe.env_unset.WORK_DIR").severity == "warning"


def test_model_config_json(tmp_path):
    good = tmp_path / "qwen"
    good.mkdir()
    (good / "config.json").write_text(json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}))
    r = _probe(_ctx(tmp_path), checks=["model"], model_path=str(good))
    assert r.model.config_json and r.model.model_type == "qwen3" and r.model.architectures == ["Qwen3ForCausalLM"]
    assert r.findings == []

    bare = tmp_path / "bare"
    bare.mkdir()
    r = _probe(_ctx(tmp_path), checks=["model"], model_path=str(bare))
    assert r.model.config_json is False and _by_id(r, "probe.model_config_missing").category == "model_loading"

    r = _probe(_ctx(tmp_path), checks=["model"], model_path=str(tmp_path / "missing"))
    assert r.model.exists is False and "probe.model_path_missing" in _ids(r)

    r = _probe(_ctx(tmp_path), checks=["model"], model_path="/etc")
    assert r.model.checkable is False and r.findings == []


# --------------------------------------------------------------------------------------------------------
# Packages and binaries (found without importing)
# --------------------------------------------------------------------------------------------------------


def test_packages_and_binaries_shape(tmp_path):
    r = _probe(_ctx(tmp_path), checks=["packages", "binaries"], detail="full")
    names = {p.name for p in r.packages.items}
    for required in ("xtuner", "ray", "lmdeploy", "sglang", "vllm", "torch", "transformers", "flash_attn_3"):
        assert required in names
    assert {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc", "mathruler", "cyclopts"} <= names
    ray_pkg = next(p for p in r.packages.items if p.name == "ray")
    try:
        expected_version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        expected_version = None
    assert ray_pkg.version == expected_version and ray_pkg.installed == (expected_version is not None)
    bins = {b.name: b.path for b in r.binaries}
    assert set(bins) == {"ray", "otelcol", "otelcol-contrib", "nvidia-smi", "npu-smi"}
    import shutil

    assert bins["nvidia-smi"] == shutil.which("nvidia-smi")


def _fake_xtuner(root: Path, with_v1: bool) -> None:
    pkg = root / "xtuner"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the probe must not import xtuner')\n")
    if with_v1:
        cli = pkg / "v1" / "train" / "cli"
        cli.mkdir(parents=True)
        (cli / "rl.py").write_text("raise RuntimeError('never imported')\n")


@pytest.mark.parametrize("with_v1", [True, False])
def test_xtuner_v1_cli_is_found_on_disk_without_importing(tmp_path, monkeypatch, with_v1):
    _fake_xtuner(tmp_path / "site", with_v1)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    report = check_packages()
    assert "xtuner" not in sys.modules
    assert report.xtuner_location == str(tmp_path / "site" / "xtuner")
    assert report.xtuner_v1_rl_cli is with_v1
    r = _probe(_ctx(tmp_path), checks=["packages"], env={"XTUNER_USE_SGLANG": "1"})
    if with_v1:
        assert "probe.xtuner_without_v1" not in _ids(r)
    else:
        assert _by_id(r, "probe.xtuner_without_v1").severity == "blocker"
    if importlib.util.find_spec("sglang") is None:
        # xtuner is "installed" here, so this is the training env: a missing flagged backend is a blocker
        assert _by_id(r, "probe.backend_not_installed.sglang").severity == "blocker"


def test_tracing_planned_needs_otelcol(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no otelcol (nor anything else) on PATH
    r = _probe(_ctx(tmp_path), checks=["binaries"], expected=Expected(num_workers=1, tracing=True))
    f = _by_id(r, "probe.otelcol_missing")
    assert f.severity == "blocker" and f.category == "debug_trace_output"
    r = _probe(_ctx(tmp_path), checks=["binaries"])
    assert _by_id(r, "probe.otelcol_missing").severity == "info"


# --------------------------------------------------------------------------------------------------------
# Ray: no cluster, dead and black-hole addresses (no cluster needed)
# --------------------------------------------------------------------------------------------------------


def test_no_cluster_is_reported_not_started(tmp_path):
    env = {"RAY_TMPDIR": str(tmp_path), "XTUNER_USE_LMDEPLOY": "1"}
    r = _probe(_ctx(tmp_path), checks=["ray"], env=env)
    assert r.ray.resolution.source == "none"
    assert r.ray.resolution.address_file == str(tmp_path / "ray" / "ray_current_cluster")
    f = _by_id(r, "probe.ray_not_running")
    assert f.severity == "blocker" and f.category == "ray_not_running"
    assert not (tmp_path / "ray").exists()  # nothing started, nothing written


def test_dead_address_answers_within_timeout(tmp_path):
    addr = dead_address()
    r = _probe(_ctx(tmp_path), checks=["ray"], ray_address=addr, timeout_s=2)
    assert not r.ray.reachable and r.ray.elapsed_s <= 2 + 1.5
    f = _by_id(r, "probe.ray_unreachable")
    assert addr in f.title and "refused" in f.evidence.lower()


def test_stale_address_file(tmp_path):
    addr = dead_address()
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(addr)
    r = _probe(_ctx(tmp_path), checks=["ray"], env={"RAY_TMPDIR": str(tmp_path)})
    assert r.ray.resolution.source == "address_file" and r.ray.resolution.address == addr
    assert any("stale" in n for n in r.ray.notes)


@pytest.mark.skipif(not rc.ray_installed(), reason="needs ray for the GCS child")
def test_black_hole_address_is_killed_at_deadline(tmp_path):
    """Something accepts TCP but never speaks gRPC: the child is killed at the deadline, none is left."""
    before = _children()  # e.g. the session Ray cluster's nodes, when it is already up
    with socket.socket() as srv:
        srv.bind((HEAD_IP, 0))
        srv.listen(16)
        addr = f"{HEAD_IP}:{srv.getsockname()[1]}"
        r = _probe(_ctx(tmp_path), checks=["ray"], ray_address=addr, timeout_s=2)
    assert not r.ray.reachable and r.ray.elapsed_s <= 2 + 1.5
    assert any("no answer within" in e for e in r.ray.errors), r.ray.errors
    # No answer in time says nothing about whether Ray runs: unknown, a warning naming the retry, not "unreachable".
    timed_out = next(f for f in r.findings if f.id == "probe.ray_probe_timed_out")
    assert timed_out.severity == "warning" and "retry with a longer timeout_s" in timed_out.title
    assert "probe.ray_unreachable" not in _ids(r)
    assert _children() - before == set()


def _children() -> set[int]:
    """Live (non-zombie) child processes of this test process."""
    out = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.add(int(pid))
    return out


def test_invalid_and_ray_client_addresses(tmp_path):
    r = _probe(_ctx(tmp_path), checks=["ray"], ray_address="not an address!")
    assert r.ray.resolution.kind == "invalid" and not r.ray.reachable
    r = _probe(_ctx(tmp_path), checks=["ray"], ray_address="ray://10.0.0.1:10001")
    assert r.ray.resolution.kind == "ray_client" and "ray://" in r.ray.errors[0]


def test_server_start_does_not_import_ray():
    code = (
        "import sys\n"
        "from xtuner_rl_mcp.server.registry import load_specs\n"
        "names = [s.name for s in load_specs()]\n"
        "assert 'probe_environment' in names, names\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------------------
# Through the real MCP client (both protocol eras)
# --------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_call_structured(mcp_client, tmp_path):
    args = {"checks": ["env", "ray"], "env": {"RAY_TMPDIR": str(tmp_path), "XTUNER_USE_SGLANG": "1"}}
    res = await mcp_client.call_tool("probe_environment", args)
    assert not res.is_error
    data = res.structured_content
    assert data["env"]["effective_backend"] == "sglang"
    assert data["ray"]["reachable"] is False
    assert "probe.ray_not_running" in {f["id"] for f in data["findings"]}
    assert data["summary"].startswith("1 blocker")

    bad = await mcp_client.call_tool("probe_environment", {"checks": ["nope"]})
    assert bad.is_error


# --------------------------------------------------------------------------------------------------------
# Ray: the shared real cluster
# --------------------------------------------------------------------------------------------------------


@pytest.mark.ray
def test_real_cluster_nodes_gpus_versions(ray_cluster, tmp_path):
    import ray

    r = _no_side_effects(
        ray_cluster, lambda: _probe(_ctx(tmp_path), checks=["ray"], ray_address=ray_cluster.gcs_address)
    )
    snap = r.ray
    assert snap.reachable and snap.method == "gcs" and not snap.errors, snap.errors
    assert len(snap.nodes) == len(ray_cluster.nodes)
    assert sorted(n.ip for n in snap.nodes) == sorted(n.ip for n in ray_cluster.nodes)
    assert [n.is_head for n in snap.nodes].count(True) == 1
    for res in ("GPU", "CPU", "memory", "fake_accel"):
        assert snap.total[res] == ray_cluster.total(res), res
    assert snap.cluster_ray_version == ray.__version__ == snap.local_ray_version
    assert snap.cluster_python_version == platform.python_version()
    assert snap.version_mismatch == [] and "probe.ray_version_mismatch" not in _ids(r)
    assert snap.dashboard_url == ray_cluster.dashboard_url
    assert not any(k.startswith("node:") for k in snap.total)
    assert "probe.exit_handler_stops_ray" in _ids(r)  # a loopback cluster: XTuner's exit handler stops it

    # a version skew is reported with both versions (the cluster's metadata altered; no second Ray here)
    skew = snap.model_copy(update={"cluster_ray_version": "2.58.0", "cluster_python_version": "3.10.1"})
    rc.compare_versions(skew)
    assert any("2.58.0" in m and ray.__version__ in m for m in skew.version_mismatch)
    assert any("3.10.1" in m and platform.python_version() in m for m in skew.version_mismatch)
    f = _by_id(
        type(r)(summary="", checks_run=[], counts={}, findings=ray_findings(skew, None)), "probe.ray_version_mismatch"
    )
    assert "2.58.0" in f.title and ray.__version__ in f.title


@pytest.mark.ray
def test_discovery_from_address_file_and_ray_address(ray_cluster, tmp_path):
    ctx = _ctx(tmp_path, ray_cluster.tmp)  # a client-chosen RAY_TMPDIR is read only inside the allowed roots
    r = _probe(ctx, checks=["ray"], env={"RAY_TMPDIR": str(ray_cluster.tmp)}, detail="summary")
    assert r.ray.resolution.source == "address_file"
    assert r.ray.resolution.address == ray_cluster.gcs_address and r.ray.reachable
    assert r.ray.nodes == [] and r.ray.nodes_omitted == len(ray_cluster.nodes)  # summary detail keeps counts
    assert f"{len(ray_cluster.nodes)} node(s)" in r.summary
    r = _probe(ctx, checks=["ray"], env={"RAY_ADDRESS": ray_cluster.gcs_address, "RAY_TMPDIR": str(tmp_path)})
    assert r.ray.resolution.source == "RAY_ADDRESS" and r.ray.reachable


@pytest.mark.ray
def test_fit_pass_and_fail_with_numbers(ray_cluster, tmp_path):
    cpus = ray_cluster.total("CPU")
    gpus = ray_cluster.total("GPU")
    workers = int(gpus // 2)  # 8 on the default fixture: needs 12*8+10 = 106 CPUs and 16*8+10 = 138 GiB
    ok = _probe(
        _ctx(tmp_path), checks=["ray"], ray_address=ray_cluster.gcs_address, expected=Expected(num_workers=workers)
    )
    assert ok.fit.ok is True, ok.fit
    cpu_row = next(row for row in ok.fit.rows if row.check == "pg:train CPU")
    assert cpu_row.needed == 12 * workers + 10 and cpu_row.available == cpus

    def fit(**kw):
        """The same XTuner checks for other run shapes, against the snapshot just taken."""
        report = evaluate_fit(requirements(Expected(**kw)), ok.ray)
        return report, {f.id: f for f in fit_findings(report)}

    per = (cpus - 10) / workers + 1  # CPUs per worker so that the group needs more than the cluster has
    report, found = fit(num_workers=workers, num_cpus_per_worker=per)
    f = found["probe.fit_cpu"]
    assert report.ok is False and f.severity == "blocker" and f.category == "ray_resources_insufficient"
    assert f.evidence == f"Not enough available CPUs in Ray cluster, {float(cpus)} less than {per * workers + 10}."
    assert f.source and f.source.startswith("xtuner/v1/rl/utils/ray_accelerator_worker.py")

    _, found = fit(num_workers=int(gpus) + 1)
    assert found["probe.fit_gpu"].evidence == (
        f"Not enough available GPUS in Ray cluster, {float(gpus)} less than {int(gpus) + 1}."
    )
    _, found = fit(num_workers=1, cpu_memory_per_worker=int(ray_cluster.total("memory")))
    assert "probe.fit_memory" in found


@pytest.mark.ray
def test_train_placement_group_reuse_and_available_resources(ray_cluster, tmp_path):
    ctx = _ctx(tmp_path)
    bundles = [{"GPU": 1, "CPU": 2}] * 3
    with hold_placement_group(ray_cluster, bundles, name="train"):
        deadline = time.monotonic() + 30
        while True:
            r = _no_side_effects(
                ray_cluster,
                lambda: _probe(
                    ctx, checks=["ray"], ray_address=ray_cluster.gcs_address, expected=Expected(num_workers=2)
                ),
            )
            pgs = [p for p in r.ray.placement_groups if p.name == "train"]
            # The GCS reports the group CREATED a moment before the resource view shows what it holds.
            if pgs and pgs[0].state == "CREATED" and r.ray.available.get("GPU") == ray_cluster.total("GPU") - 3:
                break
            assert time.monotonic() < deadline, r.ray.placement_groups
            time.sleep(0.5)
        assert pgs[0].xtuner_name and len(pgs[0].bundles) == 3 and pgs[0].strategy == "PACK"
        assert r.ray.available["GPU"] == ray_cluster.total("GPU") - 3
        assert r.ray.available["CPU"] == ray_cluster.total("CPU") - 6
        f = _by_id(r, "probe.pg_reused.train")
        assert f.severity == "blocker"  # 3 bundles of {GPU 1, CPU 2} != 2 bundles of the expected shape
        assert f.category == "resource_mismatch_num_workers"
        assert f.source == "xtuner/v1/rl/utils/ray_accelerator_worker.py:300-305"
        gpu_row = next(row for row in r.fit.rows if row.check == "pg:train GPU")
        assert gpu_row.available == ray_cluster.total("GPU") - 3

        # the same cluster over the dashboard's HTTP API (usage there lags the GCS by up to ~5 s)
        deadline = time.monotonic() + 20
        while True:
            h = _no_side_effects(
                ray_cluster, lambda: _probe(ctx, checks=["ray"], ray_address=ray_cluster.dashboard_url)
            )
            if h.ray.available.get("GPU") == ray_cluster.total("GPU") - 3:
                break
            assert time.monotonic() < deadline, h.ray
            time.sleep(1)
        assert h.ray.method == "dashboard_http" and "probe.pg_reused.train" in _ids(h)
        assert len(h.ray.nodes) == len(ray_cluster.nodes)
    r = _probe(ctx, checks=["ray"], ray_address=ray_cluster.gcs_address)
    assert "probe.pg_reused.train" not in _ids(r)  # removed with its driver, no longer listed


@pytest.mark.ray
def test_infeasible_and_pending_placement_groups(ray_cluster, tmp_path):
    ctx = _ctx(tmp_path)
    per_node = GPU_PER_NODE
    total = int(ray_cluster.total("GPU"))
    with (
        hold_placement_group(ray_cluster, [{"GPU": 1}] * total, strategy="PACK", name="hog"),
        hold_placement_group(ray_cluster, [{"GPU": 1}] * (per_node + 1), strategy="STRICT_PACK", name="too_big"),
        hold_placement_group(ray_cluster, [{"GPU": 1}], strategy="PACK", name="waiting"),
    ):
        deadline = time.monotonic() + 30
        while True:
            r = _no_side_effects(ray_cluster, lambda: _probe(ctx, checks=["ray"], ray_address=ray_cluster.gcs_address))
            pgs = {p.name: p for p in r.ray.placement_groups}
            if (
                pgs.get("too_big")
                and pgs["too_big"].scheduling_state == "INFEASIBLE"
                and pgs.get("hog")
                and pgs["hog"].state == "CREATED"
                and pgs.get("waiting")
                and pgs["waiting"].scheduling_state == "NO_RESOURCES"
            ):
                break
            assert time.monotonic() < deadline, pgs
            time.sleep(0.5)
        assert pgs["too_big"].state == "PENDING" and len(pgs["too_big"].bundles) == per_node + 1
        ids = _ids(r)
        assert "probe.pg_infeasible.too_big" in ids and "probe.pg_pending.waiting" in ids
        assert "probe.pg_pending.hog" not in ids
        # Ray omits fully used resources; the probe reports 0 available GPUs and the fit fails on them
        assert r.ray.available.get("GPU", 0.0) == 0.0
        report = evaluate_fit(requirements(Expected(num_workers=1)), r.ray)
        assert report.ok is False and "probe.fit_gpu" in {f.id for f in fit_findings(report)}


@pytest.mark.ray
def test_probe_without_ray_installed_says_so(ray_cluster, tmp_path):
    """A Python where `import ray` fails (blocked in sys.modules; the real package cannot be uninstalled here)."""
    code = (
        "import sys, json\n"
        "sys.modules['ray'] = None\n"
        "from xtuner_rl_mcp.cluster.ray import probe_cluster\n"
        "from xtuner_rl_mcp.cluster.ray_address import RayAccess\n"
        "from xtuner_rl_mcp.cluster.packages import check_packages\n"
        "from xtuner_rl_mcp.core import RunContext\n"
        "s = probe_cluster(sys.argv[1], access=RayAccess.from_context(RunContext(environ={})), timeout_s=30)\n"
        "print(json.dumps({'snap': s.model_dump(), 'ray_pkg': [p.model_dump() for p in check_packages().items"
        " if p.name == 'ray'][0]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, ray_cluster.gcs_address], capture_output=True, text=True, timeout=60, check=True
    )
    data = json.loads(out.stdout)
    snap = data["snap"]
    assert snap["ray_installed"] is False and snap["method"] == "none"
    assert any("ray is not installed" in e for e in snap["errors"])
    assert data["ray_pkg"]["module_found"] is False
    # the dashboard path needs no Ray at all
    out = subprocess.run(
        [sys.executable, "-c", code, ray_cluster.dashboard_url], capture_output=True, text=True, timeout=60, check=True
    )
    snap = json.loads(out.stdout)["snap"]
    assert snap["reachable"] and snap["method"] == "dashboard_http" and len(snap["nodes"]) == len(ray_cluster.nodes)


def _access(server_env: dict[str, str], trusted: tuple[str, ...] = ()) -> RayAccess:
    """The address policy for a server with ``server_env`` whose operator configured ``trusted``."""
    ctx = RunContext(environ=server_env, policy=OperatorPolicy(ray_addresses=trusted))
    return RayAccess.from_context(ctx)


@pytest.mark.slow
@pytest.mark.ray
def test_token_auth_is_reported_as_auth_required(tmp_path):
    """A head with Ray 2.60 token auth: without the token the probe says 'auth required', not 'unreachable'; the
    server's token (in its env, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) goes only to the operator's cluster."""
    token = os.urandom(16).hex()
    auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    node = NodeSpec(HEAD_IP, num_cpus=2, num_gpus=1, memory=2 * GIB, resources={})
    with start_ray_cluster((node,), dashboard=False, extra_env=auth_env) as cluster:
        addr = cluster.gcs_address
        without = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
        without["HOME"] = str(tmp_path / "home")  # no ~/.ray/auth_token
        before = snapshot(cluster)
        snap = rc.probe_cluster(addr, access=_access(without, (addr,)), timeout_s=LIVE)
        assert snap.reachable and snap.auth_required and snap.trusted, snap
        assert "RAY_AUTH_TOKEN" in snap.auth_hint
        with_token = dict(without, RAY_AUTH_TOKEN=token)
        ok = rc.probe_cluster(addr, access=_access(with_token, (addr,)), timeout_s=LIVE)
        assert ok.reachable and not ok.auth_required and ok.total.get("GPU") == 1, ok

        # a client-given (loopback) address: the same token, by every route Ray knows, is withheld
        (tmp_path / "home" / ".ray").mkdir(parents=True)
        (tmp_path / "home" / ".ray" / "auth_token").write_text(token)
        (tmp_path / "token").write_text(token)
        every_route = dict(with_token, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(tmp_path / "token"))
        withheld = rc.probe_cluster(addr, access=_access(every_route), timeout_s=LIVE)
        assert withheld.reachable and withheld.auth_required and not withheld.trusted, withheld
        assert "--ray-address" in withheld.auth_hint
        time.sleep(0.5)
        after = snapshot(cluster)
        assert after == before
    # The tool's finding for it
    f = ray_findings(snap, None)[0]
    assert f.id == "probe.ray_auth_required" and "unreach" not in f.title.lower()


def test_free_port_helper_gives_a_closed_port():
    port = free_port()
    assert rc.tcp_check("127.0.0.1", port, 1.0) is not None
