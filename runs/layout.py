"""Where an XTuner RL run keeps what it writes: find the experiment directory and list its outputs.

Layout at b934f46 (every path below is relative to the experiment directory ``<work_dir>/<YYYYmmddHHMMSS>``, made
by ``XTunerMeta.build`` at xtuner/v1/train/trainer.py:226-227 and recorded in the meta file
``<work_dir>/.xtuner_rl_colocate_trainer`` or ``.xtuner_rl_disaggregated_trainer``, rl_trainer.py:1596,1864):

* ``logs/`` (rl_trainer.py:638) with ``rank_<rank>.log`` (xtuner/v1/utils/logger.py:95) and ``env.json``
  (rl_trainer.py:656); the tracker writes into ``logs/exp_tracking/`` (rl_trainer.py:578,610):
  ``tracker.jsonl`` (xtuner/v1/_writer/jsonl_writer.py:13) or TensorBoard ``events.out.tfevents.*``;
* ``train_rollout/train_rollout_<step>.jsonl`` (rl_trainer.py:942-945), ``eval_rollout/eval_rollout_<step>.jsonl``
  (rl_trainer.py:880-883, 1001-1004);
* ``checkpoints/ckpt-step-<n>`` (rl_trainer.py:792), ``hf/hf-step-<n>`` (rl_trainer.py:845);
* ``otel/<run_id>/traces/traces.jsonl`` when tracing is on (rl_trainer.py:648-649, xtuner/v1/rl/trace/runtime.py:434-441);
* sandbox agent loops write ``$WORK_DIR/trace/{fates,spans,llm_calls}.*.jsonl``
  (xtuner/v1/rl/agent_loop/sandbox_agent_loop/trace.py:56-63, 238, 293-294).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..core import PathKind, PathPolicy, ToolInputError, read_guarded
from ..core.files import file_size, refusal
from .models import TrackerFormat

META_FILES = (".xtuner_rl_colocate_trainer", ".xtuner_rl_disaggregated_trainer")
EXP_DIR_RE = re.compile(r"^\d{14}$")
TRAIN_RE = re.compile(r"^train_rollout_(\d+)\.jsonl$")
EVAL_RE = re.compile(r"^eval_rollout_(\d+)\.jsonl$")
CKPT_RE = re.compile(r"^ckpt-step-(\d+)$")
HF_RE = re.compile(r"^hf-step-(\d+)$")
RANK_LOG_RE = re.compile(r"^rank_(\d+)\.log$")
MAX_LISTED = 100_000  # directory entries looked at per folder
#: Whole-file reads: env.json is ``json.dump(os.environ)`` and the meta file a few lines per experiment.
MAX_ENV_JSON_BYTES = 4 << 20
MAX_META_BYTES = 4 << 20
#: Characters of a path named inside a file that a note quotes.
NAMED_PATH_CHARS = 200

SRC_EXP_DIR = "xtuner/v1/train/trainer.py:226-227"
SRC_META = "xtuner/v1/train/rl_trainer.py:828"
SRC_TRACKER = "xtuner/v1/train/rl_trainer.py:610"
SRC_TRAJ = "xtuner/v1/train/rl_trainer.py:942-945"
SRC_EVAL_TRAJ = "xtuner/v1/train/rl_trainer.py:1001-1004"
SRC_ENV_JSON = "xtuner/v1/train/rl_trainer.py:652-661"
SRC_OTEL = "xtuner/v1/rl/trace/runtime.py:434-441"


@dataclass
class RunLayout:
    """What one experiment directory holds. Every path is resolved and was checked inside the allowed roots; what
    was refused (a link out of the roots, a FIFO, an oversized sidecar) is said in ``notes``, never followed."""

    exp_dir: Path
    work_dir: Path
    experiments: list[str] = field(default_factory=list)  # sibling experiment names, oldest first
    meta_file: Path | None = None
    logs_dir: Path | None = None
    rank_logs: dict[int, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    env_json: Path | None = None
    tracker_dir: Path | None = None
    tracker_jsonl: Path | None = None
    tracker_events: list[Path] = field(default_factory=list)
    train_files: dict[int, Path] = field(default_factory=dict)
    eval_files: dict[int, Path] = field(default_factory=dict)
    checkpoints: list[int] = field(default_factory=list)
    hf_exports: list[int] = field(default_factory=list)
    otel_traces: list[Path] = field(default_factory=list)
    otel_trace_bytes: int = 0
    otel_path_unchecked: bool = False  # env.json names a trace file outside the roots: whether it exists is unknown
    sandbox_trace: dict[str, int] = field(default_factory=dict)  # fates/spans/llm_calls -> file count
    notes: list[str] = field(default_factory=list)

    @property
    def tracker_format(self) -> TrackerFormat:
        if self.tracker_jsonl is not None:
            return "jsonl"
        if self.tracker_events:
            return "tensorboard"
        return "none"


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """Entries of a folder already checked inside the roots (at most ``MAX_LISTED``)."""
    try:
        with os.scandir(folder) as it:
            out = []
            for i, e in enumerate(it):
                if i >= MAX_LISTED:
                    break
                out.append(e)
            return out
    except OSError:
        return []


def _dir_like(e: os.DirEntry[str]) -> bool:
    """A directory or a link (a link is judged by the path policy, never by following it here)."""
    try:
        return e.is_dir(follow_symlinks=False) or e.is_symlink()
    except OSError:
        return False


def _checked(paths: PathPolicy, path: Path, label: str, kind: PathKind, notes: list[str]) -> Path | None:
    """``path`` resolved inside the roots with the wanted kind; None when absent (silently) or refused (noted)."""
    if not os.path.lexists(path):
        return None
    try:
        return paths.check(path, kind=kind, what=label)
    except ToolInputError as exc:
        notes.append(f"{label} {refusal(exc)}: not read")
        return None


def _numbered_files(
    paths: PathPolicy, folder: Path | None, label: str, rx: re.Pattern[str], notes: list[str]
) -> dict[int, Path]:
    """``<name><n>`` regular files of a checked folder; a link or special file in their place is checked or noted."""
    out: dict[int, Path] = {}
    if folder is None:
        return out
    for e in _entries(folder):
        m = rx.match(e.name)
        if not m:
            continue
        try:
            plain = e.is_file(follow_symlinks=False)
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if plain:
            out[int(m.group(1))] = Path(e.path)
        elif not is_dir:
            real = _checked(paths, Path(e.path), f"{label}/{e.name}", "file", notes)
            if real is not None:
                out[int(m.group(1))] = real
    return dict(sorted(out.items()))


def _numbered_dirs(folder: Path | None, rx: re.Pattern[str]) -> list[int]:
    """Steps of ``<name><n>`` directories (names only: nothing inside is read)."""
    if folder is None:
        return []
    found = []
    for e in _entries(folder):
        m = rx.match(e.name)
        try:
            if m and e.is_dir(follow_symlinks=False):
                found.append(int(m.group(1)))
        except OSError:
            continue
    return sorted(found)


def _is_exp_dir(p: Path) -> bool:
    for sub in ("logs", "train_rollout", "eval_rollout", "checkpoints"):
        try:
            mode = os.lstat(p / sub).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
            return True
    return False


def _named(value: str) -> str:
    return value if len(value) <= NAMED_PATH_CHARS else value[:NAMED_PATH_CHARS] + "…"


def _meta_exp_dir(work_dir: Path, paths: PathPolicy, notes: list[str]) -> tuple[Path | None, Path | None]:
    """The latest experiment the meta file names (``exps[-1].exp_dir``, trainer.py:173-175), if readable."""
    for name in META_FILES:
        meta = work_dir / name
        if not os.path.lexists(meta):
            continue
        try:
            data = read_guarded(paths, meta, what=name, limit=MAX_META_BYTES)
        except ToolInputError as exc:
            notes.append(f"{name} {refusal(exc)}: not read")
            return None, None
        try:
            exps = json.loads(data).get("exps") or []
            raw = exps[-1]["exp_dir"] if exps else None
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError, IndexError):
            return None, meta
        if not raw or not isinstance(raw, str):
            return None, meta
        named = Path(raw) if os.path.isabs(raw) else work_dir / raw
        try:
            return paths.check(named, kind="dir", what="experiment directory"), meta
        except ToolInputError as exc:
            if exc.code == "path_outside_roots":
                notes.append(f"{name} names exp_dir {_named(raw)!r} outside the allowed roots: not checked")
        try:  # a moved run dir: the meta still names the old absolute path
            return paths.check(work_dir / Path(raw).name, kind="dir", what="experiment directory"), meta
        except ToolInputError:
            return None, meta
    return None, None


def _stamped(work_dir: Path) -> list[str]:
    """The ``<YYYYmmddHHMMSS>`` experiment directories of a work dir, oldest first."""
    return sorted(e.name for e in _entries(work_dir) if EXP_DIR_RE.match(e.name) and _dir_like(e))


def find_experiment(raw: str, paths: PathPolicy, experiment: str | None = None) -> RunLayout:
    """Resolve a work dir or an experiment dir to one experiment (newest by default) and list its outputs."""
    root = paths.check(raw, kind="dir", what="path")
    if experiment:
        if "/" in experiment or "\\" in experiment or experiment in (".", ".."):
            raise ToolInputError(
                "invalid_arguments",
                f"experiment {experiment!r} must be one directory name under path",
                "Pass the <YYYYmmddHHMMSS> name only; outputs.experiments lists them.",
            )
        exp = paths.check(str(root / experiment), kind="dir", what="experiment")
        named = describe(exp, root, paths)
        named.experiments = _stamped(root)
        return named
    stamped = _stamped(root)
    if _is_exp_dir(root) and not stamped:
        return describe(root, root.parent, paths)
    notes: list[str] = []
    meta_dir, meta = _meta_exp_dir(root, paths, notes)
    chosen = meta_dir or (root / stamped[-1] if stamped else None)
    if chosen is None:
        raise ToolInputError(
            "not_a_run_dir",
            f"{raw!r} is neither an XTuner RL experiment directory (logs/, train_rollout/, ...) nor a work dir "
            f"holding one (<YYYYmmddHHMMSS>/ or {META_FILES[0]})" + (f"; {'; '.join(notes)}" if notes else ""),
            "Pass the trainer's work_dir (WORK_DIR) or one experiment directory under it.",
        )
    layout = describe(paths.check(str(chosen), kind="dir", what="experiment directory"), root, paths)
    layout.meta_file = meta
    layout.experiments = stamped
    layout.notes[:0] = notes
    if meta_dir is None and meta is not None:
        layout.notes.append(f"{meta.name} did not name a readable experiment; took the newest directory by name")
    return layout


def describe(exp: Path, work_dir: Path, paths: PathPolicy) -> RunLayout:
    """List what XTuner wrote into ``exp``: directory entries, and env.json (capped). Each sub-directory and each
    file that is not a plain regular file is checked with the path policy on its own; refusals become notes."""
    lay = RunLayout(exp_dir=exp, work_dir=work_dir)
    notes = lay.notes
    logs = lay.logs_dir = _checked(paths, exp / "logs", "logs", "dir", notes)
    lay.rank_logs = _numbered_files(paths, logs, "logs", RANK_LOG_RE, notes)
    if logs is not None:
        lay.env_json, lay.env = _read_env(paths, logs / "env.json", notes)
        tracking = lay.tracker_dir = _checked(paths, logs / "exp_tracking", "logs/exp_tracking", "dir", notes)
        if tracking is not None:
            lay.tracker_jsonl = _checked(
                paths, tracking / "tracker.jsonl", "logs/exp_tracking/tracker.jsonl", "file", notes
            )
            events = [e for e in _entries(tracking) if e.name.startswith("events.out.tfevents")]
            for e in events:
                real = _checked(paths, Path(e.path), f"logs/exp_tracking/{e.name}", "file", notes)
                if real is not None:
                    lay.tracker_events.append(real)
            lay.tracker_events.sort()
    for sub, rx, target in (("train_rollout", TRAIN_RE, lay.train_files), ("eval_rollout", EVAL_RE, lay.eval_files)):
        target.update(_numbered_files(paths, _checked(paths, exp / sub, sub, "dir", notes), sub, rx, notes))
    lay.checkpoints = _numbered_dirs(_checked(paths, exp / "checkpoints", "checkpoints", "dir", notes), CKPT_RE)
    lay.hf_exports = _numbered_dirs(_checked(paths, exp / "hf", "hf", "dir", notes), HF_RE)
    _otel_traces(lay, paths)
    lay.sandbox_trace = _sandbox_trace(lay.env, work_dir, paths, notes)
    return lay


def _read_env(paths: PathPolicy, env_json: Path, notes: list[str]) -> tuple[Path | None, dict[str, str]]:
    """``logs/env.json`` (capped): the run's environment as strings."""
    if not os.path.lexists(env_json):
        return None, {}
    try:
        data = read_guarded(paths, env_json, what="logs/env.json", limit=MAX_ENV_JSON_BYTES)
    except ToolInputError as exc:
        notes.append(f"logs/env.json {refusal(exc)}: not read")
        return None, {}
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        notes.append("logs/env.json is not valid JSON")
        return env_json, {}
    return env_json, ({str(k): str(v) for k, v in obj.items()} if isinstance(obj, dict) else {})


def _otel_traces(lay: RunLayout, paths: PathPolicy) -> None:
    """``otel/<run_id>/traces/traces.jsonl`` files, plus the one env.json names (it may live elsewhere: a path
    outside the roots is noted as not checked -- never looked at, so the answer says nothing about it)."""
    notes = lay.notes
    found: list[Path] = []
    otel = _checked(paths, lay.exp_dir / "otel", "otel", "dir", notes)
    if otel is not None:
        for e in _entries(otel):
            if _dir_like(e):
                label = f"otel/{e.name}/traces/traces.jsonl"
                real = _checked(paths, Path(e.path) / "traces" / "traces.jsonl", label, "file", notes)
                if real is not None:
                    found.append(real)
    named = lay.env.get("XTUNER_OTEL_JSONL_PATH")
    if named:
        try:
            found.append(paths.check(named, kind="file", what="XTUNER_OTEL_JSONL_PATH"))
        except ToolInputError as exc:
            if exc.code == "path_outside_roots":
                lay.otel_path_unchecked = True
                notes.append(
                    f"logs/env.json names XTUNER_OTEL_JSONL_PATH={_named(named)!r} outside the allowed roots: "
                    "not checked"
                )
            elif exc.code != "path_not_found":
                notes.append(f"XTUNER_OTEL_JSONL_PATH {refusal(exc)}: not read")
    for p in found:
        if p in lay.otel_traces:
            continue
        try:
            lay.otel_trace_bytes += file_size(paths, p, what="trace file")
        except (ToolInputError, OSError):
            continue
        lay.otel_traces.append(p)


def _sandbox_trace(env: dict[str, str], work_dir: Path, paths: PathPolicy, notes: list[str]) -> dict[str, int]:
    """Counts of the sandbox agent loop's per-actor trace files under ``$WORK_DIR/trace`` (trace.py:61)."""
    named = env.get("WORK_DIR")
    try:
        trace_dir = paths.check(str(Path(named or str(work_dir)) / "trace"), kind="dir", what="trace dir")
    except ToolInputError as exc:
        if named and exc.code == "path_outside_roots":
            notes.append(f"logs/env.json names WORK_DIR={_named(named)!r} outside the allowed roots: not checked")
        return {}
    counts = {"fates": 0, "spans": 0, "llm_calls": 0}
    for e in _entries(trace_dir):
        kind = e.name.split(".", 1)[0]
        if kind in counts and e.name.endswith(".jsonl"):
            counts[kind] += 1
    return counts
