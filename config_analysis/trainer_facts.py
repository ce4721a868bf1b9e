"""What a launch needs from the config's syntax alone, even when its values cannot be evaluated: the kind of
``trainer`` it defines (colocated, disaggregated, missing) and the environment variables it requires."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Literal

from .env_reads import EnvRead

TrainerKind = Literal["colocate", "disaggregated", "unknown", "missing"]


@dataclass(frozen=True)
class TrainerFacts:
    """The trainer kind by its syntax, and the variables read with ``os.environ["X"]`` (KeyError when unset)."""

    trainer: TrainerKind = "unknown"
    trainer_line: int | None = None
    other_trainer_call: str | None = None  # `trainer = X(...)` with X no RL trainer config (and none named)
    required_env: dict[str, int] = field(default_factory=dict)  # os.environ["X"] -> first line
    #: Line of a module-level ``get_model_config_from_hf(...)``: the model's config.json is read when the config
    #: file is loaded (AutoConfig.from_pretrained, xtuner/v1/model/__init__.py:52-54), not when workers start.
    model_config_at_load: int | None = None


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
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                bind(elt, None)
        elif isinstance(target, ast.Starred):
            bind(target.value, None)

    for st in stmts:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                bind(t, st.value)
        elif isinstance(st, ast.AnnAssign | ast.AugAssign) and (not isinstance(st, ast.AnnAssign) or st.value):
            bind(st.target, st.value)
        elif isinstance(st, ast.Import | ast.ImportFrom):
            for alias in st.names:
                if alias.name == "*":
                    star[0] = True
                else:
                    out[alias.asname or alias.name.split(".")[0]] = None
        elif isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[st.name] = None
        elif isinstance(st, ast.For | ast.AsyncFor):
            bind(st.target, None)
            _bound_names(st.body + st.orelse, out, star)
        elif isinstance(st, ast.With | ast.AsyncWith):
            for item in st.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
            _bound_names(st.body, out, star)
        elif isinstance(st, ast.If | ast.While):
            _bound_names(st.body + st.orelse, out, star)
        elif isinstance(st, ast.Try):
            _bound_names(st.body + st.orelse + st.finalbody, out, star)
            for handler in st.handlers:
                _bound_names(handler.body, out, star)
        elif isinstance(st, ast.Match):
            for case in st.cases:
                _bound_names(case.body, out, star)


def _required_env(tree: ast.Module, reads: list[EnvRead]) -> dict[str, int]:
    """Names read as ``os.environ["X"]``, with the first line. A name the file also probes with ``.get``,
    ``os.getenv`` or ``"X" in os.environ`` counts as guarded (``int(os.environ["N"]) if os.environ.get("N") else
    None``) and is left out."""
    found: dict[str, int] = {}
    guarded: set[str] = set()
    for read in reads:
        if read.name is None:
            continue
        if read.required:
            found.setdefault(read.name, read.line)
        else:
            guarded.add(read.name)
    for node in ast.walk(tree):  # "X" in os.environ
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn):
            left, right = node.left, node.comparators[0]
            if (
                isinstance(left, ast.Constant)
                and isinstance(left.value, str)
                and isinstance(right, ast.Attribute)
                and right.attr == "environ"
            ):
                guarded.add(left.value)
    return {name: line for name, line in found.items() if name not in guarded}


def _model_config_at_load(tree: ast.Module) -> int | None:
    """The first ``get_model_config_from_hf(...)`` outside any function or class body, which runs at load."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call) and _call_name(node) == "get_model_config_from_hf":
            return node.lineno
        todo.extend(ast.iter_child_nodes(node))
    return None


def trainer_facts(tree: ast.Module, text: str, reads: list[EnvRead]) -> TrainerFacts:
    """Trainer kind, required env vars and load-time model reads from the syntax tree (never executed)."""
    names: dict[str, ast.AST | None] = {}
    star = [False]
    _bound_names(tree.body, names, star)
    required = _required_env(tree, reads)
    at_load = _model_config_at_load(tree)
    if "trainer" not in names:
        return TrainerFacts("unknown" if star[0] else "missing", required_env=required, model_config_at_load=at_load)
    value = names["trainer"]
    kind = _call_name(value) if value is not None else None
    if kind is None and isinstance(value, ast.Name):  # trainer = some_cfg
        target = names.get(value.id)
        kind = _call_name(target) if target is not None else None
    other = (
        kind if kind and "RLColocateTrainerConfig" not in text and "RLDisaggregatedTrainerConfig" not in text else None
    )
    trainer: TrainerKind = "unknown"
    if kind == "RLDisaggregatedTrainerConfig":
        trainer = "disaggregated"
    elif kind == "RLColocateTrainerConfig":
        trainer = "colocate"
    elif "RLDisaggregatedTrainerConfig(" in text and "RLColocateTrainerConfig(" not in text:
        trainer = "disaggregated"
    elif "RLColocateTrainerConfig(" in text and "RLDisaggregatedTrainerConfig(" not in text:
        trainer = "colocate"
    return TrainerFacts(trainer, getattr(value, "lineno", None), other, required, at_load)
