"""The user's own XTuner: its RL config classes read statically, and where it differs from the pinned commit.

Everything this server knows about XTuner was read at ``InternLM/xtuner@b934f46``; users run whatever they cloned.
Given an installation (the ``xtuner`` package directory of the training environment, found by
:mod:`.training_env`, or a checkout), :func:`load_installed` reads the files of the built-in class table from it with ``ast`` (never importing them) into
the same rows, and says which classes differ from ``b934f46``. :func:`annotate` then marks the findings that rest
on a differing place: a finding from a class row that changed says what changed (it was checked against the
installed class), and a hand-written rule whose source file is no longer byte-identical to ``b934f46`` is
downgraded from blocker to warning with a note to confirm it, instead of being asserted.

:func:`read_classes` builds the rows of ``xtuner_rules.classes`` from a tree's source text the same way they were
read from ``b934f46`` (a test reproduces the built-in table from the mirror with it).

Only the files named below are read, each at most 2 MiB, through the guarded opener (inside the allowed roots) and
only inside the installation's directory. A config field the installed classes lack but ``b934f46`` has gets both
fixes: remove it, or upgrade XTuner (with the ``path:line`` where ``b934f46`` defines it).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core import Finding, PathPolicy, ToolInputError, cap, guarded_file, read_guarded
from ..core.findings import XTUNER_SOURCE
from ..xtuner_rules import classes as xc

MAX_FILE_BYTES = 2 * 1024 * 1024
#: Findings whose rule is the class table itself (fields, extra, requiredness): with an installed table active they
#: were checked against the installed classes.
TABLE_IDS = ("config.positional_arguments", "config.unknown_field", "config.missing_required_field")
#: sha256 (first 16 hex digits) of every XTuner file the rules cite, at b934f46 (from the mirror; see the test).
PINNED_SHA: dict[str, str] = {
    "xtuner/v1/_writer/__init__.py": "71d8c132fbe9891a",
    "xtuner/v1/_writer/tb_writer.py": "2d9f02ade3f82bfb",
    "xtuner/v1/data_proto/rl_data.py": "2a2b8471a2fcc4d3",
    "xtuner/v1/datasets/config.py": "f799cd02692f7416",
    "xtuner/v1/datasets/dataloader.py": "05952d45243dbf7b",
    "xtuner/v1/datasets/jsonl.py": "0482bc3d46fd8dfa",
    "xtuner/v1/datasets/rl_tokenize_fn/qwen3_vl_tokenize_fn.py": "46fe57a9cc300343",
    "xtuner/v1/datasets/rl_tokenize_fn/text_tokenize_fn.py": "e58dc9e3dc8b8e0b",
    "xtuner/v1/loss/base_loss_ctx.py": "efea0ffdae2fce8d",
    "xtuner/v1/loss/ce_loss.py": "9cf6a597c19d684f",
    "xtuner/v1/model/__init__.py": "d46bb7d3d53bd6d1",
    "xtuner/v1/model/base.py": "1e042179b4c68f1d",
    "xtuner/v1/module/dispatcher/deepep.py": "187abb9175015c0a",
    "xtuner/v1/ops/__init__.py": "74ff8d83277177cc",
    "xtuner/v1/ops/flash_attn/__init__.py": "9ec007c91829d187",
    "xtuner/v1/rl/advantage/config.py": "1cf98f35995164d2",
    "xtuner/v1/rl/advantage/grpo.py": "83c2a80af7904e7c",
    "xtuner/v1/rl/agent_loop/__init__.py": "fff6e3c36f93dfeb",
    "xtuner/v1/rl/agent_loop/agent_loop.py": "a6f72b860081e7eb",
    "xtuner/v1/rl/agent_loop/gsm8k_with_tool.py": "2c241e8df2eedb17",
    "xtuner/v1/rl/agent_loop/single_turn_agent_loop.py": "1d369848283035df",
    "xtuner/v1/rl/agent_loop_manager/agent_loop_manager.py": "9bef3740945f91a4",
    "xtuner/v1/rl/agent_loop_manager/disagg_agent_loop_manager.py": "ac70343d4fb9a10b",
    "xtuner/v1/rl/agent_loop_manager/disagg_producer.py": "8ed92564f960da96",
    "xtuner/v1/rl/agent_loop_manager/produce_utils.py": "09027b5f8385291f",
    "xtuner/v1/rl/agent_loop_manager/producer.py": "ab3f59a8e57e841f",
    "xtuner/v1/rl/agent_loop_manager/sampler.py": "6fe382c3229d3d32",
    "xtuner/v1/rl/evaluator.py": "a4b32c044e20dae9",
    "xtuner/v1/rl/judger/compass_verifier_v2.py": "f0b8f28d40bff977",
    "xtuner/v1/rl/judger/composed.py": "9964f5fb036d6197",
    "xtuner/v1/rl/judger/dapo_math.py": "d793f0debacba60b",
    "xtuner/v1/rl/judger/factory.py": "5b6aa84aa57d344d",
    "xtuner/v1/rl/judger/geo3k.py": "f52b259115d6c166",
    "xtuner/v1/rl/judger/gsm8k.py": "d1800441647337ba",
    "xtuner/v1/rl/judger/native.py": "d7d9caf53e62b9b3",
    "xtuner/v1/rl/loss/base_loss.py": "3f8f37f5f1ad86e1",
    "xtuner/v1/rl/loss/grpo_loss.py": "4ee91ad08dc60d69",
    "xtuner/v1/rl/loss/loss_fn.py": "6b0555c209959321",
    "xtuner/v1/rl/replay_buffer.py": "d0434278cd803e6c",
    "xtuner/v1/rl/rollout/__init__.py": "39e540d355b7c8cf",
    "xtuner/v1/rl/rollout/lmdeploy.py": "d1e0b1845f93067f",
    "xtuner/v1/rl/rollout/sglang.py": "a4edc25ace4bc88d",
    "xtuner/v1/rl/rollout/vllm.py": "6704c0b2fa844a43",
    "xtuner/v1/rl/rollout/worker.py": "460a8a7b981398ce",
    "xtuner/v1/rl/trace/otel_utils.py": "d95fbe6bfa8a63e7",
    "xtuner/v1/rl/trace/runtime.py": "1b0f54e09e1d65fc",
    "xtuner/v1/rl/trainer/worker.py": "aa2bf9064f022f31",
    "xtuner/v1/rl/utils/ray_accelerator_worker.py": "562910d83788b492",
    "xtuner/v1/rl/utils/ray_cpu_worker.py": "8e3ce13347386a6e",
    "xtuner/v1/rl/utils/ray_utils.py": "bdef5eaf37c3c19b",
    "xtuner/v1/rl/weight_update/data.py": "fad6b29aa2772607",
    "xtuner/v1/train/cli/rl.py": "83ad8beb2a673681",
    "xtuner/v1/train/rl_trainer.py": "63b6884b87154e9b",
    "xtuner/v1/train/trainer.py": "90f9cb6284d81c06",
    "xtuner/v1/utils/config.py": "eaea70344cb53b9c",
    "xtuner/v1/utils/convert_geometry3k.py": "4abd44d854472e8e",
    "xtuner/v1/utils/convert_gsm8k.py": "38d59c4aa54be0a8",
    "xtuner/v1/utils/env_check.py": "d323a0e52b3caf61",
    "xtuner/v1/utils/loader.py": "6dd652ad98541d08",
    "xtuner/v1/utils/misc.py": "920ec9a5ff95005e",
}


class XtunerClasses(BaseModel):
    """Which XTuner the config was checked against."""

    used: Literal["installed", "builtin"] = Field(
        description="installed: read from the user's XTuner; builtin: b934f46"
    )
    label: str = Field(description="What was used, in words")
    location: str | None = Field(default=None, description="Directory of the xtuner package read")
    git_commit: str | None = None
    classes_read: int = 0
    classes_not_found: list[str] = Field(
        default_factory=list, description="Not at their b934f46 file (built-in rows used)"
    )
    differences: dict[str, list[str]] = Field(
        default_factory=dict, description="Per class, how the installed class differs from b934f46"
    )
    differences_omitted: int = 0
    files_differing: list[str] = Field(
        default_factory=list, description="Cited XTuner files differing from b934f46 (rules from them unsure)"
    )


BUILTIN = XtunerClasses(used="builtin", label=f"built-in table of {XTUNER_SOURCE}")


def _reader(package: Path, paths: PathPolicy) -> Callable[[str], str | None]:
    """``read('xtuner/...')``: that file under the package directory, through the guarded opener, else None."""

    def read(rel: str) -> str | None:
        if not rel.startswith("xtuner/"):
            return None
        target = guarded_file(paths, package / rel[len("xtuner/") :], what="XTuner file")
        if target is None or package not in target.parents:
            return None
        try:
            return read_guarded(paths, target, what="XTuner file", limit=MAX_FILE_BYTES).decode("utf-8", "replace")
        except ToolInputError:  # larger than any XTuner source file, or changed while read
            return None

    return read


def load_installed(
    package: Path, commit: str | None, paths: PathPolicy, limit: int = 50
) -> tuple[dict[str, xc.C], XtunerClasses]:
    """The class rows of the installation at ``package`` (resolved, inside ``paths``) and how it differs from
    b934f46."""
    read = _reader(package, paths)
    tree = read_classes(read)
    diffs = diff_tables(xc.CLASSES, tree.rows)
    differing = []
    for rel, sha in PINNED_SHA.items():
        text = read(rel)
        if text is not None and hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] != sha:
            differing.append(rel)
    info = XtunerClasses(
        used="installed",
        label=f"installed XTuner at {package}" + (f" (commit {commit[:12]})" if commit else ""),
        location=str(package),
        git_commit=commit,
        classes_read=len(tree.read),
        classes_not_found=tree.not_found,
    )
    rows = sorted(diffs.items())
    shown, info.differences_omitted = cap(rows, limit)
    info.differences = dict(shown)
    info.files_differing = differing  # at most len(PINNED_SHA)
    if not tree.read:
        return xc.CLASSES, info.model_copy(
            update={"used": "builtin", "label": f"{BUILTIN.label} (no class found in {package})"}
        )
    return tree.rows, info


def annotate(findings: list[Finding], info: XtunerClasses, rows: dict[str, xc.C]) -> list[Finding]:
    """Say, on each finding that rests on a place where the installation differs from b934f46, that it does."""
    if info.used != "installed":
        return findings
    differing = set(info.files_differing)
    spans = [(c.path, c.line, c.end_line or c.line, c.name) for c in rows.values() if c.name in info.differences]
    out = []
    for f in findings:
        path, _, line = (f.source or "").partition(":")
        first = int(line.split("-")[0]) if line.split("-")[0].isdigit() else None
        cls = next((n for p, a, b, n in spans if p == path and first is not None and a <= first <= b), None)
        if f.id == "config.unknown_field":
            f = _offer_upgrade(f)
        if f.id in TABLE_IDS or cls is not None:
            if cls is not None:
                note = (
                    f" [Checked against the installed {cls}, which differs from b934f46: "
                    + "; ".join(info.differences[cls][:5])
                    + ".]"
                )
                f = f.model_copy(update={"evidence": f.evidence + note})
        elif path in differing:
            note = (
                f" [Rule read from {XTUNER_SOURCE}; the installed {path} differs from it, so confirm this against "
                "your code" + (" — not asserted as a blocker" if f.severity == "blocker" else "") + ".]"
            )
            f = f.model_copy(
                update={"evidence": f.evidence + note, "severity": "warning" if f.severity == "blocker" else f.severity}
            )
        out.append(f)
    return out


_UNKNOWN_FIELD = re.compile(r"^(\w+) has no field `(\w+)`")


def _offer_upgrade(f: Finding) -> Finding:
    """A field the installed XTuner lacks but b934f46 has: removing it is one fix, upgrading XTuner the other."""
    m = _UNKNOWN_FIELD.match(f.title)
    if m is None:
        return f
    cls, name = m.groups()
    with xc.use_table(xc.CLASSES):
        owner = xc.field_owner(cls, name)
    if owner is None:
        return f
    line = next(x.line for x in owner.fields if x.name == name)
    fix = (
        f"Either remove `{name}=` (your installed XTuner's {cls} has no such field), or upgrade XTuner to a version "
        f"that has it ({XTUNER_SOURCE} has it at {owner.path}:{line}): git pull in your XTuner checkout, then "
        "pip install -e ."
    )
    return f.model_copy(update={"fix": fix})


# --------------------------------------------------------------------------------------------------------
# Reading the same rows from another XTuner tree
# --------------------------------------------------------------------------------------------------------


@dataclass
class TreeRead:
    """Rows read from a tree: every built-in class found at its path, the built-in row kept for the others."""

    rows: dict[str, xc.C]
    read: list[str] = field(default_factory=list)  # classes read from the tree
    not_found: list[str] = field(default_factory=list)  # classes whose file or definition was not there
    files_read: int = 0


def read_classes(read: Callable[[str], str | None]) -> TreeRead:
    """Build the table from a tree: ``read(path)`` returns a file's text (``path`` as in the rows), or None."""
    sources: dict[str, ast.Module | None] = {}
    out = TreeRead(rows={})
    for c in xc.CLASSES.values():
        if c.path not in sources:
            text = read(c.path)
            try:
                sources[c.path] = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError):
                sources[c.path] = None
            out.files_read += text is not None
        module = sources[c.path]
        node = _class_node(module, c.name) if module is not None else None
        if node is None:
            out.rows[c.name] = c
            out.not_found.append(c.name)
            continue
        out.rows[c.name] = _row(node, c.path)
        out.read.append(c.name)
    return out


def _class_node(module: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _row(node: ast.ClassDef, path: str) -> xc.C:
    bases = tuple(b for b in (ast.unparse(x).rsplit(".", 1)[-1] for x in node.bases) if b in xc.CLASSES)
    extra: str | None = None
    fields: list[xc.F] = []
    for st in node.body:
        if isinstance(st, ast.Assign) and any(getattr(t, "id", "") == "model_config" for t in st.targets):
            for kw in getattr(st.value, "keywords", []):
                if kw.arg == "extra" and isinstance(kw.value, ast.Constant):
                    extra = str(kw.value.value)
        elif (
            isinstance(st, ast.AnnAssign)
            and isinstance(st.target, ast.Name)
            and st.target.id != "model_config"
            and not ast.unparse(st.annotation).startswith(("ClassVar", "typing.ClassVar"))
        ):
            fields.append(_field(st, st.target.id))
    return xc.C(node.name, path, node.lineno, bases, extra, tuple(fields), end_line=node.end_lineno)


def _field(st: ast.AnnAssign, name: str) -> xc.F:
    """The field ``name`` (the statement's target) with its annotation and default."""
    ann = st.annotation
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value).rsplit(".", 1)[-1] == "Annotated":
        inner = ann.slice
        ann = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner  # the type, not its metadata
    line, annotation = st.lineno, ast.unparse(ann)
    value = st.value
    factory = False
    if isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "Field":
        kws = {k.arg: k.value for k in value.keywords}
        factory = not value.args and "default" not in kws and "default_factory" in kws
        value = value.args[0] if value.args else kws.get("default", kws.get("default_factory"))
    if value is None or (isinstance(value, ast.Constant) and value.value is Ellipsis):
        return xc.F(name, line, annotation)
    if factory:
        factory_name = ast.unparse(value)
        if factory_name in ("dict", "list"):
            return xc.F(name, line, annotation, default={} if factory_name == "dict" else [])
        return xc.F(name, line, annotation, default_expr=f"{ast.unparse(value)}()")
    literal = _literal(value)
    if literal is not xc.MISSING:
        return xc.F(name, line, annotation, default=literal)
    return xc.F(name, line, annotation, default_expr=ast.unparse(value))


_ARITHMETIC = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.List, ast.Tuple, ast.Dict)


def _literal(node: ast.expr) -> Any:
    """The value of a constant expression (literals and arithmetic on them), else xc.MISSING; never runs names."""
    if not all(isinstance(n, (*_ARITHMETIC, ast.expr_context)) for n in ast.walk(node)):
        return xc.MISSING
    try:
        return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # constants only
    except Exception:  # e.g. 1 / 0: not a usable default
        return xc.MISSING


def diff_tables(base: dict[str, xc.C], other: dict[str, xc.C]) -> dict[str, list[str]]:
    """Per class, how ``other`` differs from ``base`` in what the rules use: fields, requiredness, extra, bases."""
    out: dict[str, list[str]] = {}
    for name, b in base.items():
        o = other.get(name)
        if o is None or o is b:
            continue
        notes: list[str] = []
        bf, of = {f.name: f for f in b.fields}, {f.name: f for f in o.fields}
        notes += [f"field `{n}` added ({o.path}:{of[n].line})" for n in of if n not in bf]
        notes += [f"field `{n}` removed (b934f46 {b.path}:{bf[n].line})" for n in bf if n not in of]
        for n in bf.keys() & of.keys():
            if bf[n].required != of[n].required:
                notes.append(f"field `{n}` is {'required' if of[n].required else 'optional'} now")
            elif bf[n].type.replace(" ", "") != of[n].type.replace(" ", ""):
                notes.append(f"field `{n}` annotation {bf[n].type} -> {of[n].type}")
        if b.extra != o.extra:
            notes.append(f"model_config extra {b.extra!r} -> {o.extra!r}")
        if set(b.bases) != set(o.bases):
            notes.append(f"bases {', '.join(b.bases) or '-'} -> {', '.join(o.bases) or '-'}")
        if notes:
            out[name] = sorted(notes)
    return out
