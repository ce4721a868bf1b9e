"""Ray credentials go only where the operator sent them, and every Ray network call is bounded as a whole.

Real parts only: HTTP listeners of our own on 127.0.0.1 (threads on raw sockets) that record every request line and
header they get, FIFOs and files in tmp_path, the real MCP client, and the suite's real Ray head. Non-loopback
addresses are TEST-NET literals (192.0.2.1) that are refused before anything is sent -- no traffic leaves the host;
an audit hook (``socket.connect`` events of this process) proves no connection was even tried.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from xtuner_rl_mcp.cluster import ray as rc
from xtuner_rl_mcp.cluster.http_get import HttpAuthError, HttpError, HttpTarget, http_get
from xtuner_rl_mcp.cluster.ray_address import ADDRESS_NOT_ALLOWED, RayAccess, parse_endpoint
from xtuner_rl_mcp.core import CallLimits, OperatorPolicy, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.core.limits import CallCancelled
from xtuner_rl_mcp.operations import check_reward_data, choose_topology, inspect_run, probe_environment

from .conftest import make_server
from .hostile_support import structured_error
from .listeners import Handler, Listener, drip, drip_header, listening, reply
from .run_dir_generator import RunSpec, generate

TOKEN = "server-ray-token-0123456789abcdef"
OFF_HOST = "192.0.2.1"  # TEST-NET-1: never routed; refused before any packet
MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.33 GiB of which 1.06 GiB is free."
)
SECRET = "AKIAIOSFODNN7EXAMPLE hunter2-secret"

# --------------------------------------------------------------------------------------------------------
# Every socket connect of this process, from Python's audit events (a spy, not a mock: nothing is replaced)
# --------------------------------------------------------------------------------------------------------

_CONNECTS: list[Any] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        _CONNECTS.append(args[1])


sys.addaudithook(_audit)


def _connects_to(host: str) -> list[Any]:
    return [a for a in list(_CONNECTS) if isinstance(a, tuple) and a and a[0] == host]


# --------------------------------------------------------------------------------------------------------
# Loopback HTTP listeners that record what they are sent
# --------------------------------------------------------------------------------------------------------


def ray_dashboard(log_text: str = MESSAGE, drip_logs: bool = False) -> Handler:
    """A dashboard that answers like Ray 2.60's REST and log APIs, for one ALIVE node."""
    node = {
        "node_id": "ab" * 28,
        "node_ip": "127.0.0.9",
        "state": "ALIVE",
        "is_head_node": True,
        "resources_total": {"CPU": 4.0, "GPU": 2.0},
    }
    answers = {
        "/api/version": {"ray_version": "2.60.0", "version": "4"},
        "/api/v0/cluster_metadata": {"data": {"rayVersion": "2.60.0", "pythonVersion": platform.python_version()}},
        "/api/v0/nodes": {"data": {"result": {"result": [node]}}},
        "/api/v0/placement_groups": {"data": {"result": {"result": []}}},
        "/api/cluster_status": {"data": {"clusterStatus": {"loadMetricsReport": {"usage": {"GPU": [0.0, 2.0]}}}}},
        "/api/v0/logs": {"data": {"result": {"worker_errors": ["worker-1.err"]}}},
    }

    def handle(lst: Listener, path: str, conn: socket.socket) -> None:
        route = path.split("?", 1)[0]
        if drip_logs and route.startswith("/api/v0/logs"):
            drip(lst, path, conn)
        elif route == "/api/v0/logs/file":
            reply(lst, conn, 200, log_text.encode())
        elif route in answers:
            reply(lst, conn, 200, json.dumps(answers[route]).encode())
        else:
            reply(lst, conn, 404, b"{}")

    return handle


def huge(chunked: bool) -> Handler:
    """100 MB of body (a catalog-looking line repeated), as long as the client keeps reading."""

    def handle(lst: Listener, path: str, conn: socket.socket) -> None:
        total = 100 << 20
        line = (MESSAGE + "\n").encode()
        block = line * (65536 // len(line))
        if chunked:
            lst.send(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        else:
            lst.send(conn, f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
        while lst.sent < total and not lst.stop.is_set():
            lst.send(conn, b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)

    return handle


# --------------------------------------------------------------------------------------------------------
# Contexts
# --------------------------------------------------------------------------------------------------------


def _ctx(root: Path, *, environ: dict[str, str] | None = None, trusted: tuple[str, ...] = ()) -> RunContext:
    """A server context: its env (RAY_AUTH_TOKEN set unless given otherwise) and the operator's Ray addresses."""
    env = {"RAY_AUTH_TOKEN": TOKEN, "TMPDIR": str(root / "server-tmp")} if environ is None else environ
    return RunContext(
        paths=PathPolicy.from_strings([root]),
        environ=env,
        policy=OperatorPolicy(ray_addresses=trusted),
        limits=CallLimits(),
    )


def _within(seconds: float, fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` on a thread, and its wall time; fails (instead of hanging) when it takes longer than ``seconds``."""
    box: list[Any] = []
    t0 = time.monotonic()
    worker = threading.Thread(target=lambda: box.append(_catch(fn)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds}s"
    out = box[0]
    if isinstance(out, BaseException):
        raise out
    return out, time.monotonic() - t0


def _catch(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except BaseException as exc:  # handed back to the test thread
        return exc


def _probe(ctx: RunContext, **params: Any) -> probe_environment.Result:
    return probe_environment.run(probe_environment.Params(checks=["ray"], **params), ctx)


def _run_dir(root: Path) -> Path:
    work = root / "run"
    generate(work, RunSpec(steps=2, total_steps=2))
    return work


# --------------------------------------------------------------------------------------------------------
# Credentials: only to the operator's clusters
# --------------------------------------------------------------------------------------------------------


def test_client_loopback_dashboard_gets_no_token_and_the_operators_does(tmp_path):
    with listening(ray_dashboard()) as lst:
        r = _probe(_ctx(tmp_path), ray_address=lst.url, timeout_s=10)
        assert r.ray.reachable and not r.ray.trusted and len(r.ray.nodes) == 1, r.ray.errors
        asked = len(lst.seen)
        assert asked >= 5 and all("authorization" not in s.headers for s in lst.seen), lst.seen

        r = _probe(_ctx(tmp_path, trusted=(lst.url,)), ray_address=lst.url, timeout_s=10)
        assert r.ray.reachable and r.ray.trusted
        later = lst.seen[asked:]
        assert later and all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in later), later

        # the same cluster named differently by the operator: host case, https, trailing slash; or its GCS host
        for operator in (f"https://127.0.0.1:{lst.port}/", "127.0.0.1:6379"):
            before = len(lst.seen)
            r = _probe(_ctx(tmp_path, trusted=(operator,)), ray_address=lst.url + "/", timeout_s=10)
            assert r.ray.trusted and lst.seen[before].headers.get("authorization") == f"Bearer {TOKEN}", operator


def test_redirect_is_not_followed_and_names_only_the_status(tmp_path):
    with listening(ray_dashboard()) as second:

        def redirect(lst: Listener, path: str, conn: socket.socket) -> None:
            reply(lst, conn, 302, SECRET.encode(), f"Location: {second.url}{path}\r\n")

        with listening(redirect) as first:
            r = _probe(_ctx(tmp_path, trusted=(first.url,)), ray_address=first.url, timeout_s=5)
            assert first.seen and first.seen[0].headers.get("authorization") == f"Bearer {TOKEN}"
    assert second.seen == []  # neither the token nor the request reached the redirect target
    assert not r.ray.reachable and any("HTTP 302" in e for e in r.ray.errors), r.ray.errors
    text = r.model_dump_json()
    assert second.url not in text and "hunter2" not in text


def test_error_and_non_json_bodies_never_reach_the_answer(tmp_path):
    for status in (500, 200):

        def answer(lst: Listener, path: str, conn: socket.socket, status: int = status) -> None:
            reply(lst, conn, status, f"<html>{SECRET}</html>".encode())

        with listening(answer) as lst:
            r = _probe(_ctx(tmp_path), ray_address=lst.url, timeout_s=5)
        assert lst.seen and not r.ray.reachable
        assert "hunter2" not in r.model_dump_json()
        assert any(("HTTP 500" if status == 500 else "not JSON") in e for e in r.ray.errors), r.ray.errors


def test_untrusted_log_api_lines_never_reach_the_result_and_trusted_ones_do(tmp_path):
    work = _run_dir(tmp_path)
    with listening(ray_dashboard()) as lst:
        res = inspect_run.run(inspect_run.Params(path=str(work), ray_address=lst.url, ray_timeout_s=10), _ctx(tmp_path))
        text = res.model_dump_json()
        assert "CUDA out of memory" not in text and "logs.cuda_out_of_memory" not in text
        assert not any(s.path.startswith("/api/v0/logs") for s in lst.seen), [s.path for s in lst.seen]
        assert any("not read" in e for e in res.remote_logs.errors), res.remote_logs.errors

        trusted = _ctx(tmp_path, trusted=(lst.url,))
        res = inspect_run.run(inspect_run.Params(path=str(work), ray_address=lst.url, ray_timeout_s=10), trusted)
    assert "logs.cuda_out_of_memory" in {f.id for f in res.findings}, res.remote_logs
    log_reads = [s for s in lst.seen if s.path.startswith("/api/v0/logs/file")]
    assert log_reads and all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in log_reads)


# --------------------------------------------------------------------------------------------------------
# Refused before anything is sent: direct calls and the real MCP client
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("address", [f"{OFF_HOST}:6379", f"http://{OFF_HOST}:8265", f"https://{OFF_HOST}"])
def test_off_host_address_is_refused_before_any_connect(tmp_path, address):
    before = len(_connects_to(OFF_HOST))
    t0 = time.monotonic()
    with pytest.raises(ToolInputError) as err:
        _probe(_ctx(tmp_path), ray_address=address, timeout_s=5)
    assert time.monotonic() - t0 < 1.0
    assert err.value.code == ADDRESS_NOT_ALLOWED and "--ray-address" in err.value.fix
    assert len(_connects_to(OFF_HOST)) == before
    # the same address named by the operator is allowed, with credentials (only decided here: nothing is sent)
    access = RayAccess.from_context(_ctx(tmp_path, trusted=(address,)))
    assert access.decide(address).trusted


def test_every_ray_path_refuses_off_host(tmp_path):
    before = len(_connects_to(OFF_HOST))
    (tmp_path / "d.jsonl").write_text("{}\n")
    work = _run_dir(tmp_path)
    ctx = _ctx(tmp_path)
    calls = [
        lambda: _probe(ctx, env={"RAY_ADDRESS": f"{OFF_HOST}:6379"}),
        lambda: inspect_run.run(inspect_run.Params(path=str(work), ray_address=f"http://{OFF_HOST}:8265"), ctx),
        lambda: check_reward_data.run(
            check_reward_data.Params(path="d.jsonl", engine="ray", ray_address=f"{OFF_HOST}:6379"), ctx
        ),
        lambda: choose_topology.run(
            choose_topology.Params(params_b=8, use_cluster=True, ray_address=f"{OFF_HOST}:6379"), ctx
        ),
    ]
    for call in calls:
        with pytest.raises(ToolInputError) as err:
            call()
        assert err.value.code == ADDRESS_NOT_ALLOWED
    assert len(_connects_to(OFF_HOST)) == before


def test_address_file_in_a_client_tmpdir_is_not_trusted(tmp_path):
    """A client-chosen RAY_TMPDIR inside the roots whose address file names an off-host cluster: refused."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"{OFF_HOST}:6379\n")
    with pytest.raises(ToolInputError) as err:
        _probe(_ctx(tmp_path), env={"RAY_TMPDIR": str(tmp_path)})
    assert err.value.code == ADDRESS_NOT_ALLOWED


@pytest.fixture
def server_token(monkeypatch) -> str:
    """RAY_AUTH_TOKEN in the server's own environment (set before the MCP server is built); no Ray address there."""
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    for name in ("RAY_ADDRESS", "XTUNER_RL_MCP_RAY_ADDRESSES"):
        monkeypatch.delenv(name, raising=False)
    return TOKEN


@pytest.mark.anyio
async def test_refused_through_the_mcp_client(server_token, mcp_client, tmp_path):
    before = len(_connects_to(OFF_HOST))
    work = _run_dir(tmp_path)
    (tmp_path / "x.jsonl").write_text("{}\n")
    calls = [
        ("probe_environment", {"checks": ["ray"], "ray_address": f"{OFF_HOST}:6379"}),
        ("probe_environment", {"checks": ["ray"], "env": {"RAY_ADDRESS": f"http://{OFF_HOST}:8265"}}),
        ("inspect_run", {"path": str(work), "ray_address": f"http://{OFF_HOST}:8265", "ray_timeout_s": 5}),
        ("preflight", {"config": "cfg.py", "ray_address": f"{OFF_HOST}:6379"}),
        ("check_reward_data", {"path": "x.jsonl", "engine": "ray", "ray_address": f"{OFF_HOST}:6379"}),
    ]
    for name, args in calls:
        t0 = time.monotonic()
        res = await mcp_client.call_tool(name, args)
        assert res.is_error, (name, res.structured_content)
        err = structured_error(res)
        assert err and err["code"] == ADDRESS_NOT_ALLOWED, (name, err)
        assert "--ray-address" in err["fix"]
        assert time.monotonic() - t0 < 3.0, name
    assert len(_connects_to(OFF_HOST)) == before


@pytest.mark.anyio
async def test_client_loopback_gets_no_token_through_the_mcp_client(server_token, mcp_client, tmp_path):
    with listening(ray_dashboard()) as lst:
        res = await mcp_client.call_tool("probe_environment", {"checks": ["ray"], "ray_address": lst.url})
    assert not res.is_error and res.structured_content["ray"]["reachable"] is True
    assert lst.seen and all("authorization" not in s.headers for s in lst.seen)


@pytest.mark.anyio
async def test_operator_address_gets_the_token_through_the_mcp_server(server_token, tmp_path):
    with listening(ray_dashboard()) as lst:
        server = make_server(tmp_path, policy=OperatorPolicy(ray_addresses=(lst.url,)))
        async with Client(server, raise_exceptions=True) as client:
            res = await client.call_tool("probe_environment", {"checks": ["ray"], "ray_address": lst.url})
    assert not res.is_error and res.structured_content["ray"]["trusted"] is True
    assert lst.seen and all(s.headers.get("authorization") == f"Bearer {server_token}" for s in lst.seen)


# --------------------------------------------------------------------------------------------------------
# Bounded as a whole: slow drip, huge answers
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("handler", [drip, drip_header], ids=["body", "header"])
def test_slow_drip_is_cut_at_the_deadline(handler):
    with listening(handler) as lst:
        target = HttpTarget("http", "127.0.0.1", "127.0.0.1", lst.port)
        t0 = time.monotonic()
        with pytest.raises(HttpError) as err:
            _within(10, lambda: http_get(target, "/api/version", timeout=2.0, max_bytes=1 << 20))
        took = time.monotonic() - t0
        assert "deadline" in str(err.value)
        assert 1.9 <= took < 3.0, took
        assert lst.sent >= 3  # it really was dripping


def test_slow_drip_probe_and_log_collection_answer_within_their_timeouts(tmp_path):
    with listening(drip) as lst:
        r, took = _within(20, lambda: _probe(_ctx(tmp_path), ray_address=lst.url, timeout_s=2))
        assert took < 2 + 1.5 and not r.ray.reachable, took
    work = _run_dir(tmp_path)
    with listening(ray_dashboard(drip_logs=True)) as lst:
        params = inspect_run.Params(path=str(work), ray_address=lst.url, ray_timeout_s=4)
        res, took = _within(30, lambda: inspect_run.run(params, _ctx(tmp_path, trusted=(lst.url,))))
        assert any(s.path.startswith("/api/v0/logs") for s in lst.seen)  # the drip was reached
    assert took < 4 + 2, took
    assert res.remote_logs.errors and res.state == "finished"


def test_call_deadline_bounds_the_probe(tmp_path):
    """The call's own deadline (CallLimits) cuts a probe whose timeout_s is longer."""
    with listening(drip) as lst:
        ctx = _ctx(tmp_path)
        ctx.limits = CallLimits.within(1.5)
        t0 = time.monotonic()
        with pytest.raises(CallCancelled):
            _within(20, lambda: _probe(ctx, ray_address=lst.url, timeout_s=30))
    assert time.monotonic() - t0 < 1.5 + 1.0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_huge_answer_is_cut_at_the_cap(tmp_path, chunked):
    with listening(huge(chunked)) as lst:
        target = HttpTarget("http", "127.0.0.1", "127.0.0.1", lst.port)
        got, took = _within(30, lambda: http_get(target, "/x", timeout=20, max_bytes=1 << 20))
        assert got.truncated and len(got.body) == 1 << 20 and took < 10
        r, _ = _within(30, lambda: _probe(_ctx(tmp_path), ray_address=lst.url, timeout_s=10))
        time.sleep(0.3)
        assert lst.sent < 40 << 20, lst.sent  # far from 100 MB: the client stopped reading and closed
    assert any("larger than" in e for e in r.ray.errors), r.ray.errors
    assert "CUDA" not in r.model_dump_json()


def test_auth_refusal_is_reported_as_such():
    def refuse(lst: Listener, path: str, conn: socket.socket) -> None:
        reply(lst, conn, 401, SECRET.encode())

    with listening(refuse) as lst:
        target = HttpTarget("http", "127.0.0.1", "127.0.0.1", lst.port)
        with pytest.raises(HttpAuthError) as err:
            http_get(target, "/api/version", timeout=5, max_bytes=1024)
    assert str(err.value) == "HTTP 401"


# --------------------------------------------------------------------------------------------------------
# The address file: FIFOs never block, content is used only as host:port and never echoed
# --------------------------------------------------------------------------------------------------------


def _fifo(tmpdir: Path) -> Path:
    (tmpdir / "ray").mkdir(parents=True, exist_ok=True)
    path = tmpdir / "ray" / "ray_current_cluster"
    os.mkfifo(path)
    return path


def test_fifo_address_file_in_a_client_tmpdir_does_not_block(tmp_path):
    _fifo(tmp_path / "client")
    r, took = _within(10, lambda: _probe(_ctx(tmp_path), env={"RAY_TMPDIR": str(tmp_path / "client")}))
    assert took < 3 and r.ray.resolution.source == "none"
    assert "not a regular file" in r.ray.resolution.note


def test_fifo_address_file_in_the_servers_own_tmpdir_does_not_block(tmp_path):
    own = tmp_path / "server-tmp"
    _fifo(own)
    r, took = _within(10, lambda: _probe(_ctx(tmp_path)))  # the server's TMPDIR is `own`
    assert took < 3 and r.ray.resolution.source == "none"
    assert "not a regular file" in r.ray.resolution.note


@pytest.mark.anyio
async def test_fifo_address_file_through_the_mcp_client(mcp_client, tmp_path):
    _fifo(tmp_path)
    res = await mcp_client.call_tool("probe_environment", {"checks": ["ray"], "env": {"RAY_TMPDIR": str(tmp_path)}})
    assert not res.is_error and res.structured_content["ray"]["resolution"]["source"] == "none"


@pytest.mark.parametrize("where", ["client", "server-tmp"])
def test_address_file_content_that_is_not_an_address_is_not_echoed(tmp_path, where):
    (tmp_path / where / "ray").mkdir(parents=True)
    (tmp_path / where / "ray" / "ray_current_cluster").write_text(SECRET + "\n")
    env = {"RAY_TMPDIR": str(tmp_path / where)} if where == "client" else None
    r = _probe(_ctx(tmp_path), env=env) if env else _probe(_ctx(tmp_path))
    text = r.model_dump_json()
    assert "hunter2" not in text and "AKIA" not in text
    assert r.ray.resolution.source == "none" and "does not hold a Ray address" in r.ray.resolution.note


def test_address_file_of_a_client_tmpdir_outside_the_roots_is_not_read(tmp_path):
    outside = Path(tempfile.mkdtemp(prefix="xtuner-rl-test-"))  # not under tmp_path, the only root
    try:
        (outside / "ray").mkdir()
        (outside / "ray" / "ray_current_cluster").write_text("127.0.0.1:6379")
        r = _probe(_ctx(tmp_path), env={"RAY_TMPDIR": str(outside)})
    finally:
        shutil.rmtree(outside)
    assert r.ray.resolution.source == "none" and "outside the allowed roots" in r.ray.resolution.note


def test_own_address_file_is_the_operators_cluster(tmp_path):
    """The local cluster Ray itself would join (the server's own address file) is trusted; any port of its host
    is the same cluster for a dashboard URL."""
    own = tmp_path / "server-tmp" / "ray"
    own.mkdir(parents=True)
    (own / "ray_current_cluster").write_text("127.0.0.1:6379\n")
    with listening(ray_dashboard()) as lst:
        r = _probe(_ctx(tmp_path), ray_address=lst.url, timeout_s=10)
    assert r.ray.trusted and lst.seen[0].headers.get("authorization") == f"Bearer {TOKEN}"


# --------------------------------------------------------------------------------------------------------
# Address normalisation
# --------------------------------------------------------------------------------------------------------


def test_normalisation_decides_the_same_cluster(tmp_path):
    access = RayAccess.from_context(_ctx(tmp_path, trusted=("Head.Example:6379", "http://dash.example:8265/")))
    same = ["head.example", "HEAD.EXAMPLE.:6379", "http://head.example:9999", "https://DASH.example:8265/x/"]
    other = ["head.example:6380", "http://dash.example:8266", "other.example:6379"]
    assert all(access.is_trusted(parse_endpoint(a)) for a in same), same
    assert not any(access.is_trusted(parse_endpoint(a)) for a in other), other
    for bad in ("http://user:pw@127.0.0.1:8265", "http://127.0.0.1:8265/?q=1", "127.0.0.1:0", "a b:1"):
        assert parse_endpoint(bad) is None, bad
    local = access.decide("localhost:1")
    assert not local.trusted and local.ip == "127.0.0.1" and local.gcs_connect() == "127.0.0.1:1"
    for refused in ("10.0.0.1:6379", "[2001:db8::1]:6379", "http://0.0.0.0:8265", "169.254.169.254:80"):
        with pytest.raises(ToolInputError) as err:
            access.decide(refused)
        assert err.value.code == ADDRESS_NOT_ALLOWED, refused
    assert access.decide("[::1]:6379").ip == "::1" and access.decide("127.9.9.9:1").ip == "127.9.9.9"


def test_untrusted_gcs_child_gets_no_credentials(tmp_path):
    access = RayAccess.from_context(
        _ctx(tmp_path, environ={"RAY_AUTH_TOKEN": TOKEN, "RAY_AUTH_TOKEN_PATH": "/x", "RAY_TLS_SERVER_KEY": "/k"})
    )
    env = access.child_environ(access.decide("127.0.0.1:6379"), "/empty-home")
    assert env["RAY_AUTH_MODE"] == "disabled" and env["HOME"] == "/empty-home"
    assert not {"RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_TLS_SERVER_KEY"} & set(env)
    trusted = RayAccess.from_context(_ctx(tmp_path, environ={"RAY_AUTH_TOKEN": TOKEN}, trusted=("127.0.0.1",)))
    env = trusted.child_environ(trusted.decide("127.0.0.1:6379"), None)
    assert env["RAY_AUTH_TOKEN"] == TOKEN and env["RAY_AUTH_MODE"] == "token"


def test_in_process_driver_with_token_mode_refuses_an_untrusted_cluster(tmp_path, monkeypatch):
    """check_reward_data's engine='ray' runs ray.init in THIS process, which presents the process's token when
    RAY_AUTH_MODE=token: an untrusted (loopback) cluster is refused then, before any connect."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    (tmp_path / "d.jsonl").write_text("{}\n")
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        address = f"127.0.0.1:{srv.getsockname()[1]}"
        before = len(_connects_to("127.0.0.1"))
        with pytest.raises(ToolInputError) as err:
            check_reward_data.run(
                check_reward_data.Params(path="d.jsonl", engine="ray", ray_address=address), _ctx(tmp_path)
            )
        assert err.value.code == ADDRESS_NOT_ALLOWED and "RAY_AUTH_MODE=token" in err.value.message
        assert len(_connects_to("127.0.0.1")) == before


# --------------------------------------------------------------------------------------------------------
# The real Ray head (tests/ray_cluster.py): loopback without credentials, and as the operator's cluster
# --------------------------------------------------------------------------------------------------------


def _home_dirs() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("xtuner-rl-mcp-ray-home-")}


@pytest.mark.ray
def test_real_head_given_explicitly_and_as_the_operators(ray_cluster, tmp_path, monkeypatch):
    # this process's temporary directory of its own: other test workers probe at the same time, and their private
    # HOMEs come and go in the shared one
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    homes = _home_dirs()
    assert homes == set()
    env = {k: v for k, v in ray_cluster.env.items() if k not in ("RAY_TMPDIR", "TMPDIR")}
    env["RAY_AUTH_TOKEN"] = TOKEN
    snap = rc.probe_cluster(
        ray_cluster.gcs_address, access=RayAccess.from_context(_ctx(tmp_path, environ=env)), timeout_s=30
    )
    assert snap.reachable and snap.method == "gcs" and not snap.trusted, snap.errors
    assert len(snap.nodes) == len(ray_cluster.nodes) and snap.dashboard_url == ray_cluster.dashboard_url
    assert _home_dirs() == homes  # the private empty HOME is gone again

    operator = RayAccess.from_context(_ctx(tmp_path, environ=env, trusted=(ray_cluster.gcs_address,)))
    snap = rc.probe_cluster(ray_cluster.gcs_address, access=operator, timeout_s=30)
    assert snap.reachable and snap.trusted and len(snap.nodes) == len(ray_cluster.nodes), snap.errors
    # the dashboard the trusted GCS reports is trusted too
    assert operator.decide(snap.dashboard_url, vouched=snap.trusted).trusted
    assert not RayAccess.from_context(_ctx(tmp_path, environ=env)).decide(snap.dashboard_url).trusted
