"""The catalog behind check_reward_data's findings: per code a title, category, reference anchor, XTuner source, fix.

Severities live next to the scanner (``scanners.jsonl_contract.CODE_SEVERITY``); a test keeps both tables in step. Sources are
``path:line`` at InternLM/xtuner@b934f46; ``None`` where the rule is this tool's own (size limit, duplicates).
"""

from __future__ import annotations

from typing import Final

from ..core.findings import Category

SRC_READ = "xtuner/v1/datasets/jsonl.py:609-611,626-627"
SRC_PROMPT = "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:52,58-60"
SRC_DS = "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py:75-81"
SRC_GT = "xtuner/v1/rl/judger/native.py:135,196-199"
SRC_GSM8K = "xtuner/v1/rl/judger/gsm8k.py:29-39,74"
SRC_CONVERT = "xtuner/v1/utils/convert_gsm8k.py:31-58"

MISSING_GT: Final = "reward_data_missing_ground_truth"
OTHER: Final = "data_format_other"

#: code -> (title, category, anchor, source, fix)
ContractEntry = tuple[str, Category, str, str | None, str]
CODES: dict[str, ContractEntry] = {
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
FILE_CODES: dict[str, ContractEntry] = {
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
