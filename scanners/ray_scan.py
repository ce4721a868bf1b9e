"""Spreading a scan over an EXISTING Ray cluster (never started here): one task per byte range, the scanner's source
shipped by value so that workers need only msgspec (and jsonschema), results gathered against a deadline."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core import ToolInputError
from ..core.limits import UNLIMITED, CallLimits
from . import jsonl, jsonl_blocks, jsonl_contract, jsonl_duplicates, jsonl_precise, jsonl_results
from .jsonl_results import RangeResult, ScanOptions, range_from_dict
from .parallel import WORKER_HASH_ENV, Progress, Task

if TYPE_CHECKING:
    from ray import ObjectRef

#: The scanner's modules in import order: what a Ray worker rebuilds as a private package (they import only each
#: other, relatively, plus the stdlib, msgspec and jsonschema).
SCANNER_MODULES = (jsonl_contract, jsonl_results, jsonl_duplicates, jsonl_precise, jsonl_blocks, jsonl)

# The Ray task is compiled from source in a namespace that is not an importable module, so cloudpickle ships it
# by value; it receives the scanner modules' source texts and runs them as a private package. Workers therefore
# need only msgspec (and jsonschema, a Ray dependency) -- not this package.
_RAY_TASK_SOURCE = """
def scan_ranges_remote(sources, digest, schema, path, ranges, opts):
    import dataclasses, sys, types
    name = "_xtuner_rl_mcp_jsonl_scan_" + digest
    pkg = sys.modules.get(name)
    if pkg is None or not getattr(pkg, "_complete", False):
        pkg = types.ModuleType(name)
        pkg.__path__ = []
        sys.modules[name] = pkg
        for module_name, source in sources:
            mod = types.ModuleType(name + "." + module_name)
            mod.__package__ = name
            sys.modules[mod.__name__] = mod
            exec(compile(source, module_name + ".py", "exec"), mod.__dict__)
            setattr(pkg, module_name, mod)
        pkg._complete = True
    pkg.jsonl_precise.set_schema(schema)
    options = pkg.jsonl_results.ScanOptions(**opts)
    return [dataclasses.asdict(pkg.jsonl.scan_range(path, s, e, options)) for s, e in ranges]
"""

_RAY_LOCK = threading.Lock()


def _ray_task_function() -> Callable[..., list[dict[str, Any]]]:
    """``scan_ranges_remote`` above, compiled in a namespace of its own: (sources, digest, schema, path, ranges,
    options) -> each range's result as a dict."""
    namespace: dict[str, Any] = {"__name__": "__xtuner_rl_mcp_ray_task__"}
    exec(compile(_RAY_TASK_SOURCE, "<check_reward_data ray task>", "exec"), namespace)
    return namespace["scan_ranges_remote"]


def scanner_sources() -> tuple[list[tuple[str, str]], str]:
    """(module name, source text) of every scanner module in import order, and a digest of them all."""
    sources = [
        (m.__name__.rsplit(".", 1)[-1], Path(inspect.getfile(m)).read_text(encoding="utf-8")) for m in SCANNER_MODULES
    ]
    digest = hashlib.sha256("\0".join(f"{name}\0{text}" for name, text in sources).encode()).hexdigest()[:16]
    return sources, digest


def scan_ray(
    tasks: list[Task],
    opts: ScanOptions,
    address: str,
    timeout_s: float,
    progress: Progress,
    limits: CallLimits = UNLIMITED,
) -> tuple[list[RangeResult], str, int]:
    """Scan the tasks on the Ray cluster at ``address``: the GCS ``ip:port`` the caller already allowed by the
    address policy (``cluster.ray_address``, which this layer does not import) and checked to answer. Stops at
    ``timeout_s`` or when the call is cancelled."""
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
        sources, digest = scanner_sources()
        schema = jsonl_precise.load_schema()
        try:
            ray.init(
                address=address,
                logging_level=logging.ERROR,
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
            sources_ref = ray.put(sources)
            refs = {remote.remote(sources_ref, digest, schema, p, [(s, e)], opts_dict): (p, s, e) for p, s, e in tasks}
            results = _gather(ray, refs, len(tasks), timeout_s, progress, limits)
            nodes = len([n for n in ray.nodes() if n.get("Alive")])
        finally:
            ray.shutdown()
    finally:
        _RAY_LOCK.release()
    return results, "ray", nodes


def _gather(
    ray: ModuleType,
    refs: dict[ObjectRef[list[dict[str, Any]]], Task],
    n_tasks: int,
    timeout_s: float,
    progress: Progress,
    limits: CallLimits,
) -> list[RangeResult]:
    """The tasks' range results as they finish (a failed task becomes a range with an error); cancel the rest at
    the deadline or when the call is cancelled."""
    deadline = time.monotonic() + timeout_s
    results: list[RangeResult] = []
    done = 0
    while refs:
        if limits.cancelled.is_set():
            for ref in refs:
                ray.cancel(ref, force=True)
            limits.check()
        left = deadline - time.monotonic()
        if left <= 0:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise ToolInputError(
                "ray_timeout",
                f"{len(refs)} of {n_tasks} Ray tasks unfinished after {timeout_s:.0f} s",
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
                results.append(RangeResult(p, s, e, error=msg[:500]))
            else:
                results.extend(range_from_dict(d) for d in payload)
            done += e - s
            progress(done, f"ray: scanned {os.path.basename(p)} bytes {s}-{e}")
    return results
