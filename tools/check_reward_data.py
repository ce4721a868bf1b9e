"""check_reward_data: validate XTuner RL JSONL data before launch, streaming, line-accurate, on files of any size.

Missing ``reward_model.ground_truth`` only surfaces in XTuner once GPUs and rollout servers are up
(xtuner/v1/rl/judger/native.py:196-199); this tool finds it, and every other break of the line contract
(``references/schemas/rl-sample.schema.json``), in seconds. The scanning engine lives in ``jsonl_scan`` (imported
lazily); this module resolves paths, spreads the work (in process, over local processes, or over an existing Ray
cluster) and turns codes into findings and conversion suggestions.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import (
    DEFAULT_LIST_CAP,
    Detail,
    Finding,
    PathPolicy,
    RunContext,
    ToolInputError,
    ToolResult,
    ToolSpec,
    cap,
    params_model_config,
    sort_findings,
)
from ..xtuner_rules.data_contract import CODES, FILE_CODES, SRC_CONVERT, SRC_GSM8K

DATA_DOC = "xtuner-rl://references/data-contract"
#: Below this total size everything is scanned in this process (process start-up would cost more than it saves).
PARALLEL_MIN_BYTES = 8 << 20
#: Byte-range size for parallel scans: small enough to balance two cores and report progress, big enough to amortise.
MIN_RANGE_BYTES = 4 << 20
MAX_RANGE_BYTES = 32 << 20
#: Environment of scan workers (local processes and Ray tasks). PYTHONHASHSEED=0: every worker hashes prompts alike,
#: so duplicates are found across ranges (jsonl_scan.HASH_DOMAIN).
WORKER_HASH_ENV = {"PYTHONHASHSEED": "0"}
#: glibc malloc settings for local workers: each block allocates and frees a few MiB, which by default goes back to
#: the kernel and faults in again (about 500 page faults per MiB scanned; ~20% of a worker's time). Other C libraries
#: ignore these variables.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(64 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}
MAX_FILES = 10_000
MAX_WALK_DIRS = 20_000
MAX_EXAMPLES_TOTAL = 50  # detail="normal": every code gets its first examples before any gets more
RAY_CONNECT_TIMEOUT_S = 2.0
GLOB_CHARS = frozenset("*?[")

# --------------------------------------------------------------------------------------------------------
# Parameters and result
# --------------------------------------------------------------------------------------------------------

Judger = Literal["gsm8k", "dapo_math", "geo3k", "generic", "auto"]


class Params(BaseModel):
    model_config = params_model_config()

    path: str = Field(
        description="A .jsonl file, a directory (every *.jsonl below it) or a glob such as 'data/*.jsonl'. Relative "
        "paths start at the first allowed root; only files inside the allowed roots are read."
    )
    role: Literal["train", "eval"] = Field(
        default="train", description="What the data is for: duplicates weigh more in an eval set (metric bias)."
    )
    judger: Judger = Field(
        default="auto",
        description="Which judger's rules to add to the generic contract: gsm8k (GSM8KJudgerConfig), dapo_math, "
        "geo3k, generic (contract only) or auto (per line from data_source: openai/gsm8k -> gsm8k, "
        "hiyouga/geometry3k -> geo3k, anything else generic).",
    )
    max_examples_per_code: int = Field(
        default=20, ge=0, le=1000, description="Offending lines listed per error code (file, line, pointer, excerpt)."
    )
    max_line_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=256 << 20,
        description="Lines longer than this (bytes) are reported as line_too_long and not loaded.",
    )
    engine: Literal["local", "ray"] = Field(
        default="local",
        description="local: this machine (all cores for big files). ray: spread files and byte ranges over an "
        "EXISTING Ray cluster at ray_address (never starts one); files must be at the same path on every node.",
    )
    ray_address: str | None = Field(
        default=None,
        description="GCS address host:port of the existing Ray cluster for engine='ray'; default RAY_ADDRESS.",
    )
    ray_timeout_s: float = Field(
        default=600.0,
        ge=5,
        le=7200,
        description="engine='ray': give up (and cancel the tasks) after this many seconds.",
    )
    detail: Detail = Field(
        default="normal",
        description="summary: counts and findings only; normal: up to 50 examples, spread over the codes; full: every "
        "example kept (max_examples_per_code per code).",
    )


class FileReport(BaseModel):
    path: str
    lines: int
    valid: int
    invalid: int
    bytes: int
    error: str | None = Field(default=None, description="Why the file could not be (fully) read")


class LineExample(BaseModel):
    file: str
    line: int = Field(description="1-based line number")
    code: str
    severity: str
    pointer: str = Field(description="JSON pointer of the offending value ('' = the whole line)")
    message: str
    excerpt: str = Field(description="Start of the line (at most 160 characters)")
    schema_error: str | None = Field(
        default=None, description="jsonschema's explanation against rl-sample.schema.json (JSON path: message)"
    )


class PromptLength(BaseModel):
    count: int
    min: int | None = None
    p50: int | None = None
    p90: int | None = None
    p99: int | None = None
    max: int | None = None
    unit: str = "characters of all message texts (exact below 1024, within 1% above)"


class DataStats(BaseModel):
    data_sources: dict[str, int] = Field(description="Lines per data_source value ('<missing>' etc. for bad ones)")
    ground_truth_types: dict[str, int] = Field(description="JSON type of reward_model.ground_truth -> lines")
    prompt_roles: dict[str, int] = Field(description="Messages per role over all well-formed prompts")
    empty_prompts: int = Field(description="Prompts whose every message text is empty or whitespace")
    duplicate_prompts: int = Field(description="Lines whose prompt text equals an earlier line's (hash-based)")
    duplicate_prompts_checked: int = Field(description="Prompts the duplicate count covers (capped at 4 million)")
    prompt_length: PromptLength


class Suggestion(BaseModel):
    title: str
    owner: str = "data_preparation"
    command: str = Field(description="Exact command to run (POSIX shell)")
    explanation: str
    source: str | None = None


class Result(ToolResult):
    ok: bool = Field(description="True when no line has a blocker")
    judger: str
    role: str
    engine: str = Field(description="What ran the scan: in_process, processes or ray")
    workers: int
    seconds: float
    files_scanned: int
    lines: int
    valid: int
    invalid: int
    bytes: int
    errors_by_code: dict[str, int] = Field(description="Lines per code (blocker, warning and info codes)")
    files: list[FileReport]
    files_omitted: int = 0
    examples: list[LineExample]
    examples_omitted: int = 0
    stats: DataStats
    findings: list[Finding]
    suggestions: list[Suggestion]


DESCRIPTION = """\
Validate XTuner V1 RL training/eval JSONL data against the line contract (prompt, data_source, \
reward_model.ground_truth, extra_info) and the chosen judger's rules (GSM8K string ground truth that can match, \
'####' instruction, ...), streaming, with line numbers, JSON pointers, per-code counts, data statistics and the exact \
conversion command for raw GSM8K or chat 'messages' files. Uses both cores for big files; engine='ray' spreads the \
work over an existing Ray cluster.
Use when: before launching a run, or when a run failed with KeyError: 'prompt', 'data_source is required in item' or \
'RolloutState must have reward_model with ground_truth'; on a file, a directory or a glob of .jsonl.
Not for: Python config files (use inspect_config) or logs of a failed run (use diagnose_symptom)."""

# --------------------------------------------------------------------------------------------------------
# Path resolution
# --------------------------------------------------------------------------------------------------------


def _glob_base(pattern: str) -> str:
    parts = Path(pattern).parts
    base: list[str] = []
    for part in parts:
        if any(ch in part for ch in GLOB_CHARS):
            break
        base.append(part)
    return str(Path(*base)) if base else "."


def _jsonl_under(root: Path) -> list[Path]:
    """Regular *.jsonl files below ``root`` (symlinked directories are not entered); bounded walk."""
    found: list[Path] = []
    for i, (dirpath, dirnames, filenames) in enumerate(os.walk(root)):
        if i >= MAX_WALK_DIRS or len(found) > MAX_FILES:
            raise ToolInputError(
                "too_many_files", f"{root} is too large a tree to search", "Pass a narrower directory or a glob."
            )
        dirnames.sort()
        for name in filenames:
            if name.endswith(".jsonl") and os.path.isfile(os.path.join(dirpath, name)):
                found.append(Path(dirpath, name))
    return found


def resolve_files(raw: str, paths: PathPolicy) -> list[Path]:
    """The data files ``raw`` names (file, directory, or glob), each checked against the path policy."""
    text = os.path.expanduser(raw.strip()) if raw else raw
    if text and any(ch in text for ch in GLOB_CHARS):
        pattern = text if os.path.isabs(text) else str(paths.roots[0] / text)
        base = paths.check(_glob_base(pattern), kind="dir", what="glob base directory")
        found = []
        for i, hit in enumerate(glob.iglob(pattern, recursive=True)):
            if i >= MAX_FILES * 4:
                break
            if os.path.isfile(hit):
                found.append(hit)
        files = sorted({paths.check(h, kind="file") for h in found})
        if not files:
            raise ToolInputError(
                "no_files_matched", f"glob {raw!r} matched no file (searched under {base})", "Check the pattern."
            )
    else:
        target = paths.check(text, kind="any")
        if target.is_dir():
            files = sorted({paths.check(h, kind="file") for h in _jsonl_under(target)})
            if not files:
                raise ToolInputError(
                    "no_jsonl_files", f"directory {raw!r} holds no *.jsonl file", "Pass the data file itself."
                )
        else:
            files = [target]
    if len(files) > MAX_FILES:
        raise ToolInputError(
            "too_many_files", f"{len(files)} files match {raw!r}; at most {MAX_FILES}", "Narrow the path or glob."
        )
    return files


# --------------------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------------------

Task = tuple[str, int, int]  # path, start, end


def _plan(files: list[tuple[str, int]], parallel: bool, workers: int) -> list[Task]:
    from ..scanners.jsonl import plan_ranges

    total = sum(size for _, size in files)
    chunk = max(MIN_RANGE_BYTES, min(MAX_RANGE_BYTES, total // max(1, workers * 4)))
    tasks: list[Task] = []
    for path, size in files:
        if parallel and size >= PARALLEL_MIN_BYTES:
            tasks.extend((path, s, e) for s, e in plan_ranges(size, chunk))
        else:
            tasks.append((path, 0, size))
    return tasks


def _scan_local(
    tasks: list[Task], opts: Any, workers: int, progress: Callable[[int, str], None]
) -> tuple[list[Any], str, int]:
    """Scan tasks in this process (small inputs) or over ``workers`` local worker processes."""
    from ..scanners import jsonl as jsonl_scan

    total = sum(e - s for _, s, e in tasks)
    if workers > 1 and total >= PARALLEL_MIN_BYTES and len(tasks) > 1:
        try:
            return (
                _scan_processes(tasks, opts, min(workers, len(tasks)), progress),
                "processes",
                min(workers, len(tasks)),
            )
        except _WorkersUnavailable:
            pass  # e.g. the package is not importable by a fresh interpreter: scan here instead
    results = []
    done = 0
    for path, start, end in tasks:
        results.append(jsonl_scan.scan_range(path, start, end, opts, lambda n, d=done: progress(d + n, "scanning")))
        done += end - start
        progress(done, f"scanned {os.path.basename(path)}")
    return results, "in_process", 1


class _WorkersUnavailable(Exception):
    pass


def _scan_processes(tasks: list[Task], opts: Any, n: int, progress: Callable[[int, str], None]) -> list[Any]:
    """Byte ranges over ``n`` worker processes, fed from a shared queue (balanced; progress per range).

    Workers are fresh interpreters running ``jsonl_scan.worker_main`` (started with ``subprocess``, not
    multiprocessing: a 'spawn' pool re-imports the caller's ``__main__``, which breaks unguarded scripts). They are
    ours alone and are always reaped: stdin closed, then killed if they do not exit.
    """
    import queue
    import subprocess
    import sys

    from ..scanners import jsonl as jsonl_scan

    cmd = [sys.executable, "-c", "from xtuner_rl_mcp.scanners.jsonl import worker_main; worker_main()"]
    env = {**os.environ, **WORKER_HASH_ENV, **WORKER_MALLOC_ENV}
    procs: list[subprocess.Popen] = []
    todo: queue.Queue = queue.Queue()
    for task in tasks:
        todo.put(task)
    done_q: queue.Queue = queue.Queue()

    def drive(proc: subprocess.Popen) -> None:
        while True:
            try:
                task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                jsonl_scan.send_message(proc.stdin, (*task, opts))
                done_q.put((task, jsonl_scan.recv_message(proc.stdout)))
            except Exception as exc:  # worker died or pipe broke: report, and stop using this worker
                done_q.put((task, exc))
                return

    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            )
        threads = [threading.Thread(target=drive, args=(p,), daemon=True) for p in procs]
        for t in threads:
            t.start()
        results: list[Any] = []
        retry: list[Task] = []
        done = 0
        failed = 0
        while len(results) + failed < len(tasks):
            try:
                task, res = done_q.get(timeout=1.0)
            except queue.Empty:
                if not any(t.is_alive() for t in threads) and done_q.empty():
                    break  # every worker is gone; whatever is left is scanned below
                continue
            if isinstance(res, Exception):
                failed += 1
                retry.append(task)
                continue
            results.append(res)
            done += task[2] - task[1]
            progress(done, f"scanned {os.path.basename(task[0])} bytes {task[1]}-{task[2]}")
        if not results and tasks:
            raise _WorkersUnavailable
        for t in threads:
            t.join()
        while True:  # ranges no worker could take (a worker died): scan them here
            try:
                retry.append(todo.get_nowait())
            except queue.Empty:
                break
        for path, start, end in retry:
            results.append(jsonl_scan.scan_range(path, start, end, opts))
            done += end - start
            progress(done, f"scanned {os.path.basename(path)} bytes {start}-{end}")
        return results
    except OSError as exc:
        raise _WorkersUnavailable from exc
    finally:
        for p in procs:
            with contextlib.suppress(OSError):
                p.stdin.close()  # type: ignore[union-attr]
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            with contextlib.suppress(OSError):
                p.stdout.close()  # type: ignore[union-attr]


# The Ray task is compiled from source in a namespace that is not an importable module, so cloudpickle ships it
# by value; it receives jsonl_scan's source text and runs it in a private module. Workers therefore need only
# msgspec (and jsonschema, a Ray dependency) -- not this package.
_RAY_TASK_SOURCE = """
def scan_ranges_remote(source, digest, schema, path, ranges, opts):
    import dataclasses, sys, types
    name = "_xtuner_rl_mcp_jsonl_scan_" + digest
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        exec(compile(source, "jsonl_scan.py", "exec"), mod.__dict__)
    mod.set_schema(schema)
    options = mod.ScanOptions(**opts)
    return [dataclasses.asdict(mod.scan_range(path, s, e, options)) for s, e in ranges]
"""

_RAY_LOCK = threading.Lock()


def _ray_task_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "__xtuner_rl_mcp_ray_task__"}
    exec(compile(_RAY_TASK_SOURCE, "<check_reward_data ray task>", "exec"), namespace)
    return namespace["scan_ranges_remote"]


def _resolve_ray_address(params: Params, environ: Any) -> tuple[str, int, str]:
    from ..cluster.ray import classify_address, split_hostport, tcp_check

    raw = params.ray_address or environ.get("RAY_ADDRESS")
    if not raw or not raw.strip():
        raise ToolInputError(
            "ray_address_required",
            "engine='ray' needs the address of an existing Ray cluster",
            "Pass ray_address='<head>:6379' (or set RAY_ADDRESS); this tool never starts a cluster.",
        )
    kind, note = classify_address(raw)
    if kind != "gcs" or raw.strip().lower() in ("auto", "local"):
        raise ToolInputError("ray_address_invalid", f"ray_address {raw!r}: {note}", "Pass the GCS address host:port.")
    host, port = split_hostport(raw)
    why = tcp_check(host, port, RAY_CONNECT_TIMEOUT_S)
    if why:
        raise ToolInputError(
            "ray_unreachable",
            f"no Ray GCS answers at {host}:{port} ({why})",
            "Start the cluster first (ray start --head ...) or fix ray_address; or use engine='local'.",
        )
    return host, port, f"{host}:{port}"


def _scan_ray(
    tasks: list[Task], opts: Any, params: Params, environ: Any, progress: Callable[[int, str], None]
) -> tuple[list[Any], str, int]:
    import dataclasses
    import hashlib

    from ..scanners import jsonl as jsonl_scan

    _, _, address = _resolve_ray_address(params, environ)
    for key, value in (("RAY_py_gcs_connect_timeout_s", "5"), ("RAY_gcs_rpc_server_connect_timeout_s", "2")):
        os.environ.setdefault(key, value)  # bound the connect phase (read when ray is imported)
    try:
        import ray
    except ImportError:
        raise ToolInputError(
            "ray_not_installed", "engine='ray' needs the ray package here", "pip install 'ray[default]'"
        ) from None
    if not _RAY_LOCK.acquire(blocking=False):
        raise ToolInputError("ray_busy", "another engine='ray' check is running in this server", "Retry when it ends.")
    try:
        if ray.is_initialized():
            raise ToolInputError(
                "ray_already_connected", "this process is already connected to Ray", "Use engine='local' here."
            )
        source = Path(jsonl_scan.__file__).read_text(encoding="utf-8")
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        schema = jsonl_scan.load_schema()
        try:
            ray.init(
                address=address,
                logging_level="ERROR",
                log_to_driver=False,
                namespace="xtuner_rl_mcp_check_reward_data",
            )
        except Exception as exc:
            raise ToolInputError(
                "ray_connect_failed", f"could not connect to Ray at {address}: {type(exc).__name__}: {exc}"[:500]
            ) from None
        try:
            remote = ray.remote(num_cpus=1, max_retries=1, runtime_env={"env_vars": WORKER_HASH_ENV})(
                _ray_task_function()
            )
            opts_dict = dataclasses.asdict(opts)
            source_ref = ray.put(source)
            refs = {remote.remote(source_ref, digest, schema, p, [(s, e)], opts_dict): (p, s, e) for p, s, e in tasks}
            deadline = time.monotonic() + params.ray_timeout_s
            results: list[Any] = []
            done = 0
            while refs:
                left = deadline - time.monotonic()
                if left <= 0:
                    for ref in refs:
                        ray.cancel(ref, force=True)
                    raise ToolInputError(
                        "ray_timeout",
                        f"{len(refs)} of {len(tasks)} Ray tasks unfinished after {params.ray_timeout_s:.0f} s",
                        "The cluster may have no free CPU (a running job holds them); raise ray_timeout_s or use "
                        "engine='local'.",
                    )
                ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=min(left, 0.5))
                for ref in ready:
                    p, s, e = refs.pop(ref)
                    try:
                        payload = ray.get(ref)
                    except Exception as exc:
                        msg = f"Ray task failed: {type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"
                        results.append(jsonl_scan.RangeResult(p, s, e, error=msg[:500]))
                    else:
                        results.extend(jsonl_scan.range_from_dict(d) for d in payload)
                    done += e - s
                    progress(done, f"ray: scanned {os.path.basename(p)} bytes {s}-{e}")
            nodes = len([n for n in ray.nodes() if n.get("Alive")])
        finally:
            ray.shutdown()
    finally:
        _RAY_LOCK.release()
    return results, "ray", nodes


# --------------------------------------------------------------------------------------------------------
# Findings and suggestions
# --------------------------------------------------------------------------------------------------------


def _finding(code: str, severity: str, evidence: str, location: str | None, table: dict) -> Finding:
    title, category, anchor, source, fix = table[code]
    return Finding(
        id=f"data.{code}",
        severity=severity,  # type: ignore[arg-type]
        category=category,  # type: ignore[arg-type]
        title=title,
        evidence=evidence,
        location=location,
        fix=fix,
        reference=f"{DATA_DOC}#{anchor}",
        source=source,
        owner="data_preparation",
    )


def _out_path(path: str, suffix: str) -> str:
    p = Path(path)
    return str(p.with_name(p.stem + suffix + ".jsonl"))


# A converter for raw HF GSM8K JSONL lines (question/answer), reproducing convert_gsm8k.py's record shape.
_HF_GSM8K_SCRIPT = r"""import json, re, sys
INSTR = " Let\u0027s think step by step and output the final answer after \"####\"."
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for i, line in enumerate(src):
        if not line.strip():
            continue
        r = json.loads(line)
        m = re.search(r"#### (\-?[0-9\.\,]+)", r["answer"])
        if m is None:
            sys.exit(f"line {i + 1}: answer has no #### <number>")
        rec = {"data_source": "openai/gsm8k",
               "prompt": [{"role": "user", "content": r["question"] + INSTR}],
               "ability": "math",
               "reward_model": {"style": "rule", "ground_truth": m.group(1).replace(",", "")},
               "extra_info": {"index": i, "answer": r["answer"], "question": r["question"]}}
        dst.write(json.dumps(rec, ensure_ascii=False) + "\n")
"""

_MESSAGES_SCRIPT = r"""import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for line in src:
        if not line.strip():
            continue
        r = json.loads(line)
        if "prompt" not in r and "messages" in r:
            r = {"prompt": r.pop("messages"), **r}
        dst.write(json.dumps(r, ensure_ascii=False) + "\n")
"""

_GSM8K_GT_SCRIPT = r"""import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as dst:
    for line in src:
        if not line.strip():
            continue
        r = json.loads(line)
        rm = r.get("reward_model")
        if isinstance(rm, dict) and rm.get("ground_truth") is not None:
            g = rm["ground_truth"]
            if isinstance(g, float) and g.is_integer():
                g = int(g)
            rm["ground_truth"] = str(g).replace(",", "").replace("$", "").strip()
        dst.write(json.dumps(r, ensure_ascii=False) + "\n")
"""

_PARQUET_SCRIPT = r"""import sys
import pandas as pd
pd.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient="records", lines=True, force_ascii=False)
"""


def _py_command(script: str, src: str, dst: str) -> str:
    return f"python3 -c {shlex.quote(script)} {shlex.quote(src)} {shlex.quote(dst)}"


def _suggestions(per_file: list[Any], parquet: list[str]) -> list[Suggestion]:
    out: list[Suggestion] = []

    def first_with(code: str) -> str | None:
        return next((fr.path for fr in per_file if fr.codes.get(code)), None)

    hf = first_with("raw_hf_gsm8k_line")
    if hf:
        out.append(
            Suggestion(
                title="Convert Hugging Face GSM8K with XTuner's converter",
                command="python xtuner/v1/utils/convert_gsm8k.py --input-dir openai/gsm8k --out-dir <out_dir>",
                explanation="Run in an XTuner checkout (needs the datasets package). --input-dir is a hub name or a "
                "local Hugging Face data-set directory (config 'main'); it writes <out_dir>/train.jsonl and "
                "<out_dir>/test.jsonl in the contract's shape.",
                source=SRC_CONVERT,
            )
        )
        out.append(
            Suggestion(
                title="Convert a local JSONL of raw GSM8K question/answer lines",
                command=_py_command(_HF_GSM8K_SCRIPT, hf, _out_path(hf, ".xtuner")),
                explanation="Same record shape as convert_gsm8k.py (instruction appended to the question, "
                "data_source openai/gsm8k, ground truth = the number after '#### ' without commas), line by line, "
                "for a file such as this one that is already JSONL.",
                source=SRC_CONVERT,
            )
        )
    msg = first_with("messages_instead_of_prompt")
    if msg:
        out.append(
            Suggestion(
                title="Rename 'messages' to 'prompt'",
                command=_py_command(_MESSAGES_SCRIPT, msg, _out_path(msg, ".prompt")),
                explanation="XTuner reads item['prompt']; this keeps every other key. Lines still lacking "
                "data_source or reward_model.ground_truth need them added from the source data (check again).",
                source="xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:52",
            )
        )
    gt = first_with("gsm8k_ground_truth_not_string") or first_with("gsm8k_ground_truth_format")
    if gt:
        out.append(
            Suggestion(
                title="Normalise GSM8K ground truths to bare number strings",
                command=_py_command(_GSM8K_GT_SCRIPT, gt, _out_path(gt, ".gt")),
                explanation="Turns 72 / 72.0 into \"72\" and strips ',' '$' and spaces, the way the judger "
                "normalises the model's answer; ground truths that are still not numbers are reported again.",
                source=SRC_GSM8K,
            )
        )
    for pq in parquet[:1]:
        out.append(
            Suggestion(
                title="Convert Parquet to JSONL",
                command=_py_command(_PARQUET_SCRIPT, pq, _out_path(pq, "")),
                explanation="Needs pandas and pyarrow. Check the converted file again: the columns must already "
                "follow the contract (prompt, data_source, reward_model).",
            )
        )
    return out


# --------------------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------------------


def _is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def run(params: Params, ctx: RunContext) -> Result:
    from ..scanners import jsonl as jsonl_scan

    t0 = time.monotonic()
    files = resolve_files(params.path, ctx.paths)
    parquet = [str(f) for f in files if _is_parquet(f)]
    scan_files = [(str(f), f.stat().st_size) for f in files if str(f) not in parquet]
    total = sum(size for _, size in scan_files)
    opts = jsonl_scan.ScanOptions(
        judger=params.judger, max_line_bytes=params.max_line_bytes, max_examples_per_code=params.max_examples_per_code
    )

    high = [0]

    def progress(done: int, message: str) -> None:  # monotonic even if a range is rescanned after a worker died
        high[0] = max(high[0], min(done, total))
        ctx.progress(float(high[0]), float(total), message)

    progress(0, f"checking {len(scan_files)} file(s), {total} bytes")
    if params.engine == "ray":
        tasks = _plan(scan_files, True, 64)
        results, engine, workers = _scan_ray(tasks, opts, params, ctx.environ, progress)
    else:
        workers = max(1, min(os.cpu_count() or 1, 8))
        tasks = _plan(scan_files, workers > 1 and total >= PARALLEL_MIN_BYTES, workers)
        results, engine, workers = _scan_local(tasks, opts, workers, progress)
    progress(total, "done")

    by_file: dict[str, list[Any]] = {}
    for r in results:
        by_file.setdefault(r.path, []).append(r)
    per_file = [jsonl_scan.merge_ranges(p, by_file.get(p, []), opts) for p, _ in scan_files]
    return _build_result(params, per_file, parquet, engine, workers, time.monotonic() - t0)


def _build_result(
    params: Params, per_file: list[Any], parquet: list[str], engine: str, workers: int, seconds: float
) -> Result:
    from ..scanners import jsonl as js

    codes: dict[str, int] = {}
    first_locs: dict[str, list[str]] = {}
    examples: list[LineExample] = []
    for fr in per_file:
        for code, n in fr.codes.items():
            codes[code] = codes.get(code, 0) + n
        for code, exs in fr.examples.items():
            locs = first_locs.setdefault(code, [])
            for ex in exs:
                if len(locs) < 3:
                    locs.append(f"{fr.path}:{ex.line}")
                examples.append(
                    LineExample(
                        file=fr.path,
                        line=ex.line,
                        code=code,
                        severity=js.CODE_SEVERITY[code],
                        pointer=ex.pointer,
                        message=ex.message,
                        excerpt=ex.excerpt,
                        schema_error=ex.schema_error,
                    )
                )
    lines = sum(fr.lines for fr in per_file)
    valid = sum(fr.valid for fr in per_file)
    invalid = sum(fr.invalid for fr in per_file)
    nbytes = sum(fr.bytes for fr in per_file)

    findings: list[Finding] = []
    for code, n in codes.items():
        sev = js.CODE_SEVERITY[code]
        locs = first_locs.get(code, [])
        evidence = f"{n} of {lines} lines; first at {', '.join(locs)}" if locs else f"{n} of {lines} lines"
        findings.append(_finding(code, sev, evidence, locs[0] if locs else None, CODES))
    for fr in per_file:
        if fr.error:
            findings.append(_finding("file_unreadable", "blocker", fr.error, fr.path, FILE_CODES))
        elif fr.lines == 0:
            findings.append(_finding("empty_file", "blocker", f"{fr.path} is empty", fr.path, FILE_CODES))
    for pq in parquet:
        findings.append(
            _finding("parquet_file", "blocker", f"{pq} starts with the Parquet magic 'PAR1'", pq, FILE_CODES)
        )

    stats = _merge_stats(per_file)
    if stats.duplicate_prompts:
        sev = "warning" if params.role == "eval" else "info"
        ev = f"{stats.duplicate_prompts} of {stats.duplicate_prompts_checked} prompts repeat an earlier prompt"
        findings.append(_finding("duplicate_prompts", sev, ev, None, FILE_CODES))
    findings = sort_findings(findings)

    ok = not any(f.severity == "blocker" for f in findings)
    examples = _round_robin(examples)
    if params.detail == "summary":
        kept, omitted = [], len(examples)
    elif params.detail == "normal":
        kept, omitted = cap(examples, MAX_EXAMPLES_TOTAL)
    else:
        kept, omitted = examples, 0
    file_reports = [
        FileReport(path=fr.path, lines=fr.lines, valid=fr.valid, invalid=fr.invalid, bytes=fr.bytes, error=fr.error)
        for fr in per_file
    ] + [FileReport(path=pq, lines=0, valid=0, invalid=0, bytes=0, error="Parquet file, not JSONL") for pq in parquet]
    shown_files, files_omitted = cap(file_reports, DEFAULT_LIST_CAP)

    blockers = sorted((c for c in codes if js.CODE_SEVERITY[c] == js.BLOCKER), key=lambda c: -codes[c])
    nfiles = len(per_file) + len(parquet)
    head = f"{valid}/{lines} lines valid in {nfiles} file(s) ({nbytes} bytes, judger={params.judger})"
    if ok:
        warn = sum(1 for f in findings if f.severity == "warning")
        notes = len(findings) - warn
        summary = f"OK: {head}" + (f"; {warn} warning(s)" if warn else "; no problems found")
        summary += f", {notes} note(s)" if notes else ""
    else:
        top = ", ".join(f"{c} x{codes[c]}" for c in blockers[:4]) or ", ".join(
            f.id for f in findings if f.severity == "blocker"
        )
        summary = f"NOT OK: {head}; {invalid} invalid line(s): {top}"
    return Result(
        summary=summary,
        ok=ok,
        judger=params.judger,
        role=params.role,
        engine=engine,
        workers=workers,
        seconds=round(seconds, 3),
        files_scanned=nfiles,
        lines=lines,
        valid=valid,
        invalid=invalid,
        bytes=nbytes,
        errors_by_code=dict(sorted(codes.items(), key=lambda kv: -kv[1])),
        files=shown_files,
        files_omitted=files_omitted,
        examples=kept,
        examples_omitted=omitted,
        stats=stats,
        findings=findings,
        suggestions=_suggestions(per_file, parquet),
    )


def _round_robin(examples: list[LineExample]) -> list[LineExample]:
    """Blocker codes first; the first example of every code, then the second of every code, and so on."""
    from ..scanners import jsonl as js

    order = {"blocker": 0, "warning": 1, "info": 2}
    by_code: dict[str, list[LineExample]] = {}
    for ex in sorted(examples, key=lambda e: (e.file, e.line)):
        by_code.setdefault(ex.code, []).append(ex)
    codes = sorted(by_code, key=lambda c: (order[js.CODE_SEVERITY[c]], -len(by_code[c]), c))
    out: list[LineExample] = []
    for rank in range(max((len(v) for v in by_code.values()), default=0)):
        out.extend(by_code[c][rank] for c in codes if rank < len(by_code[c]))
    return out


def _merge_stats(per_file: list[Any]) -> DataStats:
    from ..scanners import jsonl as js

    st = js.merge_stats(fr.stats for fr in per_file)
    hist = st.length_hist
    n = sum(hist.values())
    dup, checked = js.duplicates_across(per_file)
    return DataStats(
        data_sources=st.data_sources,
        ground_truth_types=st.ground_truth_types,
        prompt_roles=st.prompt_roles,
        empty_prompts=st.empty_prompts,
        duplicate_prompts=dup,
        duplicate_prompts_checked=checked,
        prompt_length=PromptLength(
            count=n,
            min=min(hist) if hist else None,
            p50=js.percentile(hist, n, 0.5),
            p90=js.percentile(hist, n, 0.9),
            p99=js.percentile(hist, n, 0.99),
            max=max(hist) if hist else None,
        ),
    )


def check_path(path: str, *, roots: list[str] | None = None, **params: Any) -> Result:
    """Scan ``path`` without MCP (benchmarks, scripts): same result as the tool. Roots default to the path's folder."""
    target = os.path.abspath(os.path.expanduser(path))
    base = target if os.path.isdir(target) else os.path.dirname(_glob_base(target) if "*" in target else target)
    ctx = RunContext(paths=PathPolicy.from_strings(roots or [base]))
    return run(Params(path=target, **params), ctx)


SPEC = ToolSpec("check_reward_data", "Check RL JSONL data", DESCRIPTION, Params, Result, run)
