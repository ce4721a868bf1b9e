"""lookup_reference: the right section ranks first for real questions; tokenizer; errors; through MCP."""

from __future__ import annotations

import json

import pytest
from xtuner_rl_mcp.core import RunContext, ToolInputError
from xtuner_rl_mcp.knowledge import docs
from xtuner_rl_mcp.tools import lookup_reference as lr

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
    toks = lr.tokenize("What does max_staleness do with XTUNER_USE_SGLANG and AsyncProduceStrategyConfig?")
    for t in ("max_staleness", "staleness", "xtuner_use_sglang", "sglang", "asyncproducestrategyconfig", "async"):
        assert t in toks, t
    for stop in ("what", "does", "do", "with", "and"):
        assert stop not in toks
    # brand names are words, not identifiers to split
    assert lr.tokenize("SGLang vLLM") == ["sglang", "vllm"]
    assert lr.tokenize("workers picks") == ["worker", "select"]


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
