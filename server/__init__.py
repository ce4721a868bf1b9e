"""MCP wiring: tool, resource and prompt registration, transports, CLI and the security policy."""
