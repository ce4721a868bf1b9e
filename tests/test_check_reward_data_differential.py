"""The fast path (typed msgspec decode + fallback) agrees with a plain json.loads + jsonschema loop, line by line.

The reference below is what a user would write: split the file on newlines, decode each line as strict UTF-8,
``json.loads`` it and validate it against references/schemas/rl-sample.schema.json with jsonschema. It shares no
code with the scanner. Hypothesis mutates real-shaped lines (keys dropped, values swapped for other JSON types,
bytes corrupted) and every line must get the same valid/invalid verdict from both.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from xtuner_rl_mcp.scanners import jsonl as jsonl_scan
from xtuner_rl_mcp.scanners.jsonl_contract import BLOCKING
from xtuner_rl_mcp.scanners.jsonl_results import ScanOptions

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "references" / "schemas" / "rl-sample.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
REGISTRY = Registry().with_resource(SCHEMA["$id"], Resource.from_contents(SCHEMA))
VALIDATORS = {
    "generic": Draft202012Validator(SCHEMA),
    "gsm8k": Draft202012Validator({"$ref": SCHEMA["$id"] + "#/$defs/gsm8k_line"}, registry=REGISTRY),
    "dapo_math": Draft202012Validator({"$ref": SCHEMA["$id"] + "#/$defs/dapo_math_line"}, registry=REGISTRY),
}
INSTR = ' Let\'s think step by step and output the final answer after "####".'


def test_schema_is_valid_2020_12():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$id"] == "xtuner-rl://schemas/rl-sample.schema.json"


def reference_verdicts(data: bytes, judger: str) -> list[bool]:
    """Valid/invalid per line, the plain way (XTuner's reader splits on '\\n' and json.loads each line)."""
    validator = VALIDATORS[judger]
    out = []
    for raw in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # bad UTF-8, bad JSON, integers over the digit limit, deep nesting
            out.append(False)
            continue
        out.append(validator.is_valid(obj))
    return out


def tool_verdicts(path: Path, judger: str) -> list[bool]:
    opts = ScanOptions(judger=judger, max_examples_per_code=1_000_000, collapse=False)  # one example per line
    fr = jsonl_scan.scan_file(str(path), opts)
    bad = {e.line for code, exs in fr.examples.items() if code in BLOCKING for e in exs}
    assert fr.invalid == len(bad)
    return [i not in bad for i in range(1, fr.lines + 1)]


def base_record(i: int) -> dict:
    return {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": f"Question {i}: what is {i} + 1?{INSTR}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(i + 1)},
        "extra_info": {"split": "train", "index": i},
    }


json_values = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-(10**20), 10**20) | hs.floats(allow_nan=False) | hs.text(max_size=8),
    lambda inner: hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
special_values = hs.sampled_from(
    [
        None,
        "",
        " ",
        "72",
        "-3",
        "0.5",
        "1,000",
        "$5",
        "72.0",
        "x",
        72,
        1.5,
        True,
        [],
        {},
        [{"role": "user"}],
        [{"role": "user", "content": "hi ####"}],
        [{"role": "", "content": "x"}],
        [{"role": "user", "content": 5}],
        [{"role": "user", "content": [{"type": "text", "text": "####"}]}],
        [{"role": "user", "content": [{"text": "x"}]}],
        {"messages": [{"role": "user", "content": "q ####"}], "tools": None},
        {"messages": []},
        "openai/gsm8k",
        "hiyouga/geometry3k",
        "math_dapo",
        {"ground_truth": "7"},
        {"ground_truth": None},
        {"style": "rule"},
    ]
)
values = hs.one_of(json_values, special_values)
paths = hs.sampled_from(
    [
        ("prompt",),
        ("data_source",),
        ("reward_model",),
        ("reward_model", "ground_truth"),
        ("extra_info",),
        ("prompt", 0),
        ("prompt", 0, "role"),
        ("prompt", 0, "content"),
        ("ability",),
        ("messages",),
        ("question",),
    ]
)


@hs.composite
def mutated_line(draw) -> bytes:
    rec = base_record(draw(hs.integers(0, 10**6)))
    for _ in range(draw(hs.integers(0, 3))):
        path = draw(paths)
        target = rec
        for key in path[:-1]:
            if isinstance(target, dict) and key in target:
                target = target[key]
            elif isinstance(target, list) and isinstance(key, int) and key < len(target):
                target = target[key]
            else:
                target = None
                break
        last = path[-1]
        if isinstance(target, dict):
            if draw(hs.booleans()):
                target.pop(last, None)
            else:
                target[last] = copy.deepcopy(draw(values))
        elif isinstance(target, list) and isinstance(last, int) and last < len(target):
            target[last] = copy.deepcopy(draw(values))
    if draw(hs.integers(0, 9)) == 0 and "prompt" in rec:
        rec["messages"] = rec.pop("prompt")
    raw = json.dumps(rec, ensure_ascii=draw(hs.booleans())).encode()
    corruption = draw(hs.integers(0, 14))
    if corruption == 0:
        cut = draw(hs.integers(0, len(raw)))
        raw = raw[:cut]
    elif corruption == 1:
        raw = b"\xef\xbb\xbf" + raw
    elif corruption == 2:
        pos = draw(hs.integers(0, len(raw)))
        raw = raw[:pos] + draw(hs.sampled_from([b"\x00", b"\xff", b"\xc3", b"\t", b"\r", b" "])) + raw[pos:]
    elif corruption == 3:
        raw = draw(hs.sampled_from([b"", b"   ", b"[]", b"1", b'"x"', b"null", b"{}", b"NaN", b'{"a":NaN}']))
    elif corruption == 4:
        raw = raw.replace(b'"72"', b"NaN").replace(b'"ground_truth": "', b'"ground_truth": "\\ud800')
    elif corruption == 5:
        raw = raw + b" \r"
    return raw


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    lines=hs.lists(mutated_line(), min_size=1, max_size=30), judger=hs.sampled_from(["generic", "gsm8k", "dapo_math"])
)
def test_fast_path_agrees_with_json_loads_and_jsonschema(tmp_path_factory, lines, judger):
    data = b"".join(raw.replace(b"\n", b"") + b"\n" for raw in lines)
    path = tmp_path_factory.mktemp("diff") / "lines.jsonl"
    path.write_bytes(data)
    assert tool_verdicts(path, judger) == reference_verdicts(data, judger)


def test_fixed_corpus_agrees(tmp_path, shared_data_or_none):
    """Real XTuner lines plus a hand-made set of broken ones, under every judger the schema models."""
    lines = [json.dumps(base_record(i)).encode() for i in range(50)]
    if shared_data_or_none is not None:
        for name in ("gsm8k_train_example_data.jsonl", "gsm8k_val_example_data.jsonl"):
            lines += (shared_data_or_none / name).read_bytes().splitlines()
    broken = [
        b'{"prompt": [{"role": "user", "content": "q ####"}], "data_source": "openai/gsm8k", "reward_model": {}}',
        b'{"prompt": "q", "data_source": "d", "reward_model": {"ground_truth": "1"}}',
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": 1}}',
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": "1"}, "extra_info": []}',
        b'{"prompt": {"messages": [{"role": "user", "content": "q"}], "tools": []}, "data_source": "d", "reward_model": {"ground_truth": "x"}}',
        b'{"data_source": "d", "data_source": "", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "1"}}',
        b'{"data_source": "", "data_source": "d", "prompt": [{"role": "user", "content": "q"}], "reward_model": {"ground_truth": "1"}}',
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": 1e400}}',
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": "1"}, "extra_info": {"a": '
        + b"[" * 3000
        + b"]" * 3000
        + b"}}",
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": "1"}, '
        b'"extra_info": {"n": ' + b"9" * 5000 + b"}}",
        b'{"prompt": [{"role": "user", "content": "q"}], "data_source": "d", "reward_model": {"ground_truth": '
        + b"9" * 4000
        + b"}}",
        b"",
        b"\xef\xbb\xbf{}",
    ]
    data = b"\n".join(lines + broken) + b"\n"
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(data)
    for judger in ("generic", "gsm8k", "dapo_math"):
        assert tool_verdicts(path, judger) == reference_verdicts(data, judger), judger


@pytest.fixture
def shared_data_or_none():
    from .conftest import SHARED_DATA

    return SHARED_DATA if (SHARED_DATA / "gsm8k_train_example_data.jsonl").is_file() else None
