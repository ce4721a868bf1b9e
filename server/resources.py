"""MCP resources and prompts over references/ (filled in by the knowledge-base work)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def register(server: MCPServer) -> None:
    """Register resources and prompts."""
    return None
