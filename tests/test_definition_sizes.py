"""What tools/list costs an assistant stays within budget, and compaction keeps the schemas valid and equivalent."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

REPO = Path(__file__).resolve().parents[1]
#: Descriptions plus input schemas of all tools, in characters of compact JSON (issue 20: under 20,000).
BUDGET = 20_000


def _bench():
    spec = importlib.util.spec_from_file_location("definition_sizes", REPO / "bench" / "definition_sizes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.anyio
async def test_definitions_fit_the_budget(mcp_client):
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await mcp_client.list_tools()).tools]
    sizes = _bench().sizes(tools)
    assert sizes["tools"] >= 9
    assert sizes["descriptions_plus_input_schemas"] < BUDGET, sizes["per_tool"]
    for t in tools:
        Draft202012Validator.check_schema(t["inputSchema"])
        Draft202012Validator.check_schema(t["outputSchema"])
        text = json.dumps(t["inputSchema"])
        assert '"title"' not in text.replace('"title":{', "")  # generated titles are gone (a field named title stays)
        assert "Use when" in t["description"] and "Not for" in t["description"]


def test_compaction_keeps_meaning():
    from xtuner_rl_mcp.server.app import compact_schema

    schema = {
        "title": "Params",
        "type": "object",
        "properties": {
            "default": {"title": "Default", "type": "integer", "default": 3},
            "stage": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}], "default": None},
            "title": {"title": "Title", "type": "string"},
        },
    }
    out = compact_schema(schema)
    assert set(out["properties"]) == {"default", "stage", "title"}
    assert out["properties"]["default"] == {"type": "integer", "default": 3}
    assert out["properties"]["stage"] == {"enum": ["a", "b", None], "type": ["string", "null"]}
    v = Draft202012Validator(out)
    assert v.is_valid({"stage": None}) and v.is_valid({"stage": "a"}) and not v.is_valid({"stage": "c"})
