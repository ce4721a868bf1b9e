"""The wheel carries everything: build it, install it into a fresh virtualenv, run ``list`` and ``demo`` there.

The new venv sees the test venv's third-party packages through a plain path entry (so no download is needed),
but not this checkout: the package must come from the wheel, with references/ and skill.md inside it.
"""

from __future__ import annotations

import json
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (whl,) = out.glob("xtuner_rl_mcp-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in [
        "xtuner_rl_mcp/__init__.py",
        "xtuner_rl_mcp/skill.md",
        "xtuner_rl_mcp/server/app.py",
        "xtuner_rl_mcp/references/failure_modes.toml",
        "xtuner_rl_mcp/references/troubleshooting.md",
        "xtuner_rl_mcp/references/schemas/rl-sample.schema.json",
        "xtuner_rl_mcp/references/samples/gsm8k_train_sample.jsonl",
    ]:
        assert required in names, required
    # Every module of the package (each layer's folder) ships: a folder missing from pyproject's list fails here.
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    modules = [
        f"xtuner_rl_mcp/{path}"
        for path in tracked.stdout.split()
        if not path.startswith(("tests/", "bench/", ".ci/", "references/samples/"))
    ]
    assert len(modules) > 20
    missing = [m for m in modules if m not in names]
    assert not missing, missing
    assert not any(n.startswith(("xtuner_rl_mcp/tests/", "xtuner_rl_mcp/bench/")) for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "xtuner-rl-mcp = xtuner_rl_mcp.server.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


@pytest.mark.slow
def test_fresh_venv_runs_list_and_demo(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    # Third-party dependencies from the test environment, without its .pth hooks (so not this checkout).
    (Path(purelib) / "_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    exe = env_dir / "bin" / "xtuner-rl-mcp"
    assert exe.is_file()
    where = subprocess.run(
        [str(py), "-c", "import xtuner_rl_mcp; print(xtuner_rl_mcp.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert where.stdout.strip().startswith(purelib), where.stdout + where.stderr
    listed = subprocess.run([str(exe), "list"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["tools"]) >= 8
    demo = subprocess.run([str(exe), "demo", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    records = json.loads(demo.stdout)
    assert records and all("result" in r for r in records), [r.get("error") or r.get("skipped") for r in records]
