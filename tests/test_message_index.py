"""The message index generated from XTuner's source, and what it proves about the catalog and the references.

Everything except the reproduction test reads only the checked-in ``references/xtuner_messages.json`` (CI has no
XTuner checkout).

Rule for catalog examples. An example of an entry is accounted for when one of these holds:

1. it is an XTuner message: an index entry at one of the entry's cited ``path:line`` sources prints it (the template,
   or one of its lines, or its leading sentences, occurs in the example) and the class the example shows before it
   agrees (``ValueError: ...``; pydantic's ``Value error, ...`` / ``Assertion failed, ...`` only for a
   ``ValueError`` / ``assert`` that runs inside validation);
2. it comes from another project: the entry lists an ``external:<project>`` source, and the example does not look
   like an XTuner message (it shares no run of 32 characters and 3+ words with any indexed message and matches no indexed
   message elsewhere in XTuner) - so a paraphrased or outdated copy of an XTuner message cannot hide behind it;
3. it is not a message at all and is listed in ``NOT_MESSAGES`` below with the reason (a command a user typed, a
   runtime-env dict, metric lines XTuner builds from dynamic keys).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from xtuner_rl_mcp.knowledge.catalog import FailureMode, load_catalog

from . import message_index as mi
from .upstream import MIRROR

REPO = Path(__file__).resolve().parents[1]

#: (entry id, example) -> why the example is no message text that the index or another project could own.
NOT_MESSAGES: dict[tuple[str, str], str] = {
    ("reward_always_zero", "- rewards/max              : 0.0000"): "metric table row built from dynamic keys",
    ("reward_always_zero", "Eval: accuracy: 0.0000"): "eval line joined from dynamic metric keys",
    (
        "backend_flag_multiple",
        "{'env_vars': {'XTUNER_USE_LMDEPLOY': '1', 'XTUNER_USE_SGLANG': '1', 'XTUNER_USE_FA3': '1'}}",
    ): "the Ray runtime_env XTuner prints, a dict not a message",
    (
        "backend_flag_multiple",
        "XTUNER_USE_VLLM=1 XTUNER_USE_LMDEPLOY=1 python xtuner/v1/train/cli/rl.py --config rl.py",
    ): "a launch command the user typed",
    ("grpo_groups_no_signal", "- advantages/max          : 0.0000"): "metric table row built from dynamic keys",
    (
        "responses_truncated",
        '{"rollout_id":3,"group_id":1,"status":"completed","finish_reason":"length","error_msg":null,"reward":0.0}',
    ): "a trajectory record XTuner writes (rl_trainer.py _save_trajectories), data not a message",
    (
        "async_samples_piling_up",
        '{"async/init_samples": 0, "async/completed_samples": 96, "async/aborted_samples": 0, '
        '"async/expired_samples": 24, "async/failed_samples": 3, "step": 40}',
    ): "a tracker.jsonl record of scalars, data not a message",
}

_CITE = re.compile(
    r"(?<![\w/.-])((?:xtuner|examples|recipe|docs|tests)/[\w./-]+\.(?:py|md|sh|json|jsonl|yaml|txt)|pyproject\.toml)"
    r":(\d+(?:-\d+)?(?:(?:, ?|/):?\d+(?:-\d+)?(?![\w.]))*)"
)


@pytest.fixture(scope="module")
def index() -> mi.MessageIndex:
    return mi.load_index()


def _cited(fm: FailureMode) -> list[tuple[str, int, int]]:
    out = []
    for s in fm.source:
        if s.startswith("external:"):
            continue
        path, _, lines = s.partition(":")
        first, _, last = lines.partition("-")
        out.append((path, int(first or 1), int(last or first or 10**9)))
    return out


def _verdict(fm: FailureMode, example: str, index: mi.MessageIndex) -> str | None:
    """None when the example is accounted for (see the module docstring), else why not."""
    candidates = [m for path, a, b in _cited(fm) for m in index.at(path, a, b)]
    hits = list(mi.find_in(example, candidates))
    if any(mi.class_agrees(m, shown) for m, shown in hits):
        return None
    if hits:
        found = ", ".join(f"{m.path}:{m.line} {m.kind} {m.exception} (log shows {shown!r})" for m, shown in hits)
        return f"class disagrees with the source: {found}"
    if (fm.id, example) in NOT_MESSAGES:
        return None
    elsewhere = [
        m
        for m, _ in mi.find_in(example, index.messages)
        if m.code or mi.literal_length(m.template) >= 0.5 * len(example)
    ]
    if elsewhere:
        return "printed by an XTuner line the entry does not cite: " + ", ".join(
            f"{m.path}:{m.line}" for m in elsewhere
        )
    near = mi.near_misses(example, index.messages)
    if near:
        return "looks like (but does not match) " + ", ".join(f"{m.path}:{m.line} {m.template[:80]!r}" for m in near)
    if not any(s.startswith("external:") for s in fm.source):
        return "matches no XTuner message at the cited sources and the entry declares no external:<project> source"
    return None


def test_index_shape(index: mi.MessageIndex) -> None:
    """The index covers the RL path with a few hundred messages, and records line counts for cited files."""
    assert index.commit.startswith(mi.PINNED_COMMIT)
    kinds = {m.kind for m in index.messages}
    assert {"raise", "assert", "log", "echo"} <= kinds
    assert len(index.messages) > 500
    for path in ("xtuner/v1/train/rl_trainer.py", "xtuner/v1/rl/rollout/worker.py", "xtuner/v1/utils/env_check.py"):
        assert index.in_file(path), path
    assert all(m.line <= m.end_line <= index.files[m.path] for m in index.messages)
    assert index.files["pyproject.toml"] > 50


def test_known_messages_are_indexed_with_their_class(index: mi.MessageIndex) -> None:
    """Spot checks against the source: class, template and validator context as XTuner has them."""
    (div,) = [m for m in index.at("xtuner/v1/rl/rollout/lmdeploy.py", 163, 166) if m.kind == "raise"]
    assert (div.exception, div.template) == (
        "ValueError",
        "num_rollout_workers={num_workers} must be divisible by num_gpus_per_engine={num_gpus_per_engine}.",
    )
    (ctx,) = index.at("xtuner/v1/rl/rollout/worker.py", 511, 513)
    assert (ctx.exception, ctx.validator) == ("AssertionError", True)  # model_post_init: "Assertion failed, ..."
    (branch,) = index.at("xtuner/v1/rl/judger/composed.py", 70, 72)
    assert branch.exception == "KeyError"
    (ckpt,) = [m for m in index.at("xtuner/v1/rl/weight_update/data.py", 51, 54) if m.kind == "raise"]
    assert ckpt.exception == "NotImplementedError"


@pytest.mark.parametrize(
    "example,expected",
    [
        ("ValueError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.", True),
        ("AssertionError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.", False),
        (
            "ray::RolloutController() ValueError: num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.",
            True,
        ),
        ("Value error, num_rollout_workers=6 must be divisible by num_gpus_per_engine=4.", False),  # not a validator
    ],
)
def test_class_rule(index: mi.MessageIndex, example: str, expected: bool) -> None:
    candidates = index.at("xtuner/v1/rl/rollout/lmdeploy.py", 163, 166)
    hits = list(mi.find_in(example, candidates))
    assert hits
    assert any(mi.class_agrees(m, shown) for m, shown in hits) is expected


def test_pydantic_renderings_are_modelled(index: mi.MessageIndex) -> None:
    """An assert in model_post_init reads 'Assertion failed, ...'; 'Value error, ...' would be wrong."""
    cands = index.at("xtuner/v1/rl/rollout/worker.py", 511, 513)
    msg = "context_length must be set if rollout_max_batch_size_per_instance is not provided."
    ok = [mi.class_agrees(m, s) for m, s in mi.find_in(f"  Assertion failed, {msg} [type=assertion_error]", cands)]
    bad = [mi.class_agrees(m, s) for m, s in mi.find_in(f"  Value error, {msg}", cands)]
    assert ok == [True] and bad == [False]


def test_every_catalog_example_is_accounted_for(index: mi.MessageIndex) -> None:
    problems = []
    for fm in load_catalog().entries:
        for example in fm.examples:
            why = _verdict(fm, example, index)
            if why:
                problems.append(f"{fm.id}: {example[:120]!r}: {why}")
    assert not problems, "\n".join(problems)


def test_not_messages_table_is_current() -> None:
    """Every NOT_MESSAGES row names an existing example (no stale exemptions)."""
    examples = {(fm.id, ex) for fm in load_catalog().entries for ex in fm.examples}
    assert set(NOT_MESSAGES) <= examples


def test_a_paraphrased_message_is_caught(index: mi.MessageIndex) -> None:
    """The rule fails a hand-written near copy even when the entry also has external sources."""
    fm = (
        load_catalog()
        .by_id["rollout_request_failed"]
        .model_copy(
            update={
                "source": ["xtuner/v1/rl/rollout/worker.py:1185", "external:httpx"],
                "examples": ["finish_reason is missing in response meta_info for request 7f3a"],
            }
        )
    )
    assert _verdict(fm, fm.examples[0], index)


def _citations(text: str) -> list[tuple[str, int]]:
    out = []
    for m in _CITE.finditer(text):
        for part in re.split(r", ?|/", m.group(2)):
            for n in part.lstrip(":").split("-"):
                out.append((m.group(1), int(n)))
    return out


def _reference_texts() -> dict[str, str]:
    refs = REPO / "references"
    files = [*refs.glob("*.md"), *refs.glob("*.toml"), *(refs / "schemas").glob("*.json"), REPO / "skill.md"]
    return {f.relative_to(REPO).as_posix(): f.read_text(encoding="utf-8") for f in files}


def test_every_cited_line_exists(index: mi.MessageIndex) -> None:
    """Each 'path:line' cited in references/ and skill.md names a file the index knows and a line inside it."""
    bad = []
    count = 0
    for name, text in _reference_texts().items():
        for path, line in _citations(text):
            count += 1
            total = index.files.get(path)
            if total is None:
                bad.append(f"{name}: {path}:{line} (file not in the index)")
            elif not 1 <= line <= total:
                bad.append(f"{name}: {path}:{line} (file has {total} lines)")
    assert count > 500
    assert not bad, "\n".join(bad)


def test_citation_parser() -> None:
    text = "see `xtuner/v1/rl/rollout/lmdeploy.py:163-166`, :188 and xtuner/v1/a.py:5, 7-9; /opt/xtuner/v1/b.py:3"
    assert _citations(text) == [
        ("xtuner/v1/rl/rollout/lmdeploy.py", 163),
        ("xtuner/v1/rl/rollout/lmdeploy.py", 166),
        ("xtuner/v1/a.py", 5),
        ("xtuner/v1/a.py", 7),
        ("xtuner/v1/a.py", 9),
    ]


def test_templates_from_source_text() -> None:
    """f-strings, concatenation, % and .format, local variables and helper functions become templates."""
    src = """
import logging
logger = logging.getLogger(__name__)

def helper(owner):
    return f"{owner} is not ready.\\n" "More help."

class C(BaseModel):
    @model_validator(mode="after")
    def check(self):
        self._inner()

    def _inner(self):
        msg = "bad {x}: %d" % (self.n,)
        msg += f" ({self.y!r})"
        raise ValueError(msg)

def f(a, b):
    assert a, "first {} then {k}".format(a, k=b)
    assert b
    logger.warning("slow %s after %.1fs", a, b)
    raise RuntimeError(helper(a)) from None
"""
    got = {(m.line, m.kind, m.exception, m.template, m.validator, m.code) for m in mi.messages_of("x.py", src)}
    assert got == {
        (16, "raise", "ValueError", "bad {{x}}: {self.n} ({self.y})", True, ""),
        (19, "assert", "AssertionError", "first {a} then {b}", False, ""),
        (20, "assert", "AssertionError", "", False, "assert b"),
        (21, "log", "warning", "slow {a} after {b}s", False, ""),
        (22, "raise", "RuntimeError", "{owner} is not ready.\nMore help.", False, ""),
    }


def test_dump_is_stable(index: mi.MessageIndex) -> None:
    """Loading and dumping the checked-in file gives the same bytes (sorted, one record per line)."""
    path = mi.INDEX_PATH
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    assert mi.dump_index(data) == path.read_text(encoding="utf-8")


@pytest.mark.skipif(not MIRROR.is_dir() or shutil.which("git") is None, reason="XTuner mirror not available")
def test_regenerating_reproduces_the_file_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "xtuner_messages.json"
    assert mi.main(["--xtuner", str(MIRROR), "--commit", mi.PINNED_COMMIT, "--out", str(out)]) == 0
    assert out.read_bytes() == mi.INDEX_PATH.read_bytes()
