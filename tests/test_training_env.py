"""The training environment is read, never run (issue 23 items 1-2, issue 25 item 6).

Real parts only: a real ``python -m venv`` (one for the module), prefix trees built in ``tmp_path`` with real
distribution metadata, an editable XTuner found through setuptools' finder file, a ``.pth`` path line and an
``.egg-link``, a source checkout with ``.git`` files, FIFOs, a 2 GiB sparse file, and — for the operator-allowed
run path — the real interpreter and small native programs compiled here with ``cc`` that misbehave on purpose.
Hostile inputs go through the real MCP client. In every hostile case a marker file the input would create if
anything in it ran must stay absent, the call must answer quickly, and no process may be left behind.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mcp import Client
from xtuner_rl_mcp.cluster import packages, probe_child, training_env
from xtuner_rl_mcp.core import OperatorPolicy, PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations import inspect_config

from .conftest import make_server
from .hostile_support import structured_error
from .xtuner_config_samples import COLOCATED_ASYNC, ENV, write

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
SERVER_VERSION = ".".join(str(v) for v in sys.version_info[:3])
MARKER_CODE = "import pathlib; pathlib.Path({path!r}).write_text('ran')\n"


# ---- building environments ---------------------------------------------------------------------------------------


def prefix_tree(prefix: Path, version: str = "3.11.4") -> Path:
    """A venv-shaped prefix (pyvenv.cfg, lib/pythonX.Y/site-packages, bin/); returns its site-packages."""
    major_minor = ".".join(version.split(".")[:2])
    site = prefix / "lib" / f"python{major_minor}" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {version}\n")
    return site


def dist_info(site: Path, name: str, version: str, direct_url: dict | None = None) -> Path:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong description.\n")
    if direct_url is not None:
        (d / "direct_url.json").write_text(json.dumps(direct_url))
    return d


def checkout(root: Path, *, v1: bool = True, marker: Path | None = None) -> Path:
    """An XTuner source checkout at ``root`` with a branch ref; importing its package would write ``marker``."""
    pkg = root / "xtuner"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(MARKER_CODE.format(path=str(marker)) if marker else "__version__ = '0.2.0'\n")
    if v1:
        for rel in probe_child.V1_RL_FILES:
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            (pkg / rel).write_text("# V1\n")
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    return pkg


def finder(site: Path, mapping: dict[str, str], marker: Path) -> None:
    """setuptools' editable finder and the .pth that would import it; importing the finder writes ``marker``."""
    (site / "__editable___xtuner_0_2_0_finder.py").write_text(
        "from __future__ import annotations\n"
        + MARKER_CODE.format(path=str(marker))
        + f"MAPPING: dict[str, str] = {mapping!r}\nNAMESPACES: dict[str, list[str]] = {{}}\n"
        "def install():\n    pass\n"
    )
    (site / "__editable__.xtuner-0.2.0.pth").write_text(
        "import __editable___xtuner_0_2_0_finder; __editable___xtuner_0_2_0_finder.install()\n"
    )


def ctx_for(*roots: Path, interpreters: tuple[Path, ...] = ()) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings(list(roots)), policy=OperatorPolicy(interpreters=interpreters))


def site_packages(venv: Path) -> Path:
    (site,) = (venv / "lib").glob("python*/site-packages")
    return site


@pytest.fixture(scope="module")
def real_venv(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(venv, checkout, marker): a real venv whose .pth, sitecustomize, editable finder and packages would all
    write ``marker`` if anything ran or imported them."""
    base = tmp_path_factory.mktemp("real")
    marker = base / "MARKER"
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = site_packages(venv)
    (site / "evil.pth").write_text(MARKER_CODE.format(path=str(marker)))
    (site / "sitecustomize.py").write_text(MARKER_CODE.format(path=str(marker)))
    source = base / "xtuner-src"
    checkout(source, marker=marker)
    finder(site, {"xtuner": str(source / "xtuner")}, marker)
    dist_info(site, "xtuner", "0.2.0", {"url": source.as_uri(), "dir_info": {"editable": True}})
    dist_info(site, "sglang", "0.4.6.post1")
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text(MARKER_CODE.format(path=str(marker)))
    dist_info(site, "opentelemetry-sdk", "1.30.0")
    (site / "cyclopts.py").write_text(MARKER_CODE.format(path=str(marker)))
    (site / "flash_attn_interface.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF not really")
    return venv, source, marker


# ---- reading a real venv ----------------------------------------------------------------------------------------


def test_a_real_venv_is_read_from_its_files(real_venv):
    venv, source, marker = real_venv
    r = packages.training_packages(str(venv), ctx_for(venv.parent))
    py = r.python
    assert py is not None and py.target == "training" and py.learned_from == "read"
    assert py.prefix == str(venv) and py.is_venv and not py.is_conda
    assert py.python_version == SERVER_VERSION  # pyvenv.cfg of a venv made by this Python
    assert py.executable == str(venv / "bin" / "python") and py.scripts_dir == str(venv / "bin")
    assert py.site_packages == [str(site_packages(venv))]
    assert any("import line(s) found and not run" in n for n in py.notes)
    items = {i.name: i for i in r.items}
    assert items["sglang"].version == "0.4.6.post1" and items["sglang"].module_found
    assert items["opentelemetry-sdk"].installed and items["opentelemetry-sdk"].version == "1.30.0"
    assert items["cyclopts"].module_found and items["flash_attn_3"].module_found  # a .py module, an extension
    assert not items["torch"].installed and not items["lmdeploy"].installed
    xt = r.xtuner
    assert xt is not None and xt.location == str(source / "xtuner") and "editable finder" in xt.found_by
    assert xt.install_kind == "editable" and xt.v1_rl is True and xt.source_url == source.as_uri()
    assert (xt.git_commit, xt.git_ref, xt.commit_from) == (COMMIT, "refs/heads/main", "git_checkout")
    assert not marker.exists()


@pytest.mark.parametrize("given", ["bin/python", "bin/python3", "bin/python3.11", "relative"])
def test_the_interpreter_names_its_prefix_without_being_resolved(real_venv, given):
    """bin/python links to the base Python outside the roots: the prefix is its parent's parent, not its target."""
    venv, _, marker = real_venv
    paths = PathPolicy.from_strings([venv.parent])
    assert not paths.contains(Path(os.path.realpath(venv / "bin" / "python")))  # resolving it would leave the roots
    if not os.path.lexists(venv / "bin" / "python3.11"):
        (venv / "bin" / "python3.11").symlink_to("python3")
    raw = "venv/bin/python" if given == "relative" else str(venv / given)
    assert training_env.locate(raw, paths) == venv
    assert not marker.exists()


def test_relative_paths_are_taken_from_the_first_root(real_venv, tmp_path):
    venv, _, _ = real_venv
    with pytest.raises(ToolInputError) as e:  # from the first root (tmp_path), "venv" does not exist
        training_env.locate("venv", PathPolicy.from_strings([tmp_path, venv.parent]))
    assert e.value.code == "path_not_found"
    assert training_env.locate("venv", PathPolicy.from_strings([venv.parent, tmp_path])) == venv


# ---- prefix trees: every way an XTuner is installed --------------------------------------------------------------


def test_editable_xtuner_from_a_pth_path_line(tmp_path):
    site = prefix_tree(tmp_path / "env")
    checkout(tmp_path / "src")
    (site / "__editable__.xtuner-0.2.0.pth").write_text("# comment\n" + str(tmp_path / "src") + "\n")
    r = packages.training_packages(str(tmp_path / "env"), ctx_for(tmp_path))
    xt = r.xtuner
    assert xt is not None and xt.location == str(tmp_path / "src" / "xtuner")
    assert xt.install_kind == "editable" and xt.found_by == ".pth line in __editable__.xtuner-0.2.0.pth"
    assert xt.git_commit == COMMIT and xt.v1_rl
    assert {i.name for i in r.items if i.installed} == {"xtuner"}  # module found on the .pth directory


def test_relative_pth_line_and_egg_link(tmp_path):
    site = prefix_tree(tmp_path / "env")
    checkout(site / "vendored")
    (site / "easy-install.pth").write_text("./vendored\n")
    r = packages.training_packages(str(tmp_path / "env"), ctx_for(tmp_path))
    assert r.xtuner is not None and r.xtuner.install_kind == "source_on_path"
    assert r.xtuner.location == str(site / "vendored" / "xtuner")

    site2 = prefix_tree(tmp_path / "env2")
    checkout(tmp_path / "src2")
    (site2 / "xtuner.egg-link").write_text(str(tmp_path / "src2") + "\n.\n")
    r2 = packages.training_packages(str(tmp_path / "env2"), ctx_for(tmp_path))
    assert r2.xtuner is not None and r2.xtuner.found_by == "xtuner.egg-link" and r2.xtuner.git_commit == COMMIT


def test_pypi_xtuner_in_site_packages_has_no_v1(tmp_path):
    """PyPI's 0.2.0 has no xtuner/v1: told by its files, a blocker; a VCS install's commit comes from PEP 610."""
    site = prefix_tree(tmp_path / "env")
    (site / "xtuner").mkdir()
    (site / "xtuner" / "__init__.py").write_text("__version__ = '0.2.0'\n")
    dist_info(site, "xtuner", "0.2.0", {"url": "https://github.com/InternLM/xtuner", "vcs_info": {"commit_id": COMMIT}})
    r = packages.training_packages(str(tmp_path / "env"), ctx_for(tmp_path))
    xt = r.xtuner
    assert xt is not None and xt.install_kind == "site_packages" and xt.v1_rl is False
    assert (xt.git_commit, xt.commit_from) == (COMMIT, "pip_vcs_url")
    (f,) = [f for f in packages.package_findings(r, None, None) if f.id == "probe.xtuner_without_v1"]
    assert f.severity == "blocker" and str(tmp_path / "env") in f.evidence


def test_a_conda_env_and_egg_info_metadata(tmp_path):
    prefix = tmp_path / "conda"
    site = prefix / "lib" / "python3.10" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "python-3.10.14-h955ad1f_0.json").write_text("{}")
    (site / "ray-2.40.0-py3.10.egg-info").write_text("Metadata-Version: 1.1\nName: ray\nVersion: 2.40.0\n")
    (site / "torch-2.6.0.egg-info").mkdir()
    (site / "torch-2.6.0.egg-info" / "PKG-INFO").write_text("Name: torch\nVersion: 2.6.0+cu124\n")
    r = packages.training_packages(str(prefix), ctx_for(tmp_path))
    assert r.python is not None and r.python.is_conda and not r.python.is_venv
    assert r.python.python_version == "3.10.14"
    items = {i.name: i for i in r.items}
    assert items["ray"].version == "2.40.0" and items["torch"].version == "2.6.0+cu124"


def test_xtuner_outside_the_roots_is_named_not_read(tmp_path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    checkout(elsewhere / "src")
    site = prefix_tree(tmp_path / "env")
    finder(site, {"xtuner": str(elsewhere / "src" / "xtuner")}, tmp_path / "MARKER")
    r = packages.training_packages(str(tmp_path / "env"), ctx_for(tmp_path))
    xt = r.xtuner
    assert xt is not None and xt.outside_roots and xt.v1_rl is None and xt.git_commit is None
    note = f"xtuner found at {elsewhere / 'src' / 'xtuner'}, outside the allowed roots: not read; add --allow-root"
    assert r.python is not None and any(n.startswith(note) for n in r.python.notes)
    ids = {f.id: f for f in packages.package_findings(r, None, None)}
    assert (
        "probe.xtuner_without_v1" not in ids and f"--allow-root {elsewhere / 'src'}" in ids["probe.xtuner_not_read"].fix
    )
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    with pytest.raises(ToolInputError) as e:
        inspect_config.run(
            inspect_config.Params(path=str(cfg), env=ENV, training_env=str(tmp_path / "env")), ctx_for(tmp_path)
        )
    assert e.value.code == "xtuner_outside_roots" and f"--allow-root {elsewhere / 'src'}" in e.value.fix
    assert not (tmp_path / "MARKER").exists()


def test_a_prefix_outside_the_roots_says_how_to_allow_it(tmp_path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("outside")
    prefix_tree(elsewhere / "env")
    with pytest.raises(ToolInputError) as e:
        training_env.locate(str(elsewhere / "env" / "bin" / "python"), PathPolicy.from_strings([tmp_path]))
    assert e.value.code == "path_outside_roots" and e.value.fix.startswith(
        f"Start the server with --allow-root {elsewhere / 'env'}"
    )


def test_the_checkout_is_accepted_by_inspect_config(tmp_path):
    """What people clone: a directory holding xtuner/v1/ is accepted as inspect_config's training_env."""
    checkout(tmp_path / "xtuner-src")
    package, commit = training_env.xtuner_source("xtuner-src", PathPolicy.from_strings([tmp_path]), ctx_for().limits)
    assert package == tmp_path / "xtuner-src" / "xtuner" and commit == COMMIT


# ---- the run path: only the operator's interpreter, only when asked ----------------------------------------------


def test_an_allowed_interpreter_confirms_the_reading_without_site(real_venv):
    """-I -S: the real interpreter runs the locator, yet no .pth, sitecustomize, finder or package runs."""
    venv, source, marker = real_venv
    real = Path(os.path.realpath(venv / "bin" / "python"))
    r = packages.training_packages(
        str(venv), ctx_for(venv.parent, interpreters=(real,)), run_interpreter=True, timeout=30
    )
    assert r.python is not None and r.python.learned_from == "run"
    assert r.python.python_version == SERVER_VERSION
    assert any(n.startswith(f"confirmed by running {real} -I -S") for n in r.python.notes)
    items = {i.name: i for i in r.items}
    assert items["sglang"].version == "0.4.6.post1" and items["cyclopts"].module_found
    assert r.xtuner is not None and r.xtuner.location == str(source / "xtuner")
    assert not marker.exists()


def test_run_needs_the_operator_and_the_caller(real_venv):
    venv, _, marker = real_venv
    not_allowed = packages.training_packages(str(venv), ctx_for(venv.parent), run_interpreter=True)
    assert not_allowed.python is not None and not_allowed.python.learned_from == "read"
    real = os.path.realpath(venv / "bin" / "python")
    assert any(f"start the server with --allow-python {real}" in n for n in not_allowed.python.notes)
    not_asked = packages.training_packages(str(venv), ctx_for(venv.parent, interpreters=(Path(real),)))
    assert not_asked.python is not None and not_asked.python.learned_from == "read"
    assert not any("running" in n for n in not_asked.python.notes)
    assert not marker.exists()


NATIVE_SOURCE = r"""
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* A stand-in "python": what it does is read from the file `mode` beside it. */
int main(int argc, char **argv) {
    char here[4096], path[4200], mode[64] = {0}, arg[64] = {0};
    snprintf(here, sizeof here, "%s", argv[0]);
    char *dir = dirname(here);
    snprintf(path, sizeof path, "%s/mode", dir);
    FILE *f = fopen(path, "r");
    if (f) { if (fscanf(f, "%63s %63s", mode, arg) < 1) mode[0] = 0; fclose(f); }
    if (!strcmp(mode, "marker")) {
        snprintf(path, sizeof path, "%s/RAN", dir);
        FILE *m = fopen(path, "w"); if (m) fclose(m);
        printf("{}"); return 0;
    }
    if (!strcmp(mode, "garbage")) { printf("Python 3.11.0 (main) [GCC]\nnot an answer\n"); return 0; }
    if (!strcmp(mode, "huge")) { for (;;) fputs("yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n", stdout); }
    if (!strcmp(mode, "liar")) {
        printf("{\"executable\": \"/usr/bin/python3\", \"python_version\": \"3.11.0\", \"packages\": []}");
        return 0;
    }
    if (!strcmp(mode, "minimal")) { printf("{\"executable\": \"%s\"}", argv[0]); return 0; }
    if (!strcmp(mode, "sleeper")) {
        if (fork() == 0) { execlp("sleep", "sleep", arg, (char *)0); _exit(1); }
        sleep(300); return 0;
    }
    return 3;
}
"""


@pytest.fixture(scope="module")
def native_python(tmp_path_factory) -> Path:
    """A real ELF program standing in for an interpreter (compiled here; skipped without a C compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a native stand-in interpreter")
    base = tmp_path_factory.mktemp("native")
    (base / "fake.c").write_text(NATIVE_SOURCE)
    subprocess.run([cc, "-O1", "-o", str(base / "fake"), str(base / "fake.c")], check=True, timeout=120)
    return base / "fake"


def native_env(root: Path, binary: Path, mode: str) -> tuple[Path, Path]:
    """A prefix whose bin/python is a copy of ``binary`` acting out ``mode``; returns (prefix, its interpreter)."""
    prefix = root / f"env-{mode.split()[0]}"
    prefix_tree(prefix)
    shutil.copy2(binary, prefix / "bin" / "python")
    (prefix / "bin" / "mode").write_text(mode + "\n")
    return prefix, prefix / "bin" / "python"


def sleepers(token: str) -> list[int]:
    """Live processes whose command line holds ``token``."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if token in (proc / "cmdline").read_bytes().decode("utf-8", "replace"):
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


def test_the_run_path_runs_only_what_was_asked(native_python, tmp_path):
    """The stand-in leaves a file when it runs: absent unless the operator allowed it AND the caller asked."""
    prefix, exe = native_env(tmp_path, native_python, "marker")
    ran = prefix / "bin" / "RAN"
    packages.training_packages(str(prefix), ctx_for(tmp_path, interpreters=(exe,)))
    packages.training_packages(str(prefix), ctx_for(tmp_path), run_interpreter=True)
    assert not ran.exists()
    r = packages.training_packages(str(prefix), ctx_for(tmp_path, interpreters=(exe,)), run_interpreter=True)
    assert ran.exists()  # proof that the two calls above would have shown a run
    assert r.python is not None and r.python.learned_from == "read"  # "{}" is no answer
    assert any("not the locator's answer" in n for n in r.python.notes)


@pytest.mark.parametrize(
    ("mode", "note"),
    [
        ("garbage", "not the locator's answer"),
        ("minimal", "not the locator's answer"),
        ("liar", "reported another executable"),
        ("huge", "printed more than"),
    ],
)
def test_a_misbehaving_interpreter_is_bounded_and_its_answer_ignored(native_python, tmp_path, mode, note):
    prefix, exe = native_env(tmp_path, native_python, mode)
    start = time.monotonic()
    r = packages.training_packages(
        str(prefix), ctx_for(tmp_path, interpreters=(exe,)), run_interpreter=True, timeout=10
    )
    assert time.monotonic() - start < 8
    assert r.python is not None and r.python.learned_from == "read" and r.python.python_version == "3.11.4"
    assert any(note in n for n in r.python.notes), r.python.notes
    assert [f.id for f in packages.package_findings(r, None, None)] == [
        "probe.xtuner_not_installed",
        "probe.ray_not_installed",
        "probe.cyclopts_not_installed",
        "probe.torch_not_installed",
        "probe.otel_packages_missing",
    ]  # what the files say, nothing the child claimed


def test_an_interpreter_that_sleeps_and_backgrounds_a_child_is_killed(native_python, tmp_path):
    token = f"300.{uuid.uuid4().int % 10**6:06d}"
    prefix, exe = native_env(tmp_path, native_python, f"sleeper {token}")
    start = time.monotonic()
    r = packages.training_packages(
        str(prefix), ctx_for(tmp_path, interpreters=(exe,)), run_interpreter=True, timeout=1.5
    )
    assert time.monotonic() - start < 6
    assert r.python is not None and any("did not answer within 1.5s" in n for n in r.python.notes)
    deadline = time.monotonic() + 3
    while sleepers(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers(token) == []


def test_a_script_is_never_run_even_when_allowed(tmp_path):
    prefix = tmp_path / "env"
    prefix_tree(prefix)
    script = prefix / "bin" / "python"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'MARKER'}\n")
    script.chmod(0o755)
    r = packages.training_packages(str(prefix), ctx_for(tmp_path, interpreters=(script,)), run_interpreter=True)
    assert r.python is not None and any("not a native executable" in n for n in r.python.notes)
    assert not (tmp_path / "MARKER").exists()


def test_the_locator_stays_standard_library_and_python_3_8():
    source = Path(probe_child.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported and imported <= set(sys.stdlib_module_names)


# ---- hostile inputs through the real MCP client ------------------------------------------------------------------


def child_pids() -> set[int]:
    me = str(os.getpid())
    out = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                    out.add(int(proc.name))
            except (OSError, IndexError):
                continue
    return out


def hostile_envs(root: Path, marker: Path) -> dict[str, str]:
    """name -> training_env value; each environment would write ``marker`` if anything in it ran."""
    touch = f"#!/bin/sh\ntouch {marker}\n"
    cases: dict[str, str] = {}
    prefix_tree(root / "sh_script")
    (root / "sh_script" / "bin" / "python").write_text(touch)
    (root / "sh_script" / "bin" / "python").chmod(0o755)
    cases["sh_script_named_python"] = str(root / "sh_script" / "bin" / "python")
    prefix_tree(root / "sh_link")
    (root / "sh_link" / "bin" / "python").symlink_to("/bin/sh")
    cases["symlink_to_bin_sh"] = str(root / "sh_link" / "bin" / "python")
    (root / "win" / "Lib" / "site-packages").mkdir(parents=True)
    (root / "win" / "Scripts").mkdir()
    (root / "win" / "Scripts" / "python.exe").write_text(touch)
    (root / "win" / "Scripts" / "python.exe").chmod(0o755)
    cases["python_exe_script"] = str(root / "win" / "Scripts" / "python.exe")
    site = prefix_tree(root / "pth")
    (site / "evil.pth").write_text(f"import os; os.system('touch {marker}')\n")
    cases["pth_that_writes"] = str(root / "pth")
    site = prefix_tree(root / "fifo")
    (site / "torch-2.6.0.dist-info").mkdir()
    os.mkfifo(site / "torch-2.6.0.dist-info" / "METADATA")
    (root / "fifo" / "pyvenv.cfg").unlink()
    os.mkfifo(root / "fifo" / "pyvenv.cfg")
    cases["fifo_metadata_and_pyvenv_cfg"] = str(root / "fifo")
    site = prefix_tree(root / "sparse")
    meta = dist_info(site, "ray", "2.40.0") / "METADATA"
    with open(meta, "r+b") as fh:
        fh.truncate(2 << 30)  # 2 GiB, the header at the start
    cases["sparse_2gib_metadata"] = str(root / "sparse")
    site = prefix_tree(root / "nul")
    (site / "odd.pth").write_text("/tmp/a\x00b\n" + "x" * 5000 + "\n")
    finder(site, {"xtuner": "/x\x00y"}, marker)
    cases["nul_and_overlong_pointers"] = str(root / "nul")
    prefix_tree(root / "envs" / "rel")
    cases["relative"] = "envs/rel/bin/python"
    return cases


@pytest.mark.anyio
async def test_hostile_environments_through_the_mcp_client(mcp_client, tmp_path):
    marker = tmp_path / "MARKER"
    before = child_pids()
    for name, value in hostile_envs(tmp_path, marker).items():
        for tool, args in (
            ("probe_environment", {"checks": ["packages", "binaries"], "training_env": value, "run_interpreter": True}),
            (
                "preflight",
                {"config": "nope.py", "training_env": value, "run_interpreter": True, "probe_cluster": False},
            ),
        ):
            start = time.monotonic()
            res = await mcp_client.call_tool(tool, args)
            elapsed = time.monotonic() - start
            assert elapsed < 15, (name, tool, elapsed)
            assert not res.is_error, (name, tool, structured_error(res))
            assert not marker.exists(), (name, tool)
        data = await mcp_client.call_tool("probe_environment", {"checks": ["packages"], "training_env": value})
        py = data.structured_content["python"]
        assert py["learned_from"] == "read" and py["target"] == "training", name
        notes = " ".join(py["notes"])
        if name == "pth_that_writes":
            assert "1 .pth import line(s) found and not run" in notes
        if name == "fifo_metadata_and_pyvenv_cfg":
            assert "pyvenv.cfg is not a regular file" in notes and "METADATA is not a regular file" in notes
            assert py["python_version"] == "3.11"  # from lib/python3.11, the FIFO refused
        if name == "sparse_2gib_metadata":
            ray = next(p for p in data.structured_content["packages"]["items"] if p["name"] == "ray")
            assert ray["version"] == "2.40.0"
        if name == "nul_and_overlong_pointers":
            assert "xtuner is recorded at an unusable path" in notes
        if name == "relative":
            assert py["prefix"] == str(tmp_path / "envs" / "rel")
    assert child_pids() <= before


@pytest.mark.anyio
async def test_outside_the_roots_is_a_structured_error(mcp_client, tmp_path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("not-allowed")
    prefix_tree(elsewhere / "env")
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    for tool, args in (
        ("probe_environment", {"checks": ["packages"], "training_env": str(elsewhere / "env")}),
        ("inspect_config", {"path": str(cfg), "training_env": str(elsewhere / "env" / "bin" / "python")}),
        ("preflight", {"config": str(cfg), "training_env": str(elsewhere / "env"), "probe_cluster": False}),
    ):
        start = time.monotonic()
        res = await mcp_client.call_tool(tool, args)
        err = structured_error(res)
        assert res.is_error and err is not None and time.monotonic() - start < 10, tool
        assert err["code"] == "path_outside_roots" and f"--allow-root {elsewhere / 'env'}" in err["fix"], err


@pytest.mark.anyio
async def test_the_operator_allowed_interpreter_through_the_server(real_venv, native_python, tmp_path):
    """Policy from the server's start (build_server(policy=...)): the real interpreter confirms; a stand-in that
    sleeps with a background child is stopped at the deadline and leaves nothing behind."""
    venv, _, marker = real_venv
    real = Path(os.path.realpath(venv / "bin" / "python"))
    token = f"300.{uuid.uuid4().int % 10**6:06d}"
    prefix, exe = native_env(tmp_path, native_python, f"sleeper {token}")
    server = make_server(venv.parent, tmp_path, policy=OperatorPolicy(interpreters=(real, exe)))
    async with Client(server, raise_exceptions=True) as client:
        res = await client.call_tool(
            "probe_environment", {"checks": ["packages"], "training_env": str(venv), "run_interpreter": True}
        )
        assert not res.is_error and res.structured_content["python"]["learned_from"] == "run"
        assert "confirmed by running it" in res.structured_content["summary"]
        start = time.monotonic()
        res = await client.call_tool(
            "probe_environment",
            {"checks": ["packages"], "training_env": str(prefix), "run_interpreter": True, "timeout_s": 0.5},
        )
        assert time.monotonic() - start < 8 and not res.is_error
        assert res.structured_content["python"]["learned_from"] == "read"
        assert any("did not answer" in n for n in res.structured_content["python"]["notes"])
    deadline = time.monotonic() + 3
    while sleepers(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers(token) == [] and not marker.exists()
