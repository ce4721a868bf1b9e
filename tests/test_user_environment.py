"""The user's own environment and XTuner (issue 17 item 3): a second real virtualenv is read from its files (never
run), and a config is checked against an XTuner-shaped tree whose classes differ from b934f46.

Everything here is real: ``python -m venv`` builds the second environment; the "backend" is a tiny ``sglang``
package with real distribution metadata; the XTuner is a source checkout (a ``.git`` directory with a branch ref)
installed in editable mode the way pip records it (a ``.pth`` file and a PEP 610 ``direct_url.json``). Its class
files are rendered from the built-in table, so only the deliberate changes differ in content.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from xtuner_rl_mcp.cluster import packages, xtuner_install
from xtuner_rl_mcp.core import PathPolicy, RunContext, ToolInputError
from xtuner_rl_mcp.operations import inspect_config, preflight, probe_environment
from xtuner_rl_mcp.xtuner_rules import classes as xc

from .xtuner_config_samples import COLOCATED_ASYNC, ENV, mutate, write

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ADDED = ("RolloutConfig", "new_knob")  # a field the user's XTuner has and b934f46 lacks
REMOVED = ("RolloutConfig", "max_retry_per_sample")  # a field b934f46 has and the user's XTuner dropped


def render_class(c: xc.C, drop: str | None = None, add: str | None = None) -> str:
    bases = ", ".join(c.bases) or "BaseModel"
    lines = [f"class {c.name}({bases}):"]
    if c.extra is not None:
        lines.append(f'    model_config = ConfigDict(extra="{c.extra}")')
    for f in c.fields:
        if f.name == drop:
            continue
        if f.required:
            lines.append(f"    {f.name}: {f.type}")
        else:
            value = repr(f.default) if f.has_literal_default else f.default_expr
            lines.append(f"    {f.name}: {f.type} = {value}")
    if add:
        lines.append(f"    {add}: int = 3")
    lines.append("    pass")
    return "\n".join(lines)


def xtuner_tree(root: Path, *, v1: bool = True, changed: bool = True) -> Path:
    """An XTuner checkout at ``root``: the built-in classes at their paths, RolloutConfig changed if asked."""
    pkg = root / "xtuner"
    (pkg).mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.2.0"\n')
    by_path: dict[str, list[str]] = {}
    for c in xc.CLASSES.values():
        change = changed and c.name == ADDED[0]
        by_path.setdefault(c.path, []).append(
            render_class(c, drop=REMOVED[1] if change else None, add=ADDED[1] if change else None)
        )
    if v1:
        for rel, classes in by_path.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("from pydantic import BaseModel, ConfigDict, Field\n\n\n" + "\n\n\n".join(classes) + "\n")
        (pkg / "v1" / "train" / "cli").mkdir(parents=True, exist_ok=True)
        (pkg / "v1" / "train" / "cli" / "rl.py").write_text("def main(): ...\n")
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    return pkg


def site_packages(venv: Path) -> Path:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def dist_info(site: Path, name: str, version: str, direct_url: dict | None = None) -> None:
    d = site / f"{name}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (d / "INSTALLER").write_text("pip\n")
    if direct_url is not None:
        (d / "direct_url.json").write_text(json.dumps(direct_url))


@pytest.fixture(scope="module")
def training_venv(tmp_path_factory) -> tuple[Path, Path]:
    """A second real virtualenv with a tiny sglang distribution and an editable XTuner checkout."""
    base = tmp_path_factory.mktemp("trainenv")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = site_packages(venv)
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("raise RuntimeError('the probe must never import this')\n")
    dist_info(site, "sglang", "0.4.6.post1")
    checkout = base / "xtuner-src"
    xtuner_tree(checkout)
    (site / "__editable__.xtuner-0.2.0.pth").write_text(str(checkout) + "\n")
    dist_info(site, "xtuner", "0.2.0", {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    return venv, checkout


def ctx_for(*roots: Path) -> RunContext:
    return RunContext(paths=PathPolicy.from_strings(list(roots)))


# ---- reading the training environment ----------------------------------------------------------------------------


def test_second_venv_reports_its_backend_and_its_xtuner(training_venv, tmp_path):
    venv, checkout = training_venv
    env = {"XTUNER_USE_SGLANG": "1"}
    r = probe_environment.run(
        probe_environment.Params(checks=["packages", "env"], env=env, training_env=str(venv / "bin" / "python")),
        ctx_for(venv.parent, tmp_path),
    )
    assert r.python is not None and r.python.target == "training" and r.python.is_venv
    assert r.python.learned_from == "read" and r.python.executable == str(venv / "bin" / "python")
    items = {i.name: i for i in r.packages.items}
    assert items["sglang"].installed and items["sglang"].version == "0.4.6.post1"
    assert items["xtuner"].installed and items["xtuner"].version == "0.2.0"
    assert r.xtuner is not None and Path(r.xtuner.location) == checkout / "xtuner"
    assert r.xtuner.v1_rl is True and all(r.xtuner.v1_rl_files.values())
    assert (
        r.xtuner.install_kind == "editable" and r.xtuner.git_commit == COMMIT and r.xtuner.git_ref == "refs/heads/main"
    )
    ids = {f.id for f in r.findings}
    # sglang is installed there, so no backend blocker; the server's own Python (no sglang) is not what was asked
    assert not any(i.startswith("probe.backend_not_installed") for i in ids)
    assert "training Python" in r.summary and "read from its files" in r.summary and COMMIT[:12] in r.summary


def test_training_env_without_the_backend_is_a_blocker(training_venv, tmp_path):
    venv, _ = training_venv
    r = probe_environment.run(
        probe_environment.Params(checks=["packages", "env"], env={"XTUNER_USE_LMDEPLOY": "1"}, training_env=str(venv)),
        ctx_for(venv.parent, tmp_path),
    )
    f = next(f for f in r.findings if f.id == "probe.backend_not_installed.lmdeploy")
    assert f.severity == "blocker" and f"training environment ({venv})" in f.evidence
    assert "another Python" not in f.evidence
    assert f.stage == "trainer_init" and f.owner == "backend_install"


def test_server_python_stays_the_default_and_hedges(tmp_path):
    r = probe_environment.run(
        probe_environment.Params(checks=["packages", "env"], env={"XTUNER_USE_LMDEPLOY": "1"}), ctx_for(tmp_path)
    )
    assert r.python is not None and r.python.target == "server" and r.python.executable == sys.executable
    if not any(i.installed for i in r.packages.items if i.name in ("xtuner", "lmdeploy")):
        f = next(f for f in r.findings if f.id == "probe.backend_not_installed.lmdeploy")
        assert f.severity == "warning" and "may not be the training one" in f.evidence


def test_v1_rl_is_told_by_the_files(tmp_path):
    """__version__ is 0.2.0 with or without V1: an install without the V1 files is the PyPI-style blocker."""
    venv = tmp_path / "pypi"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = site_packages(venv)
    xtuner_tree(tmp_path / "old", v1=False)
    (site / "old.pth").write_text(str(tmp_path / "old") + "\n")
    dist_info(site, "xtuner", "0.2.0")
    r = packages.training_packages(str(venv / "bin" / "python"), ctx_for(tmp_path))
    assert r.xtuner is not None and r.xtuner.v1_rl is False and r.xtuner_v1_rl_cli is False
    (f,) = [f for f in packages.package_findings(r, None, None) if f.id == "probe.xtuner_without_v1"]
    assert f.severity == "blocker" and "only the files tell" in f.evidence


def test_what_is_not_an_environment_is_an_input_error(tmp_path):
    (tmp_path / "notpython").write_text("#!/bin/sh\n")
    for value, code in (
        (tmp_path / "notpython", "training_env_not_prefix"),
        (tmp_path / "python3", "path_not_found"),
        (tmp_path / "nope", "path_not_found"),
        (tmp_path, "training_env_not_python"),
    ):
        with pytest.raises(ToolInputError) as e:
            probe_environment.run(
                probe_environment.Params(checks=["packages"], training_env=str(value)), ctx_for(tmp_path)
            )
        assert e.value.code == code, (value, e.value.code)


# ---- the user's XTuner classes ------------------------------------------------------------------------------------


CONFIG_WITH_BOTH = (
    '    weight_transport_type="ipc",\n)',
    '    weight_transport_type="ipc",\n    new_knob=4,\n    max_retry_per_sample=2,\n)',
)


def unknown_fields(r: inspect_config.Result) -> dict[str, object]:
    return {f.title: f for f in r.findings if f.id == "config.unknown_field"}


def test_changed_class_gives_no_false_blocker_and_no_silent_miss(training_venv, tmp_path):
    venv, checkout = training_venv
    cfg = write(tmp_path, "cfg.py", mutate(COLOCATED_ASYNC, CONFIG_WITH_BOTH))
    builtin = inspect_config.run(inspect_config.Params(path=str(cfg), env=ENV), ctx_for(tmp_path))
    assert builtin.xtuner_classes.used == "builtin"
    assert set(unknown_fields(builtin)) == {"RolloutConfig has no field `new_knob`"}

    for target in (str(venv), str(venv / "bin" / "python"), str(checkout), str(checkout / "xtuner")):
        r = inspect_config.run(
            inspect_config.Params(path=str(cfg), env=ENV, training_env=target), ctx_for(venv.parent, tmp_path)
        )
        assert r.xtuner_classes.used == "installed" and r.xtuner_classes.git_commit == COMMIT
        assert "installed XTuner" in r.summary and "1 class(es) differ" in r.summary
        found = unknown_fields(r)
        # the added field is accepted (no false blocker), the removed one is caught (no silent miss)
        assert set(found) == {"RolloutConfig has no field `max_retry_per_sample`"}, found
        f = found["RolloutConfig has no field `max_retry_per_sample`"]
        assert f.severity == "blocker" and "differs from b934f46" in f.evidence and "removed" in f.evidence
        assert f.source.startswith("xtuner/v1/rl/rollout/worker.py:") and f.stage == "config_load"
        (removed, added) = r.xtuner_classes.differences["RolloutConfig"]  # sorted
        assert list(r.xtuner_classes.differences) == ["RolloutConfig"]
        assert added.startswith(f"field `{ADDED[1]}` added (xtuner/v1/rl/rollout/worker.py:")
        assert removed == f"field `{REMOVED[1]}` removed (b934f46 xtuner/v1/rl/rollout/worker.py:370)"
        # the installed XTuner lacks a field b934f46 has: remove it, or upgrade XTuner to where it is
        assert "remove `max_retry_per_sample=`" in f.fix and "upgrade XTuner" in f.fix
        assert "InternLM/xtuner@b934f46 has it at xtuner/v1/rl/rollout/worker.py:370" in f.fix


def test_rules_from_files_that_differ_are_not_asserted(training_venv, tmp_path):
    """A hand-written rule read from a file that is not byte-identical to b934f46 is a warning that says so."""
    _, checkout = training_venv
    bad = mutate(COLOCATED_ASYNC, ("    context_length=max_response_length + max_prompt_length,\n", ""))
    cfg = write(tmp_path, "nocl.py", bad)
    pinned = inspect_config.run(inspect_config.Params(path=str(cfg), env=ENV), ctx_for(tmp_path))
    (f0,) = [f for f in pinned.findings if f.id == "config.rollout_context_length_missing"]
    assert f0.severity == "blocker"
    mine = inspect_config.run(
        inspect_config.Params(path=str(cfg), env=ENV, training_env=str(checkout)), ctx_for(checkout.parent, tmp_path)
    )
    (f1,) = [f for f in mine.findings if f.id == "config.rollout_context_length_missing"]
    assert f1.severity == "warning" and "differs from it, so confirm" in f1.evidence
    assert "xtuner/v1/rl/rollout/worker.py" in mine.xtuner_classes.files_differing


def test_unchanged_tree_agrees_with_the_builtin_table(tmp_path):
    """A tree rendered from the built-in table, unchanged, gives the same findings as the built-in table."""
    pkg = xtuner_tree(tmp_path / "same", changed=False)
    cfg = write(tmp_path, "cfg.py", mutate(COLOCATED_ASYNC, CONFIG_WITH_BOTH))
    a = inspect_config.run(inspect_config.Params(path=str(cfg), env=ENV), ctx_for(tmp_path))
    b = inspect_config.run(inspect_config.Params(path=str(cfg), env=ENV, training_env=str(pkg)), ctx_for(tmp_path))
    assert b.xtuner_classes.differences == {} and b.xtuner_classes.classes_read == len(xc.CLASSES)
    assert {f.id: f.severity for f in a.findings if f.id in ("config.unknown_field",)} == {
        f.id: f.severity for f in b.findings if f.id in ("config.unknown_field",)
    }


def test_table_is_scoped_to_the_call(training_venv, tmp_path):
    _, checkout = training_venv
    rows, used = inspect_config.classes_for(str(checkout), ctx_for(checkout.parent))
    assert used.used == "installed" and "new_knob" in {f.name for f in rows["RolloutConfig"].fields}
    with xc.use_table(rows):
        assert "new_knob" in xc.fields_of("RolloutConfig")
    assert "new_knob" not in xc.fields_of("RolloutConfig") and xc.table() is xc.CLASSES


def test_xtuner_argument_errors(tmp_path):
    cfg = write(tmp_path, "cfg.py", COLOCATED_ASYNC)
    with pytest.raises(ToolInputError) as e:
        inspect_config.run(inspect_config.Params(path=str(cfg), env=ENV, training_env=str(tmp_path)), ctx_for(tmp_path))
    assert e.value.code == "xtuner_not_found"


def test_reader_reproduces_the_builtin_table_from_b934f46():
    """Reading the real files at b934f46 gives exactly the built-in rows (skipped without the XTuner mirror)."""
    mirror = Path("/work/.mirror/InternLM+xtuner/repo")
    if not (mirror / "HEAD").exists():
        pytest.skip("XTuner mirror not available")

    def read(path: str) -> str | None:
        out = subprocess.run(["git", "-C", str(mirror), "show", f"b934f46:{path}"], capture_output=True, text=True)
        return out.stdout if out.returncode == 0 else None

    tree = xtuner_install.read_classes(read)
    assert tree.not_found == [] and xtuner_install.diff_tables(xc.CLASSES, tree.rows) == {}
    for name, c in xc.CLASSES.items():
        got = tree.rows[name]
        assert (got.line, got.extra, got.bases) == (c.line, c.extra, c.bases), name
        assert [(f.name, f.line, f.type, f.required, f.default_expr) for f in got.fields] == [
            (f.name, f.line, f.type, f.required, f.default_expr) for f in c.fields
        ], name


def test_pinned_fingerprints_match_b934f46():
    """The per-file fingerprints used to tell a changed installation are those of b934f46 (skipped without mirror)."""
    import hashlib

    from xtuner_rl_mcp.cluster.xtuner_install import PINNED_SHA

    mirror = Path("/work/.mirror/InternLM+xtuner/repo")
    if not (mirror / "HEAD").exists():
        pytest.skip("XTuner mirror not available")
    for path, sha in PINNED_SHA.items():
        raw = subprocess.run(["git", "-C", str(mirror), "show", f"b934f46:{path}"], capture_output=True, check=True)
        assert hashlib.sha256(raw.stdout).hexdigest()[:16] == sha, path


# ---- preflight in the training environment --------------------------------------------------------------------------


def test_preflight_uses_the_training_env_and_its_xtuner(training_venv, tmp_path):
    venv, _ = training_venv
    cfg = write(tmp_path, "cfg.py", mutate(COLOCATED_ASYNC, CONFIG_WITH_BOTH))
    r = preflight.run(
        preflight.Params(
            config=str(cfg), env=ENV, backend="lmdeploy", training_env=str(venv), probe_cluster=False, detail="full"
        ),
        ctx_for(venv.parent, tmp_path),
    )
    # the env has XTUNER_USE_LMDEPLOY=1 and the training environment has only sglang: a real blocker there
    (f,) = [b for b in r.blockers if b.id == "probe.backend_not_installed.lmdeploy"]
    assert str(venv) in f.evidence and f.stage == "trainer_init"
    # the launch command runs the training environment's interpreter (a word in the script, never run here)
    assert r.details["build_rl_command"]["command"].startswith(f"{venv}/bin/python -m xtuner.v1.train.cli.rl")


def test_preflight_reads_installed_classes_when_the_xtuner_has_v1(training_venv, tmp_path):
    """With a V1 XTuner in the training Python, inspect_config inside preflight uses its classes."""
    venv, _ = training_venv
    cfg = write(tmp_path, "cfg.py", mutate(COLOCATED_ASYNC, CONFIG_WITH_BOTH))
    r = preflight.run(
        preflight.Params(config=str(cfg), env=ENV, training_env=str(venv / "bin" / "python"), probe_cluster=False),
        ctx_for(venv.parent, tmp_path),
    )
    assert r.xtuner_classes.startswith("installed XTuner")
    titles = {b.title for b in r.blockers}
    assert "RolloutConfig has no field `max_retry_per_sample`" in titles
    assert "RolloutConfig has no field `new_knob`" not in titles
