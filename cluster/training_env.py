"""The training environment, read from its files: nothing in it is ever run or imported.

``training_env`` names the environment the run uses: its prefix directory (a venv or conda env — ``$VIRTUAL_ENV``
or ``$CONDA_PREFIX`` of the training shell), or, as a convenience, ``<prefix>/bin/python*``, which names its prefix
(the parent of ``bin/``, taken WITHOUT resolving the interpreter: a venv's ``bin/python`` links to the base Python).
A relative path is taken from the first allowed root, and the prefix must lie inside the allowed roots.

Every file is opened through :mod:`..core.files` (resolved inside the roots per file, regular files only, opened
non-blocking so a FIFO is refused at once, read up to a cap); directory listings are capped. What is read:

- the Python version (``pyvenv.cfg``, conda's ``conda-meta/python-X.Y.Z-*.json``, else ``lib/pythonX.Y``), venv
  or conda, and the site-packages directories (``lib/python*/site-packages|dist-packages``, ``Lib/site-packages``);
- packages: the ``Name``/``Version`` headers of ``*.dist-info/METADATA`` or ``*.egg-info/PKG-INFO``, and module
  presence by name (``<name>/``, ``<name>.py``, ``<name>*.so``) in site-packages and in the directories ``.pth``
  path lines add; a ``.pth`` ``import`` line is never run;
- XTuner: where it is — in site-packages, or an editable install found from ``.pth`` path lines, ``*.egg-link`` or
  setuptools' ``__editable___*_finder.py`` ``MAPPING`` (parsed with ``ast.literal_eval``) — whether it holds the V1
  RL files, PEP 610 ``direct_url.json``, and its git commit from the checkout's ``.git`` files. A location outside
  the allowed roots is reported as such and not read.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core import MAX_PATH_CHARS, PathPolicy, ToolInputError, guarded_dir, guarded_file, read_guarded, try_read_guarded
from ..core.files import refusal
from ..core.limits import CallLimits
from .interpreter import PythonEnv, XtunerInstall
from .probe_child import V1_RL_FILES, git_commit

#: Names ``<prefix>/bin/<name>`` may have to name its environment (python, python3, python3.11, python.exe).
INTERPRETER_NAME = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
MAX_DIR_ENTRIES = 20_000
MAX_PTH_FILES = 200
MAX_PTH_LINES = 2000  # path lines of all .pth files together
MAX_NOTES = 20
HEADER_PREFIX = 64 * 1024  # METADATA / PKG-INFO: Name and Version are at the top
SMALL_FILE = 256 * 1024  # pyvenv.cfg, .pth, .egg-link, direct_url.json, an editable finder
PackageSpec = tuple[str, tuple[str, ...], str | None]


@dataclass
class FoundPackage:
    """One package as read from the files: its distribution's version and whether its module is there."""

    name: str
    version: str | None = None
    distribution: str | None = None
    module_found: bool | None = None


@dataclass
class EnvReading:
    """What the files of one environment say."""

    python: PythonEnv
    packages: list[FoundPackage]
    xtuner: XtunerInstall | None
    search_paths: list[str]  # site-packages and .pth directories inside the roots (what an interpreter would search)


@dataclass
class _Site:
    """The site-packages directories and what points elsewhere from them."""

    dirs: list[Path] = field(default_factory=list)
    listing: dict[Path, list[os.DirEntry[str]]] = field(default_factory=dict)
    path_dirs: list[tuple[Path, str]] = field(default_factory=list)  # (.pth path line directory, the .pth name)
    outside: list[tuple[Path, str]] = field(default_factory=list)  # path lines leading outside the roots
    mapping: dict[str, tuple[str, str]] = field(default_factory=dict)  # module -> (path, finder file)
    egg_links: dict[str, str] = field(default_factory=dict)  # normalised project name -> directory
    import_lines: int = 0
    path_lines: int = 0


# ---- naming the environment -------------------------------------------------------------------------------------


def named_dir(raw: str, paths: PathPolicy) -> Path:
    """The directory ``raw`` names (``<prefix>/bin/python*`` names ``<prefix>``), resolved and inside the roots."""
    given: str | Path = raw
    if raw and "\x00" not in raw:
        path = Path(os.path.expanduser(raw))
        path = Path(os.path.normpath(path if path.is_absolute() else paths.roots[0] / path))
        if INTERPRETER_NAME.match(path.name) and path.parent.name in ("bin", "Scripts"):
            path = path.parent.parent
        given = path
    try:
        return paths.check(given, kind="dir", what="training_env")
    except ToolInputError as exc:
        if exc.code == "path_outside_roots":
            real = os.path.realpath(given)
            raise ToolInputError(
                "path_outside_roots",
                f"training_env {raw!r} is {real}, outside the allowed roots; nothing in it was read",
                f"Start the server with --allow-root {real} (or add it to XTUNER_RL_MCP_ALLOW_ROOTS).",
                allowed_roots=paths.describe(),
            ) from None
        if exc.code == "path_not_dir":
            raise ToolInputError(
                "training_env_not_prefix",
                f"training_env {raw!r} is a file, not an environment",
                "Pass the environment's prefix directory ($VIRTUAL_ENV or $CONDA_PREFIX in the training shell) "
                "or <prefix>/bin/python.",
            ) from None
        raise


def locate(raw: str, paths: PathPolicy) -> Path:
    """The prefix of the venv or conda environment ``raw`` names; a ToolInputError when it is none."""
    prefix = named_dir(raw, paths)
    if not is_environment(prefix, paths):
        raise ToolInputError(
            "training_env_not_python",
            f"training_env {raw!r} has no pyvenv.cfg, conda-meta/ or lib/python*/site-packages: not a Python "
            "environment",
            "Pass the environment's prefix ($VIRTUAL_ENV or $CONDA_PREFIX in the training shell) or its bin/python.",
        )
    return prefix


def is_environment(prefix: Path, paths: PathPolicy) -> bool:
    return (
        os.path.lexists(prefix / "pyvenv.cfg")
        or guarded_dir(paths, prefix / "conda-meta") is not None
        or bool(_site_dirs(prefix, paths, []))
    )


# ---- reading it -------------------------------------------------------------------------------------------------


def read_environment(prefix: Path, paths: PathPolicy, spec: list[PackageSpec], limits: CallLimits) -> EnvReading:
    """Python version, packages of ``spec`` and the XTuner installation of the environment at ``prefix``."""
    notes: list[str] = []
    cfg = _pyvenv_cfg(prefix, paths, notes)
    site = _Site(dirs=_site_dirs(prefix, paths, notes))
    for d in site.dirs:
        limits.check()
        site.listing[d] = _list(d, notes)
    _read_pointers(site, paths, notes, limits)
    if site.import_lines:
        notes.append(f"{site.import_lines} .pth import line(s) found and not run")
    if site.outside:
        notes.append(f"{len(site.outside)} .pth path line(s) lead outside the allowed roots: not read")
    if cfg.get("include-system-site-packages", "").lower() == "true":
        notes.append(f"it also sees the site-packages of its base Python ({cfg.get('home', '?')}), not read")
    dist_dirs = _dist_dirs(site)
    found = []
    for name, dists, module in spec:
        limits.check()
        found.append(_package(name, dists, module, site, dist_dirs, paths, notes))
    xtuner = None
    if any(name == "xtuner" for name, _, _ in spec):
        xtuner = _xtuner(site, dist_dirs, paths, notes)
    scripts = next((d for d in (prefix / "bin", prefix / "Scripts") if guarded_dir(paths, d) is not None), None)
    python = PythonEnv(
        target="training",
        learned_from="read",
        executable=str(_interpreter_word(prefix)),
        python_version=_python_version(prefix, cfg, site.dirs, paths, notes),
        prefix=str(prefix),
        is_venv=os.path.lexists(prefix / "pyvenv.cfg"),
        is_conda=guarded_dir(paths, prefix / "conda-meta") is not None,
        scripts_dir=str(scripts or ""),
        site_packages=[str(d) for d in site.dirs],
        notes=notes[:MAX_NOTES],
    )
    search = [str(d) for d in site.dirs] + [str(d) for d, _ in site.path_dirs]
    return EnvReading(python=python, packages=found, xtuner=xtuner, search_paths=list(dict.fromkeys(search)))


def _interpreter_word(prefix: Path) -> Path:
    """How the training shell names its interpreter: ``<prefix>/bin/python`` (not resolved)."""
    for candidate in (prefix / "bin" / "python", prefix / "bin" / "python3", prefix / "Scripts" / "python.exe"):
        if os.path.lexists(candidate):
            return candidate
    return prefix / "bin" / "python"


def _list(directory: Path, notes: list[str]) -> list[os.DirEntry[str]]:
    out: list[os.DirEntry[str]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if len(out) >= MAX_DIR_ENTRIES:
                    notes.append(f"{directory} has more than {MAX_DIR_ENTRIES:,} entries; the rest were not read")
                    break
                out.append(entry)
    except OSError as exc:
        notes.append(f"{directory} could not be listed: {exc.strerror}")
    return out


def _text(paths: PathPolicy, path: Path, limit: int, notes: list[str]) -> str | None:
    """A file's first ``limit`` bytes as text, through the guarded opener; None (and a note) when refused."""
    if not os.path.lexists(path):
        return None
    try:
        data = read_guarded(paths, path, what="file", limit=limit, truncate=True)
    except ToolInputError as exc:
        notes.append(f"{path} {refusal(exc)}: not read")
        return None
    return data.decode("utf-8", errors="replace")


def _clean(value: str, limit: int = 100) -> str:
    """A value from an untrusted file, fit to report: printable, one line, short."""
    return "".join(ch for ch in value.strip() if ch.isprintable())[:limit]


def _pyvenv_cfg(prefix: Path, paths: PathPolicy, notes: list[str]) -> dict[str, str]:
    if not os.path.lexists(prefix / "pyvenv.cfg"):
        return {}
    text = _text(paths, prefix / "pyvenv.cfg", SMALL_FILE, notes) or ""
    out: dict[str, str] = {}
    for line in text.splitlines()[:200]:
        key, sep, value = line.partition("=")
        if sep:
            out.setdefault(key.strip().lower(), _clean(value, 4096))
    return out


def _python_version(
    prefix: Path, cfg: dict[str, str], site_dirs: list[Path], paths: PathPolicy, notes: list[str]
) -> str:
    """X.Y.Z from pyvenv.cfg or conda-meta, else X.Y from the lib/pythonX.Y directory."""
    for key in ("version", "version_info"):
        m = re.match(r"(\d+\.\d+(\.\d+)?)", cfg.get(key, ""))
        if m:
            return m.group(1)
    meta = guarded_dir(paths, prefix / "conda-meta")
    if meta is not None:
        for entry in _list(meta, notes):
            m = re.match(r"^python-(\d+\.\d+\.\d+)-.*\.json$", entry.name)
            if m:
                return m.group(1)
    for d in site_dirs:
        m = re.match(r"^python(\d+\.\d+)t?$", d.parent.name)
        if m:
            return m.group(1)
    return ""


def _site_dirs(prefix: Path, paths: PathPolicy, notes: list[str]) -> list[Path]:
    """``lib/python*/site-packages`` and ``dist-packages`` (lib64 too), ``Lib/site-packages``; resolved, unique."""
    found: list[Path] = []
    for lib_name in ("lib", "lib64"):
        lib = guarded_dir(paths, prefix / lib_name)
        if lib is None:
            continue
        versions = sorted(e.name for e in _list(lib, notes) if re.match(r"^python\d+\.\d+t?$", e.name))
        for version in versions:
            for leaf in ("site-packages", "dist-packages"):
                d = guarded_dir(paths, lib / version / leaf)
                if d is not None and d not in found:
                    found.append(d)
    windows = guarded_dir(paths, prefix / "Lib" / "site-packages")
    if windows is not None and windows not in found:
        found.append(windows)
    return found


def _read_pointers(site: _Site, paths: PathPolicy, notes: list[str], limits: CallLimits) -> None:
    """``.pth`` path lines, ``*.egg-link`` files and editable finders' ``MAPPING``; read as text, never run."""
    read = 0
    for d in list(site.dirs):
        for entry in sorted(site.listing[d], key=lambda e: e.name):
            name = entry.name
            is_pth, is_link = name.endswith(".pth"), name.endswith(".egg-link")
            is_finder = name.startswith("__editable___") and name.endswith("_finder.py")
            if not (is_pth or is_link or is_finder):
                continue
            if read >= MAX_PTH_FILES:
                notes.append(f"more than {MAX_PTH_FILES} .pth/.egg-link/finder files; the rest were not read")
                return
            read += 1
            limits.check()
            text = _text(paths, d / name, SMALL_FILE, notes)
            if text is None:
                continue
            if is_pth:
                _pth_lines(site, d, name, text, paths)
            elif is_link:
                first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
                if first:
                    site.egg_links[_normal(name[: -len(".egg-link")])] = os.path.join(d, first)
            else:
                for module, target in _finder_mapping(text).items():
                    site.mapping.setdefault(module, (target, name))
    for directory, _ in site.path_dirs:
        site.listing.setdefault(directory, _list(directory, notes))


def _pth_lines(site: _Site, d: Path, name: str, text: str, paths: PathPolicy) -> None:
    """What ``site.addsitedir`` would add: existing directories; ``import`` lines are counted, never run."""
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("import ", "import\t")):
            site.import_lines += 1
            continue
        site.path_lines += 1
        if site.path_lines > MAX_PTH_LINES:
            return
        if not _plain_path(line):
            continue
        target = Path(os.path.normpath(os.path.join(d, line)))
        real = Path(os.path.realpath(target))
        if not paths.contains(real):
            site.outside.append((target, name))
        else:
            inside = guarded_dir(paths, real)
            if inside is not None and all(inside != p for p, _ in site.path_dirs) and inside not in site.dirs:
                site.path_dirs.append((inside, name))


def _finder_mapping(text: str) -> dict[str, str]:
    """The ``MAPPING`` literal of a setuptools editable finder (parsed, never imported)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    for node in module.body:
        assigned: ast.expr | None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, assigned = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, assigned = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "MAPPING" and assigned is not None:
            try:
                value = ast.literal_eval(assigned)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return {}
            if isinstance(value, dict):
                return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
    return {}


def _plain_path(text: str) -> bool:
    """Text that can name a file at all (no NUL, not overlong); anything else read from a file is skipped."""
    return "\x00" not in text and len(text) <= MAX_PATH_CHARS


def _normal(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 503, underscores)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_dirs(site: _Site) -> dict[str, tuple[Path, str]]:
    """Normalised distribution name -> (directory, ``*.dist-info``/``*.egg-info`` entry); first on the path wins."""
    out: dict[str, tuple[Path, str]] = {}
    for d in [*site.dirs, *(p for p, _ in site.path_dirs)]:
        for entry in site.listing.get(d, []):
            stem, dot, suffix = entry.name.rpartition(".")
            if dot and suffix in ("dist-info", "egg-info"):
                out.setdefault(_normal(stem.split("-", 1)[0]), (d, entry.name))
    return out


def _package(
    name: str,
    dists: tuple[str, ...],
    module: str | None,
    site: _Site,
    dist_dirs: dict[str, tuple[Path, str]],
    paths: PathPolicy,
    notes: list[str],
) -> FoundPackage:
    out = FoundPackage(name=name)
    for dist in dists:
        hit = dist_dirs.get(_normal(dist))
        if hit is None:
            continue
        d, entry = hit
        out.distribution = dist
        out.version = _metadata_version(d, entry, paths, notes)
        break
    if module:
        out.module_found = _module_present(module, site)
    return out


def _metadata_version(d: Path, entry: str, paths: PathPolicy, notes: list[str]) -> str | None:
    """The Version header of the metadata file (a capped prefix), else the version in the directory name."""
    meta = d / entry / ("METADATA" if entry.endswith(".dist-info") else "PKG-INFO")
    if entry.endswith(".egg-info") and guarded_file(paths, d / entry) is not None:
        meta = d / entry  # a single-file egg-info is the PKG-INFO itself
    text = _text(paths, meta, HEADER_PREFIX, notes) or ""
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "version" and _clean(value):
            return _clean(value)
    parts = entry.rpartition(".")[0].split("-")
    return _clean(parts[1]) if len(parts) > 1 and parts[1] else None


def _module_present(module: str, site: _Site) -> bool:
    """A top-level module by its files: ``<m>/`` (package or namespace), ``<m>.py``, ``<m>*.so``/``.pyd``."""
    if module in site.mapping:
        return True
    for d in [*site.dirs, *(p for p, _ in site.path_dirs)]:
        for entry in site.listing.get(d, []):
            n = entry.name
            if n == module and (entry.is_dir(follow_symlinks=False) or entry.is_symlink()):
                return True
            if n == f"{module}.py" or (n.startswith(f"{module}.") and n.endswith((".so", ".pyd"))):
                return True
    return False


# ---- XTuner ----------------------------------------------------------------------------------------------------


def _xtuner(
    site: _Site, dist_dirs: dict[str, tuple[Path, str]], paths: PathPolicy, notes: list[str]
) -> XtunerInstall | None:
    """Where the environment's xtuner is, in import order: site-packages, .pth lines, an editable finder, egg-link."""
    url = _direct_url(dist_dirs.get("xtuner"), paths, notes)
    editable = bool((url.get("dir_info") or {}).get("editable"))
    for d in site.dirs:
        if any(e.name == "xtuner" and e.is_dir() for e in site.listing.get(d, [])):
            return describe_xtuner(d / "xtuner", f"site-packages {d}", editable, url, paths, notes)
    for d, pth in site.path_dirs:
        if any(e.name == "xtuner" and e.is_dir() for e in site.listing.get(d, [])):
            kind = editable or pth.startswith("__editable__")
            return describe_xtuner(d / "xtuner", f".pth line in {pth}", kind, url, paths, notes)
    if "xtuner" in site.mapping:
        target, finder = site.mapping["xtuner"]
        return describe_xtuner(Path(target), f"editable finder {finder}", True, url, paths, notes)
    for d, pth in site.outside:
        if "xtuner" in pth.lower():
            return describe_xtuner(d / "xtuner", f".pth line in {pth}", True, url, paths, notes)
    if "xtuner" in site.egg_links:
        return describe_xtuner(Path(site.egg_links["xtuner"]) / "xtuner", "xtuner.egg-link", True, url, paths, notes)
    return None


def _direct_url(hit: tuple[Path, str] | None, paths: PathPolicy, notes: list[str]) -> dict:
    """PEP 610 ``direct_url.json`` of a distribution, only its well-typed parts."""
    if hit is None or not hit[1].endswith(".dist-info"):
        return {}
    path = hit[0] / hit[1] / "direct_url.json"
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(_text(paths, path, SMALL_FILE, notes) or "{}")
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict = {}
    if isinstance(data.get("url"), str):
        out["url"] = _clean(data["url"], 2000)
    dir_info, vcs = data.get("dir_info"), data.get("vcs_info")
    if isinstance(dir_info, dict) and isinstance(dir_info.get("editable"), bool):
        out["dir_info"] = {"editable": dir_info["editable"]}
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str) and _is_commit(vcs["commit_id"]):
        out["vcs_info"] = {"commit_id": vcs["commit_id"]}
    return out


def _is_commit(value: str | None) -> bool:
    return bool(value and re.fullmatch(r"[0-9a-f]{7,64}", value))


def describe_xtuner(
    location: Path, found_by: str, editable: bool, url: dict, paths: PathPolicy, notes: list[str]
) -> XtunerInstall | None:
    """The V1 RL files and git commit of the xtuner package at ``location``, read inside the roots only."""
    if not (location.is_absolute() and _plain_path(str(location))):
        notes.append(f"xtuner is recorded at an unusable path ({found_by}); not read")
        return None
    real = Path(os.path.realpath(location))
    vcs_commit = (url.get("vcs_info") or {}).get("commit_id")
    kind = "editable" if editable else ("site_packages" if found_by.startswith("site-packages") else "source_on_path")
    base = XtunerInstall(
        location=str(location),
        v1_rl=None,
        install_kind=kind,
        found_by=found_by,
        source_url=url.get("url"),
        git_commit=vcs_commit,
        commit_from="pip_vcs_url" if vcs_commit else None,
    )
    if not paths.contains(real):
        if paths.contains(Path(os.path.abspath(location))):
            notes.append(f"xtuner at {location} links outside the allowed roots: not read")
        else:
            notes.append(
                f"xtuner found at {location}, outside the allowed roots: not read; add --allow-root {location.parent}"
            )
        return base.model_copy(update={"outside_roots": True})
    if guarded_dir(paths, real) is None:
        notes.append(f"xtuner is recorded at {location} ({found_by}), which is not a directory")
        return base
    files = {rel: guarded_file(paths, real / rel) is not None for rel in V1_RL_FILES}
    commit, ref = commit_of(real.parent, paths)
    update: dict = {"location": str(real), "v1_rl": all(files.values()), "v1_rl_files": files}
    if commit is not None:
        update.update(git_commit=commit, git_ref=ref, commit_from="git_checkout")
    return base.model_copy(update=update)


def commit_of(checkout: Path, paths: PathPolicy) -> tuple[str | None, str | None]:
    """(commit, ref) of the git checkout around ``checkout``, its ``.git`` files read through the guarded opener."""

    def read(path: str, limit: int) -> str | None:
        data = try_read_guarded(paths, path, what="git file", limit=limit)
        return data.decode("utf-8", errors="replace").strip() if data is not None else None

    commit, ref = git_commit(str(checkout), read=read, is_dir=lambda p: guarded_dir(paths, p) is not None)
    if not _is_commit(commit):
        return None, None
    return commit, (_clean(ref, 200) if ref else None)


# ---- for inspect_config -----------------------------------------------------------------------------------------


def xtuner_source(raw: str, paths: PathPolicy, limits: CallLimits) -> tuple[Path, str | None]:
    """The xtuner package to read config classes from, and its commit: ``raw`` is an XTuner checkout (holding
    ``xtuner/v1/``), the xtuner package directory itself, or an environment (its installed xtuner)."""
    directory = named_dir(raw, paths)
    for candidate in (directory / "xtuner", directory):
        package = guarded_dir(paths, candidate)
        if (
            package is not None
            and guarded_dir(paths, package / "v1") is not None
            and guarded_file(paths, package / "__init__.py") is not None
        ):
            return package, commit_of(package.parent, paths)[0]
    if not is_environment(directory, paths):
        raise ToolInputError(
            "xtuner_not_found",
            f"training_env {raw!r} is neither a Python environment nor an XTuner checkout (a directory holding "
            "xtuner/v1/)",
            "Pass the training environment's prefix ($VIRTUAL_ENV / $CONDA_PREFIX) or the directory you cloned "
            "XTuner into.",
        )
    reading = read_environment(directory, paths, [("xtuner", ("xtuner",), "xtuner")], limits)
    xt = reading.xtuner
    if xt is None:
        raise ToolInputError(
            "xtuner_not_found",
            f"the environment {directory} has no xtuner",
            "Install XTuner V1 from source there (git clone ... && pip install -e .), or pass the XTuner checkout.",
        )
    if xt.outside_roots:
        raise ToolInputError(
            "xtuner_outside_roots",
            f"the xtuner of {directory} is at {xt.location}, outside the allowed roots: not read",
            f"Start the server with --allow-root {Path(xt.location).parent}, or pass a checkout inside the roots.",
        )
    return Path(xt.location), xt.git_commit
