"""Line patches of the RL data file (issue 27, the data lines): a check_reward_data finding whose fix follows from
each offending line alone carries a unified diff of the file as it is on disk. Each fault is planted in copies of
real sample lines; each diff is used the way an agent would: ``git apply --check`` from the allowed root in a git
repository, ``git apply``, check again — its finding is gone, every other finding is unchanged, and the file is
the clean one again. A file over the size threshold, or too many lines to change, gets no patch and keeps its fix
text and converter command."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from xtuner_rl_mcp.core import Finding, PathPolicy, RunContext
from xtuner_rl_mcp.operations import check_reward_data
from xtuner_rl_mcp.scanners.data_patches import MAX_PATCH_FILE_BYTES, MAX_PATCH_LINES, line_diff, split_lines

from .conftest import SAMPLES

GIT = shutil.which("git") or ""
pytestmark = pytest.mark.skipif(not GIT, reason="git is needed to apply the patches")
EXE = shutil.which("xtuner-rl-mcp", path=str(Path(sys.executable).parent)) or "xtuner-rl-mcp"
DIAGNOSTIC = re.compile(r"^[^:\n]+:\d+:\d+: [a-z_]+\.[a-z0-9_.]+ ")

#: Nine real, clean GSM8K lines (newline kept); line 2 (index 1) gets an unrelated warning that must survive.
CLEAN = (SAMPLES / "gsm8k_train_sample.jsonl").read_bytes().splitlines(keepends=True)
WARNED = CLEAN[1].replace(b'"ground_truth": "69"', b'"ground_truth": "69.0"')  # gsm8k_ground_truth_noncanonical


def base_lines() -> list[bytes]:
    lines = list(CLEAN)
    lines[1] = WARNED
    assert lines[1] != CLEAN[1]
    return lines


def check(root: Path, name: str, **params: object) -> check_reward_data.Result:
    p = check_reward_data.Params(path=str(root / name), detail="full", **params)  # type: ignore[arg-type]
    return check_reward_data.run(p, RunContext(paths=PathPolicy.from_strings([root])))


def key(f: Finding) -> tuple[str, str, str]:
    return (f.id, f.severity, f.title)


def git(cwd: Path, *args: str, patch: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GIT, *args], input=patch, cwd=cwd, capture_output=True, text=True, timeout=30)


def in_git_repo(root: Path, tmp: Path) -> Path:
    copy = tmp / "repo"
    shutil.copytree(root, copy)
    assert git(copy, "init", "-q").returncode == 0
    return copy


def apply(copy: Path, patch: str) -> None:
    checked = git(copy, "apply", "--check", "-", patch=patch)
    assert checked.returncode == 0, checked.stderr + patch
    applied = git(copy, "apply", "-", patch=patch)
    assert applied.returncode == 0, applied.stderr


def apply_data_patch(root: Path, name: str, fid: str, tmp: Path, **params: object) -> Path:
    """The finding's patch applies from the root, removes the finding (and its code's lines) and changes nothing
    else; returns the patched copy of the root."""
    before = check(root, name, **params)
    (f,) = [g for g in before.findings if g.id == fid]
    assert f.patch is not None, f"{fid} has no patch: {f.evidence}"
    assert f.patch.startswith(f"--- a/{name}\n+++ b/{name}\n"), f.patch
    copy = in_git_repo(root, tmp)
    apply(copy, f.patch)
    after = check(copy, name, **params)
    assert Counter(key(g) for g in after.findings) == Counter(key(g) for g in before.findings) - Counter([key(f)])
    code = fid.removeprefix("data.")
    assert after.errors_by_code == {c: n for c, n in before.errors_by_code.items() if c != code}
    return copy


def plant_blank(lines: list[bytes]) -> list[bytes]:
    return [*lines[:3], b"   \n", *lines[3:6], b"\n", *lines[6:]]


def plant_bom(lines: list[bytes]) -> list[bytes]:
    return [b"\xef\xbb\xbf" + lines[0], *lines[1:]]


def plant_no_final_newline(lines: list[bytes]) -> list[bytes]:
    return [*lines[:-1], lines[-1].rstrip(b"\n")]


def plant_messages(lines: list[bytes]) -> list[bytes]:
    out = list(lines)
    for i in (2, 5):
        out[i] = out[i].replace(b'"prompt":', b'"messages":')
    return out


def plant_gsm8k_numbers(lines: list[bytes]) -> list[bytes]:
    out = list(lines)
    out[4] = out[4].replace(b'"ground_truth": "126"', b'"ground_truth": 126')
    out[5] = out[5].replace(b'"ground_truth": "34"', b'"ground_truth": 34.0')
    return out


CASES: dict[str, tuple[Callable[[list[bytes]], list[bytes]], int]] = {
    "data.blank_line": (plant_blank, 2),
    "data.bom": (plant_bom, 1),
    "data.missing_final_newline": (plant_no_final_newline, 1),
    "data.messages_instead_of_prompt": (plant_messages, 2),
    "data.gsm8k_ground_truth_not_string": (plant_gsm8k_numbers, 2),
}


@pytest.mark.parametrize("fid", sorted(CASES))
def test_planted_fault_patch_applies_and_removes_only_its_finding(fid, tmp_path):
    plant, lines_changed = CASES[fid]
    root = tmp_path / "root"
    root.mkdir()
    planted = plant(base_lines())
    assert planted != base_lines()
    (root / "train.jsonl").write_bytes(b"".join(planted))
    before = check(root, "train.jsonl")
    assert before.errors_by_code[fid.removeprefix("data.")] == lines_changed
    assert before.errors_by_code["gsm8k_ground_truth_noncanonical"] == 1  # the unrelated warning is there
    copy = apply_data_patch(root, "train.jsonl", fid, tmp_path)
    # the file is the clean one again, byte for byte (the planted lines' own layout kept)
    assert (copy / "train.jsonl").read_bytes() == b"".join(base_lines())


def test_patch_keeps_a_lines_layout_and_its_ascii_escapes(tmp_path):
    """A compact line stays compact, an ASCII-escaped line stays escaped; only the key changes."""
    root = tmp_path / "root"
    root.mkdir()
    compact = json.loads(CLEAN[3])
    compact["prompt"][0]["content"] += " Réponds en français — 谢谢."
    escaped = json.loads(CLEAN[6])
    escaped["prompt"][0]["content"] += " Température: 20°C."
    good = [
        *CLEAN[:3],
        (json.dumps(compact, ensure_ascii=False, separators=(",", ":")) + "\n").encode(),
        *CLEAN[4:6],
        (json.dumps(escaped) + "\n").encode(),
        *CLEAN[7:],
    ]
    bad = [line.replace(b'"prompt":', b'"messages":') if i in (3, 6) else line for i, line in enumerate(good)]
    (root / "d.jsonl").write_bytes(b"".join(bad))
    copy = apply_data_patch(root, "d.jsonl", "data.messages_instead_of_prompt", tmp_path)
    assert (copy / "d.jsonl").read_bytes() == b"".join(good)


def test_crlf_lines_and_a_file_in_a_subdirectory(tmp_path):
    """The label is relative to the allowed root; CRLF line endings are kept."""
    root = tmp_path / "root"
    (root / "data" / "gsm8k").mkdir(parents=True)
    lines = [line.rstrip(b"\n") + b"\r\n" for line in CLEAN]
    bad = [*lines[:2], b"\r\n", *lines[2:4], lines[4].replace(b'"126"', b"126"), *lines[5:]]
    (root / "data" / "gsm8k" / "t.jsonl").write_bytes(b"".join(bad))
    name = "data/gsm8k/t.jsonl"
    copy = apply_data_patch(root, name, "data.blank_line", tmp_path)
    copy = apply_data_patch(copy, name, "data.gsm8k_ground_truth_not_string", tmp_path / "second")
    assert (copy / name).read_bytes() == b"".join(lines)


def test_one_patch_covers_every_file_of_a_directory(tmp_path):
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.jsonl").write_bytes(b"".join(plant_blank(list(CLEAN))))
    (root / "data" / "b.jsonl").write_bytes(b"".join([b"\n", *CLEAN]))
    before = check(root, "data")
    (f,) = [g for g in before.findings if g.id == "data.blank_line"]
    assert f.patch is not None and f.patch.count("--- a/data/") == 2
    copy = in_git_repo(root, tmp_path)
    apply(copy, f.patch)
    assert check(copy, "data").ok
    assert all((copy / "data" / n).read_bytes() == b"".join(CLEAN) for n in ("a.jsonl", "b.jsonl"))


def test_too_many_lines_get_no_patch_but_keep_the_fix(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    n = MAX_PATCH_LINES + 1
    lines = [CLEAN[i % len(CLEAN)] for i in range(n)]
    (root / "blank.jsonl").write_bytes(b"".join(x for line in lines for x in (line, b"\n")))
    (root / "msg.jsonl").write_bytes(b"".join(line.replace(b'"prompt":', b'"messages":') for line in lines))
    r = check(root, "blank.jsonl")
    (f,) = [g for g in r.findings if g.id == "data.blank_line"]
    assert f.patch is None and "sed -i" in f.fix and r.errors_by_code["blank_line"] == n
    r = check(root, "msg.jsonl")
    (f,) = [g for g in r.findings if g.id == "data.messages_instead_of_prompt"]
    assert f.patch is None and "Rename 'messages' to 'prompt'" in f.fix
    assert any(s.title == "Rename 'messages' to 'prompt'" for s in r.suggestions)
    # at the limit, the patch is there
    (root / "ok.jsonl").write_bytes(b"".join(x for line in lines[:-1] for x in (line, b"\n")))
    (f,) = [g for g in check(root, "ok.jsonl").findings if g.id == "data.blank_line"]
    assert f.patch is not None and f.patch.count("\n-\n") == MAX_PATCH_LINES


def test_file_over_the_size_threshold_gets_no_patch(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    body = b"".join(CLEAN)
    copies = MAX_PATCH_FILE_BYTES // len(body) + 1
    with (root / "big.jsonl").open("wb") as fh:
        fh.write(CLEAN[0].replace(b'"prompt":', b'"messages":'))
        fh.write(b"\n")
        for _ in range(copies):
            fh.write(body)
    assert (root / "big.jsonl").stat().st_size > MAX_PATCH_FILE_BYTES
    r = check(root, "big.jsonl")
    found = {f.id: f for f in r.findings}
    assert r.errors_by_code["blank_line"] == 1 and r.errors_by_code["messages_instead_of_prompt"] == 1
    assert found["data.blank_line"].patch is None and "sed -i" in found["data.blank_line"].fix
    assert found["data.messages_instead_of_prompt"].patch is None
    assert any(s.title == "Rename 'messages' to 'prompt'" for s in r.suggestions)


def test_no_patch_where_the_corrected_line_is_not_certain(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    cases = {
        # the rest of a cut-off record cannot be known
        "cut.jsonl": ([*CLEAN[:-1], CLEAN[-1][:80]], "data.truncated_last_line"),
        # 0.5 and 1e300 have no one string form the judger is sure to compare against
        "half.jsonl": (
            [CLEAN[0].replace(b'"ground_truth": "159"', b'"ground_truth": 0.5'), *CLEAN[1:]],
            "data.gsm8k_ground_truth_not_string",
        ),
        "huge.jsonl": (
            [CLEAN[0].replace(b'"ground_truth": "159"', b'"ground_truth": 1e300'), *CLEAN[1:]],
            "data.gsm8k_ground_truth_not_string",
        ),
        "bool.jsonl": (
            [CLEAN[0].replace(b'"ground_truth": "159"', b'"ground_truth": true'), *CLEAN[1:]],
            "data.gsm8k_ground_truth_not_string",
        ),
        # renaming would give a prompt that is not a message list: a new blocker, so not the whole fix
        "msgstr.jsonl": (
            [
                json.dumps({**json.loads(CLEAN[0]), "prompt": None}).replace('"prompt": null', '"messages": "hi"')
                + "\n",
                *CLEAN[1:],
            ],
            "data.messages_instead_of_prompt",
        ),
        # one of the two lines is not certain: the finding gets no patch at all
        "mixed.jsonl": (
            [
                CLEAN[0].replace(b'"ground_truth": "159"', b'"ground_truth": 159'),
                CLEAN[1].replace(b'"ground_truth": "69"', b'"ground_truth": 6.9'),
                *CLEAN[2:],
            ],
            "data.gsm8k_ground_truth_not_string",
        ),
    }
    for name, (lines, fid) in cases.items():
        data = b"".join(x if isinstance(x, bytes) else x.encode() for x in lines)
        (root / name).write_bytes(data)
        r = check(root, name)
        (f,) = [g for g in r.findings if g.id == fid]
        assert f.patch is None and f.fix, (name, f.patch)
    # a BOM line whose remainder is not JSON is left to the person who knows the file
    (root / "bomblank.jsonl").write_bytes(b"\xef\xbb\xbf\n" + b"".join(CLEAN))
    (f,) = [g for g in check(root, "bomblank.jsonl").findings if g.id == "data.bom"]
    assert f.patch is None


def test_bom_patch_may_show_what_the_bom_hid(tmp_path):
    """A line with a BOM is not parsed at all: once stripped, its own problems are reported."""
    root = tmp_path / "root"
    root.mkdir()
    no_gt = CLEAN[0].replace(b'"ground_truth": "159"', b'"answer_key": "159"')
    (root / "d.jsonl").write_bytes(b"\xef\xbb\xbf" + no_gt + b"".join(CLEAN[1:]))
    before = check(root, "d.jsonl")
    (f,) = [g for g in before.findings if g.id == "data.bom"]
    assert f.patch is not None and "missing_ground_truth" not in before.errors_by_code
    copy = in_git_repo(root, tmp_path)
    apply(copy, f.patch)
    after = check(copy, "d.jsonl")
    assert "bom" not in after.errors_by_code and after.errors_by_code["missing_ground_truth"] == 1


def test_line_diff_renders_hunks_git_accepts(tmp_path):
    """Changes far apart are separate hunks with the right new-file offsets; deleting the only line empties it."""
    old = [f"{i}\n" for i in range(40)]
    changes = {2: "", 20: "twenty\n", 21: "", 39: "39"}
    patch = line_diff("f.txt", old, changes)
    assert patch.count("@@ ") == 3 and patch.endswith("+39\n\\ No newline at end of file\n")
    (tmp_path / "f.txt").write_text("".join(old))
    assert git(tmp_path, "init", "-q").returncode == 0
    apply(tmp_path, patch)
    expected = [changes.get(i, line) for i, line in enumerate(old)]
    assert (tmp_path / "f.txt").read_text() == "".join(expected)
    (tmp_path / "g.txt").write_text("\n")
    apply(tmp_path, line_diff("g.txt", ["\n"], {0: ""}))
    assert (tmp_path / "g.txt").read_text() == ""
    assert split_lines(b"a\r\nb\n\nc") == [b"a\r\n", b"b\n", b"\n", b"c"]


# ---- through MCP and the linter -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_result_carries_the_patches(mcp_client, tmp_path):
    """The tool's structured result carries each patch, labelled from the first allowed root."""
    (tmp_path / "d.jsonl").write_bytes(b"".join(plant_blank(plant_gsm8k_numbers(base_lines()))))
    r = await mcp_client.call_tool("check_reward_data", {"path": "d.jsonl"})
    assert not r.is_error, r.content[0].text
    patches = {f["id"]: f.get("patch") for f in r.structured_content["findings"]}
    assert patches["data.gsm8k_ground_truth_noncanonical"] is None
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "d.jsonl", copy / "d.jsonl")
    assert git(copy, "init", "-q").returncode == 0
    for fid in ("data.blank_line", "data.gsm8k_ground_truth_not_string"):
        assert patches[fid] and patches[fid].startswith("--- a/d.jsonl\n")
    apply(copy, patches["data.blank_line"])
    r = await mcp_client.call_tool("check_reward_data", {"path": "copy/d.jsonl"})
    after = {f["id"]: f.get("patch") for f in r.structured_content["findings"]}
    assert "data.blank_line" not in after and "data.gsm8k_ground_truth_not_string" in after
    assert after["data.gsm8k_ground_truth_not_string"].startswith("--- a/copy/d.jsonl\n")


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def printed_patches(stdout: str) -> dict[str, str]:
    """The diffs ``--diff`` prints, by the code of the diagnostic line they follow."""
    out: dict[str, str] = {}
    code = ""
    for line in stdout.splitlines(keepends=True):
        if DIAGNOSTIC.match(line):
            code = line.split(": ", 1)[1].split(" ", 1)[0]
        else:
            out[code] = out.get(code, "") + line
    return out


def test_check_data_diff_prints_patches_that_apply(tmp_path):
    planted = plant_messages(plant_bom(base_lines()))
    (tmp_path / "d.jsonl").write_bytes(b"".join(planted))
    assert git(tmp_path, "init", "-q").returncode == 0
    p = lint("check-data", "--diff", "--severity", "info", "d.jsonl", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    patches = printed_patches(p.stdout)
    assert set(patches) == {"data.bom", "data.messages_instead_of_prompt"}, p.stdout
    plain = lint("check-data", "--severity", "info", "d.jsonl", cwd=tmp_path)
    assert "--- a/" not in plain.stdout  # without --diff, only the diagnostics
    assert [line for line in p.stdout.splitlines() if DIAGNOSTIC.match(line)] == plain.stdout.splitlines()
    body = json.loads(lint("check-data", "--format", "json", "d.jsonl", cwd=tmp_path).stdout)
    assert {d["code"] for d in body["diagnostics"] if d["patch"]} == set(patches)
    # each diff is against the file as it is now: apply one, check again, apply the next
    apply(tmp_path, patches["data.bom"])
    p = lint("check-data", "--diff", "--severity", "info", "d.jsonl", cwd=tmp_path)
    assert set(printed_patches(p.stdout)) == {"data.messages_instead_of_prompt"}, p.stdout
    apply(tmp_path, printed_patches(p.stdout)["data.messages_instead_of_prompt"])
    p = lint("check-data", "--severity", "info", "d.jsonl", cwd=tmp_path)
    assert p.returncode == 0 and "data.gsm8k_ground_truth_noncanonical" in p.stdout, p.stdout
    assert (tmp_path / "d.jsonl").read_bytes() == b"".join(base_lines())
