"""The path policy holds for every path argument of every registered tool, through a real MCP client.

Traversal, absolute paths outside the allowed roots, symlink escapes (to a file and through a directory), ``/proc``,
devices, home-directory expansion and NUL bytes must all be refused with the policy's error code, and nothing of
the refused file may appear in the answer. A tool may report the refusal as a structured error or as a finding in
a structured result; either way the policy's code (or its wording) must be visible. Path arguments a tool never opens (it answers a
missing file without ``path_not_found``, e.g. a model path echoed into a launch plan) are only checked for leaks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from .conftest import make_server
from .hostile_support import (
    minimal_arguments,
    path_arguments,
    reads_path,
    refused_with,
    reproducer,
    structured_error,
    with_full_detail,
)

pytestmark = pytest.mark.anyio

OUTSIDE = "path_outside_roots"
#: Text that appears in the refused files; it must never reach the client.
LEAK_MARKERS = ("root:x:0:0", "hostile-canary-3f9a")


def hostile_paths(root: Path) -> dict[str, tuple[str, set[str]]]:
    """name -> (path as the agent would send it, acceptable refusal codes)."""
    (root / "escape_file").symlink_to("/etc/passwd")
    (root / "escape_dir").symlink_to("/etc")
    (root / "sub").mkdir()
    (root / "sub" / "deeper_escape").symlink_to("../../../../../../etc/passwd")
    return {
        "absolute_outside": ("/etc/passwd", {OUTSIDE}),
        "relative_traversal": ("../../../../../../../../etc/passwd", {OUTSIDE}),
        "traversal_after_root": (f"{root}/../../../../etc/passwd", {OUTSIDE}),
        "dot_dot_segments": (f"{root}/sub/../../{root.name}/../../../../etc/passwd", {OUTSIDE}),
        "symlink_escape_file": ("escape_file", {OUTSIDE}),
        "symlink_escape_dir": ("escape_dir/passwd", {OUTSIDE}),
        "relative_symlink_escape": ("sub/deeper_escape", {OUTSIDE}),
        "proc_environ": ("/proc/self/environ", {OUTSIDE}),
        "proc_mem": ("/proc/self/mem", {OUTSIDE}),
        "proc_cmdline_of_init": ("/proc/1/cmdline", {OUTSIDE}),
        "dev_zero": ("/dev/zero", {OUTSIDE}),
        "filesystem_root": ("/", {OUTSIDE}),
        "home_expansion": ("~/.bashrc", {OUTSIDE, "path_not_found"}),
        # a NUL can never name a file; any structured refusal is right (a command builder says unsafe_shell_value)
        "nul_byte": ("ok\x00/../../etc/passwd", {"path_invalid", "*"}),
        # not an escape: a tool may refuse it or just not find it; only a crash or a leak would be wrong
        "overlong": ("a/" * 3000, set()),
    }


async def test_every_path_argument_refuses_escapes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOSTILE_CANARY", "hostile-canary-3f9a")
    root = tmp_path / "root"
    root.mkdir()
    cases = hostile_paths(root)
    failures: list[str] = []
    async with Client(make_server(root), raise_exceptions=True) as client:
        tools = (await client.list_tools()).tools
        targets = [(t.name, t.input_schema, a, lst) for t in tools for a, lst in path_arguments(t.input_schema)]
        if not targets:
            pytest.skip("no registered tool takes a path argument yet")
        opened = {
            (t, a) for t, s, a, lst in targets if await reads_path(client, t, s, a, lst, root, enable_checks=True)
        }
        for tool, schema, arg, is_list in targets:
            for name, (path, codes) in cases.items():
                value = [path] if is_list else path
                args = with_full_detail(schema, minimal_arguments(schema, arg, value, enable_checks=True))
                result = await client.call_tool(tool, args)
                text = "".join(getattr(c, "text", "") for c in result.content)
                body = text if result.is_error else json.dumps(result.structured_content)
                refused = refused_with(result, codes) if codes else not _crashed(result)
                if (tool, arg) not in opened:
                    refused = True  # never opened (echoed into a plan): only a leak would be wrong
                leaked = [m for m in LEAK_MARKERS if m in text or m in body]
                if not refused or leaked:
                    failures.append(
                        f"{tool}.{arg} {name}: refused={refused} leaked={leaked}\n  {reproducer(tool, args)}\n"
                        f"  -> {text[:300]}"
                    )
    assert not failures, f"{len(failures)} path-policy failures:\n" + "\n".join(failures[:30])


def _crashed(result) -> bool:
    err = structured_error(result) if result.is_error else None
    return err is not None and err["code"] == "internal_error"


def test_path_argument_detection() -> None:
    """The schema heuristic that decides which arguments are paths (guards the two tests above)."""
    schema = {
        "properties": {
            "path": {"type": "string"},
            "data_paths": {"type": "array", "items": {"type": "string"}},
            "log_file": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "model_dir": {"type": "string"},
            "config": {"type": "string", "description": "Path of the RL Python config"},
            "train_data": {"type": "string", "description": "Training JSONL (file, dir or glob)"},
            "num_workers": {"type": "integer", "description": "a number, not a path"},
            "profile": {"type": "string"},
            "query": {"type": "string", "description": "Question or keywords"},
        }
    }
    assert path_arguments(schema) == [
        ("path", False),
        ("data_paths", True),
        ("log_file", False),
        ("model_dir", False),
        ("config", False),
        ("train_data", False),
    ]
