"""What each tool does, callable in-process: one module per tool with its typed request (``Params``), its result
model (``Result``) and ``run(params, ctx)``. The MCP faces in ``tools/`` and the command line call these; an
operation that composes others (``preflight``) passes what it has already read (the config view) on."""
