"""What a launch needs to know from the RL config, read statically (never executed): the kind of ``trainer`` it
defines (colocated, disaggregated, missing) and the environment variables it requires."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Literal

from ..config_analysis.env_reads import collect_env_reads
from ..core import PathPolicy, ToolInputError, open_guarded

TrainerKind = Literal["colocate", "disaggregated", "unknown", "missing"]
MAX_CONFIG_BYTES = 1_000_000


@dataclass
class ConfigFacts:
    """What a static read of the config file found."""

    read: bool = False
    why_not: str = ""
    trainer: TrainerKind = "unknown"
    trainer_line: int | None = None
    other_trainer_call: str | None = None  # `trainer = X(...)` with X no RL trainer config (and none named)
    required_env: dict[str, int] = field(default_factory=dict)  # os.environ["X"] -> first line
    syntax_error: str | None = None
    text: str | None = None  # the source read, for the value analysis (launch.ray_need)


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _bound_names(stmts: list[ast.stmt], out: dict[str, ast.AST | None], star: list[bool]) -> None:
    """Module-level name bindings (not inside functions or classes): name -> assigned value if simple."""

    def bind(target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            out[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                bind(elt, None)
        elif isinstance(target, ast.Starred):
            bind(target.value, None)

    for st in stmts:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                bind(t, st.value)
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)) and (not isinstance(st, ast.AnnAssign) or st.value):
            bind(st.target, st.value)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            for alias in st.names:
                if alias.name == "*":
                    star[0] = True
                else:
                    out[alias.asname or alias.name.split(".")[0]] = None
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[st.name] = None
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            bind(st.target, None)
            _bound_names(st.body + st.orelse, out, star)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
            _bound_names(st.body, out, star)
        elif isinstance(st, (ast.If, ast.While)):
            _bound_names(st.body + st.orelse, out, star)
        elif hasattr(st, "handlers") and hasattr(st, "finalbody"):  # try / try-except*
            _bound_names(st.body + st.orelse + st.finalbody, out, star)  # type: ignore[attr-defined]
            for handler in st.handlers:  # type: ignore[attr-defined]
                _bound_names(handler.body, out, star)
        elif type(st).__name__ == "Match":
            for case in st.cases:  # type: ignore[attr-defined]
                _bound_names(case.body, out, star)


def _required_env(tree: ast.Module) -> dict[str, int]:
    """Names read as ``os.environ["X"]`` (KeyError when unset), with the first line.

    The reads come from ``config_analysis.env_reads.collect_env_reads`` (shared with inspect_config). A name the file also probes
    with ``os.environ.get``, ``os.getenv`` or ``"X" in os.environ`` counts as guarded (e.g.
    ``int(os.environ["N"]) if os.environ.get("N") else None``) and is left out.
    """
    found: dict[str, int] = {}
    guarded: set[str] = set()
    for read in collect_env_reads(tree):
        if read.name is None:
            continue
        if read.required:
            found.setdefault(read.name, read.line)
        else:
            guarded.add(read.name)
    for node in ast.walk(tree):  # "X" in os.environ
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            left, right = node.left, node.comparators[0]
            if (
                isinstance(left, ast.Constant)
                and isinstance(left.value, str)
                and isinstance(right, ast.Attribute)
                and right.attr == "environ"
            ):
                guarded.add(left.value)
    return {name: line for name, line in found.items() if name not in guarded}


def analyse_config_text(text: str) -> ConfigFacts:
    """Trainer kind and required env vars, from the config's source (never executed)."""
    facts = ConfigFacts(read=True)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        facts.syntax_error = f"line {exc.lineno}: {exc.msg}"
        return facts
    except (ValueError, RecursionError, MemoryError) as exc:
        facts.read, facts.why_not = False, f"config could not be parsed ({type(exc).__name__})"
        return facts
    names: dict[str, ast.AST | None] = {}
    star = [False]
    _bound_names(tree.body, names, star)
    facts.required_env = _required_env(tree)
    if "trainer" not in names:
        facts.trainer = "unknown" if star[0] else "missing"
        return facts
    value = names["trainer"]
    kind = _call_name(value) if value is not None else None
    if kind is None and isinstance(value, ast.Name):  # trainer = some_cfg
        kind = _call_name(names.get(value.id)) if names.get(value.id) is not None else None
    facts.trainer_line = getattr(value, "lineno", None)
    if kind and "RLColocateTrainerConfig" not in text and "RLDisaggregatedTrainerConfig" not in text:
        facts.other_trainer_call = kind
    if kind == "RLDisaggregatedTrainerConfig":
        facts.trainer = "disaggregated"
    elif kind == "RLColocateTrainerConfig":
        facts.trainer = "colocate"
    elif "RLDisaggregatedTrainerConfig(" in text and "RLColocateTrainerConfig(" not in text:
        facts.trainer = "disaggregated"
    elif "RLColocateTrainerConfig(" in text and "RLDisaggregatedTrainerConfig(" not in text:
        facts.trainer = "colocate"
    return facts


def read_config(path: str, policy: PathPolicy) -> ConfigFacts:
    """Read the config file inside the allowed roots (size-capped) and analyse it; why not, when it cannot be."""
    if os.path.splitext(path)[1] != ".py":
        return ConfigFacts(why_not="config is not a .py file")
    try:
        with open_guarded(policy, path, what="config") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except ToolInputError as exc:
        return ConfigFacts(why_not=exc.message)
    except OSError as exc:
        return ConfigFacts(why_not=f"config could not be read: {exc.strerror}")
    if len(data) > MAX_CONFIG_BYTES:
        return ConfigFacts(why_not=f"config is larger than {MAX_CONFIG_BYTES} bytes")
    if b"\x00" in data:
        return ConfigFacts(why_not="config contains NUL bytes (not a Python source file)")
    text = data.decode("utf-8", errors="replace")
    facts = analyse_config_text(text)
    facts.text = text
    return facts
