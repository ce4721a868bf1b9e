"""xtuner-rl-mcp: an MCP server that plans, checks and troubleshoots XTuner V1 RL (GRPO) runs.

The repository root is this package: ``server/`` holds the MCP wiring, ``tools/`` one pure module per tool,
``references/`` the knowledge the tools read.
"""

__version__ = "0.1.0"

#: The XTuner source every claim of this server is checked against.
XTUNER_COMMIT = "b934f462095c1e750229de35367c50ae36caa786"
XTUNER_COMMIT_SHORT = "b934f46"
