"""Streaming summary of trajectory files (``train_rollout_<step>.jsonl`` / ``eval_rollout_<step>.jsonl``).

What XTuner writes (``_save_trajectories``, xtuner/v1/train/rl_trainer.py:1431-1499; eval: ``_save_eval_trajectories``,
:1501-1530): a first line of batch statistics (``reward_mean`` ... ``total_len``), then one compact JSON object per
sample with ``group_id`` (shared by the ``prompt_repeat_k`` samples of one prompt), ``status``, ``finish_reason``,
``error_msg``, ``prompt``, ``label`` (``reward_model.ground_truth``), ``response``, ``reward`` (``reward["score"]``),
``prompt_len``, ``response_len``, ``reward_payload`` and ``agent``. Train files hold only groups that passed
``is_valid_for_training`` (rl_trainer.py:1436; aborted/failed/filtered groups are dropped, :260-267); eval files hold
every sample.

The same fast path as ``check_reward_data`` (scanners/jsonl.py): the file is read a block (about 1 MiB of whole lines)
at a time and each block is decoded by ONE typed ``msgspec`` call as a JSON array of records holding only the fields
used here (everything else -- prompts, payloads, agent traces -- is skipped by the decoder without building
objects); a block that does not decode goes line by line, and a line that still fails is counted as unreadable.
Memory per file is bounded: the group table (one small list per ``group_id``, at most ``MAX_GROUPS``) and capped
counters. Each GSM8K sample is judged again by XTuner's rule (:func:`gsm8k_verdict`), so a reward of 0 can be told
apart as a wrong answer, a label or answer format the exact match cannot meet, a cut-off response, or a judge that
scores a matching answer 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
from msgspec import Struct

from ..core import PathPolicy, open_guarded
from ..core.limits import UNLIMITED, CallLimits
from ..scanners.jsonl_contract import GSM8K_ANSWER_RE, gsm8k_label_code

BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 64 << 20
MAX_GROUPS = 1 << 20
MAX_ERROR_KEYS = 200
EXAMPLE_CHARS = 240

#: The GSM8K judger reads only the last 300 characters of a response (xtuner/v1/rl/judger/gsm8k.py:7,29-30).
GSM8K_TAIL_CHARS = 300
GSM8K_SOURCES = ("openai/gsm8k", "gsm8k")
#: Characters of a label or an answer a verdict example keeps (a number is short; anything longer is cut).
LABEL_CHARS = 40
#: What the GSM8K judger rule says about one train sample, see :func:`gsm8k_verdict`.
VERDICTS = (
    "rewarded",
    "wrong",
    "label_format",
    "answer_form",
    "no_answer",
    "no_answer_truncated",
    "judge_zero",
    "rewarded_unmatched",
)
#: ``finish_reason`` of a response cut at max_tokens (xtuner/v1/data_proto/rl_data.py:202,220; rollout/worker.py:885).
LENGTH_REASON = "length"


class _Rec(Struct, gc=False):
    """The fields of one trajectory line this engine reads; unknown members are skipped by the decoder.
    ``group_id``, ``label`` and ``data_source`` are whatever JSON the dataset carried (a label may be a string, a
    number or an object), hence ``Any``."""

    group_id: Any = None
    status: str | None = None
    finish_reason: str | None = None
    error_msg: str | None = None
    label: Any = None
    response: str | None = None
    reward: float | None = None
    response_len: int | None = None
    data_source: Any = None
    total_len: int | None = None  # only in the summary line


_LINE = msgspec.json.Decoder(_Rec)
_BLOCK = msgspec.json.Decoder(list[_Rec])


@dataclass(frozen=True)
class VerdictExample:
    """One sample behind a verdict, for quoting: its label, the judged answer and the end of the response."""

    label: str  # repr of the label as the file holds it ("'72.0'", '72', 'None')
    label_code: str | None  # the data-contract code of the label (gsm8k_label_code)
    answer: str | None
    tail: str


def gsm8k_answer(response: str) -> str | None:
    """The answer XTuner's GSM8K judger extracts: the last '#### <number>' within the last 300 characters, with ','
    and '$' removed (``extract_solution``, xtuner/v1/rl/judger/gsm8k.py:29-39)."""
    found = GSM8K_ANSWER_RE.findall(response[-GSM8K_TAIL_CHARS:])
    return found[-1].replace(",", "").replace("$", "") if found else None


def _same_number(answer: str, label: Any) -> bool:
    """Whether the answer and the label name the same number though their strings differ ('72' and '72.0')."""
    if isinstance(label, bool) or not isinstance(label, str | int | float):
        return False
    text = str(label).replace(",", "").strip()
    if len(text) > LABEL_CHARS or len(answer) > LABEL_CHARS:
        return False
    try:
        return Decimal(answer) == Decimal(text)
    except InvalidOperation:
        return False


def _shown(label: Any) -> str:
    """A label for quoting, at most LABEL_CHARS long (a huge one is cut before it is copied)."""
    if isinstance(label, str):
        return repr(label[:LABEL_CHARS])
    if label is None or isinstance(label, bool | int | float):
        return repr(label)[:LABEL_CHARS]
    return f"<a JSON {type(label).__name__}>"


def gsm8k_verdict(response: str, label: Any, reward: float | None, truncated: bool) -> str:
    """The GSM8K judger's rule applied to one sample -- the answer compared as an exact string with the label
    (``compute_reward``, gsm8k.py:70-77) -- and what the outcome says about a reward of 0:

    ``rewarded`` answer == label and scored; ``wrong`` another number; ``label_format`` the same number, but the label
    is written in a form a model does not write ('72.0', 72, '1,000': the data-contract codes of
    ``gsm8k_label_code``); ``answer_form`` the same number, a canonical label, the model writing it otherwise
    ('72.00'); ``no_answer`` / ``no_answer_truncated`` no '#### <number>' in the tail, the response ended by itself /
    cut at the length limit; ``judge_zero`` answer == label and still 0; ``rewarded_unmatched`` scored though the rule
    finds no match (the run is judged by something else)."""
    answer = gsm8k_answer(response)
    scored = reward is not None and reward > 0
    if answer is not None and isinstance(label, str) and answer == label:
        return "rewarded" if scored else "judge_zero"
    if scored:
        return "rewarded_unmatched"
    if answer is None:
        return "no_answer_truncated" if truncated else "no_answer"
    if _same_number(answer, label):
        return "label_format" if gsm8k_label_code(label) else "answer_form"
    return "wrong"


@dataclass
class FileStats:
    """One trajectory file, summarised."""

    step: int
    path: str
    bytes: int = 0
    samples: int = 0
    unreadable: int = 0
    reward_n: int = 0
    reward_sum: float = 0.0
    reward_sq: float = 0.0
    reward_min: float | None = None
    reward_max: float | None = None
    reward_positive: int = 0  # score > 0: what the default eval metric counts (xtuner/v1/rl/evaluator.py:23)
    groups: int = 0
    groups_no_signal: int = 0  # groups of 2+ samples whose rewards are all equal: zero advantage, no gradient
    groups_all_zero: int = 0
    truncated: int = 0
    status: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    missing_label: int = 0
    response_len_sum: int = 0
    response_len_n: int = 0
    response_len_max: int = 0
    gsm8k_verdicts: dict[str, int] = field(default_factory=dict)  # verdict -> GSM8K samples, see gsm8k_verdict
    gsm8k_examples: dict[str, list[VerdictExample]] = field(default_factory=dict)  # first two per verdict
    group_sizes: dict[int, int] = field(default_factory=dict)

    @property
    def reward_mean(self) -> float | None:
        return self.reward_sum / self.reward_n if self.reward_n else None

    @property
    def reward_std(self) -> float | None:
        if self.reward_n < 2:
            return None
        mean = self.reward_sum / self.reward_n
        var = max(0.0, (self.reward_sq - self.reward_n * mean * mean) / (self.reward_n - 1))
        return var**0.5

    @property
    def response_len_mean(self) -> float | None:
        return self.response_len_sum / self.response_len_n if self.response_len_n else None


class _Scan:
    """Accumulates one file's records."""

    def __init__(self, stats: FileStats) -> None:
        self.st = stats
        self.groups: dict[Any, list[float]] = {}

    def records(self, recs: list[_Rec]) -> None:
        st = self.st
        groups = self.groups
        status = st.status
        for r in recs:
            if r.total_len is not None and r.status is None:
                continue  # the batch-statistics first line
            st.samples += 1
            s = r.status or "unknown"
            status[s] = status.get(s, 0) + 1
            truncated = r.finish_reason == LENGTH_REASON
            if truncated:
                st.truncated += 1
            if r.error_msg:
                self._error(r.error_msg)
            label = r.label
            if label is None or label == "":
                st.missing_label += 1
            n = r.response_len
            if n is not None:
                st.response_len_sum += n
                st.response_len_n += 1
                if n > st.response_len_max:
                    st.response_len_max = n
            reward = r.reward
            if reward is not None:
                self._reward(reward)
                g = r.group_id
                if g is not None:
                    bucket = groups.get(g)
                    if bucket is not None:
                        bucket.append(reward)
                    elif len(groups) < MAX_GROUPS:
                        groups[g] = [reward]
            if r.data_source in GSM8K_SOURCES and r.response is not None:
                self._gsm8k(r.response, label, reward, truncated)

    def _reward(self, x: float) -> None:
        st = self.st
        st.reward_n += 1
        st.reward_sum += x
        st.reward_sq += x * x
        if x > 0:
            st.reward_positive += 1
        if st.reward_min is None or x < st.reward_min:
            st.reward_min = x
        if st.reward_max is None or x > st.reward_max:
            st.reward_max = x

    def _error(self, msg: str) -> None:
        key = re.sub(r"\d+", "N", msg.strip().splitlines()[0] if msg.strip() else msg)[:200]
        errors = self.st.errors
        if key in errors or len(errors) < MAX_ERROR_KEYS:
            errors[key] = errors.get(key, 0) + 1

    def _gsm8k(self, response: str, label: Any, reward: float | None, truncated: bool) -> None:
        verdicts = self.st.gsm8k_verdicts
        verdict = gsm8k_verdict(response, label, reward, truncated)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        examples = self.st.gsm8k_examples.setdefault(verdict, [])
        if len(examples) < 2:
            text = response.strip().replace("\n", " ")
            tail = ("…" + text[-EXAMPLE_CHARS:]) if len(text) > EXAMPLE_CHARS else text
            examples.append(VerdictExample(_shown(label), gsm8k_label_code(label), gsm8k_answer(response), tail))

    def line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            rec = _LINE.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            self.st.unreadable += 1
            return
        self.records([rec])

    def block(self, body: bytes) -> None:
        """Whole lines, each ending in a newline: one typed decode, else line by line."""
        text = body.replace(b"\n", b"\n,")
        try:
            recs = _BLOCK.decode(b"".join((b"[", text, b"{}]")))
        except (msgspec.DecodeError, RecursionError):
            recs = None
        if recs is None or len(recs) - 1 != len(text) - len(body):  # a blank or multi-value line: look closer
            for raw in body.split(b"\n")[:-1]:
                self.line(raw)
            return
        recs.pop()
        self.records(recs)

    def finish(self) -> FileStats:
        st = self.st
        st.groups = len(self.groups)
        for rewards in self.groups.values():
            size = len(rewards)
            st.group_sizes[size] = st.group_sizes.get(size, 0) + 1
            if size > 1 and min(rewards) == max(rewards):
                st.groups_no_signal += 1
                if rewards[0] == 0:
                    st.groups_all_zero += 1
        self.groups = {}
        return st


def _skip_line(f: BinaryIO, limits: CallLimits) -> int:
    n = 0
    while True:
        limits.check()
        piece = f.readline(BLOCK_BYTES)
        n += len(piece)
        if not piece or piece.endswith(b"\n"):
            return n


def scan_file(
    path: Path,
    step: int,
    on_bytes: Callable[[int], None] | None = None,
    *,
    paths: PathPolicy,
    limits: CallLimits = UNLIMITED,
) -> FileStats:
    """Summarise one trajectory file in bounded memory (a line over ``MAX_LINE_BYTES`` is counted, not read).

    The file is opened through the path policy (a :class:`ToolInputError` says why it was refused); the call's
    deadline is checked once per block."""
    st = FileStats(step=step, path=str(path))
    scan = _Scan(st)
    with open_guarded(paths, path, what="trajectory file", buffering=1 << 16) as f:
        while True:
            limits.check()
            chunk = f.read(BLOCK_BYTES)
            if not chunk:
                break
            st.bytes += len(chunk)
            cut = chunk.rfind(b"\n") + 1
            if cut:
                scan.block(chunk[:cut] if cut < len(chunk) else chunk)
            head = chunk[cut:]
            if head:  # finish the line the block ends inside
                tail = f.readline(MAX_LINE_BYTES + 1 - len(head))
                st.bytes += len(tail)
                raw = head + tail
                if raw.endswith(b"\n") or len(raw) <= MAX_LINE_BYTES:
                    scan.line(raw)  # a torn last line of a file being written is counted as unreadable
                else:
                    st.bytes += _skip_line(f, limits)
                    st.unreadable += 1
            if on_bytes is not None:
                on_bytes(st.bytes)
    return scan.finish()
