"""The precise line path: a line's bytes read the way XTuner's dataset reads them (strict UTF-8, stdlib ``json``),
every rule of the contract with a stable code, and jsonschema's explanation of a failing line."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from .jsonl_contract import (
    DAPO_ANSWER_RE,
    EXPECTED_SOURCE,
    KNOWN_SOURCES,
    gsm8k_label_code,
    type_name,
)
from .jsonl_results import Stats, bump, record_prompt

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

BOM = b"\xef\xbb\xbf"
NUL = b"\x00"
Issue = tuple[str, str, str]  # code, JSON pointer, message
NO_FINAL_NEWLINE: Issue = ("missing_final_newline", "", "the last line has no trailing newline (harmless)")


def _line_judger(judger: str, data_source: Any) -> str:
    if judger != "auto":
        return judger
    return KNOWN_SOURCES.get(data_source, "generic") if isinstance(data_source, str) else "generic"


def _message_texts(msg: dict[str, Any]) -> list[str]:
    """The texts of a well-formed message (``_check_messages`` passed it): its string content or its text parts."""
    c = msg.get("content")
    if isinstance(c, str):
        return [c]
    if not isinstance(c, list):
        return []
    out = []
    for part in c:
        t = part.get("text")
        if part.get("type") == "text" and isinstance(t, str):
            out.append(t)
    return out


def _prompt_text(messages: list) -> str:
    """All message texts joined by newlines: what the marker checks and the length statistics look at."""
    return "\n".join(t for m in messages for t in _message_texts(m))


def _check_messages(messages: Any, base: str, issues: list[Issue]) -> list | None:
    """Check a message list; return it when well formed."""
    if not isinstance(messages, list):
        issues.append(
            ("prompt_not_list", base, f"must be a list of {{role, content}} messages, got {type_name(messages)}")
        )
        return None
    if not messages:
        issues.append(("prompt_empty", base, "the message list is empty"))
        return None
    ok = True
    for i, m in enumerate(messages):
        p = f"{base}/{i}"
        if not isinstance(m, dict):
            issues.append(("bad_message", p, f"a message must be an object, got {type_name(m)}"))
            ok = False
            continue
        role, content = m.get("role"), m.get("content", UNSET)
        if not isinstance(role, str) or not role:
            what = "missing" if "role" not in m else f"{type_name(role)} {role!r}"[:60]
            issues.append(("bad_message", f"{p}/role", f"role must be a non-empty string, got {what}"))
            ok = False
        if content is UNSET:
            issues.append(("bad_message", f"{p}/content", "content is missing"))
            ok = False
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    issues.append(
                        ("bad_message", f"{p}/content/{j}", "a content part must be an object with a string 'type'")
                    )
                    ok = False
                    break
        elif not isinstance(content, str):
            issues.append(
                (
                    "bad_message",
                    f"{p}/content",
                    f"content must be a string or a list of parts, got {type_name(content)}",
                )
            )
            ok = False
    return messages if ok else None


def check_object(obj: dict, judger: str) -> tuple[list[Issue], list | None]:
    """Every issue of one decoded line, and its messages when the prompt is well formed."""
    issues: list[Issue] = []
    if "prompt" not in obj and "question" in obj and "answer" in obj:
        issues.append(("raw_hf_gsm8k_line", "", "raw Hugging Face GSM8K record (question/answer), not converted"))
        return issues, None
    messages = None
    if "prompt" not in obj:
        if "messages" in obj:
            issues.append(
                ("messages_instead_of_prompt", "/messages", "XTuner reads 'prompt'; a 'messages' key is ignored")
            )
        else:
            issues.append(("missing_prompt", "/prompt", "no 'prompt' key"))
    else:
        prompt = obj["prompt"]
        if isinstance(prompt, dict):
            missing = [k for k in ("messages", "tools") if k not in prompt]
            if missing:
                issues.append(("vlm_prompt_missing_key", "/prompt", f"a prompt object needs {' and '.join(missing)!s}"))
            if "messages" in prompt:
                messages = _check_messages(prompt["messages"], "/prompt/messages", issues)
            if not missing:
                issues.append(
                    ("prompt_vlm_object", "/prompt", "object prompt {messages, tools}: VLM tokenize function only")
                )
        else:
            messages = _check_messages(prompt, "/prompt", issues)
        if messages is not None:
            text = _prompt_text(messages)
            if not text or text.isspace():
                issues.append(("prompt_blank", "/prompt", "every message content is empty or whitespace"))

    ds = obj.get("data_source")
    if ds is None:
        issues.append(("missing_data_source", "/data_source", "no 'data_source' (or null)"))
    elif not isinstance(ds, str):
        issues.append(("data_source_not_string", "/data_source", f"must be a string, got {type_name(ds)}"))
    elif not ds:
        issues.append(("empty_data_source", "/data_source", "data_source is an empty string"))

    line_judger = _line_judger(judger, ds)
    has_gt, gt = False, None
    if "reward_model" not in obj or obj["reward_model"] is None:
        issues.append(("missing_reward_model", "/reward_model", "no 'reward_model' (or null)"))
    elif not isinstance(obj["reward_model"], dict):
        issues.append(
            ("reward_model_not_object", "/reward_model", f"must be an object, got {type_name(obj['reward_model'])}")
        )
    else:
        rm = obj["reward_model"]
        gt = rm.get("ground_truth")
        if gt is None:
            what = "missing" if "ground_truth" not in rm else "null"
            issues.append(("missing_ground_truth", "/reward_model/ground_truth", f"ground_truth is {what}"))
        elif gt == "":
            issues.append(("empty_ground_truth", "/reward_model/ground_truth", "ground_truth is an empty string"))
        else:
            has_gt = True

    if "extra_info" in obj and not isinstance(obj["extra_info"], dict):
        issues.append(
            ("extra_info_not_object", "/extra_info", f"must be an object, got {type_name(obj['extra_info'])}")
        )

    prompt_text = _prompt_text(messages) if messages is not None else None
    _judger_rules(line_judger, judger, ds, has_gt, gt, prompt_text, issues)
    return issues, messages


def _judger_rules(
    line_judger: str, judger: str, ds: Any, has_gt: bool, gt: Any, prompt_text: str | None, issues: list[Issue]
) -> None:
    p = "/reward_model/ground_truth"
    expected = EXPECTED_SOURCE.get(line_judger)
    if judger != "auto" and expected and isinstance(ds, str) and ds and ds != expected:
        issues.append(
            (
                "unknown_data_source",
                "/data_source",
                f"{ds!r} is not {expected!r}, the source the {judger} judger is built for",
            )
        )
    if line_judger == "gsm8k":
        code = gsm8k_label_code(gt) if has_gt else None
        if code == "gsm8k_ground_truth_not_string":
            issues.append((code, p, f"ground_truth is a JSON {type_name(gt)} ({gt!r})"[:120]))
        elif code == "gsm8k_ground_truth_format":
            issues.append((code, p, f"{gt!r} can never equal the number taken from '#### <n>'"[:160]))
        elif code == "gsm8k_ground_truth_noncanonical":
            issues.append(
                (
                    "gsm8k_ground_truth_noncanonical",
                    p,
                    f"{gt!r} scores only if the model writes exactly this form"[:160],
                )
            )
        if prompt_text is not None and "####" not in prompt_text:
            issues.append(
                ("gsm8k_prompt_no_answer_marker", "/prompt", "no message asks for the final answer after '####'")
            )
    elif line_judger == "dapo_math":
        if has_gt and not isinstance(gt, str):
            issues.append(("dapo_ground_truth_not_string", p, f"ground_truth is a JSON {type_name(gt)} ({gt!r})"[:120]))
        if prompt_text is not None and not DAPO_ANSWER_RE.search(prompt_text):
            issues.append(("dapo_prompt_no_answer_marker", "/prompt", "no message asks for a final 'Answer: ...' line"))
    elif line_judger == "geo3k":
        if has_gt and not isinstance(gt, str):
            issues.append(
                ("geo3k_ground_truth_not_string", p, f"ground_truth is a JSON {type_name(gt)} ({gt!r})"[:120])
            )
        if prompt_text is not None and "boxed" not in prompt_text:
            issues.append(("geo3k_prompt_no_boxed_marker", "/prompt", "no message asks for the answer in \\boxed{}"))


def analyze_line(raw: bytes, *, last_unterminated: bool, judger: str) -> tuple[list[Issue], Any]:
    """The precise verdict on one line's bytes (newline included), as XTuner's reader would see it."""
    if raw.startswith(BOM):
        return [("bom", "", "line starts with a UTF-8 byte-order mark; json.loads refuses it")], None
    if b"\x00" in raw:
        return [("nul_byte", "", f"NUL byte at offset {raw.index(NUL)}")], None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [("invalid_utf8", "", f"invalid UTF-8 at byte {exc.start}: {exc.reason}")], None
    if not text.strip():
        return [("blank_line", "", "empty or whitespace-only line")], None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):  # an integer over Python's str->int digit limit
            return [("invalid_json", "", f"json.loads refuses it: {str(exc)[:120]}")], None
        code = "truncated_last_line" if last_unterminated else "invalid_json"
        msg = f"{exc.msg} at column {exc.colno}"
        if code == "truncated_last_line":
            msg = f"last line has no newline and does not parse ({msg}): the file was probably cut off"
        return [(code, "", msg)], None
    except RecursionError:
        return [("invalid_json", "", "nested too deeply for json.loads (RecursionError)")], None
    if not isinstance(obj, dict):
        return [("not_an_object", "", f"the line is a JSON {type_name(obj)}, not an object")], obj
    issues, _ = check_object(obj, judger)
    return issues, obj


def slow_stats(obj: Any, judger: str, st: Stats) -> None:
    if not isinstance(obj, dict):
        return
    ds = obj.get("data_source")
    bump(st.data_sources, ds if isinstance(ds, str) else f"<{type_name(ds) if 'data_source' in obj else 'missing'}>")
    rm = obj.get("reward_model")
    if isinstance(rm, dict):
        bump(st.ground_truth_types, type_name(rm["ground_truth"]) if "ground_truth" in rm else "<missing>")
    else:
        bump(st.ground_truth_types, "<no reward_model>")
    issues: list[Issue] = []
    prompt = obj.get("prompt")
    if isinstance(prompt, dict):
        prompt = prompt.get("messages")
    if prompt is None:
        return
    messages = _check_messages(prompt, "", issues)
    if messages is not None:
        record_prompt(st, [m["role"] for m in messages], _prompt_text(messages))


# --------------------------------------------------------------------------------------------------------
# The contract as a JSON Schema: explanations for the first failing lines (jsonschema loads lazily)
# --------------------------------------------------------------------------------------------------------


_SCHEMA: dict | None = None


def load_schema() -> dict:
    """The contract (references/schemas/rl-sample.schema.json), read once."""
    global _SCHEMA
    if _SCHEMA is None:
        here = Path(__file__).resolve().parent.parent / "references" / "schemas" / "rl-sample.schema.json"
        _SCHEMA = json.loads(here.read_text(encoding="utf-8"))
    return _SCHEMA


def set_schema(schema: dict) -> None:
    """Use this schema instead of the packaged file (Ray workers receive it with the task)."""
    global _SCHEMA
    if schema != _SCHEMA:
        _SCHEMA = schema
        schema_validator.cache_clear()


@lru_cache(maxsize=8)
def schema_validator(judger: str) -> Draft202012Validator:
    """The jsonschema validator of the contract for a judger (lazy: jsonschema is imported on first failure)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = load_schema()
    registry = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    ref = {"gsm8k": "#/$defs/gsm8k_line", "dapo_math": "#/$defs/dapo_math_line"}.get(judger, "#")
    return Draft202012Validator({"$ref": schema["$id"] + ref}, registry=registry)


def schema_explanation(obj: Any, judger: str) -> str | None:
    from jsonschema.exceptions import best_match

    line_judger = _line_judger(judger, obj.get("data_source") if isinstance(obj, dict) else None)
    try:
        err = best_match(schema_validator(line_judger).iter_errors(obj))
    except Exception:  # no schema available (e.g. a worker without the file): explanations are optional
        return None
    if err is None:
        return None
    return f"{err.json_path}: {err.message}"[:300]
