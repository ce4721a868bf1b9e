"""MCP resources, resource templates and prompts over references/, in both protocol eras."""

from __future__ import annotations

import json

import pytest
from mcp import MCPError
from xtuner_rl_mcp.knowledge import docs

pytestmark = pytest.mark.anyio

R = "xtuner-rl://references/"


async def test_resources_and_templates_listed(mcp_client) -> None:
    listed = {str(r.uri): r for r in (await mcp_client.list_resources()).resources}
    for name in docs.list_docs():
        assert f"{R}{name}" in listed
        assert listed[f"{R}{name}"].mime_type == "text/markdown"
    assert "xtuner-rl://skill" in listed
    assert "xtuner-rl://failure-modes" in listed
    for name in docs.list_schemas():
        assert f"xtuner-rl://schemas/{name}" in listed
    for r in listed.values():
        assert r.description and r.title
    templates = {t.uri_template for t in (await mcp_client.list_resource_templates()).resource_templates}
    assert {
        f"{R}{{name}}",
        f"{R}{{name}}{{#anchor}}",
        "xtuner-rl://failure-modes/{id}",
        "xtuner-rl://schemas/{name}",
    } <= templates


async def test_read_references_skill_and_schemas(mcp_client) -> None:
    for name in docs.list_docs():
        result = await mcp_client.read_resource(f"{R}{name}")
        (content,) = result.contents
        assert content.text == docs.read_doc(name)
        assert content.mime_type == "text/markdown"
    result = await mcp_client.read_resource(f"{R}workflows#effective-staleness")
    text = result.contents[0].text
    assert text.startswith("## Effective staleness")
    assert "(max_staleness + 1) × sync_weights_interval" in text
    assert "## Train batch size" not in text  # only that section
    skill = (await mcp_client.read_resource("xtuner-rl://skill")).contents[0].text
    assert skill.startswith("---\nname: xtuner-rl")
    for name in docs.list_schemas():
        text = (await mcp_client.read_resource(f"xtuner-rl://schemas/{name}")).contents[0].text
        assert isinstance(json.loads(text), dict)


async def test_failure_modes_index_and_entry(mcp_client) -> None:
    index = json.loads((await mcp_client.read_resource("xtuner-rl://failure-modes")).contents[0].text)
    assert index["count"] == len(index["failure_modes"]) == len(docs.catalog_sections())
    if not index["failure_modes"]:
        pytest.skip("failure-mode catalog not available")
    row = index["failure_modes"][0]
    assert set(row) >= {"id", "title", "category", "uri"}
    entry = json.loads((await mcp_client.read_resource(row["uri"])).contents[0].text)
    assert entry["id"] == row["id"] and entry["title"] == row["title"]
    assert entry["patterns"] and entry["fix"] and entry["source"]


UNKNOWN = [
    f"{R}no-such-doc",
    f"{R}workflows#no-such-anchor",
    f"{R}nope#prompt",
    "xtuner-rl://failure-modes/no_such_entry",
    "xtuner-rl://schemas/nope.json",
    "xtuner-rl://nothing-here",
]


async def test_unknown_names_are_not_found(mcp_client) -> None:
    for uri in UNKNOWN:
        with pytest.raises(MCPError) as exc:
            await mcp_client.read_resource(uri)
        assert exc.value.error.code == -32602, uri
        assert "Traceback" not in exc.value.error.message
    with pytest.raises(MCPError):
        await mcp_client.read_resource(f"{R}..%2F..%2Fserver%2Fapp.py")


async def test_prompts(mcp_client) -> None:
    prompts = {p.name: p for p in (await mcp_client.list_prompts()).prompts}
    assert {"plan_grpo_run", "diagnose_failed_run"} <= set(prompts)
    plan_args = {a.name for a in prompts["plan_grpo_run"].arguments}
    assert {"nodes", "gpus_per_node", "model", "backend", "train_data"} <= plan_args
    assert all(not a.required for a in prompts["plan_grpo_run"].arguments)
    assert {a.name for a in prompts["diagnose_failed_run"].arguments} == {"log_excerpt", "log_path"}
    result = await mcp_client.get_prompt(
        "plan_grpo_run", {"nodes": "2", "gpus_per_node": "8", "model": "/models/qwen3-8b", "backend": "sglang"}
    )
    text = result.messages[0].content.text
    assert "/models/qwen3-8b" in text and "nodes: 2" in text and "sglang" in text
    order = [text.index(t) for t in ("choose_topology", "check_reward_data", "probe_environment", "preflight")]
    assert order == sorted(order)
    log = "AssertionError: Unsupported rollout backend: . Please set XTUNER_USE_SGLANG ..."
    result = await mcp_client.get_prompt("diagnose_failed_run", {"log_excerpt": log})
    text = result.messages[0].content.text
    assert log in text and text.index("diagnose_symptom") < text.index("probe_environment")
    result = await mcp_client.get_prompt("diagnose_failed_run", {"log_path": "/tmp/run/rl.log"})
    assert "/tmp/run/rl.log" in result.messages[0].content.text
    result = await mcp_client.get_prompt("diagnose_failed_run", {})
    assert "Ask the user" in result.messages[0].content.text
