"""``python -m xtuner_rl_mcp`` runs the command line (``serve`` over stdio by default)."""

from .server.cli import main

raise SystemExit(main())
