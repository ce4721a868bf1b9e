"""The launch env file: a shell launch script or a dotenv file, read statically (never run, never sourced).

:func:`read_env_file` opens it through the guarded reader (inside the allowed roots, regular file, 1 MiB, text
only) and :func:`parse_env_file` understands the lines a launch script sets its environment with: ``export
NAME=value``, ``NAME=value`` (exported in a dotenv file, after ``set -a``, or by a later ``export NAME``), quoted
values, ``$NAME`` / ``${NAME}`` of a variable the file set before, ``${NAME:-default}`` (the default, when the file
does not set NAME), ``unset NAME``. What cannot be known without running the shell — command substitution,
arithmetic, a variable the file does not set, an assignment inside ``if``/``for``/a function, a sourced file — is
kept as *unresolved* with the reason, never guessed. Every entry keeps its line and the character span of its
value, so fixes are edits of the file as it is on disk (:class:`EnvFileEditor`, rendered with
:func:`.patches.unified_diff`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Literal

from ..core import PathPolicy, read_text_input
from .patches import Edit, unified_diff

MAX_ENV_FILE_BYTES = 1 << 20
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
#: A value written bare needs no quotes in the shell.
_BARE_RE = re.compile(r"[A-Za-z0-9_./:,@%+=-]*")
#: Words that open and close a block: an assignment inside one may or may not run.
_OPENERS = {"if", "for", "while", "until", "case", "select", "{", "(", "function"}
_CLOSERS = {"fi", "done", "esac", "}", ")"}
_CONTINUERS = {"then", "do", "else", "elif", "!"}
#: Commands that come before the launch itself: a new export may still follow them.
_SETUP = {"set", "shopt", "trap", "umask", "ulimit", "cd", "echo", "printf", "mkdir", "true", "false", ":"}
_SETUP |= {"export", "unset", "declare", "typeset", "readonly", "local", "source", ".", "[", "[[", "test"}
Kind = Literal["shell", "dotenv"]


@dataclass(frozen=True)
class EnvEntry:
    """One variable the file sets: its value (None when unresolved, with the reason), where it is written."""

    name: str
    value: str | None
    line: int
    written: str  # the value as written (quotes included)
    exported: bool
    reason: str = ""  # why the value is unresolved
    defaulted: bool = False  # the value is a ${NAME:-default} default: the launching shell may set NAME
    span: tuple[int, int] | None = None  # character offsets of the written value (None: not editable)
    start: int | None = None  # character offset of ``NAME=`` (for an ``export`` prefix)

    @property
    def resolved(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class LaunchEnvFile:
    """A launch env file as the launch shell would see it, statically: the last top-level setting of each name."""

    name: str
    source: str
    path: str | None = None
    kind: Kind = "shell"
    entries: Mapping[str, EnvEntry] = field(default_factory=dict)  # exported (or dotenv) variables
    shell_only: Mapping[str, EnvEntry] = field(default_factory=dict)  # assigned but never exported
    notes: tuple[str, ...] = ()
    insert_at: int = 0  # where a new ``export`` line goes (before the launch commands)

    @property
    def lines(self) -> list[str]:
        return self.source.splitlines()

    @property
    def values(self) -> dict[str, str]:
        """The resolved exported variables: what the planned env takes from the file."""
        return {n: e.value for n, e in self.entries.items() if e.value is not None}

    @property
    def unresolved(self) -> dict[str, str]:
        """Exported variables whose value is not known statically, with the reason."""
        return {n: e.reason for n, e in self.entries.items() if e.value is None}

    def where(self, name: str) -> str | None:
        """'file:line' of the setting of ``name`` the launch would use."""
        e = self.entries.get(name) or self.shell_only.get(name)
        return f"{self.name}:{e.line}" if e is not None else None


# ---- reading ------------------------------------------------------------------------------------------------------


def read_env_file(raw: str, paths: PathPolicy) -> LaunchEnvFile:
    """Read and parse a launch env file through the guarded reader; refusals are :class:`ToolInputError`."""
    real, text = read_text_input(
        paths,
        raw,
        what="launch env file",
        code="env_file",
        limit=MAX_ENV_FILE_BYTES,
        fix="Pass the shell script or .env file that sets the launch environment.",
        strict_utf8=True,
    )
    return parse_env_file(PurePath(real).name, text, real)


def file_kind(name: str, text: str) -> Kind:
    """A shell script by its suffix or ``#!`` line; anything else (``.env``, ``env.list``) is a dotenv file."""
    if text.startswith("#!") or PurePath(name).suffix in (".sh", ".bash", ".zsh", ".ksh"):
        return "shell"
    return "dotenv"


# ---- parsing ------------------------------------------------------------------------------------------------------


@dataclass
class _Word:
    text: str
    start: int  # offset in the file
    end: int
    editable: bool  # lies on one physical line


@dataclass
class _Logical:
    line: int
    words: list[list[_Word]]  # simple commands (split at ; && || | &)
    ops: list[tuple[str, str]]  # the operators before and after each command ("" at the ends of the line)
    heredoc: str | None = None


class _Parser:
    def __init__(self, name: str, source: str, path: str | None) -> None:
        self.name = name
        self.source = source
        self.path = path
        self.kind: Kind = file_kind(name, source)
        self.vars: dict[str, EnvEntry] = {}  # every top-level assignment so far (for $NAME)
        self.exported: set[str] = set()
        self.allexport = self.kind == "dotenv"
        self.notes: list[str] = []
        self.depth = 0
        self.last_assign_end: int | None = None  # end of the last top-level assignment line before a launch command
        self.launch_start: int | None = None  # start of the first launch command line

    # -- lexing: logical lines of words, offsets kept ------------------------------------------------------------

    def logical_lines(self) -> list[tuple[int, int, int, _Logical]]:
        """(first line number, start offset, end offset, parsed) per logical line; continuation lines joined."""
        out: list[tuple[int, int, int, _Logical]] = []
        src = self.source
        pos, lineno, n = 0, 1, len(src)
        heredoc: str | None = None
        while pos < n:
            nl = src.find("\n", pos)
            end = n if nl < 0 else nl + 1
            if heredoc is not None:
                if src[pos:end].rstrip("\r\n").lstrip("\t") == heredoc:
                    heredoc = None
                pos, lineno = end, lineno + 1
                continue
            logical, stop, used = self._lex(pos, lineno)
            out.append((lineno, pos, stop, logical))
            heredoc = logical.heredoc
            pos, lineno = stop, lineno + used
        return out

    def _lex(self, pos: int, lineno: int) -> tuple[_Logical, int, int]:
        """Words from ``pos`` to the end of the logical line: (parsed, offset after it, physical lines used)."""
        src, n = self.source, len(self.source)
        commands: list[list[_Word]] = [[]]
        seps: list[str] = []  # the operator after each command but the last
        cur: list[str] = []
        start = -1
        lines = 1
        multiline = False
        heredoc: str | None = None
        i = pos

        def flush(at: int) -> None:
            nonlocal cur, start, multiline
            if start >= 0:
                commands[-1].append(_Word("".join(cur), start, at, not multiline))
            cur, start, multiline = [], -1, False

        while i < n:
            ch = src[i]
            if ch == "\n":
                break
            if ch == "\r" and src.startswith("\r\n", i):
                i += 1
                continue
            if ch == "\\" and i + 1 < n and src[i + 1] in "\r\n":  # line continuation
                flush(i)
                i += 3 if src.startswith("\r\n", i + 1) else 2
                lines += 1
                continue
            if ch in " \t":
                flush(i)
                i += 1
                continue
            if ch == "#" and start < 0:
                while i < n and src[i] != "\n":
                    i += 1
                break
            if ch in ";&|" and not cur:
                flush(i)
                j = i
                while j < n and src[j] in ";&|":
                    j += 1
                seps.append(src[i:j])
                i = j
                commands.append([])
                continue
            if ch in ";&|":
                flush(i)
                continue
            if ch == "<" and src.startswith("<<", i) and start < 0:
                m = re.match(r"<<-?\s*(['\"]?)([A-Za-z_0-9]+)\1", src[i:])
                if m:
                    heredoc = m.group(2)
                    i += m.end()
                    continue
            if start < 0:
                start = i
            j = self._scan_unit(i)
            piece = src[i:j]
            if "\n" in piece:
                multiline = True
                lines += piece.count("\n")
            cur.append(piece)
            i = j
        flush(i)
        stop = i + 1 if i < n else n
        ops = [(seps[k - 1] if k else "", seps[k] if k < len(seps) else "") for k in range(len(commands))]
        kept = [k for k, c in enumerate(commands) if c]
        return _Logical(lineno, [commands[k] for k in kept], [ops[k] for k in kept], heredoc), stop, lines

    def _scan_unit(self, i: int) -> int:
        """End of the quoted string, escape, ``$(...)`` or single character starting at ``i``."""
        src, n = self.source, len(self.source)
        ch = src[i]
        if ch == "'":
            j = src.find("'", i + 1)
            return n if j < 0 else j + 1
        if ch == '"':
            j = i + 1
            while j < n and src[j] != '"':
                if src[j] == "\\":
                    j += 1
                elif src.startswith("$(", j):
                    j = self._scan_unit(j) - 1
                j += 1
            return min(j + 1, n)
        if ch == "\\":
            return min(i + 2, n)
        if ch == "`":
            j = src.find("`", i + 1)
            return n if j < 0 else j + 1
        if src.startswith("$(", i) or src.startswith("${", i):
            close = ")" if src[i + 1] == "(" else "}"
            opener = src[i + 1]
            depth, j = 0, i + 1
            while j < n:
                c = src[j]
                if c == opener:
                    depth += 1
                elif c == close:
                    depth -= 1
                    if depth == 0:
                        return j + 1
                elif c in "'\"" and close == ")":
                    j = self._scan_unit(j) - 1
                j += 1
            return n
        return i + 1

    # -- expansion: the value a word has, or why it cannot be known -----------------------------------------------

    def expand(self, text: str) -> tuple[str | None, str, bool]:
        """(value, reason when None, a default was used) of a word as the shell would expand it."""
        out: list[str] = []
        defaulted = False
        i, n = 0, len(text)
        if text.startswith("~"):
            return None, "tilde expansion depends on the launching user", False
        while i < n:
            ch = text[i]
            if ch == "'":
                j = text.find("'", i + 1)
                if j < 0:
                    return None, "unterminated quote", False
                out.append(text[i + 1 : j])
                i = j + 1
            elif ch == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    c = text[j]
                    if c == "\\" and j + 1 < n and text[j + 1] in '$`"\\\n':
                        out.append(text[j + 1])
                        j += 2
                    elif c in "$`":
                        val, why, d, j = self._substitution(text, j)
                        if val is None:
                            return None, why, False
                        out.append(val)
                        defaulted |= d
                    else:
                        out.append(c)
                        j += 1
                if j >= n:
                    return None, "unterminated quote", False
                i = j + 1
            elif ch == "\\":
                out.append(text[i + 1 : i + 2])
                i += 2
            elif ch in "$`":
                val, why, d, i = self._substitution(text, i)
                if val is None:
                    return None, why, False
                out.append(val)
                defaulted |= d
            else:
                out.append(ch)
                i += 1
        return "".join(out), "", defaulted

    def _substitution(self, text: str, i: int) -> tuple[str | None, str, bool, int]:
        """The ``$`` form or backtick at ``i``: a ``$`` form is expanded, a backtick is a program (never run)."""
        if text[i] == "`":
            return None, "command substitution (`...`) runs a program", False, i
        return self._dollar(text, i)

    def _dollar(self, text: str, i: int) -> tuple[str | None, str, bool, int]:
        """Expand the ``$`` form at ``i``: (value, reason, defaulted, index after it)."""
        rest = text[i + 1 :]
        if rest.startswith("(("):
            return None, "arithmetic expansion $((...))", False, i
        if rest.startswith("("):
            return None, "command substitution $(...) runs a program", False, i
        if rest.startswith("{"):
            close = text.find("}", i)
            if close < 0:
                return None, "unterminated ${", False, i
            body = text[i + 2 : close]
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])(.*))?", body, re.S)
            if m is None:
                return None, f"${{{body}}} is not a plain variable or default", False, i
            name, op, word = m.group(1), m.group(2), m.group(3)
            known = self.vars.get(name)
            if known is not None and (op is None or not op.startswith(":") or known.value != ""):
                if known.value is None:
                    return None, f"${name} is unresolved ({known.reason})", False, i
                return known.value, "", known.defaulted, close + 1
            if op is None:
                return None, f"${name} is not set in this file (it comes from the launching shell)", False, i
            dval, why, _ = self.expand(word)
            if dval is None:
                return None, why, False, i
            return dval, "", True, close + 1
        m = NAME_RE.match(rest)
        if m is None:
            if rest[:1] and rest[:1] in "0123456789@*#?$!-":
                return None, f"${rest[:1]} is a shell parameter", False, i
            return "$", "", False, i + 1
        name = m.group(0)
        known = self.vars.get(name)
        if known is None:
            return None, f"${name} is not set in this file (it comes from the launching shell)", False, i
        if known.value is None:
            return None, f"${name} is unresolved ({known.reason})", False, i
        return known.value, "", known.defaulted, i + 1 + len(name)

    # -- commands -------------------------------------------------------------------------------------------------

    def run(self) -> LaunchEnvFile:
        for lineno, start, stop, logical in self.logical_lines():
            for words, (before, after) in zip(logical.words, logical.ops, strict=True):
                # after && or ||, or in a pipeline or background job, an assignment may not run or not persist
                side = before not in ("", ";", ";;") or after in ("|", "&", "|&")
                self.depth += side
                self.command(words, lineno, start, stop)
                self.depth -= side
        entries = {n: e for n, e in self.vars.items() if n in self.exported or e.exported}
        entries = {n: replace(e, exported=True) for n, e in entries.items()}
        shell_only = {n: e for n, e in self.vars.items() if n not in entries}
        if self.launch_start is None:
            insert = len(self.source)
        elif self.last_assign_end is not None:
            insert = self.last_assign_end
        else:
            insert = self.launch_start
        return LaunchEnvFile(
            self.name, self.source, self.path, self.kind, entries, shell_only, tuple(self.notes[:50]), insert
        )

    def command(self, words: list[_Word], lineno: int, start: int, stop: int) -> None:
        while words and words[0].text in _CONTINUERS:
            words = words[1:]
        if not words:
            return
        head = words[0].text
        fdef = (head.endswith("()") and NAME_RE.fullmatch(head[:-2])) or (len(words) > 1 and words[1].text == "()")
        if head in _OPENERS or fdef:
            self.depth += 1
            if head in ("{", "("):
                self.command(words[1:], lineno, start, stop)
            return
        if head in _CLOSERS:
            self.depth = max(0, self.depth - 1)
            return
        if head in ("export", "declare", "typeset", "readonly", "local"):
            flags = [w.text for w in words[1:] if w.text.startswith("-")]
            exports = head == "export" or any("x" in f for f in flags)
            if head == "export" and any("n" in f for f in flags):
                self.notes.append(f"line {lineno}: `export -n` is not followed; the names stay as read")
            for w in words[1:]:
                if w.text.startswith("-"):
                    continue
                if _ASSIGN_RE.match(w.text):
                    self.assign(w, lineno, exports, stop)
                elif NAME_RE.fullmatch(w.text) and exports:  # the export attribute stays with the name
                    self.exported.add(w.text)
            return
        if head == "unset" and self.depth == 0:
            for w in words[1:]:
                self.vars.pop(w.text, None)
                self.exported.discard(w.text)
            return
        if head == "set" and self.depth == 0:
            args = [w.text for w in words[1:]]
            if "-a" in args or args[:2] == ["-o", "allexport"]:
                self.allexport = True
            if "+a" in args or args[:2] == ["+o", "allexport"]:
                self.allexport = False
        if head in ("source", "."):
            target = words[1].text if len(words) > 1 else ""
            self.notes.append(f"line {lineno}: sources {target!r}, which is not read; what it sets is unknown")
            return
        assigns = 0
        for w in words:
            if not _ASSIGN_RE.match(w.text):
                break
            assigns += 1
        if assigns == len(words):  # only assignments: shell variables of the script
            for w in words:
                self.assign(w, lineno, self.allexport, stop)
            return
        if head not in _SETUP and words[assigns].text not in _SETUP and self.depth == 0 and self.launch_start is None:
            self.launch_start = start

    def assign(self, w: _Word, lineno: int, exported: bool, stop: int) -> None:
        m = _ASSIGN_RE.match(w.text)
        assert m is not None
        name = m.group(1)
        written = w.text[m.end() :]
        value, why, defaulted = self.expand(written)
        if self.depth > 0:
            value, why = None, "set inside an if/for/while block or a function: whether it runs is not known"
        if w.text[m.end() - 1 : m.end() + 1] == "=(":
            value, why = None, "a shell array"
        span = (w.start + m.end(), w.end) if w.editable and self.depth == 0 else None
        entry = EnvEntry(name, value, lineno, written, exported, why, defaulted, span, w.start if span else None)
        if self.depth > 0 and name in self.vars:  # may or may not replace the earlier value
            prev = self.vars[name]
            entry = EnvEntry(name, None, lineno, written, exported or prev.exported, entry.reason)
        self.vars[name] = entry
        if exported:
            self.exported.add(name)
        if self.depth == 0 and self.launch_start is None:
            self.last_assign_end = stop


def parse_env_file(name: str, text: str, path: str | None = None) -> LaunchEnvFile:
    """Parse launch env text (never executed): see the module docstring for what is understood."""
    return _Parser(name, text, path).run()


# ---- edits --------------------------------------------------------------------------------------------------------


def shell_word(value: str, written: str = "") -> str:
    """``value`` as a shell word: bare when safe, double-quoted like ``written`` when that was, else single-quoted."""
    if written.startswith('"') and not re.search(r'["$`\\!]', value):
        return f'"{value}"'
    if _BARE_RE.fullmatch(value) and value:
        return value
    return shlex.quote(value)


class EnvFileEditor:
    """Edits of one launch env file; :meth:`diff` renders them as one unified diff (the file is never written)."""

    def __init__(self, env_file: LaunchEnvFile, label: str) -> None:
        self.file = env_file
        self.label = label
        self.newline = "\r\n" if "\r\n" in env_file.source else "\n"

    def set_value(self, name: str, value: str) -> Edit | None:
        """Give ``name``'s setting the value ``value`` where it is written; None when it is not editable."""
        e = self.file.entries.get(name)
        if e is None or e.span is None:
            return None
        return Edit(e.span[0], e.span[1], shell_word(value, e.written))

    def add(self, name: str, value: str) -> Edit:
        """A new ``export NAME=value`` line before the launch commands (after the file's own exports)."""
        at = self.file.insert_at
        src = self.file.source
        lead = self.newline if at > 0 and not src[:at].endswith("\n") else ""
        return Edit(at, at, f"{lead}export {name}={shell_word(value)}{self.newline}")

    def export(self, name: str) -> Edit | None:
        """Prefix a top-level ``NAME=value`` the file never exports with ``export``."""
        e = self.file.shell_only.get(name)
        if e is None or e.start is None or e.value is None:
            return None
        return Edit(e.start, e.start, "export ")

    def diff(self, edits: list[Edit | None]) -> str | None:
        chosen = sorted({e for e in edits if e is not None}, key=lambda e: (e.start, e.end))
        if not chosen or None in edits:
            return None
        out: list[str] = []
        pos = 0
        src = self.file.source
        for e in chosen:
            if e.start < pos:
                return None
            out += [src[pos : e.start], e.text]
            pos = e.end
        out.append(src[pos:])
        return unified_diff(self.label, src, "".join(out))

    def setting(self, values: Mapping[str, str]) -> str | None:
        """One diff giving each name its value: changed where the file sets it, else a new export line."""
        edits: list[Edit | None] = []
        for name, value in values.items():
            if name in self.file.entries:
                edits.append(self.set_value(name, value))
            elif name in self.file.shell_only:
                return None
            else:
                edits.append(self.add(name, value))
        merged = _merge_inserts(edits)
        return self.diff(merged)


def _merge_inserts(edits: list[Edit | None]) -> list[Edit | None]:
    """New lines at the same place become one insertion (two edits at one offset would be ambiguous)."""
    out: list[Edit | None] = []
    for e in edits:
        prev = next((p for p in out if p is not None and e is not None and p.start == p.end == e.start == e.end), None)
        if prev is not None and e is not None:
            out[out.index(prev)] = Edit(prev.start, prev.end, prev.text + e.text.lstrip("\r\n"))
        else:
            out.append(e)
    return out
