"""One module per tool: pure, typed logic (pydantic in and out). Nothing here imports MCP."""
