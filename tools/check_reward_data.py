"""check_reward_data: validate XTuner RL JSONL data before launch, streaming, line-accurate, on files of any size.

Missing ``reward_model.ground_truth`` only surfaces in XTuner once GPUs and rollout servers are up
(xtuner/v1/rl/judger/native.py:196-199); this tool finds it, and every other break of the line contract
(``references/schemas/rl-sample.schema.json``), in seconds. The scanning engine lives in ``jsonl_scan`` (imported
lazily); this module resolves paths, spreads the work (in process, over local processes, or over an existing Ray
cluster) and turns codes into findings and conversion suggestions.
"""

from __future__ import annotations

import glob
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .common import (
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

DATA_DOC = "xtuner-rl://references/data-contract"
#: Below this total size everything is scanned in this process (process start-up would cost more than it saves).
PARALLEL_MIN_BYTES = 8 << 20
#: Byte-range size for parallel scans: small enough to balance two cores and report progress, big enough to amortise.
MIN_RANGE_BYTES = 4 << 20
MAX_RANGE_BYTES = 32 << 20
MAX_FILES = 10_000
MAX_EXAMPLES_TOTAL = 200  # detail="normal"
RAY_CONNECT_TIMEOUT_S = 2.0
GLOB_CHARS = frozenset("*?[")

# --------------------------------------------------------------------------------------------------------
# Code catalog: title, category, reference anchor, XTuner source, fix
# --------------------------------------------------------------------------------------------------------

SRC_READ = "xtuner/v1/datasets/jsonl.py:609-611,626-627"
SRC_PROMPT = "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:52,58-60"
SRC_DS = "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:75-81"
SRC_GT = "xtuner/v1/rl/judger/native.py:135,196-199"
SRC_GSM8K = "xtuner/v1/rl/judger/gsm8k.py:29-39,74"
SRC_CONVERT = "xtuner/v1/utils/convert_gsm8k.py:31-58"

MISSING_GT = "reward_data_missing_ground_truth"
OTHER = "data_format_other"

#: code -> (title, category, anchor, source, fix)
CODES: dict[str, tuple[str, str, str, str | None, str]] = {
    "invalid_utf8": (
        "Line is not valid UTF-8",
        OTHER,
        "line-contract",
        "xtuner/v1/datasets/jsonl.py:626",
        "Re-encode the file as UTF-8 (e.g. iconv -f <encoding> -t UTF-8); XTuner decodes every line strictly.",
    ),
    "nul_byte": (
        "Line contains NUL bytes",
        OTHER,
        "line-contract",
        SRC_READ,
        "Remove the NUL bytes (often a zero-filled tail after an interrupted copy); regenerate the file.",
    ),
    "bom": (
        "Line starts with a UTF-8 byte-order mark",
        OTHER,
        "line-contract",
        SRC_READ,
        "Strip the BOM (e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' file.jsonl); json.loads refuses it.",
    ),
    "blank_line": (
        "Empty or whitespace-only line",
        OTHER,
        "line-contract",
        SRC_READ,
        "Delete blank lines (e.g. sed -i '/^[[:space:]]*$/d' file.jsonl): XTuner parses every line, blank ones fail.",
    ),
    "line_too_long": (
        "Line over the size limit (reported, not checked)",
        OTHER,
        "length-limits",
        None,
        "An RL prompt line is rarely this large; if it is intended, raise max_line_bytes and check again.",
    ),
    "truncated_last_line": (
        "Last line is cut off",
        OTHER,
        "line-contract",
        SRC_READ,
        "The file ends mid-record (interrupted write or copy); regenerate it or delete the last line.",
    ),
    "invalid_json": (
        "Line is not valid JSON",
        OTHER,
        "line-contract",
        SRC_READ,
        "Write one complete JSON object per line (json.dumps per record); a pretty-printed or JSON-array file is not JSONL.",
    ),
    "not_an_object": (
        "Line is JSON but not an object",
        OTHER,
        "line-contract",
        "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:51-52",
        "Each line must be one JSON object {prompt, data_source, reward_model, ...}.",
    ),
    "missing_final_newline": (
        "Last line has no trailing newline",
        OTHER,
        "line-contract",
        SRC_READ,
        "Harmless: XTuner reads the last line without a newline too. Add one for tools that expect it.",
    ),
    "raw_hf_gsm8k_line": (
        "Raw Hugging Face GSM8K record (question/answer), not converted",
        OTHER,
        "conversion",
        SRC_CONVERT,
        "Convert with XTuner's convert_gsm8k.py (see suggestions): it builds prompt, data_source and reward_model.",
    ),
    "messages_instead_of_prompt": (
        "'messages' key instead of 'prompt'",
        OTHER,
        "prompt",
        SRC_PROMPT,
        "Rename 'messages' to 'prompt' (see suggestions); XTuner reads item['prompt'] and raises KeyError: 'prompt'.",
    ),
    "missing_prompt": (
        "No 'prompt'",
        OTHER,
        "prompt",
        SRC_PROMPT,
        'Add "prompt": [{"role": "user", "content": "..."}]; XTuner raises KeyError: \'prompt\' at dataset build.',
    ),
    "prompt_not_list": (
        "'prompt' is not a list of messages",
        OTHER,
        "prompt",
        SRC_PROMPT,
        'Wrap the text: "prompt": [{"role": "user", "content": <text>}]; the chat template needs a message list.',
    ),
    "prompt_empty": (
        "'prompt' is an empty list",
        OTHER,
        "prompt",
        SRC_PROMPT,
        "Give every line at least one message (normally a single user turn).",
    ),
    "bad_message": (
        "A prompt message is not {role, content}",
        OTHER,
        "prompt",
        SRC_PROMPT,
        "Each message needs a non-empty string 'role' and a 'content' (a string, or a list of {type, ...} parts).",
    ),
    "vlm_prompt_missing_key": (
        "Object prompt lacks 'messages' or 'tools'",
        OTHER,
        "prompt",
        "xtuner/v1/datasets/rl_tokenize_fn/qwen3_vl_tokenize_fn.py:71-75",
        "An object prompt needs both 'messages' and 'tools' (tools may be null); or use the list form.",
    ),
    "prompt_vlm_object": (
        "Object prompt {messages, tools}: read only by the VLM tokenize function",
        OTHER,
        "prompt",
        "xtuner/v1/datasets/rl_tokenize_fn/qwen3_vl_tokenize_fn.py:71-75",
        "Fine with RLQwen3VLTokenizeFnConfig; with RLTextTokenizeFnConfig use the list form (prompt = the messages).",
    ),
    "prompt_blank": (
        "Prompt text is empty",
        OTHER,
        "prompt",
        SRC_PROMPT,
        "Every message content is empty or whitespace: the model gets nothing to answer. Fill in the question.",
    ),
    "missing_data_source": (
        "No 'data_source'",
        OTHER,
        "data-source",
        SRC_DS,
        'Add "data_source" (e.g. "openai/gsm8k"); XTuner asserts "data_source is required in item" when sampling.',
    ),
    "data_source_not_string": (
        "'data_source' is not a string",
        OTHER,
        "data-source",
        SRC_DS,
        "Use the data set's name as a string; it becomes a dict key for judger routing (a list or object crashes).",
    ),
    "empty_data_source": (
        "'data_source' is an empty string",
        OTHER,
        "data-source",
        SRC_DS,
        'Name the data set (e.g. "openai/gsm8k"); composed judgers and per-source eval metrics route by it.',
    ),
    "missing_reward_model": (
        "No 'reward_model'",
        MISSING_GT,
        "reward-model",
        SRC_GT,
        'Add "reward_model": {"style": "rule", "ground_truth": "<answer>"}; the judger asserts on it mid-run.',
    ),
    "reward_model_not_object": (
        "'reward_model' is not an object",
        OTHER,
        "reward-model",
        SRC_GT,
        'Make it an object: "reward_model": {"style": "rule", "ground_truth": "<answer>"}.',
    ),
    "missing_ground_truth": (
        "No reward_model.ground_truth",
        MISSING_GT,
        "reward-model",
        SRC_GT,
        "Add reward_model.ground_truth (the reference answer, as a string); XTuner only fails on it after GPUs and "
        "rollout servers are up.",
    ),
    "empty_ground_truth": (
        "reward_model.ground_truth is an empty string",
        MISSING_GT,
        "reward-model",
        SRC_GT,
        "Fill in the reference answer; an empty label gives no meaningful reward.",
    ),
    "extra_info_not_object": (
        "'extra_info' is not an object",
        OTHER,
        "extra-info",
        "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:51,61",
        "Make extra_info an object or drop the key: XTuner writes extra_info['raw_prompt'] into it.",
    ),
    "gsm8k_ground_truth_not_string": (
        "GSM8K ground truth is not a string",
        OTHER,
        "gsm8k-scoring",
        SRC_GSM8K,
        'Store it as a string ("72", not 72): the judger compares strings exactly, so every reward would be 0.',
    ),
    "gsm8k_ground_truth_format": (
        "GSM8K ground truth can never be matched",
        OTHER,
        "gsm8k-scoring",
        SRC_GSM8K,
        "Use the bare number as the judger extracts it: digits and '.', optional leading '-', no ',', '$', spaces, "
        "units or fractions ('1200', not '1,200' or '$1200').",
    ),
    "gsm8k_ground_truth_noncanonical": (
        "GSM8K ground truth in an unusual number form",
        OTHER,
        "gsm8k-scoring",
        SRC_GSM8K,
        "Write it the way a model writes the answer ('72', not '72.0', '072' or '72.'): the match is exact.",
    ),
    "gsm8k_prompt_no_answer_marker": (
        "GSM8K prompt does not ask for '#### <answer>'",
        OTHER,
        "gsm8k-scoring",
        "xtuner/v1/rl/judger/gsm8k.py:29-34",
        "Keep the converter's instruction in the prompt: Let's think step by step and output the final answer "
        'after "####". (xtuner/v1/utils/convert_gsm8k.py:31); without it most responses score 0.',
    ),
    "dapo_ground_truth_not_string": (
        "DAPO math ground truth is not a string",
        OTHER,
        "reward-model",
        "xtuner/v1/rl/judger/dapo_math.py:125,180",
        "Store it as a string: the DAPO scorer calls str methods on it and crashes on a number.",
    ),
    "dapo_prompt_no_answer_marker": (
        "DAPO math prompt does not ask for an 'Answer:' line",
        OTHER,
        "reward-model",
        "xtuner/v1/rl/judger/dapo_math.py:158,172-174",
        "Ask for a final line 'Answer: <answer>': the scorer extracts only that, otherwise every reward is -1.",
    ),
    "geo3k_ground_truth_not_string": (
        "Geometry3K ground truth is not a string",
        OTHER,
        "reward-model",
        "xtuner/v1/rl/judger/geo3k.py:27",
        "Store it as a string, as xtuner/v1/utils/convert_geometry3k.py does; it is handed to mathruler's grader.",
    ),
    "geo3k_prompt_no_boxed_marker": (
        "Geometry3K prompt does not ask for \\boxed{}",
        OTHER,
        "reward-model",
        "xtuner/v1/rl/judger/geo3k.py:24,42",
        "Ask for the final answer in \\boxed{} (the judger extracts the boxed content by default, use_boxed=True).",
    ),
    "unknown_data_source": (
        "data_source differs from the one the chosen judger is built for",
        OTHER,
        "data-source",
        "xtuner/v1/utils/convert_gsm8k.py:43",
        "Check the judger choice; if the data is right, ignore this (the built-in judgers do not route by it), but a "
        "ComposedJudgerConfig routes by data_source and must name it.",
    ),
}

#: File-level findings (not per line).
FILE_CODES: dict[str, tuple[str, str, str, str | None, str]] = {
    "empty_file": (
        "File has no lines",
        OTHER,
        "line-contract",
        "xtuner/v1/datasets/jsonl.py:609-611",
        "Point the config at the real data file; an empty data set gives no samples.",
    ),
    "parquet_file": (
        "File is Parquet, not JSONL",
        OTHER,
        "conversion",
        "xtuner/v1/datasets/jsonl.py:609-611",
        "Convert it to JSONL (see suggestions); XTuner's RL dataset reads one JSON object per line.",
    ),
    "file_unreadable": (
        "File could not be read",
        OTHER,
        "line-contract",
        None,
        "Check the path and permissions; with engine='ray' the file must exist at the same path on every node.",
    ),
    "duplicate_prompts": (
        "Duplicate prompts",
        OTHER,
        "common-mistakes",
        None,
        "Deduplicate unless the repetition is intended; duplicates over-weight some questions (and, in eval sets, "
        "the metric).",
    ),
}

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
        description="summary: counts and findings only; normal: up to 200 examples; full: every example kept.",
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
            files = sorted({paths.check(h, kind="file") for h in target.rglob("*.jsonl") if h.is_file()})
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
    from .jsonl_scan import plan_ranges

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
    from . import jsonl_scan

    total = sum(e - s for _, s, e in tasks)
    if workers <= 1 or total < PARALLEL_MIN_BYTES or len(tasks) == 1:
        results = []
        done = 0
        for path, start, end in tasks:
            results.append(jsonl_scan.scan_range(path, start, end, opts, lambda n, d=done: progress(d + n, "scanning")))
            done += end - start
            progress(done, f"scanned {os.path.basename(path)}")
        return results, "in_process", 1
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    n = min(workers, len(tasks))
    results = []
    done = 0
    ex = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
    try:
        pending = {ex.submit(jsonl_scan.scan_range, p, s, e, opts): (p, s, e) for p, s, e in tasks}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                p, s, e = pending.pop(fut)
                results.append(fut.result())
                done += e - s
                progress(done, f"scanned {os.path.basename(p)} bytes {s}-{e}")
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    return results, "processes", n


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
    from .ray_cluster import classify_address, split_hostport, tcp_check

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

    from . import jsonl_scan

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
            remote = ray.remote(num_cpus=1, max_retries=1)(_ray_task_function())
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
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=min(left, 1.0))
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
                title="Convert raw Hugging Face GSM8K to XTuner's RL format",
                command="python xtuner/v1/utils/convert_gsm8k.py --input-dir openai/gsm8k --out-dir <out_dir>",
                explanation="Run in an XTuner checkout (needs the datasets package): it loads the HF data set "
                "(--input-dir is a hub name or a local HF data-set directory, config 'main') and writes "
                "train.jsonl and test.jsonl in the contract's shape. For a local JSONL of question/answer lines "
                f"such as {hf}, this command does the same conversion line by line:\n"
                + _py_command(_HF_GSM8K_SCRIPT, hf, _out_path(hf, ".xtuner")),
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
    from . import jsonl_scan

    t0 = time.monotonic()
    files = resolve_files(params.path, ctx.paths)
    parquet = [str(f) for f in files if _is_parquet(f)]
    scan_files = [(str(f), f.stat().st_size) for f in files if str(f) not in parquet]
    total = sum(size for _, size in scan_files)
    opts = jsonl_scan.ScanOptions(
        judger=params.judger, max_line_bytes=params.max_line_bytes, max_examples_per_code=params.max_examples_per_code
    )

    def progress(done: int, message: str) -> None:
        ctx.progress(float(min(done, total)), float(total), message)

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
    from . import jsonl_scan as js

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
    examples.sort(key=lambda e: (js.CODE_SEVERITY[e.code] != js.BLOCKER, e.file, e.line))
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
        summary = f"OK: {head}" + (f"; {warn} warning(s)" if warn else "; no problems found")
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


def _merge_stats(per_file: list[Any]) -> DataStats:
    from . import jsonl_scan as js

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


SPEC = ToolSpec(
    name="check_reward_data",
    title="Check RL JSONL data",
    description=DESCRIPTION,
    params=Params,
    result=Result,
    run=run,
    read_only=True,
    idempotent=True,
    open_world=False,
)
