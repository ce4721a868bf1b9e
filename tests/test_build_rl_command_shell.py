"""Shell safety of build_rl_command, property-based: the produced text runs exactly what was intended, nothing else.

Hypothesis feeds arbitrary strings (quotes, ``$()``, backticks, ``;``, globs, unicode, leading ``-``, spaces) as
paths, env values, env names and interpreter paths. The produced ``exports`` + ``command`` and the full ``script`` run
in real ``bash`` with stub ``python`` and ``ray`` executables first on PATH; the stubs record their argv and
environment (NUL-separated). The tests assert the recorded argv/env equal the intended ones exactly, that no other
stub call happened, and that the empty working directory stays empty (every payload tries to create a file there).
Stubs stand in for XTuner and Ray only because a GPU training run cannot run here.

Case counts: XTUNER_RL_CMD_FUZZ_EXAMPLES (command batches, default 300 batches of 1-10 plans, about 1,150 plans) and
XTUNER_RL_CMD_SCRIPT_FUZZ_EXAMPLES (full scripts, default 120); the fuzz suite raises both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xtuner_rl_mcp.core import PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations.build_rl_command import Params, run

COMMAND_EXAMPLES = int(os.environ.get("XTUNER_RL_CMD_FUZZ_EXAMPLES", "300"))
SCRIPT_EXAMPLES = int(os.environ.get("XTUNER_RL_CMD_SCRIPT_FUZZ_EXAMPLES", "120"))
FLAGS = {"sglang": "XTUNER_USE_SGLANG", "vllm": "XTUNER_USE_VLLM", "lmdeploy": "XTUNER_USE_LMDEPLOY"}
#: Variables bash itself sets in every child; not part of what the plan decides.
BASH_OWN = {"_", "SHLVL", "PWD", "OLDPWD"}
BASH = shutil.which("bash")

pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

STUB = r"""#!/bin/bash
{
  printf 'CALL\0%s\0%s\0' "$0" "$#"
  printf '%s\0' "$@"
  /usr/bin/env -0
  printf 'END\0'
} >> "$XRLT_RECORD"
if [ "${1:-}" = status ]; then
  if [ "${XRLT_STATUS_FAIL:-0}" = 1 ]; then exit 1; fi
  printf '======== Autoscaler status ========\nTotal Usage:\n %s CPU\n 0.0/%s GPU (0.0 used of 0.0 reserved in placement groups)\n %s memory\n 0B/9.31GiB object_store_memory\n' "${XRLT_CPUS:-0.0/4.0}" "$XRLT_GPUS" "${XRLT_MEM:-0B/9.0GiB}"
fi
"""

# -- strategies ------------------------------------------------------------------------------------------

_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
CHARS = st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=_BIDI)
#: Every payload that could run something tries to create a file in the (empty) working directory.
PAYLOADS = [
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "' ; touch pwned ; '",
    '" ; touch pwned ; "',
    "&& touch pwned",
    "| tee pwned",
    "> pwned",
    "$(>pwned)",
    "${IFS}",
    "$((1+1))",
    "${HOME:-x}",
    "*",
    "?",
    "[a-z]*",
    "{a,b}",
    "~",
    "~root",
    "!!",
    "-",
    "--config",
    "--work-dir=x",
    "-rf",
    "\\",
    "'",
    '"',
    "'\"'\"'",
    "#",
    " ",
    "a b",
    "%1",
    "é ü 中文 🙂",
    "\u2028",
    "\u00a0",
    "=",
    "\\'",
]
TEXT = st.text(CHARS, min_size=0, max_size=40)
NASTY = st.one_of(
    st.sampled_from(PAYLOADS),
    TEXT,
    st.tuples(TEXT, st.sampled_from(PAYLOADS), TEXT).map("".join),
    st.tuples(st.sampled_from(["-", "--", "-x", "./-"]), TEXT).map("".join),
)
PATH_VALUE = NASTY.filter(lambda s: s != "")
_PLAIN_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
ENV_NAME = st.one_of(
    _PLAIN_NAME,
    _PLAIN_NAME,
    _PLAIN_NAME,
    st.sampled_from(
        [
            *("HOME", "LANG", "IFS", "PATH", "PS4", "BASH_ENV", "ENV", "SHELLOPTS", "UID", "RANDOM", "SECONDS", "PWD"),
            *("EXECIGNORE", "PIPESTATUS", "DIRSTACK", "GLOBIGNORE", "CDPATH", "OPTIND", "xtuner_rl_seen", "WORK_DIR"),
            *("XTUNER_USE_VLLM", "RAY_ADDRESS", "PYTORCH_CUDA_ALLOC_CONF", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"),
            *("REPLY", "MAPFILE", "COLUMNS", "TMOUT", "HISTFILE", "TIMEFORMAT", "FUNCNEST", "MAIL", "HOSTNAME"),
        ]
    ),
).filter(lambda n: not n.startswith(("XRLT_", "LC_", "LD_")) and n != "LANG")
FILE_NAME = st.text(CHARS, min_size=1, max_size=30).filter(
    lambda s: "/" not in s and s not in (".", "..") and len(s.encode()) < 200
)
PYTHON = st.one_of(
    st.sampled_from(["python", "python3", "python3.11", "py_x+y-1.2"]),
    FILE_NAME.map(lambda n: ("PYDIR", n)),  # an absolute path to a stub with this file name
)


@st.composite
def plan_inputs(draw) -> dict:
    args: dict = {
        "config": draw(PATH_VALUE),
        "backend": draw(st.sampled_from(["lmdeploy", "sglang", "vllm"])),
        "python": draw(PYTHON),
        "entry": draw(st.sampled_from(["module", "script"])),
        "allow_unsupported": True,
    }
    for name in ("model_path", "data_path", "eval_data_path", "work_dir"):
        if draw(st.booleans()):
            args[name] = draw(PATH_VALUE)
    if draw(st.booleans()):
        args["num_workers"] = draw(st.integers(1, 64))
    args["extra_env"] = draw(st.dictionaries(ENV_NAME, NASTY, max_size=4))
    return args


# -- harness ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    lab = tmp_path_factory.mktemp("shell-lab")
    for sub in ("bin", "py", "roots", "runs"):
        (lab / sub).mkdir()
    for name in ("python", "python3", "python3.11", "py_x+y-1.2", "ray"):
        _write_stub(lab / "bin" / name)
    return lab


def _write_stub(path: Path) -> None:
    path.write_text(STUB)
    path.chmod(0o755)


def _materialise(args: dict, lab: Path) -> dict:
    """Replace a ("PYDIR", name) python choice by a real stub path under lab/py."""
    args = dict(args)
    if isinstance(args["python"], tuple):
        target = lab / "py" / args["python"][1]
        if not target.exists():
            _write_stub(target)
        args["python"] = str(target)
    return args


def _baseline(lab: Path, record: Path, gpus: int, status_fail: bool = False) -> dict[str, str]:
    """A controlled environment with stale values the plan must override or remove."""
    return {
        "PATH": f"{lab / 'bin'}:/usr/bin:/bin",
        "HOME": str(lab),
        "LC_ALL": "C.UTF-8",
        "XRLT_RECORD": str(record),
        "XRLT_GPUS": f"{gpus}.0",
        "XRLT_STATUS_FAIL": "1" if status_fail else "0",
        "XTUNER_USE_SGLANG": "1",
        "XTUNER_USE_VLLM": "1",
        "XTUNER_USE_LMDEPLOY": "1",
        "RAY_ADDRESS": "10.9.9.9:6379",
        "PYTORCH_CUDA_ALLOC_CONF": "stale",
        "MODEL_PATH": "stale-model",
    }


def _intended_env(args: dict, base: dict[str, str]) -> dict[str, str]:
    """What XTuner needs to see, derived from the inputs independently of the tool."""
    env = dict(base)
    for flag in FLAGS.values():
        env.pop(flag, None)
    env.pop("RAY_ADDRESS", None)
    env[FLAGS[args["backend"]]] = "1"
    if args["backend"] == "sglang":
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] = "1"
        env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] = "False"
    else:
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    env["WORLD_SIZE"] = str(args.get("nodes", 1))
    for pname, ename in (
        ("work_dir", "WORK_DIR"),
        ("model_path", "MODEL_PATH"),
        ("data_path", "DATA_PATH"),
        ("eval_data_path", "EVAL_DATA_PATH"),
    ):
        if pname in args:
            env[ename] = args[pname]
    env.update(args["extra_env"])
    return env


def _intended_argv(args: dict) -> list[str]:
    def arg(p: str) -> str:
        return "./" + p if p.startswith("-") else p

    entry = ["-m", "xtuner.v1.train.cli.rl"] if args["entry"] == "module" else ["xtuner/v1/train/cli/rl.py"]
    argv = [*entry, "--config", arg(args["config"])]
    if "work_dir" in args:
        argv += ["--work-dir", arg(args["work_dir"])]
    workers = args.get("num_workers", args.get("nodes", 1) * args.get("gpus_per_node", 8))
    return [*argv, "--num-workers", str(workers)]


def _program_path(args: dict, lab: Path) -> str:
    return args["python"] if "/" in args["python"] else str(lab / "bin" / args["python"])


def _parse(record: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    """The stub calls in order: (program path, argv, env)."""
    if not record.exists():
        return []
    fields = record.read_bytes().decode("utf-8").split("\0")
    calls, i = [], 0
    while i < len(fields) and fields[i] == "CALL":
        prog, argc = fields[i + 1], int(fields[i + 2])
        argv = fields[i + 3 : i + 3 + argc]
        i += 3 + argc
        env: dict[str, str] = {}
        while fields[i] != "END":
            key, _, value = fields[i].partition("=")
            env[key] = value
            i += 1
        calls.append((prog, argv, env))
        i += 1
    assert fields[i:] == [""], "record has trailing garbage"
    return calls


def _plan(args: dict, lab: Path):
    """Run the tool; None when it refuses the input with a structured error (reserved names and the like)."""
    try:
        return run(Params(**args), RunContext(paths=PathPolicy.from_strings([lab / "roots"])))
    except ToolInputError as exc:
        assert exc.code in {"reserved_env_name", "env_conflict"}, exc.to_dict()
        return None


def _run_bash(text: str, env: dict[str, str], lab: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run ``text`` as a bash script in a fresh, empty working directory."""
    cwd = Path(tempfile.mkdtemp(dir=lab / "runs"))
    script = lab / "runs" / (cwd.name + ".sh")
    script.write_text(text, encoding="utf-8")
    proc = subprocess.run([BASH, str(script)], cwd=cwd, env=env, capture_output=True, timeout=60)
    return proc, cwd


def _strip(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in BASH_OWN}


# -- properties ------------------------------------------------------------------------------------------


@settings(
    max_examples=COMMAND_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.slow
@given(batch=st.lists(plan_inputs(), min_size=1, max_size=10))
def test_exports_and_command_run_exactly_as_intended(lab: Path, batch: list[dict]) -> None:
    """Each plan's exports + command, in its own subshell; many plans per bash process to keep CI fast."""
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    base = _baseline(lab, record, gpus=8)
    cases, parts = [], []
    for raw in batch:
        args = _materialise(raw, lab)
        result = _plan(args, lab)
        if result is None:
            continue
        assert result.argv == [args["python"], *_intended_argv(args)]
        cases.append(args)
        parts.append(f"(\n{result.exports}\n{result.command}\n)")
    proc, cwd = _run_bash("set -euo pipefail\n" + "\n".join(parts) + "\n", base, lab)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert os.listdir(cwd) == [], "something ran besides the planned command"
    calls = _parse(record)
    assert len(calls) == len(cases)
    for args, (prog, argv, env) in zip(cases, calls, strict=True):
        assert prog == _program_path(args, lab)
        assert argv == _intended_argv(args)
        assert _strip(env) == _intended_env(args, base)


@settings(max_examples=SCRIPT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=plan_inputs(),
    nodes=st.integers(1, 3),
    gpus=st.integers(1, 8),
    port=st.integers(1024, 65535),
    host=st.sampled_from(["10.0.0.1", "head-0", "node.example.org"]),
)
@pytest.mark.slow
def test_script_runs_exactly_as_intended(lab: Path, raw: dict, nodes: int, gpus: int, port: int, host: str) -> None:
    """The full head script (and the worker script): ray start, the wait loop, the RL command — nothing else."""
    args = _materialise({**raw, "nodes": nodes, "gpus_per_node": gpus, "ray_port": port, "head_address": host}, lab)
    args.pop("num_workers", None)
    if "work_dir" in args:
        # The script creates the work dir for its log file: keep it one plain entry inside the run's directory.
        wd = args["work_dir"].replace("/", "_")
        args["work_dir"] = wd + "x" if wd in (".", "..") else wd
    result = _plan(args, lab)
    if result is None:
        return
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    base = _baseline(lab, record, gpus=nodes * gpus)
    proc, cwd = _run_bash(result.script, base, lab)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    _take_log(cwd, args.get("work_dir"))
    intended = _intended_env(args, base)
    ray = str(lab / "bin" / "ray")
    calls = _parse(record)
    assert [(p, a) for p, a, _ in calls] == [
        (ray, ["start", "--head", f"--port={port}", f"--num-gpus={gpus}"]),
        (ray, ["status"]),
        (_program_path(args, lab), _intended_argv(args)),
    ]
    for _, _, env in calls:
        assert _strip(env) == intended
    if nodes > 1:
        record.unlink()
        proc, cwd = _run_bash(result.ray_start.worker_script, base, lab)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert os.listdir(cwd) == []
        ((prog, argv, env),) = _parse(record)
        assert (prog, argv) == (ray, ["start", f"--address={host}:{port}", f"--num-gpus={gpus}"])
        assert _strip(env) == intended


def _take_log(cwd: Path, work_dir: str | None) -> None:
    """The one thing the script may leave: its log file (in the work dir, else the working directory). Removed."""
    where = cwd / work_dir if work_dir is not None else cwd
    logs = [p for p in where.iterdir() if p.name.startswith("training_log_") and p.name.endswith(".txt")]
    assert len(logs) == 1 and logs[0].is_file(), os.listdir(where)
    logs[0].unlink()
    if work_dir is not None:
        where.rmdir()
    assert os.listdir(cwd) == [], "something ran besides the planned commands"


# -- the wait loop ---------------------------------------------------------------------------------------


def _simple(lab: Path, **kw):
    args = {"config": "cfg.py", "backend": "sglang", "wait_timeout_s": 1, **kw}
    return run(Params(**args), RunContext(paths=PathPolicy.from_strings([lab / "roots"])))


@pytest.mark.parametrize("shown,fail", [(15, False), (0, True)])
def test_wait_loop_fails_clearly_when_gpus_are_missing(lab: Path, shown: int, fail: bool) -> None:
    result = _simple(lab, nodes=2, head_address="h")
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    proc, _ = _run_bash(result.script, _baseline(lab, record, gpus=shown, status_fail=fail), lab)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "ERROR: Ray shows" in err and "need 16" in err
    assert f"shows {'no' if fail else shown} GPUs" in err
    assert [a[0] for _, a, _ in _parse(record)] == ["start", "status"]  # the RL command never ran


def test_wait_loop_accepts_more_gpus_and_reports(lab: Path) -> None:
    result = _simple(lab)
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    proc, _ = _run_bash(result.script, _baseline(lab, record, gpus=16), lab)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "Ray cluster shows 16 GPUs (need 8)." in proc.stdout.decode()
    assert [Path(p).name for p, _, _ in _parse(record)] == ["ray", "ray", "python"]


ASYNC_LIKE = """\
import os
from xtuner.v1.rl.utils import AcceleratorResourcesConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig
NNODE = int(os.environ.get("WORLD_SIZE", "1"))
resources = AcceleratorResourcesConfig(num_workers=8 * NNODE, num_cpus_per_worker=12, cpu_memory_per_worker=32 * 1024**3)
trainer = RLColocateTrainerConfig(resources=resources)
"""


@pytest.mark.parametrize(
    "cpus,mem,ok",
    [
        ("0.0/106.0", "0B/266.00GiB", True),  # exactly XTuner's need: 8 x 12 + 10 CPUs, 8 x 32 + 10 GiB
        ("2.0/112.0", "0B/1.50TiB", True),
        ("0.0/105.0", "0B/1.50TiB", False),  # one CPU short
        ("0.0/128.0", "0B/265.90GiB", False),  # memory short
        ("8.0/112.0", "0B/300.00GiB", False),  # 112 in total but 8 in use: 104 free
        ("0.0/128.0", "16.00GiB/280.00GiB", False),
    ],
)
def test_resource_check_stops_before_the_run(lab: Path, cpus: str, mem: str, ok: bool) -> None:
    """The script compares Ray's free CPUs and memory with XTuner's need and stops before the run, with numbers."""
    (lab / "roots" / "async_like.py").write_text(ASYNC_LIKE)
    result = _simple(lab, config=str(lab / "roots" / "async_like.py"), backend="lmdeploy")
    assert (result.ray_need.cpus, result.ray_need.memory_gib) == (106, 266)
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    env = {**_baseline(lab, record, gpus=8), "XRLT_CPUS": cpus, "XRLT_MEM": mem}
    proc, cwd = _run_bash(result.script, env, lab)
    progs = [Path(p).name for p, _, _ in _parse(record)]
    if ok:
        assert proc.returncode == 0, proc.stderr.decode()
        assert "(need 106 CPUs, 266 GiB)" in proc.stdout.decode()
        assert progs == ["ray", "ray", "ray", "python"]
        _take_log(cwd, None)
    else:
        assert proc.returncode == 1
        assert "ERROR: XTuner needs 106 CPUs and 266 GiB of Ray memory" in proc.stderr.decode()
        assert progs == ["ray", "ray", "ray"]  # start, the GPU wait, the resource check; never the run


def test_resource_check_unreadable_status_stops(lab: Path) -> None:
    (lab / "roots" / "async_like.py").write_text(ASYNC_LIKE)
    result = _simple(lab, config=str(lab / "roots" / "async_like.py"))
    block = result.script[result.script.index("# 3b.") : result.script.index("# 4.")]
    record = Path(tempfile.mktemp(dir=lab / "runs", suffix=".rec"))
    proc, _ = _run_bash("set -euo pipefail\n" + block, _baseline(lab, record, gpus=8, status_fail=True), lab)
    assert proc.returncode != 0 and "could not read CPU and memory" in proc.stderr.decode()


def test_script_raises_open_files_before_ray_and_logs(lab: Path) -> None:
    result = _simple(lab, work_dir="/data/run 1")
    s = result.script
    assert s.index("\nulimit -n 65536") < s.index("\nray start --head")
    assert "mkdir -p -- '/data/run 1'" in s and '| tee -a -- "$xtuner_rl_log"' in s
    assert result.log_file == "/data/run 1/training_log_<YYYYmmdd_HHMMSS>.txt"


def test_wait_loop_is_bounded(lab: Path) -> None:
    result = _simple(lab, wait_timeout_s=600)
    assert "xtuner_rl_max_checks=300" in result.script and "sleep 2" in result.script


# -- refusals --------------------------------------------------------------------------------------------

CONTROL = st.characters(whitelist_categories=("Cc", "Cs")) | st.sampled_from(list(_BIDI))


@settings(max_examples=300, deadline=None)
@given(
    field=st.sampled_from(["config", "model_path", "data_path", "eval_data_path", "work_dir", "python", "extra_env"]),
    before=TEXT,
    bad=CONTROL,
    after=TEXT,
)
def test_values_a_shell_line_cannot_hold_are_refused(field: str, before: str, bad: str, after: str) -> None:
    """NUL, newline, CR, any other control character, lone surrogates and bidi overrides: a structured error."""
    value = before + bad + after
    args: dict = {"config": "cfg.py", "backend": "sglang"}
    if field == "extra_env":
        args["extra_env"] = {"SOME_VAR": value}
    else:
        args[field] = "/opt/" + value if field == "python" else value
    with pytest.raises(ToolInputError) as exc:
        run(Params(**args), RunContext(paths=PathPolicy.from_strings([tempfile.gettempdir()])))
    assert exc.value.code == "unsafe_shell_value"
    assert f"U+{ord(bad):04X}" in exc.value.message
