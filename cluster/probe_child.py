"""What one Python environment has installed for XTuner RL, found without importing any of it.

This module is plain standard library and is used in two ways: imported by the server to look at its own Python,
and sent as source text (``python -I -S -c``) to a training interpreter the operator allowed, which may be another
Python version and never has this package. It must therefore stay self-contained, Python 3.8-compatible, and free
of imports beyond the standard library.

Packages are found through their distribution metadata and module specs (a top-level name is located, never
executed). Run in another interpreter, the request names the directories to search (``paths``: the environment's
site-packages, which ``-S`` left off ``sys.path``); they are searched explicitly and never put on ``sys.path``, so
nothing there can shadow a module this script uses. :func:`git_commit` reads a checkout's commit from its files
through a reader the caller passes (the server passes its guarded opener).
"""

import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys

#: Files whose presence means "this xtuner holds V1 RL" (``xtuner.__version__`` is 0.2.0 with or without them).
V1_RL_FILES = ("v1/train/cli/rl.py", "v1/train/rl_trainer.py", "v1/rl/rollout/worker.py")
MAX_GIT_DEPTH = 4


def _distribution(names, paths):
    """The first installed distribution among ``names`` (searched in ``paths``, else ``sys.path``), else None."""
    for name in names:
        for spelling in dict.fromkeys((name, name.replace("-", "_"))):
            try:
                if paths is None:
                    return importlib.metadata.distribution(spelling), name
                found = next(iter(importlib.metadata.Distribution.discover(name=spelling, path=paths)), None)
                if found is not None:
                    return found, name
            except Exception:  # not installed, or broken metadata: either way not this name
                continue
    return None, None


def _module_location(module, paths):
    """(found, package directory) for a top-level module, located but not executed."""
    try:
        if paths is None:
            spec = importlib.util.find_spec(module)
        else:
            spec = importlib.machinery.PathFinder.find_spec(module, paths)
    except (ImportError, ValueError):
        return False, None
    if spec is None:
        return False, None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return True, locations[0]
    return True, os.path.dirname(spec.origin) if spec.origin else None


def read_text(path, limit=4096):
    """A small text file's first ``limit`` characters, stripped; None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit).strip()
    except (OSError, ValueError):
        return None


def _git_dir(start, read, is_dir):
    """The .git directory of the checkout holding ``start`` (a worktree's gitdir is followed), else None."""
    here = os.path.abspath(start)
    for _ in range(MAX_GIT_DEPTH):
        candidate = os.path.join(here, ".git")
        if is_dir(candidate):
            return candidate
        text = read(candidate, 4096) or ""
        if text.startswith("gitdir:"):
            target = text[len("gitdir:") :].strip()
            return os.path.normpath(os.path.join(here, target))
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return None


def git_commit(start, read=read_text, is_dir=os.path.isdir):
    """(commit, ref) of the checkout around ``start``, read from its files (no git binary); (None, None) if none.

    ``read(path, limit)`` returns a file's stripped text or None; ``is_dir(path)`` says whether a directory exists.
    """
    gd = _git_dir(start, read, is_dir)
    if gd is None:
        return None, None
    head = read(os.path.join(gd, "HEAD"), 4096)
    if not head:
        return None, None
    if not head.startswith("ref:"):
        return head[:40], None
    ref = head[4:].strip()
    common = read(os.path.join(gd, "commondir"), 4096)
    roots = [gd] + ([os.path.normpath(os.path.join(gd, common))] if common else [])
    for root in roots:
        value = read(os.path.join(root, *ref.split("/")), 4096)
        if value:
            return value[:40], ref
        packed = read(os.path.join(root, "packed-refs"), 4 * 1024 * 1024) or ""
        for line in packed.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0][:40], ref
    return None, ref


def _direct_url():
    try:
        text = importlib.metadata.distribution("xtuner").read_text("direct_url.json")
    except Exception:  # no distribution, or no PEP 610 record
        return None
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def describe_xtuner(location):
    """Where this interpreter's xtuner is, whether it holds V1 RL, how it was installed and its git commit."""
    files = {rel: os.path.isfile(os.path.join(location, *rel.split("/"))) for rel in V1_RL_FILES}
    url = _direct_url() or {}
    editable = bool((url.get("dir_info") or {}).get("editable"))
    in_site = any(part in ("site-packages", "dist-packages") for part in location.replace("\\", "/").split("/"))
    commit, ref = git_commit(os.path.dirname(location))
    origin = "git_checkout" if commit else None
    if commit is None and (url.get("vcs_info") or {}).get("commit_id"):
        commit, origin = url["vcs_info"]["commit_id"], "pip_vcs_url"
    kind = "editable" if editable else ("site_packages" if in_site else "source_on_path")
    return {
        "location": location,
        "v1_rl": all(files.values()),
        "v1_rl_files": files,
        "install_kind": kind,
        "source_url": url.get("url"),
        "git_commit": commit,
        "git_ref": ref,
        "commit_from": origin,
    }


def probe(spec):
    """``spec``: {"packages": [[name, [dists], module or None], ...], "paths": [dirs] (optional)} -> what is there.

    Without ``paths`` this interpreter's own ``sys.path`` is searched and its xtuner described; with ``paths`` only
    those directories are searched and the xtuner is only located (the caller reads its files itself)."""
    paths = spec.get("paths")
    if paths is not None:
        paths = [p for p in paths if isinstance(p, str)]
    items = []
    xtuner_location = None
    for name, dists, module in spec.get("packages", []):
        dist, dist_name = _distribution(dists, paths)
        version = None
        if dist is not None:
            try:
                version = dist.version
            except Exception:  # metadata without a Version header
                version = None
        found, where = (None, None)
        if module:
            found, where = _module_location(module, paths)
        if name == "xtuner" and found and where:
            xtuner_location = where
        items.append({"name": name, "version": version, "distribution": dist_name, "module_found": found})
    prefix = sys.prefix
    out = {
        "executable": sys.executable,
        "python_version": ".".join(str(v) for v in sys.version_info[:3]),
        "prefix": prefix,
        "is_venv": prefix != getattr(sys, "base_prefix", prefix),
        "is_conda": os.path.isdir(os.path.join(prefix, "conda-meta")),
        "scripts_dir": os.path.dirname(sys.executable),
        "packages": items,
        "xtuner_location": xtuner_location,
    }
    if paths is None:
        out["xtuner"] = describe_xtuner(xtuner_location) if xtuner_location else None
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(probe(json.loads(sys.stdin.read() or "{}"))))
