"""The README a newcomer follows (issue 27 item 4): every client configuration names a command that exists after the
quickstart and starts a server a real MCP client can use; the registry form is marked "after release" and
server.json claims no published package; the Python API example calls every tool with real parameters; the
pre-commit example names real hooks."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from xtuner_rl_mcp import api

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
#: The placeholder the README uses for the clone, and where the quickstart's virtualenv puts the executable.
CLONE = "/ABSOLUTE/PATH/TO/xtuner-rl-mcp"
VENV_BIN = f"{CLONE}/.venv/bin"
AFTER_RELEASE = "<!-- after-release -->"
BLOCK = re.compile(r"(?P<marker><!-- after-release -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def client_configs() -> list[tuple[bool, str, list[str], dict[str, str]]]:
    """(after release?, command, args, env) of every configuration in the README's client section."""
    out = []
    for m in BLOCK.finditer(section("Client configuration")):
        later, lang, body = bool(m["marker"]), m["lang"], m["body"]
        if lang == "json":
            servers = json.loads(body)
            for entry in (servers.get("mcpServers") or servers.get("servers")).values():
                out.append((later, entry["command"], entry.get("args", []), entry.get("env", {})))
        elif lang == "bash":
            for line in body.splitlines():
                words = shlex.split(line)
                if words[:3] == ["claude", "mcp", "add"]:
                    cut = words.index("--")
                    env = dict(w.split("=", 1) for w in words[4:cut] if "=" in w)
                    out.append((later, words[cut + 1], words[cut + 2 :], env))
    return out


def local(text: str) -> str:
    """A README path as it is on this machine after the quickstart (the clone, and the venv running the tests)."""
    return text.replace(VENV_BIN, str(Path(sys.executable).parent)).replace(CLONE, str(REPO))


def test_every_configuration_is_found_and_the_registry_form_is_marked():
    configs = client_configs()
    assert len([c for c in configs if not c[0]]) >= 4  # Claude Code, Desktop/Cursor, VS Code, uvx --from
    for later, command, args, _ in configs:
        registry = command == "uvx" and "--from" not in args
        assert registry == later, f"{command} {args}: only the registry form may be 'after release', and it must be"
    assert "after release" in section("Client configuration").lower()


def test_server_json_claims_no_published_package():
    meta = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
    assert "packages" not in meta, "server.json lists a package the registry does not have"
    note = meta["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    assert note["release_status"].startswith("unpublished")


def test_commands_exist_after_the_quickstart():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    for later, command, args, _ in client_configs():
        if later:
            continue
        if command == "uvx":  # uvx --from <clone> <script> ...: the clone must provide that script
            i = args.index("--from")
            assert local(args[i + 1]) == str(REPO) and args[i + 2] in scripts, args
            continue
        path = Path(local(command))
        assert path.is_absolute() and path.is_file() and os.access(path, os.X_OK), command
        assert path.name in scripts


@pytest.mark.anyio
async def test_each_configuration_starts_a_server_a_client_can_use(tmp_path):
    """Spawned as a client spawns it — the command, its args, its env, another working directory, a bare PATH."""
    from mcp import Client, StdioServerParameters

    started = set()
    for later, command, args, env in client_configs():
        if later or command == "uvx" or (command, tuple(args)) in started:
            continue
        started.add((command, tuple(args)))
        roots = str(tmp_path)
        server_env = {"PATH": "/usr/bin:/bin", **env, "XTUNER_RL_MCP_ALLOW_ROOTS": roots}
        params = StdioServerParameters(command=local(command), args=args, env=server_env, cwd=str(tmp_path))
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert set(api.MODULES) <= names
            result = await client.call_tool("lookup_reference", {"query": "max_staleness", "limit": 1})
            assert not result.is_error
    assert started


def test_python_api_example_calls_every_tool_with_real_parameters():
    (code,) = [m["body"] for m in BLOCK.finditer(section("Python API")) if m["lang"] == "python"]
    called: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in api.MODULES:
            called.add(node.func.id)
            fields = set(api.module_of(node.func.id).Params.model_fields) | set(api.CALL_KEYWORDS)
            unknown = {k.arg for k in node.keywords} - fields
            assert not unknown, f"{node.func.id}: {unknown}"
    assert called == set(api.MODULES)


def test_pre_commit_example_names_real_hooks():
    hooks = {h["id"] for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    (example,) = [m["body"] for m in BLOCK.finditer(section("In your CI")) if m["lang"] == "yaml"]
    used = {h["id"] for repo in yaml.safe_load(example)["repos"] for h in repo["hooks"]}
    assert used and used <= hooks
