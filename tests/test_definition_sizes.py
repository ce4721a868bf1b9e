"""What tools/list costs an assistant stays within budget, and compaction keeps the schemas valid and equivalent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from .upstream import bench_module

REPO = Path(__file__).resolve().parents[1]
#: Descriptions plus input schemas of all tools, in characters of compact JSON (issue 20: under 20,000).
BUDGET = 20_000


def _bench():
    return bench_module("definition_sizes")


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
    """The generator drops derived titles and null defaults but keeps names, defaults, enums and validation."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field
    from xtuner_rl_mcp.server.schemas import schema_of

    class Inner(BaseModel):
        n: int = 1

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        default: int = 3
        stage: Literal["a", "b"] | None = None
        title: str
        items: list[str] = Field(default_factory=list)
        inner: Inner | None = None

    out = schema_of(Params)
    assert "title" not in out and set(out["properties"]) == {"default", "stage", "title", "items", "inner"}
    assert out["properties"]["default"] == {"type": "integer", "default": 3}
    assert out["properties"]["stage"] == {"enum": ["a", "b", None], "type": ["string", "null"]}
    assert out["properties"]["title"] == {"type": "string"}
    assert out["properties"]["items"]["default"] == []
    assert out["additionalProperties"] is False and out["required"] == ["title"]
    v = Draft202012Validator(out)
    assert v.is_valid({"title": "x", "stage": None, "inner": None}) and v.is_valid({"title": "x", "stage": "a"})
    assert not v.is_valid({"title": "x", "stage": "c"}) and not v.is_valid({"title": "x", "nope": 1})
    assert v.is_valid({"title": "x", "inner": {"n": 2}}) and not v.is_valid({"title": "x", "inner": {"n": "two"}})
