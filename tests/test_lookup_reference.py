"""lookup_reference: the right section ranks first, the answer is in a top passage (English and Chinese
questions), passages are whole, the glossary and catalog phrases work; tokenizer; errors; speed; through MCP."""

from __future__ import annotations

import json
import re
import statistics
import time

import pytest
from xtuner_rl_mcp.core import RunContext, ToolInputError
from xtuner_rl_mcp.knowledge import docs, passages
from xtuner_rl_mcp.knowledge import search as engine
from xtuner_rl_mcp.operations import lookup_reference as lr

R = "xtuner-rl://references/"
F = "xtuner-rl://failure-modes/"

#: (question, the URI that must rank first - or a tuple of URIs that are all a right first answer)
QUESTIONS: list[tuple[str, str | tuple[str, ...]]] = [
    ("which env var picks SGLang", R + "cluster-and-backends#backend-flags"),
    ("what does max_staleness do", R + "workflows#max_staleness"),
    (
        "why does my config fail with 'Config' object is not callable",
        R + "cluster-and-backends#the-config-file-must-define-trainer",
    ),
    ("does the CLI stop my Ray cluster when it exits", R + "cluster-and-backends#exit-handler-stops-ray"),
    (
        "ray.init(address='auto') needs a running cluster: how do I start Ray first",
        R + "cluster-and-backends#ray-preparation",
    ),
    ("how do environment variables reach the Ray workers", R + "cluster-and-backends#env-vars-reach-ray-workers"),
    ("can I use vLLM for rollout", (R + "cluster-and-backends#backend-support", F + "vllm_rollout_not_implemented")),
    ("how is the effective staleness threshold computed", R + "workflows#effective-staleness"),
    ("what does train_batch_size count", R + "workflows#train-batch-size"),
    ("what is tail_batch_trigger_size", R + "workflows#tail_batch_trigger_size"),
    ("enable_partial_rollout", R + "workflows#enable_partial_rollout"),
    ("what does over_sample_threshold control", R + "workflows#over_sample_threshold"),
    ("how do I choose between colocated and disaggregated", R + "workflows#choosing-a-topology"),
    ("what fields does RLDisaggregatedTrainerConfig add", R + "api-reference#rldisaggregatedtrainerconfig"),
    ("list the fields of RolloutConfig", R + "api-reference#rolloutconfig"),
    ("is there a backend field in RolloutConfig", R + "api-reference#rolloutconfig"),
    ("what fields does AgentLoopManagerConfig have", R + "api-reference#agentloopmanagerconfig"),
    ("default of prompt_repeat_k", R + "api-reference#samplerconfig"),
    (
        "why must evaluate_step be a multiple of sync_weights_interval",
        (R + "api-reference#interval-validation", R + "workflows#sync_weights_interval-and-the-other-intervals"),
    ),
    ("how does the GSM8K judger compute the reward", R + "data-contract#gsm8k-scoring"),
    ("ground truth 72.0 never matches the answer", R + "data-contract#gsm8k-scoring"),
    ("my file uses a messages key instead of prompt", R + "data-contract#prompt"),
    ("what is data_source used for", R + "data-contract#data-source"),
    ("how do I convert GSM8K to jsonl", R + "data-contract#conversion"),
    ("RolloutState must have reward_model with 'ground_truth' for judging", F + "reward_missing_ground_truth"),
    (
        "AssertionError: Not enough available CPUs in Ray cluster, 64.0 less than 106.",
        F + "ray_not_enough_cpus_or_memory",
    ),
    ("which ports do the rollout workers use", R + "cluster-and-backends#ports"),
    ("a placement group from a previous run is reused", R + "cluster-and-backends#placement-group-reuse"),
    (
        "divisibility rules for tensor_parallel_size and the number of rollout workers",
        R + "cluster-and-backends#divisibility-rules",
    ),
    ("tracing needs otelcol on PATH", R + "cluster-and-backends#tracing-requirements"),
    ("TraceConfig fields", R + "api-reference#traceconfig"),
    ("SampleParams max_tokens default", R + "api-reference#sampleparams"),
    ("the docstring says the seed default is 66", R + "api-reference#docstring-errata"),
    ("cliprange_low in policy_loss_cfg of GRPOLossConfig", R + "api-reference#advantage-and-loss"),
    ("EvaluatorConfig eval_sample_ratio", R + "api-reference#evaluatorconfig"),
    ("default num_cpus_per_worker of AcceleratorResourcesConfig", R + "api-reference#resources"),
    ("judger cpu_resources outside the accelerator placement group", R + "cluster-and-backends#external-cpu-pools"),
    ("SyncReplayBufferConfig or AsyncReplayBufferConfig", R + "api-reference#replay-buffers"),
    (
        "difference between SyncProduceStrategyConfig and AsyncProduceStrategyConfig",
        R + "api-reference#produce-strategies",
    ),
    ("vLLM rollout topology has not been verified after topology refactor.", F + "vllm_rollout_not_implemented"),
    (
        "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to",
        F + "ray_not_running",
    ),
    ("prompt plus response longer than pack_max_length", R + "data-contract#length-limits"),
    ("what goes into TaskSpecConfig", R + "api-reference#taskspecconfig"),
    ("WorkerConfig optimizer_steps and sp_size", R + "api-reference#workerconfig"),
    ("SingleTurnAgentLoopConfig hf_checkpoint", R + "api-reference#agent-loops"),
    ("what are the three topologies", R + "workflows#topologies"),
    ("what does max_token_staleness do", R + "workflows#max_token_staleness"),
    ("common mistakes in RL data files", R + "data-contract#common-mistakes"),
    ("does --num-workers work for disaggregated", R + "cluster-and-backends#entry-point-arguments"),
    ("is ground_truth compared by exact string equality", R + "data-contract#gsm8k-scoring"),
    ("KeyError: 'prompt'", F + "data_missing_prompt"),
]


def _needs_catalog(expected: tuple[str, ...]) -> None:
    if any(u.startswith(F) for u in expected) and not docs.catalog_sections():
        pytest.skip("failure-mode catalog not available")


@pytest.mark.parametrize("question,expected", QUESTIONS, ids=[q[:60] for q, _ in QUESTIONS])
def test_right_section_ranks_first(question: str, expected: str | tuple[str, ...]) -> None:
    wanted = expected if isinstance(expected, tuple) else (expected,)
    _needs_catalog(wanted)
    for uri in wanted:  # the expectation itself must name something that exists
        assert docs.resolve_reference_uri(uri) is not None, uri
    result = lr.run(lr.Params(query=question, limit=3), RunContext())
    ranked = [h.uri for h in result.hits]
    assert ranked and ranked[0] in wanted, f"{question!r}: got {ranked}"


def test_enough_questions() -> None:
    assert len(QUESTIONS) >= 30
    assert len({q for q, _ in QUESTIONS}) == len(QUESTIONS)


def test_tokenizer_keeps_identifiers_whole_and_split() -> None:
    toks = engine.tokenize("What does max_staleness do with XTUNER_USE_SGLANG and AsyncProduceStrategyConfig?")
    for t in ("max_staleness", "staleness", "xtuner_use_sglang", "sglang", "asyncproducestrategyconfig", "async"):
        assert t in toks, t
    for stop in ("what", "does", "do", "with", "and"):
        assert stop not in toks
    # brand names are words, not identifiers to split
    assert engine.tokenize("SGLang vLLM") == ["sglang", "vllm"]
    assert engine.tokenize("workers picks") == ["worker", "select"]


def test_result_shape_and_limit() -> None:
    result = lr.run(lr.Params(query="staleness", limit=2), RunContext())
    assert len(result.hits) == 2 and result.hits_omitted > 0
    assert [h.rank for h in result.hits] == [1, 2]
    assert result.hits[0].score >= result.hits[1].score
    top = result.hits[0]
    assert top.snippet and top.sources and top.uri.startswith("xtuner-rl://")
    assert docs.resolve_reference_uri(top.uri) is not None
    assert result.summary.startswith("Best match:")


def test_doc_filter() -> None:
    result = lr.run(lr.Params(query="staleness", doc="data-contract.md", limit=5), RunContext())
    assert all(h.doc == "data-contract" for h in result.hits)
    result = lr.run(lr.Params(query="ground truth", doc="workflows", limit=20), RunContext())
    assert all(h.doc == "workflows" for h in result.hits)
    if docs.catalog_sections():  # troubleshooting.md is rendered from the catalog: its entries answer
        result = lr.run(lr.Params(query="ground_truth missing", doc="troubleshooting"), RunContext())
        assert result.hits and all(h.uri.startswith(F) for h in result.hits)


def test_nothing_found_is_a_result_not_an_error() -> None:
    result = lr.run(lr.Params(query="zzqxv flibbertigibbet"), RunContext())
    assert result.hits == [] and result.hits_omitted == 0 and "No section" in result.summary


@pytest.mark.parametrize(
    "params,code",
    [({"query": "what is the"}, "query_has_no_terms"), ({"query": "staleness", "doc": "nope"}, "unknown_doc")],
)
def test_user_errors(params: dict, code: str) -> None:
    with pytest.raises(ToolInputError) as exc:
        lr.run(lr.Params(**params), RunContext())
    assert exc.value.code == code and exc.value.fix


def test_huge_query_is_bounded() -> None:
    text = ("Not enough available CPUs in Ray cluster, 8 less than 106. " * 40)[: lr.MAX_QUERY_CHARS]
    result = lr.run(lr.Params(query=text, limit=20), RunContext())
    assert len(result.hits) <= 20


# ---------------------------------------------------------------------------------------------------------
# The answer itself is in a top passage
# ---------------------------------------------------------------------------------------------------------

#: (question as a new user asks it, a text the ANSWER contains - or a tuple of texts, any of which is the answer).
#: Expected texts are copied from references/*.md (or the catalog), compared with white space collapsed.
ANSWERS: list = [
    # --- English -------------------------------------------------------------------------------------------
    ("how is the effective staleness threshold computed", "(max_staleness + 1) × sync_weights_interval"),
    ("what format must the final answer have for the GSM8K judger to give a reward", "####"),
    ("does the CLI stop my Ray cluster when it exits", "ray stop --force"),
    (
        "why does my config fail with 'Config' object is not callable",
        ("variable `trainer`", "variable named `trainer`", "trainer = "),
    ),
    ("which env var picks SGLang", "XTUNER_USE_SGLANG"),
    ("how many CPUs does Ray need for 8 rollout workers", "106"),
    ("which ports do the rollout workers use", "25000"),
    ("default of prompt_repeat_k", "`prompt_repeat_k` | `int` | `1`"),
    ("what does train_batch_size count", "prompt groups"),
    ("how do environment variables reach the Ray workers", "before `ray start`"),
    (
        "the number of rollout workers must be divisible by what",
        ("divisible by the GPUs per engine", "must be a multiple of it"),
    ),
    ("can I use vLLM for rollout", "NotImplementedError"),
    ("what do I need installed to enable tracing", "otelcol"),
    ("my data file uses a messages key instead of prompt", "KeyError: 'prompt'"),
    ("ground truth 72.0 never matches the answer 72", ("not normalised", "bare number as a string")),
    ("what does tail_batch_trigger_size -1 mean", "`-1` discards them"),
    (
        "why must evaluate_step be a multiple of sync_weights_interval",
        ("only happen on sync steps", "evaluation only runs on weight-sync steps"),
    ),
    ("what is the default seed of the trainer", ("`seed` | `int` | `42`", "defaults to 66 | 42")),
    ("where are checkpoints saved", "checkpoints/ckpt-step-<n>/"),
    ("what is the GRPO advantage formula", "(r - mean) / (std + eps)"),
    ("how long does XTuner wait for a placement group to be ready", "XTUNER_PG_READY_TIMEOUT"),
    ("how do I set the backend in RolloutConfig", "no `backend` field"),
    ("do I need WORK_DIR even when I pass --work-dir", "even when `--work-dir` is passed"),
    ("how many extra groups does over_sample_threshold launch", "ceil(over_sample_threshold × task_batch_size)"),
    ("how do I convert GSM8K to jsonl", "convert_gsm8k.py --input-dir"),
    (
        "what happens with max_staleness > 0 and partial rollout off",
        ("reset to their prompt", "retry cap", "stale samples are dropped"),
    ),
    ("which port does the NCCL weight update group use", "30000"),
    ("how is evaluation accuracy computed", ('score"] > 0', "score > 0")),
    # --- Chinese -------------------------------------------------------------------------------------------
    ("max_staleness 的有效阈值是怎么计算的？", "(max_staleness + 1) × sync_weights_interval"),
    ("GSM8K 判分器要求模型的最终答案是什么格式？", "####"),
    ("CLI 退出的时候会把我的 Ray 集群停掉吗？", "ray stop --force"),
    ("配置文件没有定义 trainer 变量会报什么错？", "object is not callable"),
    ("用哪个环境变量来选择 SGLang 后端？", "XTUNER_USE_SGLANG"),
    ("环境变量怎么传到 Ray 的 worker 进程里？", "before `ray start`"),
    ("rollout worker 用哪些端口？", "25000"),
    ("8 个 worker 需要多少 CPU？资源检查不通过", "106"),
    ("train_batch_size 是按样本数还是按组数算的？", "prompt groups"),
    ("开启链路追踪需要安装什么？", "otelcol"),
    ("部分 rollout 是做什么用的？", "continued from where they stopped"),
    ("检查点保存在哪个目录？", "checkpoints/ckpt-step-<n>/"),
    ("GSM8K 的 ground truth 写成 72.0，为什么奖励一直是 0？", ("not normalised", "bare number as a string")),
    ("放置组等待超时是多久？", "XTUNER_PG_READY_TIMEOUT"),
    ("启动时报错找不到正在运行的 Ray 实例怎么办？", "ray start --head"),
    ("显存不足 OOM 应该调哪个参数？", "gpu_memory_utilization"),
    ("端口被占用怎么办？", "dist_port_base"),
]
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _question(entry) -> str:
    return entry.values[0] if hasattr(entry, "values") else entry[0]


def _ws(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("question,answer", ANSWERS, ids=[_question(a)[:50] for a in ANSWERS])
def test_answer_is_in_a_top_passage(question: str, answer: str | tuple[str, ...]) -> None:
    wanted = answer if isinstance(answer, tuple) else (answer,)
    result = lr.run(lr.Params(query=question, limit=3), RunContext())
    shown = [_ws(h.passage) for h in result.hits]
    assert any(w in p for p in shown for w in wanted), f"{question!r}: {wanted} not in {shown}"


def test_answer_table_is_big_and_bilingual() -> None:
    questions = [_question(a) for a in ANSWERS]
    assert len(questions) >= 24 and len(set(questions)) == len(questions)
    assert sum(1 for q in questions if _CJK.search(q)) >= 8


def test_query_speed_after_index_is_built() -> None:
    engine.build_index()
    timings = []
    for entry in ANSWERS:
        start = time.perf_counter()
        engine.search(_question(entry), 5)
        timings.append(time.perf_counter() - start)
    assert statistics.median(timings) < 0.050, timings
    assert max(timings) < 0.250, timings  # generous: a loaded CI machine


# ---------------------------------------------------------------------------------------------------------
# Passages: whole, with their context, at most two per section in the top five
# ---------------------------------------------------------------------------------------------------------


def test_table_row_comes_with_its_header() -> None:
    hit = lr.run(lr.Params(query="which env var picks SGLang", limit=3), RunContext()).hits
    rows = [h for h in hit if "XTUNER_USE_SGLANG=1" in h.passage and h.passage.startswith("|")]
    assert rows, [h.passage for h in hit]
    header, row = rows[0].passage.splitlines()
    assert header == "| Variable | Backend |" and row == "| `XTUNER_USE_SGLANG=1` | SGLang |"
    assert rows[0].snippet == row


def test_passages_are_whole_and_snippets_are_in_them() -> None:
    for entry in ANSWERS:
        for h in lr.run(lr.Params(query=_question(entry), limit=5), RunContext()).hits:
            assert h.passage.strip() and h.snippet
            assert len(h.passage) <= passages.PASSAGE_CHARS or passages.ELLIPSIS in h.passage, h.passage
            last = h.passage.rstrip().splitlines()[-1].rstrip()
            # prose ends at a sentence end (or says that it was cut); rows, code and list items end as written
            assert last.endswith((".", ":", ")", "|", "```", "`", ";", passages.ELLIPSIS, "*", ",", "or", '"')), last
            assert _ws(h.snippet.rstrip(passages.ELLIPSIS)) in _ws(h.passage) or h.snippet.endswith(
                passages.ELLIPSIS
            ), (h.snippet, h.passage)


@pytest.mark.parametrize(
    "question", ["staleness", "ray cluster", "placement group", "GSM8K reward", "环境变量", "port", "rollout backend"]
)
def test_at_most_two_passages_of_a_section_in_the_top_five(question: str) -> None:
    hits = lr.run(lr.Params(query=question, limit=5), RunContext()).hits
    assert len(hits) == 5
    per_section: dict[str, int] = {}
    for h in hits:
        per_section[h.uri] = per_section.get(h.uri, 0) + 1
    assert max(per_section.values()) <= 2, per_section


def test_splitter_shapes() -> None:
    body = """Intro sentence. It has two sentences, e.g. `a.b` and `x. Y` stay whole.

| field | default | meaning |
|---|---|---|
| `x` | `1` | the x |

- parent item
  - child item
- second item

The command is:

```bash
run --it
```
"""
    got = passages.split_markdown(body)
    kinds = [p.kind for p in got]
    assert kinds == ["paragraph", "row", "item", "item", "item", "paragraph", "code"], kinds
    assert got[0].units == ("Intro sentence.", "It has two sentences, e.g. `a.b` and `x. Y` stay whole.")
    assert got[1].text == "| field | default | meaning |\n| `x` | `1` | the x |"
    assert got[3].text == "- parent item\n  - child item"
    assert got[4].text == "- second item"
    assert got[6].text == "The command is:\n```bash\nrun --it\n```"


def test_lead_in_paragraph_carries_its_list() -> None:
    got = passages.split_markdown("Rules:\n\n- one thing.\n- other thing.\n")
    assert got[0].text == "Rules:\n- one thing.\n- other thing."
    assert got[1].text == "Rules:\n- one thing." and got[2].text == "Rules:\n- other thing."


def test_long_passage_is_cut_at_sentence_boundaries_around_the_best_sentence() -> None:
    sentences = [f"Sentence number {i} talks about filler words here." for i in range(30)]
    sentences[20] = "The answer sits in this sentence."
    (p,) = passages.split_markdown(" ".join(sentences))
    best = p.units.index("The answer sits in this sentence.")
    shown = passages.shown_text(p, best)
    assert "The answer sits in this sentence." in shown
    assert len(shown) <= passages.PASSAGE_CHARS + 4
    assert shown.startswith(passages.ELLIPSIS) and shown.endswith(passages.ELLIPSIS)
    inner = shown.strip(passages.ELLIPSIS + " ")
    assert inner.startswith("Sentence number") and inner.endswith(".")


# ---------------------------------------------------------------------------------------------------------
# Chinese: glossary and catalog phrases
# ---------------------------------------------------------------------------------------------------------

GLOSSARY_MUST_HAVE = (
    "环境变量 显存 奖励 评估 超时 端口 节点 卡住 后端 启动 配置 异步 同步 权重 陈旧 过期 部分 批次 资源 放置组 集群 "
    "数据格式 答案 判分 评判器 检查点 日志 追踪"
).split()


def test_glossary_is_data_and_covers_the_field() -> None:
    table = engine.glossary()
    assert len(table) >= 150
    for term in GLOSSARY_MUST_HAVE:
        assert term in table, term
    for term, english in table.items():
        assert _CJK.search(term) and engine.tokenize(english), (term, english)


def test_glossary_longest_match_first_and_latin_kept() -> None:
    assert engine.translate_cjk("放置组超时") == (engine.glossary()["放置组"], engine.glossary()["超时"])
    assert "hang" in engine.translate_cjk("训练卡住")[-1]  # 卡住 (hang), not 卡 (gpu) + 住
    expanded = engine.expand_query("max_staleness 和 SGLang后端是什么")
    assert "max_staleness" in expanded and "SGLang" in expanded and "backend" in expanded
    terms = engine.parse_query("max_staleness 和 SGLang后端是什么").terms
    assert {"max_staleness", "sglang", "backend"} <= set(terms)


def test_fei_gongka_is_disaggregated_not_colocated() -> None:
    """非共卡 (XTuner's own word for the disaggregated layout) must not be read as 非 + 共卡 (colocated)."""
    assert engine.translate_cjk("非共卡") == (engine.glossary()["非共卡"],)
    assert "disaggregated" in engine.translate_cjk("非共卡模式怎么配置")[0]
    for question in ("非共卡模式怎么配置", "非共卡", "非共卡模式下权重怎么同步"):
        result = lr.run(lr.Params(query=question), RunContext())
        assert "disaggregat" in result.query_terms and "colocat" not in result.query_terms, question
        top = result.hits[0]
        assert "isaggregat" in top.heading + top.passage and "Colocated" not in top.heading, (question, top.heading)
        assert all("Colocate" not in h.heading for h in result.hits[:3]), (question, [h.heading for h in result.hits])
    # 共卡 alone still means colocated
    assert "colocat" in lr.run(lr.Params(query="共卡模式怎么配置"), RunContext()).query_terms


def test_ka_zai_is_stuck_while_ka_alone_stays_gpu() -> None:
    """卡在第一步 is "stuck at the first step", not "GPU at the first step"; 8卡 and 单卡 still mean GPUs."""
    stuck = lr.run(lr.Params(query="训练卡在第一步"), RunContext()).query_terms
    assert "stuck" in stuck and "gpu" not in stuck
    both = lr.run(lr.Params(query="8卡训练卡在第一步"), RunContext()).query_terms
    assert {"stuck", "gpu"} <= set(both)
    assert engine.translate_cjk("显卡在哪") == (engine.glossary()["显卡"],)  # 显卡 wins over 卡在
    assert engine.translate_cjk("单卡") == (engine.glossary()["单卡"],)


def test_chinese_only_question_is_searchable_and_function_words_alone_are_not() -> None:
    result = lr.run(lr.Params(query="检查点保存在哪个目录？"), RunContext())
    assert result.hits and "checkpoint" in result.query_terms
    with pytest.raises(ToolInputError) as exc:
        lr.run(lr.Params(query="是什么吗？"), RunContext())
    assert exc.value.code == "query_has_no_terms"


def test_catalog_phrases_find_an_entry_from_a_chinese_description() -> None:
    entry = docs.Section(
        doc="failure-modes",
        heading="Rollout stalls after weight sync",
        anchor="synthetic_stall_after_sync",
        level=2,
        text="The engine never resumes after the update.\nRestart the engine.\nother",
        kind="failure_mode",
        extra={"category": "other", "phrases": ["权重同步后卡住不动", "stalls after sync"]},
    )
    other = docs.Section("workflows", "Weights", "weights", 2, "Weight sync pushes weights to the engine.")
    index = engine.index_sections([other, entry])
    found, _ = engine.search("为什么权重同步后卡住不动了", 3, index=index)
    assert found[0].section.anchor == "synthetic_stall_after_sync"
    assert found[0].passage == "The engine never resumes after the update."
    assert any(f.passage == "Fix: Restart the engine." for f in found)


def test_real_catalog_chinese_phrases_find_their_entry() -> None:
    entries = [s for s in docs.catalog_sections() if engine._entry_parts(s)[1]]
    pairs = [
        (s.anchor, p)
        for s in entries
        for p in engine._entry_parts(s)[1]
        if _CJK.search(p) and len(p) >= 4 and not re.search(r"[A-Za-z]", p)
    ]
    if not pairs:
        pytest.skip("no catalog entry carries Chinese phrases yet")
    found_in_top3 = 0
    for anchor, phrase in pairs:
        found, _ = engine.search(phrase, 3)
        found_in_top3 += any(f.section.anchor == anchor for f in found)
    # phrases shared by several entries cannot all rank their own entry: most must
    assert found_in_top3 >= 0.8 * len(pairs), (found_in_top3, len(pairs))


# ---------------------------------------------------------------------------------------------------------
# Through the real MCP client (both protocol eras)
# ---------------------------------------------------------------------------------------------------------


MCP_QUESTIONS = [
    ("which env var picks SGLang", R + "cluster-and-backends#backend-flags"),
    ("what does max_staleness do", R + "workflows#max_staleness"),
    (
        "why does my config fail with 'Config' object is not callable",
        R + "cluster-and-backends#the-config-file-must-define-trainer",
    ),
]


@pytest.mark.anyio
async def test_through_mcp(mcp_client) -> None:
    tools = {t.name: t for t in (await mcp_client.list_tools()).tools}
    assert "lookup_reference" in tools
    tool = tools["lookup_reference"]
    assert tool.input_schema["required"] == ["query"]
    assert tool.annotations.read_only_hint and not tool.annotations.open_world_hint
    for question, expected in MCP_QUESTIONS:
        r = await mcp_client.call_tool("lookup_reference", {"query": question, "limit": 3})
        assert not r.is_error
        assert r.structured_content["hits"][0]["uri"] == expected, question
        assert json.loads(r.content[0].text) == r.structured_content
        read = await mcp_client.read_resource(expected)
        assert read.contents and read.contents[0].text.strip()


@pytest.mark.anyio
async def test_errors_through_mcp(mcp_client) -> None:
    r = await mcp_client.call_tool("lookup_reference", {"query": "x y", "doc": "nope"})
    assert r.is_error
    text = r.content[0].text
    assert json.loads(text[text.index("{") :])["error"]["code"] == "unknown_doc"
    r = await mcp_client.call_tool("lookup_reference", {"query": "staleness", "limit": 0})
    assert r.is_error and "limit" in r.content[0].text
    r = await mcp_client.call_tool("lookup_reference", {"query": "staleness", "top_k": 3})
    assert r.is_error
