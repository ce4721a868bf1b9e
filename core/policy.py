"""What the operator allowed when starting the server, beyond the file roots: the training interpreters that may be
run, and the Ray clusters the server's credentials may be sent to. A client's arguments can never widen it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: Training interpreters (or venv/conda prefixes) the operator allows the server to run, ``os.pathsep``-separated.
ALLOW_PYTHON_ENV = "XTUNER_RL_MCP_ALLOW_PYTHON"
#: Ray clusters (GCS ``host:port`` or dashboard URL) the server may send its Ray credentials to, comma-separated.
RAY_ADDRESSES_ENV = "XTUNER_RL_MCP_RAY_ADDRESSES"


@dataclass(frozen=True)
class OperatorPolicy:
    """Decided at start by the operator (flags and the server's environment), never by a tool argument."""

    #: Resolved paths of interpreters that may be run (each ``<prefix>/bin/python`` of an allowed prefix too).
    interpreters: tuple[Path, ...] = ()
    #: Ray addresses the operator configured (``RAY_ADDRESS`` at start, ``--ray-address``, the env list above).
    ray_addresses: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        pythons: Iterable[str] = (),
        ray_addresses: Iterable[str] = (),
    ) -> OperatorPolicy:
        env = os.environ if environ is None else environ
        raw_pythons = [*pythons, *(p for p in env.get(ALLOW_PYTHON_ENV, "").split(os.pathsep) if p.strip())]
        interpreters: list[Path] = []
        for raw in raw_pythons:
            path = Path(os.path.expanduser(raw.strip()))
            for candidate in (path, path / "bin" / "python", path / "bin" / "python3") if path.is_dir() else (path,):
                real = Path(os.path.realpath(candidate))
                if real.is_file() and real not in interpreters:
                    interpreters.append(real)
        addresses = [a.strip() for a in ray_addresses if a.strip()]
        addresses += [a.strip() for a in env.get(RAY_ADDRESSES_ENV, "").split(",") if a.strip()]
        ray_env = env.get("RAY_ADDRESS", "").strip()
        if ray_env and ray_env.lower() not in ("auto", "local"):
            addresses.append(ray_env)
        return cls(interpreters=tuple(interpreters), ray_addresses=tuple(dict.fromkeys(addresses)))
