"""Where ``xtuner-rl-mcp serve`` spends its start-up, phase by phase, in one fresh process.

``python bench/startup_breakdown.py`` prints JSON: milliseconds for importing the SDK (what the minimal server also
pays), our server modules, each tool module, creating the MCPServer, registering each tool (the SDK builds its
input/output JSON schemas here), and registering resources and prompts. The phases run in the order ``serve`` runs
them, so each figure is that phase's own cost.
"""

from __future__ import annotations

import importlib
import json
import time


def main() -> dict[str, object]:
    t = time.perf_counter
    out: dict[str, object] = {}
    t0 = t()
    from mcp.server.mcpserver import MCPServer  # the minimal server's whole import

    out["import_sdk_ms"] = (t() - t0) * 1000
    t0 = t()
    from xtuner_rl_mcp.core import PathPolicy
    from xtuner_rl_mcp.server import app, cli, registry  # noqa: F401 - timing the import

    out["import_server_modules_ms"] = (t() - t0) * 1000
    tool_imports: dict[str, float] = {}
    specs = []
    for name in registry.TOOL_MODULES:
        t0 = t()
        module = importlib.import_module(f"xtuner_rl_mcp.tools.{name}")
        tool_imports[name] = (t() - t0) * 1000
        specs.append(module.SPEC)
    out["import_tool_modules_ms"] = tool_imports
    t0 = t()
    server = MCPServer("bench", log_level="WARNING")
    out["create_mcpserver_ms"] = (t() - t0) * 1000
    paths = PathPolicy.from_strings(["."])
    register: dict[str, float] = {}
    for spec in specs:
        t0 = t()
        app.register_tool(server, spec, paths)
        register[spec.name] = (t() - t0) * 1000
    out["register_tool_ms"] = register
    t0 = t()
    from xtuner_rl_mcp.server import resources

    resources.register(server)
    out["register_resources_prompts_ms"] = (t() - t0) * 1000
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
