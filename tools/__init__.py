"""The MCP tools, one module each: description, parameters, result and a run() that composes engines below.

Nothing here imports MCP; server/ turns each module's SPEC into an MCP tool.
"""
