"""What one Python environment has installed for XTuner RL, found without importing anything heavy.

This module is plain standard library and runs in two ways: imported by the server to look at its own Python, and
sent as source text (``python -I -c``) to the training environment's interpreter, which may be another Python
version and never has this package. It must therefore stay self-contained, Python 3.8-compatible, and free of
imports beyond the standard library. Packages are found through their distribution metadata and module specs
(``importlib.util.find_spec`` of a top-level name locates it without executing it); the XTuner installation is
described from its files: where it is, whether it holds the V1 RL tree, and its git commit when it is a checkout.
"""

import importlib.metadata
import importlib.util
import json
import os
import sys

#: Files whose presence means "this xtuner holds V1 RL" (``xtuner.__version__`` is 0.2.0 with or without them).
V1_RL_FILES = ("v1/train/cli/rl.py", "v1/train/rl_trainer.py", "v1/rl/rollout/worker.py")
MAX_GIT_DEPTH = 4


def _dist_version(names):
    for name in names:
        try:
            return importlib.metadata.version(name), name
        except Exception:  # not installed, or broken metadata: either way not this name
            continue
    return None, None


def _module_location(module):
    """(found, package directory) for a top-level module, located but not executed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False, None
    if spec is None:
        return False, None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return True, locations[0]
    return True, os.path.dirname(spec.origin) if spec.origin else None


def _read(path, limit=4096):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit).strip()
    except OSError:
        return None


def _git_dir(start):
    """The .git directory of the checkout holding ``start`` (a worktree's gitdir is followed), else None."""
    here = os.path.abspath(start)
    for _ in range(MAX_GIT_DEPTH):
        candidate = os.path.join(here, ".git")
        if os.path.isdir(candidate):
            return candidate
        if os.path.isfile(candidate):
            text = _read(candidate) or ""
            if text.startswith("gitdir:"):
                target = text[len("gitdir:") :].strip()
                return os.path.normpath(os.path.join(here, target))
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return None


def git_commit(start):
    """(commit, ref) of the checkout around ``start``, read from its files (no git binary); (None, None) if none."""
    gd = _git_dir(start)
    if gd is None:
        return None, None
    head = _read(os.path.join(gd, "HEAD"))
    if not head:
        return None, None
    if not head.startswith("ref:"):
        return head[:40], None
    ref = head[4:].strip()
    common = _read(os.path.join(gd, "commondir"))
    roots = [gd] + ([os.path.normpath(os.path.join(gd, common))] if common else [])
    for root in roots:
        value = _read(os.path.join(root, *ref.split("/")))
        if value:
            return value[:40], ref
        packed = _read(os.path.join(root, "packed-refs"), limit=4 * 1024 * 1024) or ""
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
    """Where xtuner is, whether it holds V1 RL, how it was installed and its git commit when that is knowable."""
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
    """``spec``: {"packages": [[name, [dists], module or None], ...]} -> what this interpreter has."""
    items = []
    xtuner = None
    for name, dists, module in spec.get("packages", []):
        version, dist = _dist_version(dists)
        found, where = (None, None)
        if module:
            found, where = _module_location(module)
        if name == "xtuner" and found and where:
            xtuner = describe_xtuner(where)
        items.append({"name": name, "version": version, "distribution": dist, "module_found": found})
    prefix = sys.prefix
    return {
        "executable": sys.executable,
        "python_version": ".".join(str(v) for v in sys.version_info[:3]),
        "prefix": prefix,
        "is_venv": prefix != getattr(sys, "base_prefix", prefix),
        "is_conda": os.path.isdir(os.path.join(prefix, "conda-meta")),
        "scripts_dir": os.path.dirname(sys.executable),
        "packages": items,
        "xtuner": xtuner,
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(probe(json.loads(sys.stdin.read() or "{}"))))
