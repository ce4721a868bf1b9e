"""``xtuner-rl-mcp check-data FILE...`` and ``check-config FILE...``: the data and config checks the way linters
answer, for pre-commit hooks and CI.

One line per problem, ``path:line:col: CODE message`` (``--format json``, or ``sarif`` for code-scanning UIs), the
blockers by default (``--severity warning`` adds warnings); exit 1 when any file has a blocker, 0 and silent
otherwise, 2 on a usage error. The checks are the tools' own operations called in process through
:mod:`xtuner_rl_mcp.api`: no MCP client, no event loop, and ``mcp`` is never imported (``server/cli.py`` hands these
commands over before it loads anything of the server).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn

from .. import __version__
from ..api import function
from ..core import ToolInputError
from ..core.findings import SEVERITY_ORDER

COMMANDS = ("check-data", "check-config")
EXIT_OK, EXIT_BLOCKERS, EXIT_USAGE = 0, 1, 2
SARIF_LEVEL = {"blocker": "error", "warning": "warning", "info": "note"}


@dataclass
class Diagnostic:
    """One problem at one place, as a linter reports it."""

    path: str
    line: int
    col: int
    code: str
    severity: str
    message: str
    fix: str = ""
    patch: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors: exit 2, the message and what to do on stderr
        self.print_usage(sys.stderr)
        fix = f"Run `{self.prog} --help` for the arguments."
        sys.stderr.write(json.dumps({"error": {"code": "usage", "message": message, "fix": fix}}) + "\n")
        raise SystemExit(EXIT_USAGE)


def add_parsers(sub: Any) -> None:
    """The two commands, for this module's parser and for the server CLI's ``--help``."""
    data = sub.add_parser("check-data", help="check RL JSONL files like a linter (path:line:col: CODE message)")
    data.add_argument("files", nargs="+", metavar="FILE", help="JSONL files, directories or globs")
    data.add_argument("--judger", default="auto", choices=["auto", "gsm8k", "dapo_math", "geo3k", "generic"])
    data.add_argument("--role", default="train", choices=["train", "eval"])
    data.add_argument(
        "--max-per-code", type=int, default=20, metavar="N", help="distinct issues listed per code and file"
    )
    data.add_argument("--diff", action="store_true", help="print each fix that is an exact line edit as a unified diff")
    _common(data)
    config = sub.add_parser("check-config", help="check XTuner RL configs (.py) like a linter, never running them")
    config.add_argument("files", nargs="+", metavar="FILE", help="RL config files (.py)")
    config.add_argument(
        "--env",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="planned launch env for os.environ reads (repeatable; overrides --env-file); without either, env "
        "reads stay unresolved",
    )
    config.add_argument(
        "--env-file",
        default=None,
        metavar="PATH",
        help="launch script or .env whose exports are the planned env (read, never run); env fixes are diffs of it",
    )
    config.add_argument(
        "--backend",
        default=None,
        choices=["lmdeploy", "sglang"],
        help="the installed rollout backend, so a missing or extra XTUNER_USE_* flag in --env-file gets a diff",
    )
    config.add_argument("--training-env", default=None, metavar="PATH", help="check against this installed XTuner")
    config.add_argument("--diff", action="store_true", help="print each fix that is an exact edit as a unified diff")
    _common(config)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    p.add_argument(
        "--severity",
        choices=["blocker", "warning", "info"],
        default="blocker",
        help="lowest severity printed (default blocker); the exit code counts blockers only",
    )
    p.add_argument(
        "--allow-root",
        action="append",
        default=None,
        metavar="DIR",
        help="directories that may be read (default: the working directory and the named files' directories)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="xtuner-rl-mcp", description="Check XTuner RL data and configs like a linter")
    parser.add_argument("--version", action="version", version=f"xtuner-rl-mcp {__version__}")
    add_parsers(parser.add_subparsers(dest="command", parser_class=_Parser))
    return parser


# ---- running the checks ---------------------------------------------------------------------------------------


def roots_for(files: list[str], given: list[str] | None) -> list[str]:
    """Where the checks may read: the operator's --allow-root, else the cwd and the parent of each named path (named
    by whoever runs the command, a training env included; the cwd first, so diff paths are relative to it)."""
    if given:
        return given
    cwd = os.getcwd()
    extra = [os.path.dirname(os.path.abspath(os.path.expanduser(f))) or cwd for f in files if "*" not in f]
    return list(dict.fromkeys([cwd, *extra]))


def shown(path: str) -> str:
    """A path as a linter prints it: relative to the cwd when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def input_error(path: str, exc: ToolInputError) -> Diagnostic:
    return Diagnostic(shown(path), 1, 1, f"input.{exc.code}", "blocker", exc.message, exc.fix)


def _line_of(location: str | None, default_path: str) -> tuple[str, int]:
    """('path', line) of a finding's 'file:line' location (line 1 when it names a whole file)."""
    if not location:
        return default_path, 1
    head, _, tail = location.rpartition(":")
    if head and tail.isdigit():
        return head, int(tail)
    return location, 1


def check_data(args: argparse.Namespace, roots: list[str]) -> list[Diagnostic]:
    check = function("check_reward_data")
    out: list[Diagnostic] = []
    for raw in args.files:
        try:
            result = check(
                path=raw,
                judger=args.judger,
                role=args.role,
                max_examples_per_code=max(0, args.max_per_code),
                detail="full",
                roots=roots,
            )
        except ToolInputError as exc:
            out.append(input_error(raw, exc))
            continue
        out += data_diagnostics(result)
    return out


def data_diagnostics(result: Any) -> list[Diagnostic]:
    """Every listed line of every example, a note for lines with the same issue not listed, and the file-level
    findings (unreadable, empty, Parquet, duplicates)."""
    out: list[Diagnostic] = []
    listed: dict[tuple[str, str], int] = {}
    for ex in result.examples:
        path = shown(ex.file)
        for n in ex.lines or [ex.line]:
            out.append(
                Diagnostic(path, n, 1, f"data.{ex.code}", ex.severity, ex.message, extra={"pointer": ex.pointer})
            )
        listed[(ex.file, ex.code)] = listed.get((ex.file, ex.code), 0) + len(ex.lines or [ex.line])
    by_file_code: dict[tuple[str, str], int] = {}
    for ex in result.examples:
        by_file_code[(ex.file, ex.code)] = by_file_code.get((ex.file, ex.code), 0) + ex.count
    for (file, code), total in by_file_code.items():
        more = total - listed[(file, code)]
        if more > 0:
            severity = next(ex.severity for ex in result.examples if ex.file == file and ex.code == code)
            out.append(Diagnostic(shown(file), 1, 1, f"data.{code}", severity, f"{more} more line(s) with this issue"))
    coded = {f"data.{code}" for code in result.errors_by_code}
    for f in result.findings:
        if f.id not in coded:
            path, line = _line_of(f.location, result.files[0].path if result.files else "")
            out.append(Diagnostic(shown(path), line, 1, f.id, f.severity, f.title, f.fix))
        elif not any(d.code == f.id for d in out):  # a code whose examples were not kept (--max-per-code 0)
            path, line = _line_of(f.location, "")
            out.append(Diagnostic(shown(path), line, 1, f.id, f.severity, f"{f.title} ({f.evidence})", f.fix))
        if f.patch:  # one diff fixes every line of the code: printed after its first line
            first = min((d for d in out if d.code == f.id), key=lambda d: (d.path, d.line), default=None)
            if first is not None:
                first.patch = f.patch
    return out


def check_config(args: argparse.Namespace, roots: list[str]) -> list[Diagnostic]:
    env: dict[str, str] | None = None
    if args.env is not None:
        env = {}
        for item in args.env:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise ValueError(f"--env {item!r} is not NAME=VALUE")
            env[name] = value
    inspect = function("inspect_config")
    out: list[Diagnostic] = []
    for raw in args.files:
        try:
            result = inspect(
                path=raw,
                env=env,
                env_file=args.env_file,
                backend=args.backend,
                training_env=args.training_env,
                detail="full",
                roots=roots,
            )
        except ToolInputError as exc:
            out.append(input_error(raw, exc))
            continue
        for f in result.findings:
            _, line = _line_of(f.location, raw)
            out.append(Diagnostic(shown(result.path), line, 1, f.id, f.severity, f.title, f.fix, f.patch))
    return out


# ---- output -----------------------------------------------------------------------------------------------------


def render(diagnostics: list[Diagnostic], fmt: str, files: int, diff: bool = False) -> str:
    if fmt == "json":
        blockers = sum(d.severity == "blocker" for d in diagnostics)
        body = {"files": files, "blockers": blockers, "diagnostics": [asdict(d) for d in diagnostics]}
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(diagnostics), indent=2, ensure_ascii=False) + "\n"
    lines = []
    for d in diagnostics:
        lines.append(d.text())
        if diff and d.patch:
            lines.append(d.patch.rstrip("\n"))
    return "".join(f"{line}\n" for line in lines)


def sarif(diagnostics: Iterable[Diagnostic]) -> dict[str, Any]:
    """SARIF 2.1.0, the format code-scanning UIs read: one rule per code, one result per diagnostic."""
    items = list(diagnostics)
    rules = {d.code: {"id": d.code, "shortDescription": {"text": d.code}} for d in items}
    results = []
    for d in items:
        res: dict[str, Any] = {
            "ruleId": d.code,
            "level": SARIF_LEVEL[d.severity],
            "message": {"text": d.message + (f" Fix: {d.fix}" if d.fix else "")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": d.path.replace(os.sep, "/")},
                        "region": {"startLine": max(1, d.line), "startColumn": max(1, d.col)},
                    }
                }
            ],
        }
        if d.patch:
            res["properties"] = {"patch": d.patch}
        results.append(res)
    driver = {
        "name": "xtuner-rl-mcp",
        "version": __version__,
        "informationUri": "https://github.com/InternLM/xtuner",
        "rules": list(rules.values()),
    }
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }


def main(argv: list[str]) -> int:
    """Run one linter command; the exit code says whether any file has a blocker."""
    parser = build_parser()
    args = parser.parse_args(argv)
    named = [*args.files, *(p for p in (getattr(args, "training_env", None), getattr(args, "env_file", None)) if p)]
    roots = roots_for(named, args.allow_root)
    try:
        found = check_data(args, roots) if args.command == "check-data" else check_config(args, roots)
    except ValueError as exc:
        parser.error(str(exc))
    threshold = SEVERITY_ORDER[args.severity]
    printed = sorted(
        (d for d in found if SEVERITY_ORDER[d.severity] <= threshold), key=lambda d: (d.path, d.line, d.code)
    )
    text = render(printed, args.format, len(args.files), getattr(args, "diff", False))
    sys.stdout.write(text)
    return EXIT_BLOCKERS if any(d.severity == "blocker" for d in found) else EXIT_OK
