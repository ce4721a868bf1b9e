"""Hostile files inside a run, a log directory or a data directory: links out of the allowed roots, FIFOs, sparse
2 GiB sidecars, paths named inside files, non-finite tracker values, and calls cancelled or past their deadline.

Everything is real: run directories written by ``run_dir_generator`` the way XTuner lays them out, real symlinks,
FIFOs and sparse files, real worker processes, the real MCP client over the full server (tool-level behaviour) and
real subprocesses where memory or the home directory must be observed from outside.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from xtuner_rl_mcp.core import CallCancelled, CallLimits, PathPolicy, RunContext
from xtuner_rl_mcp.operations import check_reward_data, diagnose_symptom, inspect_run

from .hostile_support import result_text
from .run_dir_generator import RunSpec, generate

SECRET = "SECRET-quokka-bramble"  # no digits: messages are keyed with digits masked
REFUSED_OUT = "links outside the allowed roots: not read"
NOT_REGULAR = "is not a regular file"
#: Seconds a hostile call may take through the MCP client before the test calls it a hang.
CALL_BOUND_S = 30


def _run(work: Path, **spec: Any) -> Path:
    """A finished four-step run (JSONL tracker, eval at step 2) under ``work``; returns its experiment dir."""
    return generate(work, RunSpec(steps=4, total_steps=4, evaluate_step=2, **spec))


def _secret_log_line() -> str:
    return f"[XTuner][RANK 0][2099-01-01 00:00:00][ERROR][RLTrainer] RuntimeError: {SECRET} leaked\n"


def _as_text(result: Any) -> str:
    return result_text(result) + json.dumps(result.structured_content or {})


async def _inspect(client: Any, path: Path, **args: Any) -> Any:
    with anyio.fail_after(CALL_BOUND_S):
        return await client.call_tool("inspect_run", {"path": str(path), "detail": "full", **args})


# ---------------------------------------------------------------------------------------------------------------
# Links out of the roots inside a run directory
# ---------------------------------------------------------------------------------------------------------------


def _link_logs(exp: Path, outside: Path) -> str:
    shutil.move(str(exp / "logs"), str(outside / "logs"))
    with open(outside / "logs" / "rank_0.log", "a") as f:
        f.write(_secret_log_line())
    (exp / "logs").symlink_to(outside / "logs")
    return "logs"


def _link_train_rollout(exp: Path, outside: Path) -> str:
    shutil.move(str(exp / "train_rollout"), str(outside / "train_rollout"))
    line = {"group_id": 1, "status": "failed", "error_msg": f"{SECRET} in a rollout", "reward": 0.0, "label": "1"}
    (outside / "train_rollout" / "train_rollout_1.jsonl").write_text(json.dumps(line) + "\n")
    (exp / "train_rollout").symlink_to(outside / "train_rollout")
    return "train_rollout"


def _link_tracker(exp: Path, outside: Path) -> str:
    tracker = exp / "logs" / "exp_tracking" / "tracker.jsonl"
    (outside / "tracker.jsonl").write_text(
        "".join(json.dumps({f"eval/{SECRET}": 0.5, "step": s}) + "\n" for s in (1, 2))
    )
    tracker.unlink()
    tracker.symlink_to(outside / "tracker.jsonl")
    return "logs/exp_tracking/tracker.jsonl"


def _link_env_json(exp: Path, outside: Path) -> str:
    env = {"XTUNER_OTEL_ENABLED": "1", "XTUNER_OTEL_JSONL_PATH": f"/nonexistent/{SECRET}/traces.jsonl"}
    (outside / "env.json").write_text(json.dumps(env))
    (exp / "logs" / "env.json").unlink()
    (exp / "logs" / "env.json").symlink_to(outside / "env.json")
    return "logs/env.json"


def _link_rank_log(exp: Path, outside: Path) -> str:
    (outside / "rank_0.log").write_text(_secret_log_line())
    (exp / "logs" / "rank_0.log").unlink()
    (exp / "logs" / "rank_0.log").symlink_to(outside / "rank_0.log")
    return "logs/rank_0.log"


@pytest.mark.anyio
@pytest.mark.parametrize("link", [_link_logs, _link_train_rollout, _link_tracker, _link_env_json, _link_rank_log])
async def test_links_out_of_the_roots_in_a_run_are_refused_with_a_note(mcp_client, tmp_path, tmp_path_factory, link):
    exp = _run(tmp_path / "work")
    label = link(exp, tmp_path_factory.mktemp("outside"))
    r = await _inspect(mcp_client, tmp_path / "work")
    assert not r.is_error, result_text(r)[:500]
    assert SECRET not in _as_text(r)
    assert f"{label} {REFUSED_OUT}" in r.structured_content["outputs"]["notes"]


@pytest.mark.anyio
async def test_a_run_dir_behind_a_link_out_of_the_roots_is_an_error_without_content(
    mcp_client, tmp_path, tmp_path_factory
):
    outside = tmp_path_factory.mktemp("outside")
    exp = _run(outside / "work")
    with open(exp / "logs" / "rank_0.log", "a") as f:
        f.write(_secret_log_line())
    (tmp_path / "work").symlink_to(outside / "work")
    r = await _inspect(mcp_client, tmp_path / "work")
    assert r.is_error and "path_outside_roots" in result_text(r)
    assert SECRET not in result_text(r)


# ---------------------------------------------------------------------------------------------------------------
# FIFOs in place of the files a run writes
# ---------------------------------------------------------------------------------------------------------------

FIFO_TARGETS = (
    "20*/logs/env.json",
    ".xtuner_rl_colocate_trainer",
    "20*/logs/rank_0.log",
    "20*/logs/exp_tracking/tracker.jsonl",
    "20*/train_rollout/train_rollout_1.jsonl",
)


@contextlib.contextmanager
def _fifo_in_place_of(path: Path) -> Iterator[None]:
    """``path`` replaced by a FIFO; on the way out a writer opens and closes it, so a reader stuck in open() (the
    bug this guards against) is released instead of hanging the test run."""
    path.unlink()
    os.mkfifo(path)
    try:
        yield
    finally:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader: nothing was stuck


@pytest.mark.anyio
@pytest.mark.parametrize("target", FIFO_TARGETS)
async def test_fifos_in_place_of_run_files_answer_at_once(mcp_client, tmp_path, target):
    _run(tmp_path / "work")
    (fifo,) = (tmp_path / "work").glob(target)
    with _fifo_in_place_of(fifo):
        t0 = time.monotonic()
        r = await _inspect(mcp_client, tmp_path / "work")
        elapsed = time.monotonic() - t0
    assert not r.is_error, result_text(r)[:500]
    assert elapsed < 10
    notes = r.structured_content["outputs"]["notes"]
    assert any(n.startswith(f"{fifo.name} {NOT_REGULAR}") or f"/{fifo.name} {NOT_REGULAR}" in n for n in notes), notes


# ---------------------------------------------------------------------------------------------------------------
# Sparse 2 GiB sidecars: answered fast, in bounded memory (measured in a child process)
# ---------------------------------------------------------------------------------------------------------------

_CHILD = """
import asyncio, json, resource, sys, time
from mcp import Client
from xtuner_rl_mcp.core import PathPolicy
from xtuner_rl_mcp.server.app import build_server

async def main(root, path):
    async with Client(build_server(PathPolicy.from_strings([root]))) as client:
        t0 = time.monotonic()
        r = await client.call_tool("inspect_run", {"path": path})
        seconds = time.monotonic() - t0
    text = "".join(getattr(c, "text", "") for c in r.content)
    print(json.dumps({"seconds": seconds, "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10,
                      "is_error": r.is_error, "notes": (r.structured_content or {}).get("outputs", {}).get("notes"),
                      "text": text[:2000]}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""
SPARSE_BYTES = 2 << 30


@pytest.mark.parametrize(
    ("sidecar", "label"),
    [("20*/logs/env.json", "logs/env.json"), (".xtuner_rl_colocate_trainer", ".xtuner_rl_colocate_trainer")],
)
def test_sparse_2gib_sidecar_answers_fast_in_bounded_memory(tmp_path, sidecar, label):
    _run(tmp_path / "work")
    (path,) = (tmp_path / "work").glob(sidecar)
    with open(path, "r+b") as f:  # its real JSON, then ~2 GiB of holes
        f.truncate(SPARSE_BYTES)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(tmp_path / "work")],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = json.loads(proc.stdout)
    assert not out["is_error"], out["text"]
    assert out["seconds"] < 5, out
    assert out["maxrss_mib"] < 600, out  # reading the file whole would take 2 GiB or more
    assert any(n.startswith(f"{label} is larger than") and n.endswith(": not read") for n in out["notes"]), out


# ---------------------------------------------------------------------------------------------------------------
# Paths named inside files, outside the roots: never an existence oracle
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_paths_named_in_env_json_and_meta_outside_the_roots_tell_nothing(mcp_client, tmp_path, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    work = tmp_path / "work"
    exp = _run(work, trace_enabled=True)
    shutil.rmtree(exp / "otel")  # the only trace file is the one env.json names
    otel, work_dir, moved = outside / "otel" / "traces.jsonl", outside / "work_dir", outside / "old" / exp.name
    env_json = exp / "logs" / "env.json"
    env = json.loads(env_json.read_text())
    env.update(XTUNER_OTEL_JSONL_PATH=str(otel), WORK_DIR=str(work_dir))
    env_json.write_text(json.dumps(env))
    meta = work / ".xtuner_rl_colocate_trainer"
    meta_obj = json.loads(meta.read_text())
    meta_obj["exps"][-1]["exp_dir"] = str(moved)
    meta.write_text(json.dumps(meta_obj))

    otel.parent.mkdir(parents=True)
    otel.write_text('{"resourceSpans": []}\n' * 100)
    (work_dir / "trace").mkdir(parents=True)
    (work_dir / "trace" / "fates.0.jsonl").write_text("{}\n")
    (moved / "logs").mkdir(parents=True)
    present = await _inspect(mcp_client, work)
    shutil.rmtree(outside)
    absent = await _inspect(mcp_client, work)

    for r in (present, absent):
        assert not r.is_error, result_text(r)[:500]
    a, b = present.structured_content, absent.structured_content
    assert a["outputs"] == b["outputs"]
    assert a["findings"] == b["findings"]
    assert a["outputs"]["otel_trace_files"] == [] and a["outputs"]["otel_trace_bytes"] == 0
    assert a["outputs"]["exp_dir"] == str(exp)
    notes = a["outputs"]["notes"]
    for named in (f"XTUNER_OTEL_JSONL_PATH={str(otel)!r}", f"WORK_DIR={str(work_dir)!r}", f"exp_dir {str(moved)!r}"):
        assert any(named in n and n.endswith("outside the allowed roots: not checked") for n in notes), (named, notes)
    assert not any(f["id"] == "output.trace_missing" for f in a["findings"])  # unknown, not missing


@pytest.mark.anyio
async def test_env_paths_outside_the_roots_tell_nothing(mcp_client, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    env = {"MODEL_PATH": str(outside / "model"), "DATA_PATH": str(outside / "d.jsonl"), "XTUNER_USE_LMDEPLOY": "1"}
    (outside / "model").mkdir()
    (outside / "d.jsonl").write_text("{}\n")
    answers = []
    for _ in range(2):
        with anyio.fail_after(CALL_BOUND_S):
            r = await mcp_client.call_tool("probe_environment", {"checks": ["env"], "env": env})
        assert not r.is_error, result_text(r)[:500]
        answers.append(r.structured_content["env"]["paths"])
        shutil.rmtree(outside)
        outside.mkdir()
    assert answers[0] == answers[1]
    named = {p["name"]: p for p in answers[0]}
    for var in ("MODEL_PATH", "DATA_PATH"):
        assert named[var]["checkable"] is False and named[var]["exists"] is None
        assert "outside the server's allowed roots: not checked" in named[var]["error"]


# ---------------------------------------------------------------------------------------------------------------
# Non-finite and huge tracker values; matplotlib writes nothing under $HOME
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_huge_and_non_finite_tracker_values_still_give_a_png(mcp_client, tmp_path):
    pytest.importorskip("matplotlib")
    exp = _run(tmp_path / "work")
    tracker = exp / "logs" / "exp_tracking" / "tracker.jsonl"
    rows = [json.loads(line) for line in tracker.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["time/step"] = 1e308 if i % 2 else -1e308
        row["response/rewards/mean"] = 1e308
        row["entropy/rollout"] = [float("nan"), float("inf"), -1e308, 1e308][i % 4]
    tracker.write_text("".join(json.dumps(row) + "\n" for row in rows))  # json.dumps writes NaN and Infinity
    r = await _inspect(mcp_client, tmp_path / "work", picture=True)
    assert not r.is_error, result_text(r)[:500]
    images = [c for c in r.content if getattr(c, "type", "") == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    out = r.structured_content
    assert out["picture"]["bytes"] > 0 and out["outputs"]["tracker_records"] == len(rows)
    assert any("non-finite scalar value" in n for n in out["outputs"]["notes"])
    json.loads(result_text(r), parse_constant=lambda c: pytest.fail(f"{c} in the JSON answer"))


def test_plotting_writes_nothing_under_home(tmp_path):
    pytest.importorskip("matplotlib")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    code = (
        "import json, os, sys\n"
        "from xtuner_rl_mcp.runs import plot\n"
        "png, curves, _ = plot.render({'step': [1.0, 2.0, 3.0], 'reward_mean': [0.1, 0.4, 0.5]}, {}, 'run')\n"
        "assert png.startswith(b'\\x89PNG') and curves == ['reward mean']\n"
        "assert 'MPLCONFIGDIR' not in os.environ  # only matplotlib saw the private dirs\n"
        "sys.stdout.write(json.dumps(os.listdir(os.environ['TMPDIR'])))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert list(home.iterdir()) == []
    (private,) = json.loads(proc.stdout)  # matplotlib's config and cache went to one private dir ...
    assert private.startswith("xtuner-rl-mcp-matplotlib-")
    assert list(tmp.iterdir()) == []  # ... removed at exit


# ---------------------------------------------------------------------------------------------------------------
# diagnose_symptom and check_reward_data: links out of the roots among the files listed
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_diagnose_log_dir_with_links_out(mcp_client, tmp_path, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "x.log").write_text(f"KeyError: '{SECRET}'\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "y.log").write_text(f"KeyError: '{SECRET}'\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "ok.log").write_text("AssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8.\n")
    (logs / "link.log").symlink_to(outside / "x.log")
    (logs / "sub").symlink_to(outside / "sub")
    (logs / "notes").symlink_to(outside / "x.log")  # a link is noted alike whatever it points to
    with anyio.fail_after(CALL_BOUND_S):
        r = await mcp_client.call_tool("diagnose_symptom", {"log_path": str(logs), "detail": "full"})
    assert not r.is_error, result_text(r)[:500]
    assert SECRET not in _as_text(r)
    out = r.structured_content
    assert [f["failure_mode_id"] for f in out["findings"]][:1] == ["ray_not_enough_gpus"]
    assert out["scanned"]["sources"] == [str(logs / "ok.log")]
    assert f"{logs / 'link.log'} {REFUSED_OUT}" in out["scanned"]["notes"]
    assert f"{logs / 'sub'} {REFUSED_OUT}" in out["scanned"]["notes"]
    assert f"{logs / 'notes'} {REFUSED_OUT}" in out["scanned"]["notes"]


GOOD_LINE = {"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "x", "reward_model": {"ground_truth": "2"}}


@pytest.mark.anyio
async def test_check_reward_data_behind_links_out(mcp_client, tmp_path, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    secret_line = json.dumps({**GOOD_LINE, "prompt": [{"role": "user", "content": SECRET}]}) + "\n"
    (outside / "data").mkdir()
    (outside / "data" / f"{SECRET}.jsonl").write_text(secret_line)
    (outside / "d.jsonl").write_text(secret_line)
    (tmp_path / "data").symlink_to(outside / "data")
    mixed = tmp_path / "mixed"
    (mixed / "real").mkdir(parents=True)
    (mixed / "real" / "good.jsonl").write_text(json.dumps(GOOD_LINE) + "\n")
    (mixed / "link.jsonl").symlink_to(outside / "d.jsonl")
    (mixed / "linked_dir").symlink_to(outside / "data")

    async def call(path: str) -> Any:
        with anyio.fail_after(CALL_BOUND_S):
            return await mcp_client.call_tool("check_reward_data", {"path": path, "detail": "full"})

    behind = await call(f"data/{SECRET}.jsonl")  # a file whose parent directory links out
    assert behind.is_error and "path_outside_roots" in result_text(behind)
    listed = await call("mixed")  # a directory holding a linked file and a linked directory
    globbed = await call("mixed/*/*.jsonl")  # a glob that could walk into the linked directory
    for r in (listed, globbed):
        assert not r.is_error, result_text(r)[:500]
        assert SECRET not in _as_text(r)
    out = listed.structured_content
    assert [f["path"] for f in out["files"]] == [str(mixed / "real" / "good.jsonl"), str(mixed / "link.jsonl")]
    assert out["ok"] is False and out["lines"] == 1
    refused = [f for f in out["findings"] if f["id"].endswith("file_unreadable")]
    assert len(refused) == 1 and f"{mixed / 'link.jsonl'} {REFUSED_OUT}" in refused[0]["evidence"]
    assert globbed.structured_content["ok"] is True and globbed.structured_content["files_scanned"] == 1


# ---------------------------------------------------------------------------------------------------------------
# Cancelled or expired calls stop within a second and leave no process behind
# ---------------------------------------------------------------------------------------------------------------


def _worker_pids() -> set[int]:
    """This process's scan workers (children running ``worker_main``)."""
    me = str(os.getpid())
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[1] == me and b"worker_main" in cmd:
            found.add(int(pid))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class _Call:
    """A tool run on a thread with its own limits; ``cancel_when`` cancels it once ``started`` is true."""

    def __init__(self, run: Any, params: Any, root: Path, limits: CallLimits | None = None) -> None:
        self.limits = limits or CallLimits()
        self.progressed = threading.Event()
        self.ctx = RunContext(paths=PathPolicy.from_strings([root]), limits=self.limits, progress=self._progress)
        self.error: BaseException | None = None
        self.reports: list[tuple[float, float | None]] = []  # every (done, total) the call reported
        self.thread = threading.Thread(target=self._target, args=(run, params), daemon=True)

    def _progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self.reports.append((done, total))
        if done > 0:
            self.progressed.set()

    def _target(self, run: Any, params: Any) -> None:
        try:
            run(params, self.ctx)
        except BaseException as exc:
            self.error = exc

    def cancel_after(self, started: Any, wait_s: float = 60.0) -> float:
        """Start, wait for ``started()``, cancel; the seconds from the cancel until the call returned."""
        self.thread.start()
        deadline = time.monotonic() + wait_s
        while not started():
            assert self.thread.is_alive(), f"the call ended before it could be cancelled: {self.error!r}"
            assert time.monotonic() < deadline, "the call never started its long part"
            time.sleep(0.01)
        t0 = time.monotonic()
        self.limits.cancel()
        self.thread.join(10)
        assert not self.thread.is_alive()
        return time.monotonic() - t0


class _CountingLimits(CallLimits):
    """Call limits that count how often the work looked at them (once a block in a scan): where the work is."""

    checks = 0

    def check(self) -> None:
        self.checks += 1
        super().check()


def _stopped_before_the_end(call: _Call) -> bool:
    """The call reported progress and never reached the total it announced: the cancel stopped the work itself
    (how fast is the benchmarks' business, not an assertion here)."""
    totals = [t for _, t in call.reports if t]
    return bool(totals) and max(d for d, _ in call.reports) < max(totals)


def _failing_data(path: Path, target_bytes: int) -> None:
    """JSONL lines without a ground truth: each one takes the slow, precise path, so a scan takes seconds."""
    line = (json.dumps({"prompt": [{"role": "user", "content": "q" * 200}], "data_source": "x"}) + "\n").encode()
    block = line * ((4 << 20) // len(line))
    with open(path, "wb") as f:
        while f.tell() < target_bytes:
            f.write(block)


def test_cancelled_check_kills_its_worker_processes_at_once(tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: the scan runs in process, there are no workers")
    _failing_data(tmp_path / "big.jsonl", 96 << 20)
    seen: set[int] = set()

    def workers_running() -> bool:
        seen.update(_worker_pids())
        return len(seen) >= 2

    call = _Call(check_reward_data.run, check_reward_data.Params(path="big.jsonl"), tmp_path)
    call.cancel_after(workers_running)
    assert isinstance(call.error, CallCancelled), call.error
    assert _stopped_before_the_end(call), call.reports[-3:]
    assert not any(_alive(pid) for pid in seen)
    assert _worker_pids() == set()


def test_cancelled_in_process_check_stops_within_a_block(tmp_path):
    _failing_data(tmp_path / "mid.jsonl", 6 << 20)  # under the parallel threshold: scanned in this process
    limits = _CountingLimits()
    call = _Call(check_reward_data.run, check_reward_data.Params(path="mid.jsonl"), tmp_path, limits)
    # cancel once the scan is two blocks in (a fixed wait raced a fast, idle machine: the scan had ended)
    call.cancel_after(lambda: limits.checks >= 2)
    assert isinstance(call.error, CallCancelled), call.error
    assert _stopped_before_the_end(call), call.reports[-3:]
    assert _worker_pids() == set()


def test_cancelled_inspect_run_stops_in_the_trajectory_scan(tmp_path):
    exp = _run(tmp_path / "work")
    big = exp / "train_rollout" / "train_rollout_4.jsonl"
    lines = big.read_bytes().split(b"\n", 1)[1]  # the samples, without the statistics line
    with open(big, "ab") as f:
        while f.tell() < 160 << 20:
            f.write(lines)
    call = _Call(inspect_run.run, inspect_run.Params(path=str(tmp_path / "work")), tmp_path)
    call.cancel_after(call.progressed.is_set)
    assert isinstance(call.error, CallCancelled), call.error
    assert _stopped_before_the_end(call), call.reports[-3:]


def test_cancelled_diagnosis_stops_in_the_log_scan(tmp_path):
    log = tmp_path / "big.log"
    line = b"[XTuner][RANK 0][2026-01-01 00:00:00][ERROR][RLTrainer] RuntimeError: step 12 failed at shard 3\n"
    with open(log, "wb") as f:
        while f.tell() < 96 << 20:
            f.write(line * 40_000)
    size = log.stat().st_size
    call = _Call(diagnose_symptom.run, diagnose_symptom.Params(log_path=str(log)), tmp_path)
    call.cancel_after(call.progressed.is_set)
    assert isinstance(call.error, CallCancelled), call.error
    assert _stopped_before_the_end(call) and max(done for done, _ in call.reports) < size, call.reports[-3:]


@pytest.mark.parametrize("tool", ["check_reward_data", "inspect_run", "diagnose_symptom"])
def test_a_call_past_its_deadline_does_not_start_reading(tmp_path, tool):
    _run(tmp_path / "work")
    (tmp_path / "d.jsonl").write_text(json.dumps(GOOD_LINE) + "\n")
    params = {
        "check_reward_data": lambda: check_reward_data.Params(path="d.jsonl"),
        "inspect_run": lambda: inspect_run.Params(path=str(tmp_path / "work")),
        "diagnose_symptom": lambda: diagnose_symptom.Params(log_path=str(tmp_path / "work")),
    }[tool]()
    module = {"check_reward_data": check_reward_data, "inspect_run": inspect_run, "diagnose_symptom": diagnose_symptom}
    ctx = RunContext(paths=PathPolicy.from_strings([tmp_path]), limits=CallLimits(deadline=time.monotonic() - 1))
    with pytest.raises(CallCancelled):
        module[tool].run(params, ctx)
