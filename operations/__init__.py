"""What each tool does, callable in-process: one module per tool with its typed request (``Params``), its result
model (``Result``) and ``run(params, ctx)``. The MCP faces in ``tools/`` and the command line call these; an
operation that composes others (``preflight``) passes what it has already read (the config view) on."""

#: One operation module per tool, by the tool's name: the package's functions, the MCP tools and the CLI all list these.
TOOLS = (
    "build_rl_command",
    "choose_topology",
    "lookup_reference",
    "inspect_config",
    "probe_environment",
    "check_reward_data",
    "preflight",
    "diagnose_symptom",
    "inspect_run",
)
