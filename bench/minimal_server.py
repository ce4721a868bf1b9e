"""The cold-start baseline: a bare one-tool ``MCPServer`` over stdio, nothing else imported."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
