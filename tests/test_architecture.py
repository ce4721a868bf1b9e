"""The layering holds: import-linter's contracts are kept, and no two modules import each other in a circle."""

from __future__ import annotations

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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_planted_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_between_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("xtuner_rl_mcp", cache_dir=None)
    modules = {m for m in graph.modules if m.startswith("xtuner_rl_mcp.") and ".tests" not in m}
    edges = {m: {d for d in graph.find_modules_directly_imported_by(m) if d in modules} for m in modules}
    # A package's __init__ re-exporting its own modules is not a circle of logic.
    for m in modules:
        edges[m] = {d for d in edges[m] if not d.startswith(m + ".")}
    assert len(modules) > 30
    assert _cycles(edges) == []


ENGINE_MAX_LINES = 800
TOOL_MAX_LINES = 400
LAYERS = (
    "server",
    "tools",
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
