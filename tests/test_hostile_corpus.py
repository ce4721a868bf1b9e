"""A corpus of corrupted and adversarial data files, fed to every file-reading tool through a real MCP client.

The corpus (60+ files) is generated at test time under ``tmp_path``: truncated and binary files, a huge single line,
deep nesting, invalid UTF-8, NUL bytes, BOMs, CRLF, 10k-level arrays, symlink loops, FIFOs, ``/dev/zero`` behind a
symlink, unreadable files, sparse files, and more. A file-reading tool is any registered tool with an argument that
takes a path (judged from the published input schema) and that it opens (a missing file gives ``path_not_found``). Every call must come back within the per-call timeout as a
structured result or a structured error that is not ``internal_error``, with no traceback text.

``XTUNER_RL_HOSTILE_LARGE=1`` makes the big members larger (huge line 256 MB instead of 16 MB, sparse file 4 GB
instead of 256 MB).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from .conftest import SHARED_DATA, make_server
from .hostile_support import (
    CALL_TIMEOUT_S,
    assert_well_formed,
    minimal_arguments,
    path_arguments,
    reads_path,
    refused_with,
    reproducer,
    with_full_detail,
)

pytestmark = pytest.mark.anyio

LARGE = os.environ.get("XTUNER_RL_HOSTILE_LARGE") == "1"
HUGE_LINE_MB = 256 if LARGE else 16
SPARSE_MB = 4096 if LARGE else 256

GOOD = {
    "data_source": "openai/gsm8k",
    "prompt": [{"role": "user", "content": "What is 1+1? Output the final answer after ####."}],
    "ability": "math",
    "reward_model": {"ground_truth": "2", "style": "rule"},
    "extra_info": {"index": 0, "split": "train"},
}
GOOD_LINE = json.dumps(GOOD).encode()


def _deep(depth: int, open_: bytes = b"[", close: bytes = b"]") -> bytes:
    return open_ * depth + close * depth


def build_corpus(root: Path) -> dict[str, Path]:
    """Write every adversarial file under ``root``; return name -> path (paths may be links, FIFOs, ...)."""
    d = root / "corpus"
    d.mkdir()
    files: dict[str, bytes] = {}
    real = (SHARED_DATA / "gsm8k_train_example_data.jsonl").read_bytes() if SHARED_DATA.is_dir() else GOOD_LINE * 20
    rnd = random.Random(7)

    files["empty"] = b""
    files["only_newlines"] = b"\n" * 10_000
    files["only_spaces"] = b"   \t  \n" * 100
    files["single_good_line_no_newline"] = GOOD_LINE
    files["truncated_mid_line"] = real[: len(real) // 2]
    files["truncated_mid_utf8"] = "ü".encode() * 100 + GOOD_LINE[:30] + "é".encode()[:1]
    files["truncated_mid_escape"] = GOOD_LINE[: GOOD_LINE.index(b'"ground_truth"') + 16] + b"\\u00"
    files["binary_random"] = bytes(rnd.randrange(256) for _ in range(64 * 1024))
    files["binary_elf_header"] = b"\x7fELF\x02\x01\x01" + bytes(4096)
    files["gzip_magic"] = b"\x1f\x8b\x08\x00" + bytes(rnd.randrange(256) for _ in range(2048))
    files["png_magic"] = b"\x89PNG\r\n\x1a\n" + bytes(1024)
    files["zip_magic"] = b"PK\x03\x04" + bytes(1024)
    files["nul_bytes_only"] = b"\x00" * 100_000
    files["nul_inside_json"] = GOOD_LINE[:20] + b"\x00" + GOOD_LINE[20:] + b"\n"
    files["nul_between_lines"] = GOOD_LINE + b"\n\x00\n" + GOOD_LINE + b"\n"
    files["invalid_utf8"] = (
        b'{"prompt": [{"role": "user", "content": "\xff\xfe\xfd"}], "reward_model": {"ground_truth": "1"}}\n'
    )
    files["overlong_utf8"] = b'{"prompt": "\xc0\xaf\xe0\x80\xaf"}\n'
    files["lone_surrogate_escape"] = (
        b'{"prompt": [{"role": "user", "content": "\\ud800"}], "reward_model": {"ground_truth": "\\udfff"}}\n'
    )
    files["latin1_text"] = "naïve café, 1+1?".encode("latin-1") + b"\n"
    files["utf8_bom"] = b"\xef\xbb\xbf" + GOOD_LINE + b"\n" + GOOD_LINE + b"\n"
    files["utf16_le_bom"] = b"\xff\xfe" + (GOOD_LINE.decode() + "\n").encode("utf-16-le")
    files["utf16_be_bom"] = b"\xfe\xff" + (GOOD_LINE.decode() + "\n").encode("utf-16-be")
    files["utf32"] = (GOOD_LINE.decode() + "\n").encode("utf-32")
    files["crlf_lines"] = (GOOD_LINE + b"\r\n") * 50
    files["cr_only_lines"] = (GOOD_LINE + b"\r") * 50
    files["mixed_line_endings"] = GOOD_LINE + b"\n" + GOOD_LINE + b"\r\n" + GOOD_LINE + b"\r" + GOOD_LINE
    files["unicode_line_separators"] = GOOD_LINE.replace(b"What", "\u2028What\u2029".encode()) + b"\n"
    files["huge_single_line"] = b'{"prompt": "' + b"A" * (HUGE_LINE_MB << 20) + b'"}'
    files["huge_line_then_good"] = b"x" * (4 << 20) + b"\n" + GOOD_LINE + b"\n"
    files["many_tiny_lines"] = b"{}\n" * 200_000
    files["deep_array_10k"] = _deep(10_000) + b"\n"
    files["deep_array_100k"] = _deep(100_000) + b"\n"
    files["deep_object_10k"] = b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"\n"
    files["deep_in_prompt"] = b'{"prompt": ' + _deep(5_000) + b', "reward_model": {"ground_truth": "1"}}\n'
    files["deep_in_ground_truth"] = (
        b'{"prompt": [], "reward_model": {"ground_truth": ' + _deep(5_000, b'{"a":', b"}")[:-1] + b"}}\n"
    )
    files["deep_unclosed"] = b"[" * 50_000 + b"\n"
    files["wide_array_1m"] = b"[" + b"0," * 1_000_000 + b"0]\n"
    files["huge_number"] = b'{"prompt": [], "reward_model": {"ground_truth": ' + b"9" * 100_000 + b"}}\n"
    files["huge_float_exponent"] = b'{"reward_model": {"ground_truth": 1e999999}}\n'
    files["nan_infinity_literals"] = b'{"reward_model": {"ground_truth": NaN}, "x": Infinity, "y": -Infinity}\n'
    files["duplicate_keys"] = b'{"reward_model": {"ground_truth": "1"}, "reward_model": {"ground_truth": 2}}\n' * 10
    files["many_keys"] = ("{" + ",".join(f'"k{i}": {i}' for i in range(100_000)) + "}\n").encode()
    files["long_key"] = b'{"' + b"k" * (1 << 20) + b'": 1}\n'
    files["json_array_not_jsonl"] = b"[" + b",".join([GOOD_LINE] * 10) + b"]\n"
    files["pretty_printed_json"] = json.dumps(GOOD, indent=2).encode()
    files["top_level_scalars"] = b'1\n"s"\ntrue\nnull\n[]\n'
    files["trailing_commas"] = b'{"prompt": [1,2,], "reward_model": {"ground_truth": "1",},}\n'
    files["single_quotes"] = b"{'prompt': 'x', 'reward_model': {'ground_truth': '1'}}\n"
    files["comments"] = b"// a comment\n/* block */\n" + GOOD_LINE + b"  # trailing\n"
    files["two_objects_one_line"] = GOOD_LINE + GOOD_LINE + b"\n"
    files["control_chars_in_strings"] = b'{"prompt": "' + bytes(range(1, 32)).replace(b"\n", b"") + b'"}\n'
    files["escaped_nul_in_strings"] = (
        b'{"prompt": [{"role": "user", "content": "a\\u0000b"}], "reward_model": {"ground_truth": "\\u0000"}}\n'
    )
    files["rtl_and_zero_width"] = json.dumps({"prompt": "\u202e\u200b\ufeff" * 1000}).encode() + b"\n"
    files["emoji_heavy"] = json.dumps({"prompt": [{"role": "user", "content": "😀" * 50_000}]}).encode() + b"\n"
    files["wrong_types_everywhere"] = b'{"prompt": 5, "reward_model": "gt", "data_source": [], "extra_info": 1}\n'
    files["ground_truth_wrong_types"] = b"".join(
        json.dumps({**GOOD, "reward_model": {"ground_truth": v}}).encode() + b"\n"
        for v in (None, 1, 1.5, True, [], {}, "", " ", "1" * 10_000)
    )
    files["log_with_ansi_and_tracebacks"] = (
        b"\x1b[31mERROR\x1b[0m Traceback (most recent call last):\n" + b'  File "/x.py", line 1\n' * 1000
    )
    files["log_huge_line_with_error"] = b"ERROR " + b"z" * (8 << 20) + b"\n"
    files["python_config_garbage"] = b"from xtuner import *\nimport os; os.system('touch /tmp/pwned')\n" + b"(" * 10_000
    files["python_config_deep_expr"] = (
        b"x = " + b"(" * 200 + b"1" + b")" * 200 + b"\n" + b"y = [" * 5_000 + b"]" * 5_000
    )

    paths: dict[str, Path] = {}
    for name, data in files.items():
        p = d / f"{name}.jsonl"
        p.write_bytes(data)
        paths[name] = p
    # sparse file: large apparent size of NUL bytes with no newline, almost no disk
    sparse = d / "sparse_nul.jsonl"
    with sparse.open("wb") as fh:
        fh.truncate(SPARSE_MB << 20)
    paths["sparse_file_of_nul"] = sparse
    # links, loops, special files
    (d / "loop_a").symlink_to(d / "loop_b")
    (d / "loop_b").symlink_to(d / "loop_a")
    paths["symlink_loop"] = d / "loop_a"
    (d / "self_loop").symlink_to(d / "self_loop")
    paths["symlink_self_loop"] = d / "self_loop"
    (d / "dangling").symlink_to(d / "does_not_exist")
    paths["symlink_dangling"] = d / "dangling"
    (d / "to_dev_zero.jsonl").symlink_to("/dev/zero")
    paths["symlink_to_dev_zero"] = d / "to_dev_zero.jsonl"
    (d / "to_dev_urandom.jsonl").symlink_to("/dev/urandom")
    paths["symlink_to_dev_urandom"] = d / "to_dev_urandom.jsonl"
    (d / "to_proc_self_mem").symlink_to("/proc/self/mem")
    paths["symlink_to_proc_self_mem"] = d / "to_proc_self_mem"
    os.mkfifo(d / "fifo.jsonl")
    paths["fifo"] = d / "fifo.jsonl"
    (d / "a_directory.jsonl").mkdir()
    paths["directory_named_like_a_file"] = d / "a_directory.jsonl"
    (d / "good_link.jsonl").symlink_to(paths["crlf_lines"])
    paths["symlink_inside_root"] = d / "good_link.jsonl"
    unreadable = d / "unreadable.jsonl"
    unreadable.write_bytes(GOOD_LINE + b"\n")
    unreadable.chmod(0)
    paths["permission_000"] = unreadable
    locked = d / "locked_dir"
    locked.mkdir()
    (locked / "inside.jsonl").write_bytes(GOOD_LINE + b"\n")
    locked.chmod(0)
    paths["file_in_unreadable_dir"] = locked / "inside.jsonl"
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    paths = build_corpus(root)
    yield paths
    for p in (paths["permission_000"], paths["file_in_unreadable_dir"].parent):
        p.chmod(0o700)


def test_corpus_is_large_and_varied(corpus: dict[str, Path]) -> None:
    assert len(corpus) >= 50, len(corpus)
    kinds = {"fifo", "symlink_loop", "symlink_to_dev_zero", "deep_array_10k", "huge_single_line", "utf8_bom"}
    assert kinds <= set(corpus)


def _head(path: Path, limit: int = 1 << 20) -> bytes:
    """The first bytes of a corpus member (what a tool may legitimately quote back), or nothing if unreadable."""
    try:
        if not path.is_file():
            return b""
        with path.open("rb") as fh:
            return fh.read(limit)
    except OSError:
        return b""


async def _file_tools(client: Client, root: Path) -> list[tuple[str, dict[str, Any], str, bool]]:
    """(tool, schema, argument, is_list) for every path argument a tool actually opens."""
    tools = (await client.list_tools()).tools
    candidates = [(t.name, t.input_schema, a, lst) for t in tools for a, lst in path_arguments(t.input_schema)]
    return [c for c in candidates if await reads_path(client, *c, root, enable_checks=True)]


@pytest.mark.slow
async def test_every_file_tool_survives_the_corpus(corpus: dict[str, Path]) -> None:
    root = next(iter(corpus.values())).parent
    failures: list[str] = []
    async with Client(make_server(root.parent), raise_exceptions=True) as client:
        targets = await _file_tools(client, root)
        if not targets:
            pytest.skip("no registered tool takes a path argument yet")
        for tool, schema, arg, is_list in targets:
            for name, path in corpus.items():
                value = [str(path)] if is_list else str(path)
                args = minimal_arguments(schema, arg, value, enable_checks=True)
                try:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        result = await client.call_tool(tool, args)
                    assert_well_formed(tool, args, result, echoed=_head(path))
                except TimeoutError:
                    failures.append(
                        f"{tool}.{arg} on {name}: no answer within {CALL_TIMEOUT_S}s\n  {reproducer(tool, args)}"
                    )
                except AssertionError as exc:
                    failures.append(f"{tool}.{arg} on {name}: {str(exc)[:400]}\n  {reproducer(tool, args)}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:30])


async def test_special_files_are_refused_not_read(corpus: dict[str, Path]) -> None:
    """FIFOs, devices behind symlinks and loops are refused by the path policy before any read."""
    root = next(iter(corpus.values())).parent
    expected = {
        "fifo": {"path_special_file"},
        "symlink_to_dev_zero": {"path_outside_roots"},
        "symlink_to_dev_urandom": {"path_outside_roots"},
        "symlink_to_proc_self_mem": {"path_outside_roots"},
        "symlink_loop": {"path_invalid", "path_not_found"},
        "symlink_self_loop": {"path_invalid", "path_not_found"},
        "symlink_dangling": {"path_not_found"},
    }
    async with Client(make_server(root.parent), raise_exceptions=True) as client:
        targets = await _file_tools(client, root)
        if not targets:
            pytest.skip("no registered tool takes a path argument yet")
        for tool, schema, arg, is_list in targets:
            for name, codes in expected.items():
                value = [str(corpus[name])] if is_list else str(corpus[name])
                args = with_full_detail(schema, minimal_arguments(schema, arg, value, enable_checks=True))
                with anyio.fail_after(CALL_TIMEOUT_S):
                    result = await client.call_tool(tool, args)
                refused = refused_with(result, codes)
                assert refused, (
                    f"{tool}.{arg} on {name}: expected one of {codes}, got {reproducer(tool, args)} -> {result.content[0].text[:300]}"
                )


async def test_permission_denied_is_structured(corpus: dict[str, Path]) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: permission bits do not stop root, so a 000 file is readable here")
    root = next(iter(corpus.values())).parent
    async with Client(make_server(root.parent), raise_exceptions=True) as client:
        targets = await _file_tools(client, root)
        if not targets:
            pytest.skip("no registered tool takes a path argument yet")
        for tool, schema, arg, is_list in targets:
            value = [str(corpus["permission_000"])] if is_list else str(corpus["permission_000"])
            args = minimal_arguments(schema, arg, value, enable_checks=True)
            result = await client.call_tool(tool, args)
            text = result.content[0].text
            assert "path_permission_denied" in text, f"{reproducer(tool, args)} -> {text[:300]}"
