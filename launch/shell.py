"""Shell-safe rendering for generated bash: quoting, value and name validation.

Everything a caller passes ends up inside single quotes (``shlex.quote``), which bash never expands. What a single
quote cannot hold on one line (NUL, newlines and other control characters) is refused with a ``ToolInputError``, as
are lone surrogates (not encodable as UTF-8) and bidirectional-override characters (they make the displayed command
differ from the one that runs).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable, Mapping

from ..core import ToolInputError

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Bidirectional embedding/override/isolate controls ("Trojan Source"): refused in every value.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

#: Names a launch plan must not export: they change how bash itself runs the script (``PATH`` decides which
#: ``python`` and ``ray`` run, ``IFS``/``ENV``/``PS4`` change parsing or tracing), or bash treats them as read-only
#: or dynamic, so an ``export`` fails or does not hold.
RESERVED_ENV_NAMES = frozenset(
    {
        "_",
        "PATH",
        "IFS",
        "ENV",
        "CDPATH",
        "EXECIGNORE",
        "PIPESTATUS",
        "DIRSTACK",
        "GLOBIGNORE",
        "PS4",
        "POSIXLY_CORRECT",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "UID",
        "EUID",
        "PPID",
        "PWD",
        "OLDPWD",
        "RANDOM",
        "SRANDOM",
        "SECONDS",
        "LINENO",
        "GROUPS",
        "HISTCMD",
        "OPTIND",
        "OPTARG",
        "OPTERR",
        "EPOCHREALTIME",
        "EPOCHSECONDS",
        "FUNCNAME",
        "SHLVL",
    }
)
#: ``xtuner_rl_*`` are the launch script's own loop variables.
RESERVED_ENV_PREFIXES = ("BASH", "xtuner_rl_")

MAX_VALUE_CHARS = 32768

#: Words bash reads as syntax in command position even though ``shlex.quote`` leaves them bare.
_BASH_KEYWORDS = frozenset(
    "case coproc do done elif else esac fi for function if in select then time until while".split()
)


def unsafe_char(value: str) -> str | None:
    """The first character a single-quoted bash word on one line cannot carry safely, if any."""
    for ch in value:
        if ch in _BIDI_CONTROLS:
            return ch
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs"):  # C0/C1 controls incl. NUL, LF, CR, TAB, DEL; lone surrogates
            return ch
    return None


def check_value(value: str, what: str, *, allow_empty: bool = False, max_chars: int = MAX_VALUE_CHARS) -> str:
    """Return ``value`` if it can be rendered as one single-quoted shell word; else raise ``ToolInputError``."""
    if not value and not allow_empty:
        raise ToolInputError("value_empty", f"{what} is empty", f"Pass a non-empty {what}.")
    if len(value) > max_chars:
        raise ToolInputError("value_too_long", f"{what} is longer than {max_chars} characters")
    bad = unsafe_char(value)
    if bad is not None:
        raise ToolInputError(
            "unsafe_shell_value",
            f"{what} contains the control character U+{ord(bad):04X}, which one shell line cannot hold safely",
            "Remove NUL, newline, carriage return, tab and other control or bidi-override characters from the value.",
            field=what,
        )
    return value


def check_env_name(name: str, *, what: str = "extra_env") -> str:
    """Return ``name`` if it is a plain, non-reserved environment variable name; else raise ``ToolInputError``."""
    if not ENV_NAME_RE.match(name):
        raise ToolInputError(
            "invalid_env_name",
            f"{what} key {name!r} is not a valid environment variable name",
            "Use letters, digits and underscores, not starting with a digit.",
        )
    if name in RESERVED_ENV_NAMES or name.startswith(RESERVED_ENV_PREFIXES):
        raise ToolInputError(
            "reserved_env_name",
            f"{what} key {name!r} is reserved: exporting it would change how bash runs the launch script",
            "Set it in your own shell before running the script, or drop it.",
        )
    return name


#: bash builtins: a command word with one of these names runs the builtin (``eval`` would re-parse the arguments).
BASH_BUILTINS = frozenset(
    ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo "
    "enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd "
    "printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true type "
    "typeset ulimit umask unalias unset wait".split()
)
_PROGRAM_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def check_program(value: str, what: str) -> str:
    """A program to run as the command word: a path (contains ``/``) or a plain name that is no bash builtin."""
    check_value(value, what, max_chars=4096)
    if "/" in value:
        return value  # bash executes a word with a slash directly: no builtin, keyword or function lookup
    if not _PROGRAM_NAME_RE.match(value) or value in BASH_BUILTINS or value in _BASH_KEYWORDS:
        raise ToolInputError(
            "invalid_program",
            f"{what} {value!r} is not a plain program name (or names a bash builtin or keyword)",
            f"Pass a name like 'python3' or a path like '/opt/venv/bin/python' for {what}.",
        )
    return value


def quote(word: str) -> str:
    """One shell word for ``word`` in argument position (single quotes where needed)."""
    return shlex.quote(word)


def quote_command_word(word: str) -> str:
    """The command word: a bare ``A=b`` would be an assignment and ``if`` a keyword, so those get forced quotes."""
    quoted = shlex.quote(word)
    if quoted == word and ("=" in word or word in _BASH_KEYWORDS):
        return "'" + word + "'"  # no quote or other special character inside: shlex left it bare
    return quoted


def join_command(argv: Iterable[str]) -> str:
    """One shell line that runs ``argv`` exactly (the first word is always quoted)."""
    words = list(argv)
    if not words:
        return ""
    return " ".join([quote_command_word(words[0]), *(quote(w) for w in words[1:])])


def export_lines(env: Mapping[str, str], unset: Iterable[str]) -> list[str]:
    """``unset -v`` then ``export NAME=value`` lines; names must already be validated."""
    lines: list[str] = []
    names = list(unset)
    if names:
        lines.append("unset -v " + " ".join(names))
    lines.extend(f"export {name}={quote(value)}" for name, value in env.items())
    return lines


def safe_path_arg(path: str) -> str:
    """A path as a CLI argument that cannot be read as an option: ``-x.py`` becomes ``./-x.py``."""
    return "./" + path if path.startswith("-") else path
