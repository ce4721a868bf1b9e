"""An index of the messages XTuner's RL path can print, generated from the source (never imported).

``python tests/message_index.py --xtuner <checkout or bare repo> --commit b934f46
--out references/xtuner_messages.json`` parses every file of the RL path at that commit with :mod:`ast` and records
each ``raise X(...)``, ``assert cond, msg``, logger ``error``/``warning``/``exception``/``critical`` call and
``warnings.warn`` call: file, first and last line, the exception class (``AssertionError`` for an ``assert``, the
level for a log call), whether it sits in a pydantic validator or ``model_post_init`` (pydantic then prints
``Value error, <msg>`` / ``Assertion failed, <msg>``), and the message as a template.

Scope (``MESSAGE_SCOPE``): ``xtuner/v1/train/rl_trainer.py``, ``xtuner/v1/train/cli/rl.py``, everything under
``xtuner/v1/rl/``, the RL data path (``xtuner/v1/datasets/{jsonl,config,dataloader}.py``,
``xtuner/v1/datasets/rl_tokenize_fn/``, ``xtuner/v1/data_proto/rl_data.py``), the environment checks
(``xtuner/v1/utils/env_check.py``), and the shared helpers an RL run goes through and the failure-mode catalog
cites (config loading, model loading, ops, writers: ``SUPPORT_FILES``). Line counts are recorded for every text
file under ``LINE_COUNT_ROOTS`` so a ``path:line`` cited anywhere in the references can be checked without the
checkout.

Templates follow ``str.format`` syntax: literal text, ``{expr}`` for a value filled at run time (the expression's
source, braces inside it replaced by parentheses) and ``{{``/``}}`` for literal braces. f-strings, ``+``
concatenation, ``%`` and ``.format`` with literal format strings, a logger's ``%``-style arguments and a message
held in a local variable assigned in the same function are resolved; anything else becomes one placeholder.
The output is sorted and formatted the same way every time: re-running on the same commit gives the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

INDEX_PATH = Path(__file__).resolve().parent.parent / "references" / "xtuner_messages.json"
PINNED_COMMIT = "b934f46"

#: Path prefixes (a trailing "/" means a folder) whose Python files are indexed for messages.
MESSAGE_SCOPE: tuple[str, ...] = (
    "xtuner/v1/train/rl_trainer.py",
    "xtuner/v1/train/cli/rl.py",
    "xtuner/v1/rl/",
    "xtuner/v1/datasets/jsonl.py",
    "xtuner/v1/datasets/config.py",
    "xtuner/v1/datasets/dataloader.py",
    "xtuner/v1/datasets/rl_tokenize_fn/",
    "xtuner/v1/data_proto/rl_data.py",
    "xtuner/v1/utils/env_check.py",
)
#: Shared helpers outside the RL folders that an RL run calls and the catalog cites.
SUPPORT_FILES: tuple[str, ...] = (
    "xtuner/v1/utils/config.py",
    "xtuner/v1/utils/loader.py",
    "xtuner/v1/utils/misc.py",
    "xtuner/v1/model/__init__.py",
    "xtuner/v1/model/base.py",
    "xtuner/v1/ops/__init__.py",
    "xtuner/v1/ops/flash_attn/__init__.py",
    "xtuner/v1/module/dispatcher/deepep.py",
    "xtuner/v1/_writer/__init__.py",
    "xtuner/v1/_writer/tb_writer.py",
    "xtuner/v1/_writer/jsonl_writer.py",
)
#: Folders (and top-level files) whose text files get a line count.
LINE_COUNT_ROOTS: tuple[str, ...] = (
    "xtuner/v1/",
    "xtuner/model/",  # XTuner 0.x's model wrappers (its LoRA set-up), cited where a 0.x run differs
    "xtuner/__init__.py",
    # XTuner 0.x, cited where a fine-tuning failure reaches it: its reference QLoRA config (fp16 AMP, bitsandbytes
    # 4-bit base), the launcher's DeepSpeed precision choice, the DeepSpeed strategy, dataset filters, the merge tool
    "xtuner/configs/internlm/internlm2_chat_7b/internlm2_chat_7b_qlora_alpaca_e3.py",
    "xtuner/tools/train.py",
    "xtuner/tools/utils.py",
    "xtuner/engine/_strategy/deepspeed.py",
    "xtuner/dataset/huggingface.py",
    "xtuner/tools/model_converters/merge.py",
    "xtuner/version.py",
    "examples/",
    "recipe/",
    "docs/",
    "tests/resource/",
    "pyproject.toml",
)

_LOG_LEVELS = {
    "error": "error",
    "warning": "warning",
    "warn": "warning",
    "exception": "exception",
    "critical": "critical",
    "info": "info",
}
#: Shell launch scripts whose ``echo`` lines are indexed (their messages appear in run logs).
SHELL_SCOPE: tuple[str, ...] = ("examples/v1/scripts/run_rl.sh", "examples/v1/scripts/run_rl_submit.sh")
_ECHO = re.compile(r"""^\s*echo\s+(?:-e\s+)?(["'])(.*)\1\s*(?:[;&|>].*)?$""")
_SHELL_VAR = re.compile(r"\$\{(\w+)[^}]*\}|\$(\w+)|\$\(([^)]*)\)")
_VALIDATORS = {"field_validator", "model_validator", "validator", "root_validator"}
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifgexXo%]")
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


@dataclass(frozen=True, order=True)
class Message:
    """One place that raises, asserts or logs: where, what class or level, and the message template."""

    path: str
    line: int
    end_line: int
    kind: str  # "raise" | "assert" | "log" | "warn" | "echo" | "part" (a line a message is joined from)
    exception: str  # exception class, "AssertionError", the log level, the warning category, or "echo"
    template: str
    function: str = ""
    validator: bool = False  # in a validator / model_post_init, or a module function or property they use
    code: str = ""  # an assert without a message: its source line (what a traceback shows)


# ---------------------------------------------------------------------------------------------------------------
# Reading the source
# ---------------------------------------------------------------------------------------------------------------


class Source:
    """Files of an XTuner tree at one commit: a git checkout or bare repo (read through git), or a plain folder."""

    def __init__(self, root: Path, commit: str) -> None:
        self.root = root
        self.commit = commit
        self.git = _git(root, "rev-parse", "--git-dir") is not None
        self.resolved = (_git(root, "rev-parse", f"{commit}^{{commit}}") or "").strip() if self.git else commit
        if self.git and not self.resolved:
            raise SystemExit(f"commit {commit!r} not found in {root}")

    def names(self) -> list[str]:
        if self.git:
            out = _git(self.root, "ls-tree", "-r", "--name-only", self.resolved) or ""
            return sorted(out.splitlines())
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())

    def read(self, name: str) -> bytes:
        if self.git:
            return subprocess.run(
                ["git", "-C", str(self.root), "show", f"{self.resolved}:{name}"],
                capture_output=True,
                check=True,
                timeout=60,
            ).stdout
        return (self.root / name).read_bytes()


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def in_scope(name: str) -> bool:
    """True for a Python file whose messages the index records."""
    if not name.endswith(".py"):
        return False
    return name in SUPPORT_FILES or any(name == s or (s.endswith("/") and name.startswith(s)) for s in MESSAGE_SCOPE)


def line_count(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


# ---------------------------------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------------------------------


def _esc(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _hole(node: ast.AST) -> str:
    return "{" + ast.unparse(node).replace("{", "(").replace("}", ")") + "}"


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class _Templater:
    """Turns a message expression into a template, resolving local string variables of the enclosing function."""

    def __init__(self, scope: ast.AST | None, funcs: dict[str, ast.FunctionDef] | None = None) -> None:
        self.scope = scope
        self.funcs = funcs or {}

    def render(self, node: ast.AST, before: int, depth: int = 0) -> str:
        if depth > 4:
            return _hole(node)
        if (text := _literal(node)) is not None:
            return _esc(text)
        if isinstance(node, ast.JoinedStr):
            return "".join(
                _esc(v.value) if isinstance(v, ast.Constant) else _hole(v.value)  # type: ignore[attr-defined]
                for v in node.values
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.render(node.left, before, depth + 1) + self.render(node.right, before, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and (fmt := _literal(node.left)) is not None:
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return _percent(fmt, list(args))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and (fmt := _literal(node.func.value)) is not None
        ):
            return _dot_format(fmt, node.args, {k.arg: k.value for k in node.keywords if k.arg})
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (helper := self.funcs.get(node.func.id)):
            last = helper.body[-1] if helper.body else None
            if isinstance(last, ast.Return) and last.value is not None:
                return _Templater(helper, self.funcs).render(last.value, last.lineno, depth + 1)
        if isinstance(node, ast.Name) and (value := self._assigned(node.id, before)) is not None:
            return value if isinstance(value, str) else self.render(value, before, depth + 1)
        return _hole(node)

    def _assigned(self, name: str, before: int) -> ast.AST | str | None:
        """The last plain assignment of ``name`` above ``before`` in the function, plus later ``+=`` parts."""
        if self.scope is None:
            return None
        base: ast.AST | None = None
        base_line = -1
        extra: list[tuple[int, ast.AST]] = []
        for n in ast.walk(self.scope):
            if getattr(n, "lineno", before) >= before:
                continue
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
                if n.lineno > base_line:
                    base, base_line = n.value, n.lineno
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
                extra.append((n.lineno, n.value))
        if base is None:
            return None
        parts = [self.render(base, base_line, 3)]
        parts += [self.render(v, line, 3) for line, v in sorted(extra, key=lambda x: x[0]) if line > base_line]
        return "".join(parts) if len(parts) > 1 else base


def _percent(fmt: str, args: list[ast.AST]) -> str:
    out: list[str] = []
    pos = 0
    it = iter(args)
    for m in _PERCENT.finditer(fmt):
        out.append(_esc(fmt[pos : m.start()]))
        if m.group() == "%%":
            out.append("%")
        else:
            arg = next(it, None)
            out.append(_hole(arg) if arg is not None else "{}")
        pos = m.end()
    out.append(_esc(fmt[pos:]))
    return "".join(out)


def _dot_format(fmt: str, args: list[ast.expr], kwargs: dict[str, ast.expr]) -> str:
    auto = iter(args)

    def field(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group()
        key = re.split(r"[.!:\[]", m.group(1), maxsplit=1)[0]
        node: ast.AST | None
        if key == "":
            node = next(auto, None)
        elif key.isdigit():
            node = args[int(key)] if int(key) < len(args) else None
        else:
            node = kwargs.get(key)
        return _hole(node) if node is not None else "{" + key + "}"

    return _FORMAT_FIELD.sub(field, fmt)


# ---------------------------------------------------------------------------------------------------------------
# Walking a module
# ---------------------------------------------------------------------------------------------------------------


def _decorator_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _is_logger(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return "log" in text and "dialog" not in text


def _collects_text(node: ast.AST) -> bool:
    """A list that a message is joined from: ``errors``, ``lines``, ``msg_parts`` and the like."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return any(w in name.lower() for w in ("error", "lines", "msg", "message"))


def _exception_name(node: ast.AST) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Name):
        return target.id if target.id[:1].isupper() else None
    return None


def messages_of(path: str, text: str) -> list[Message]:
    """Every raise / assert / log / warnings.warn of one module, as messages."""
    tree = ast.parse(text, filename=path)
    found: list[Message] = []
    funcs = {n.name: n for n in getattr(tree, "body", []) if isinstance(n, ast.FunctionDef)}
    _visit(tree, path, [], None, False, _Module(_validation_reach(tree), text.splitlines(), funcs), found)
    return found


def echoes_of(path: str, text: str) -> list[Message]:
    """The ``echo "..."`` lines of a shell script, shell variables and ``$(...)`` as placeholders."""
    found = []
    for no, raw in enumerate(text.splitlines(), start=1):
        m = _ECHO.match(raw)
        if not m or raw.lstrip().startswith("#"):
            continue
        body = m.group(2)
        parts: list[str] = []
        pos = 0
        for v in _SHELL_VAR.finditer(body):
            parts.append(_esc(body[pos : v.start()]))
            parts.append("{" + (v.group(1) or v.group(2) or v.group(3)).replace("{", "(").replace("}", ")") + "}")
            pos = v.end()
        parts.append(_esc(body[pos:]))
        found.append(Message(path, no, no, "echo", "echo", "".join(parts)))
    return found


def _validation_reach(tree: ast.AST) -> frozenset[str]:
    """Names of the module's functions that can run inside pydantic validation: validators, ``model_post_init``,
    and (transitively) functions and properties of the module they call or read by name."""
    defs: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(n.name, []).append(n)
    todo = [
        name
        for name, fns in defs.items()
        if name == "model_post_init" or any(_decorator_names(f) & _VALIDATORS for f in fns)  # type: ignore[arg-type]
    ]
    reach: set[str] = set()
    while todo:
        name = todo.pop()
        if name in reach:
            continue
        reach.add(name)
        for fn in defs.get(name, ()):
            for n in ast.walk(fn):
                used = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None
                if used in defs and used not in reach:
                    todo.append(used)
    return frozenset(reach)


@dataclass(frozen=True)
class _Module:
    """What the walk of one module needs: reach of validation, source lines, module-level functions."""

    reach: frozenset[str]
    lines: list[str]
    funcs: dict[str, ast.FunctionDef]


def _visit(
    node: ast.AST, path: str, stack: list[str], fn: ast.AST | None, validator: bool, mod: _Module, out: list[Message]
) -> None:
    """Walk ``node`` and collect its messages; ``validator``: the current function can run inside validation."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _visit(child, path, [*stack, child.name], child, child.name in mod.reach, mod, out)
            continue
        if isinstance(child, ast.ClassDef):
            _visit(child, path, [*stack, child.name], None, False, mod, out)
            continue
        msg = _message(child, path, ".".join(stack), fn, validator, mod)
        if msg is not None:
            out.append(msg)
        _visit(child, path, stack, fn, validator, mod, out)


def _message(node: ast.AST, path: str, where: str, fn: ast.AST | None, validator: bool, mod: _Module) -> Message | None:
    line = getattr(node, "lineno", 0)
    end = getattr(node, "end_lineno", line) or line
    tpl = _Templater(fn, mod.funcs)

    def make(kind: str, exc: str, template: str) -> Message:
        return Message(path, line, end, kind, exc, template, where, validator)

    if isinstance(node, ast.Raise) and node.exc is not None:
        name = _exception_name(node.exc)
        if name is None:
            return None
        call = node.exc if isinstance(node.exc, ast.Call) else None
        arg = call.args[0] if call and call.args else None
        return make("raise", name, tpl.render(arg, line) if arg is not None else "")
    if isinstance(node, ast.Assert):
        if node.msg is None:
            return Message(
                path, line, end, "assert", "AssertionError", "", where, validator, mod.lines[line - 1].strip()
            )
        return make("assert", "AssertionError", tpl.render(node.msg, line))
    if (
        isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Attribute)
        and _collects_text(node.targets[0])
        and isinstance(node.value, (ast.Constant, ast.JoinedStr))
    ):
        text = tpl.render(node.value, line)  # e.g. rollout_state.error_msg = "...": reported later
        return make("part", "part", text) if literal_length(text) else None
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and _collects_text(node.targets[0]):
        parts = [e for e in node.value.elts if isinstance(e, (ast.Constant, ast.JoinedStr, ast.BinOp))]
        joined = "\n".join(tpl.render(e, line) for e in parts)
        return make("part", "part", joined) if parts and literal_length(joined) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        attr = node.func.attr
        if (
            attr == "append"
            and _collects_text(node.func.value)
            and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))
        ):
            text = tpl.render(node.args[0], line)
            return make("part", "part", text) if literal_length(text) else None
        if attr == "warn" and ast.unparse(node.func.value) == "warnings":
            category = _exception_name(node.args[1]) if len(node.args) > 1 else None
            for k in node.keywords:
                if k.arg == "category":
                    category = _exception_name(k.value)
            return make("warn", category or "UserWarning", tpl.render(node.args[0], line))
        if attr in _LOG_LEVELS and _is_logger(node.func.value):
            first = node.args[0]
            if (fmt := _literal(first)) is not None and len(node.args) > 1:
                return make("log", _LOG_LEVELS[attr], _percent(fmt, list(node.args[1:])))
            return make("log", _LOG_LEVELS[attr], tpl.render(first, line))
    return None


# ---------------------------------------------------------------------------------------------------------------
# Building and writing the index
# ---------------------------------------------------------------------------------------------------------------


def build_index(source: Source) -> dict[str, object]:
    """The whole index as plain data (sorted)."""
    names = source.names()
    files: dict[str, int] = {}
    messages: list[Message] = []
    for name in names:
        counted = any(name == r or (r.endswith("/") and name.startswith(r)) for r in LINE_COUNT_ROOTS)
        scoped = in_scope(name)
        if not (counted or scoped):
            continue
        data = source.read(name)
        if b"\0" in data[:8192]:
            continue
        files[name] = line_count(data)
        if scoped:
            messages.extend(messages_of(name, data.decode("utf-8")))
        elif name in SHELL_SCOPE:
            messages.extend(echoes_of(name, data.decode("utf-8")))
    messages.sort()
    return {
        "commit": source.resolved,
        "generator": "python tests/message_index.py",
        "message_scope": [*MESSAGE_SCOPE, *SUPPORT_FILES, *SHELL_SCOPE],
        "files": files,
        "messages": [asdict(m) for m in messages],
    }


def dump_index(index: dict[str, object]) -> str:
    """Stable JSON text: one file or message per line, keys sorted, UTF-8 kept, trailing newline."""

    def one(obj: object) -> str:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True)

    files = index["files"]
    messages = index["messages"]
    assert isinstance(files, dict) and isinstance(messages, list)
    head = {k: v for k, v in index.items() if k not in ("files", "messages")}
    lines = ["{"]
    lines += [f"  {one(k)}: {one(v)}," for k, v in sorted(head.items())]
    lines.append('  "files": {')
    lines += [f"    {one(k)}: {v}," for k, v in sorted(files.items())]
    lines[-1] = lines[-1].rstrip(",")
    lines.append("  },")
    lines.append('  "messages": [')
    lines += [f"    {one(m)}," for m in messages]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Loading and matching (used by the tests; needs only the checked-in JSON)
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageIndex:
    """The checked-in index: line counts per file and the messages, grouped by file."""

    commit: str
    files: dict[str, int]
    messages: tuple[Message, ...]

    def at(self, path: str, first: int, last: int | None = None) -> list[Message]:
        """Messages of ``path`` whose statement overlaps lines ``first``..``last``."""
        last = first if last is None else last
        return [m for m in self._by_path().get(path, ()) if m.line <= last and m.end_line >= first]

    def in_file(self, path: str) -> tuple[Message, ...]:
        return self._by_path().get(path, ())

    def _by_path(self) -> dict[str, tuple[Message, ...]]:
        return _group(self.messages)


@lru_cache(maxsize=8)
def _group(messages: tuple[Message, ...]) -> dict[str, tuple[Message, ...]]:
    out: dict[str, list[Message]] = {}
    for m in messages:
        out.setdefault(m.path, []).append(m)
    return {k: tuple(v) for k, v in out.items()}


@lru_cache(maxsize=4)
def load_index(path: Path = INDEX_PATH) -> MessageIndex:
    """The index written by this module (cached)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return MessageIndex(
        commit=data["commit"],
        files=dict(data["files"]),
        messages=tuple(Message(**m) for m in data["messages"]),
    )


@lru_cache(maxsize=4096)
def template_regex(template: str) -> re.Pattern[str]:
    """A regex for the text a template prints: literal parts exact, each placeholder any text (non-greedy)."""
    parts: list[str] = []
    pos = 0
    for m in _FORMAT_FIELD.finditer(template):
        parts.append(re.escape(template[pos : m.start()]))
        parts.append(re.escape(m.group()[0]) if m.group(1) is None else "(?s:.*?)")
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts))


def literal_length(template: str) -> int:
    """How many literal characters a template has (placeholders excluded)."""
    return len(_FORMAT_FIELD.sub(lambda m: m.group()[0] if m.group(1) is None else "", template))


def literal_segments(template: str) -> list[str]:
    """The literal runs of a template (between placeholders and line breaks), stripped."""
    text = _FORMAT_FIELD.sub(lambda m: m.group()[0] if m.group(1) is None else "\n", template)
    return [seg.strip() for seg in text.split("\n") if seg.strip()]


_SENTENCE_END = re.compile(r"(?<=[.:;!?])\s")
#: A template piece must have this many literal characters to be searched for anywhere in a line.
MIN_SEARCH_LITERAL = 8


@lru_cache(maxsize=4096)
def pieces(template: str) -> tuple[tuple[str, bool], ...]:
    """What one log line can show of a message: the whole template, each of its lines, and each line cut after a
    sentence (examples and logs often stop there). Each piece comes with whether it is a cut (then the line must
    end where the piece ends)."""
    out: list[tuple[str, bool]] = [(template, False)]
    for line in template.split("\n"):
        if line and line != template:
            out.append((line, False))
        for cut in _SENTENCE_END.finditer(line):
            out.append((line[: cut.start()], True))
    return tuple(dict.fromkeys(out))


_SHOWN_CLASS = re.compile(
    r"(?:\b([A-Z]\w*(?:Error|Exception|Warning|Interrupt|Exit))(?:: [\"']?|\([\"']?)|(Value error|Assertion failed), )$"
)
_CLASS_PREFIX = r"(?:.*?\b(?:[A-Z]\w*(?:Error|Exception|Warning)(?:: |\()|Value error, |Assertion failed, ))?"


def shown_class(prefix: str) -> str | None:
    """The class a log shows right before a message: ``ValueError``, or pydantic's ``Value error`` /
    ``Assertion failed`` for an error raised inside a validator; None when no class is shown."""
    m = _SHOWN_CLASS.search(prefix)
    return (m.group(1) or m.group(2)) if m else None


def find_in(example: str, candidates: Iterable[Message]) -> Iterator[tuple[Message, str | None]]:
    """Candidates whose message (or one line / leading sentences of it) occurs in ``example``, each with the class
    the example shows right before it. Short templates must make up the whole line after the class; an assert
    without a message matches the source line a traceback prints."""
    text = example.strip()
    for m in candidates:
        if m.code:
            if text == m.code or text.endswith(m.code):
                yield m, None
            continue
        for piece, cut in pieces(m.template):
            rx = template_regex(piece)
            size = literal_length(piece)
            if size < (MIN_SEARCH_LITERAL if cut else 3):
                continue
            if size >= MIN_SEARCH_LITERAL:
                hit = next((h for h in rx.finditer(text) if not cut or h.end() == len(text)), None)
                if hit is None and cut:
                    hit = re.search(rx.pattern + r"$", text)
            else:
                hit = re.fullmatch(_CLASS_PREFIX + "(" + rx.pattern + ")", text)
            if hit is not None:
                start = hit.start(1) if hit.re.groups else hit.start()
                yield m, shown_class(text[:start])
                break


def class_agrees(m: Message, shown: str | None) -> bool:
    """Whether the class shown in a log is what this message raises.

    pydantic prints a ``ValueError`` / ``AssertionError`` raised in a validator or ``model_post_init`` as
    ``Value error, <msg>`` / ``Assertion failed, <msg>``; a log call or a message shown without a class agrees
    with anything."""
    if shown is None or m.kind in ("log", "warn", "echo", "part"):
        return True
    if shown == "Value error":
        return m.validator and m.exception == "ValueError"
    if shown == "Assertion failed":
        return m.validator and m.exception == "AssertionError"
    return shown == m.exception


def near_misses(example: str, candidates: Iterable[Message], min_chars: int = 32) -> list[Message]:
    """Messages sharing a literal run of ``min_chars``+ characters and 3+ words with ``example``: the example
    claims to be one of them (a paraphrase or an out-of-date copy when it does not match)."""
    table = _shingles(tuple(candidates), min_chars)
    found: dict[Message, None] = {}
    for i in range(len(example) - min_chars + 1):
        for m in table.get(example[i : i + min_chars], ()):
            found[m] = None
    return list(found)


@lru_cache(maxsize=8)
def _shingles(candidates: tuple[Message, ...], size: int) -> dict[str, tuple[Message, ...]]:
    out: dict[str, list[Message]] = {}
    for m in candidates:
        for seg in literal_segments(m.template):
            for i in range(len(seg) - size + 1):
                if seg.count(" ", i, i + size) >= 3:
                    out.setdefault(seg[i : i + size], []).append(m)
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/message_index.py", description=__doc__)
    parser.add_argument("--xtuner", type=Path, required=True, help="XTuner checkout, bare repo or source folder")
    parser.add_argument("--commit", default=PINNED_COMMIT, help="commit to read (git sources)")
    parser.add_argument("--out", type=Path, default=INDEX_PATH, help="where to write the JSON ('-' for stdout)")
    args = parser.parse_args(argv)
    text = dump_index(build_index(Source(args.xtuner, args.commit)))
    if str(args.out) == "-":
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({text.count(chr(10))} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
