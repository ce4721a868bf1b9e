"""The layering holds: import-linter's contracts (layers, no MCP below the server, no import circles) are kept, and
the server uses only the SDK's public API."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")


@pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter not installed")
def test_import_contracts_kept():
    p = subprocess.run([LINT_IMPORTS], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout


def test_the_acyclic_contract_finds_a_planted_circle(tmp_path):
    """The same contract type, on a tiny package with a circle planted in it, is reported broken."""
    pkg = tmp_path / "planted"
    (pkg / "inner").mkdir(parents=True)
    for rel, text in {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "from .inner import c\n",
        "inner/__init__.py": "",
        "inner/c.py": "from .. import a\n",
    }.items():
        (pkg / rel).write_text(text)
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = planted\n\n[importlinter:contract:acyclic]\nname = acyclic\n"
        "type = acyclic_siblings\nancestors =\n    planted\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    p = subprocess.run([LINT_IMPORTS], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode != 0 and "BROKEN" in p.stdout, p.stdout[-2000:]


def test_no_private_attribute_of_the_mcp_sdk_is_used():
    """The server uses the SDK's public API only: no ``_name`` imported from ``mcp``, and no ``obj._name`` access on
    anything but the server's own objects (``self``/``cls``)."""
    offences = []
    for path in sorted(REPO.glob("**/*.py")):
        if any(part in (".venv", "build", "node_modules", "tests", "bench") for part in path.relative_to(REPO).parts):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses_mcp = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("mcp", "mcp_types"):
                uses_mcp = True
                parts = (node.module or "").split(".") + [a.name for a in node.names]
                offences += [
                    f"{path.name}:{node.lineno} from {node.module} import ..." for p in parts if p.startswith("_")
                ]
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("mcp", "mcp_types") for a in node.names):
                uses_mcp = True
        if not uses_mcp:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                offences.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    assert not offences, offences


ENGINE_MAX_LINES = 800
TOOL_MAX_LINES = 400
LAYERS = (
    "server",
    "tools",
    "operations",
    "launch",
    "planning",
    "runs",
    "config_analysis",
    "diagnosis",
    "cluster",
    "scanners",
    "knowledge",
    "xtuner_rules",
    "core",
)


def test_modules_stay_small_enough_to_read():
    """No engine module over ~800 lines and no tool module over ~400: rooms a reader can know."""
    too_big = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).glob("*.py")):
            lines = path.read_text(encoding="utf-8").count("\n")
            limit = TOOL_MAX_LINES if layer == "tools" else ENGINE_MAX_LINES
            if lines > limit:
                too_big.append((str(path.relative_to(REPO)), lines, limit))
    assert not too_big, too_big


def test_architecture_page_names_every_layer():
    page = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [layer for layer in LAYERS if f"{layer}/" not in page]
    assert not missing, missing
    on_disk = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests", "bench", "references"}
    assert on_disk <= set(LAYERS), on_disk - set(LAYERS)
