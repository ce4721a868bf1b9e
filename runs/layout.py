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
from dataclasses import dataclass, field
from pathlib import Path

from ..core import PathPolicy, ToolInputError

META_FILES = (".xtuner_rl_colocate_trainer", ".xtuner_rl_disaggregated_trainer")
EXP_DIR_RE = re.compile(r"^\d{14}$")
TRAIN_RE = re.compile(r"^train_rollout_(\d+)\.jsonl$")
EVAL_RE = re.compile(r"^eval_rollout_(\d+)\.jsonl$")
CKPT_RE = re.compile(r"^ckpt-step-(\d+)$")
HF_RE = re.compile(r"^hf-step-(\d+)$")
RANK_LOG_RE = re.compile(r"^rank_(\d+)\.log$")
MAX_LISTED = 100_000  # directory entries looked at per folder

SRC_EXP_DIR = "xtuner/v1/train/trainer.py:226-227"
SRC_META = "xtuner/v1/train/rl_trainer.py:828"
SRC_TRACKER = "xtuner/v1/train/rl_trainer.py:610"
SRC_TRAJ = "xtuner/v1/train/rl_trainer.py:942-945"
SRC_EVAL_TRAJ = "xtuner/v1/train/rl_trainer.py:1001-1004"
SRC_ENV_JSON = "xtuner/v1/train/rl_trainer.py:652-661"
SRC_OTEL = "xtuner/v1/rl/trace/runtime.py:434-441"


@dataclass
class RunLayout:
    """What one experiment directory holds (paths are resolved and inside the allowed roots)."""

    exp_dir: Path
    work_dir: Path
    experiments: list[str] = field(default_factory=list)  # sibling experiment names, oldest first
    meta_file: Path | None = None
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
    sandbox_trace: dict[str, int] = field(default_factory=dict)  # fates/spans/llm_calls -> file count
    notes: list[str] = field(default_factory=list)

    @property
    def tracker_format(self) -> str:
        if self.tracker_jsonl is not None:
            return "jsonl"
        if self.tracker_events:
            return "tensorboard"
        return "none"


def _entries(folder: Path) -> list[os.DirEntry[str]]:
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


def _numbered(folder: Path, rx: re.Pattern[str], *, dirs: bool) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for e in _entries(folder):
        m = rx.match(e.name)
        try:
            kind_ok = e.is_dir(follow_symlinks=False) if dirs else e.is_file(follow_symlinks=False)
        except OSError:
            kind_ok = False
        if m and kind_ok:
            out[int(m.group(1))] = Path(e.path)
    return dict(sorted(out.items()))


def _is_exp_dir(p: Path) -> bool:
    return any((p / sub).is_dir() for sub in ("logs", "train_rollout", "eval_rollout", "checkpoints"))


def _meta_exp_dir(work_dir: Path, paths: PathPolicy) -> tuple[Path | None, Path | None]:
    """The latest experiment the meta file names (``exps[-1].exp_dir``, trainer.py:173-175), if readable."""
    for name in META_FILES:
        meta = work_dir / name
        if not meta.is_file():
            continue
        try:
            exps = json.loads(meta.read_text(encoding="utf-8")[: 8 << 20]).get("exps") or []
            raw = exps[-1]["exp_dir"] if exps else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None, meta
        if not raw:
            return None, meta
        cand = Path(raw) if os.path.isabs(raw) else work_dir / raw
        if not cand.is_dir():  # moved run dir: the meta still names the old absolute path
            cand = work_dir / Path(raw).name
        try:
            return paths.check(str(cand), kind="dir", what="experiment directory"), meta
        except ToolInputError:
            return None, meta
    return None, None


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
        return describe(exp, root, paths)
    if _is_exp_dir(root) and not any(EXP_DIR_RE.match(e.name) for e in _entries(root) if e.is_dir()):
        return describe(root, root.parent, paths)
    meta_dir, meta = _meta_exp_dir(root, paths)
    stamped = sorted(e.name for e in _entries(root) if EXP_DIR_RE.match(e.name) and e.is_dir())
    exp = meta_dir or (root / stamped[-1] if stamped else None)
    if exp is None:
        raise ToolInputError(
            "not_a_run_dir",
            f"{raw!r} is neither an XTuner RL experiment directory (logs/, train_rollout/, ...) nor a work dir "
            f"holding one (<YYYYmmddHHMMSS>/ or {META_FILES[0]})",
            "Pass the trainer's work_dir (WORK_DIR) or one experiment directory under it.",
        )
    layout = describe(paths.check(str(exp), kind="dir", what="experiment directory"), root, paths)
    layout.meta_file = meta
    layout.experiments = stamped
    if meta_dir is None and meta is not None:
        layout.notes.append(f"{meta.name} did not name a readable experiment; took the newest directory by name")
    return layout


def describe(exp: Path, work_dir: Path, paths: PathPolicy) -> RunLayout:
    """List what XTuner wrote into ``exp`` (nothing is read beyond directory entries and env.json)."""
    lay = RunLayout(exp_dir=exp, work_dir=work_dir)
    logs = exp / "logs"
    lay.rank_logs = _numbered(logs, RANK_LOG_RE, dirs=False)
    env_json = logs / "env.json"
    if env_json.is_file():
        lay.env_json = env_json
        try:
            data = json.loads(env_json.read_bytes()[: 4 << 20])
            lay.env = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError):
            lay.notes.append("logs/env.json is not valid JSON")
    tracking = logs / "exp_tracking"
    if tracking.is_dir():
        lay.tracker_dir = tracking
        if (tracking / "tracker.jsonl").is_file():
            lay.tracker_jsonl = tracking / "tracker.jsonl"
        lay.tracker_events = sorted(
            Path(e.path) for e in _entries(tracking) if e.name.startswith("events.out.tfevents") and e.is_file()
        )
    lay.train_files = _numbered(exp / "train_rollout", TRAIN_RE, dirs=False)
    lay.eval_files = _numbered(exp / "eval_rollout", EVAL_RE, dirs=False)
    lay.checkpoints = sorted(_numbered(exp / "checkpoints", CKPT_RE, dirs=True))
    lay.hf_exports = sorted(_numbered(exp / "hf", HF_RE, dirs=True))
    lay.otel_traces = _otel_traces(exp, lay.env)
    lay.sandbox_trace = _sandbox_trace(lay.env, work_dir, paths)
    return lay


def _otel_traces(exp: Path, env: dict[str, str]) -> list[Path]:
    """``otel/<run_id>/traces/traces.jsonl`` files, plus the one env.json names (it may live elsewhere)."""
    found = [Path(e.path) / "traces" / "traces.jsonl" for e in _entries(exp / "otel") if e.is_dir()]
    named = env.get("XTUNER_OTEL_JSONL_PATH")
    if named:
        found.append(Path(named))
    out: list[Path] = []
    for p in found:
        if p.is_file() and p not in out:
            out.append(p)
    return out


def _sandbox_trace(env: dict[str, str], work_dir: Path, paths: PathPolicy) -> dict[str, int]:
    """Counts of the sandbox agent loop's per-actor trace files under ``$WORK_DIR/trace`` (trace.py:61)."""
    base = env.get("WORK_DIR") or str(work_dir)
    try:
        trace_dir = paths.check(str(Path(base) / "trace"), kind="dir", what="trace dir")
    except ToolInputError:
        return {}
    counts = {"fates": 0, "spans": 0, "llm_calls": 0}
    for e in _entries(trace_dir):
        kind = e.name.split(".", 1)[0]
        if kind in counts and e.name.endswith(".jsonl"):
            counts[kind] += 1
    return counts
