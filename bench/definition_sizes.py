"""What the tool definitions cost an assistant's context: characters of tools/list, split the way clients pay.

    python bench/definition_sizes.py [--json]

Every session pays for the descriptions and input schemas; output schemas are sent too (structured output), and
are measured apart. Sizes are of compact JSON (no indentation), as a client receives them.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio


async def _tools() -> list[dict]:
    from mcp import Client
    from xtuner_rl_mcp.server.app import build_server

    async with Client(build_server(), mode="auto") as client:
        listed = await client.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


def sizes(tools: list[dict]) -> dict:
    def n(obj) -> int:
        return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))

    per_tool = {
        t["name"]: {
            "description": len(t.get("description", "")),
            "input_schema": n(t.get("inputSchema", {})),
            "output_schema": n(t.get("outputSchema", {})),
        }
        for t in tools
    }
    return {
        "tools": len(tools),
        "descriptions_plus_input_schemas": sum(v["description"] + v["input_schema"] for v in per_tool.values()),
        "output_schemas": sum(v["output_schema"] for v in per_tool.values()),
        "tools_list_total": n(tools),
        "per_tool": per_tool,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    s = sizes(anyio.run(_tools))
    if args.json:
        json.dump(s, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"{s['tools']} tools: descriptions + input schemas {s['descriptions_plus_input_schemas']:,} chars; "
        f"output schemas {s['output_schemas']:,} chars; whole tools/list {s['tools_list_total']:,} chars"
    )
    for name, v in s["per_tool"].items():
        print(
            f"  {name:20s} description {v['description']:6,}  input {v['input_schema']:6,}  output {v['output_schema']:7,}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
