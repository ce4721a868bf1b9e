"""Static evaluation of an XTuner Python config file with ``ast``: the config is never imported or executed.

The evaluator walks the module's top-level statements in order and binds each name to a value (:mod:`.values`):

* ``Lit`` — a Python literal or the result of simple arithmetic / comparisons / ``int()``-style casts on literals;
* ``Coll`` — a list, tuple or dict holding other values (e.g. a list of ``TaskSpecConfig(...)`` calls);
* ``Obj`` — a call to a class (``RolloutConfig(...)``) with its keyword arguments, evaluated recursively;
* ``Func`` — a function defined in the config (``def compute_metric(...)``) or a lambda;
* ``Unres`` — anything it cannot compute, with the source expression and the reason (never a guess).

Environment reads are understood: ``os.environ["X"]`` is required (a missing value raises ``KeyError`` when
XTuner loads the file), ``os.environ.get("X", d)`` / ``os.getenv("X", d)`` fall back to ``d``. Values come from the
``env`` mapping the caller supplies; without it, required reads stay unresolved and defaulted reads take the
default (marked as such). Bounded in time and memory: big literal operations are refused, not computed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..xtuner_rules import classes as xc
from .env_reads import EnvRead, collect_env_reads
from .literal_ops import COMPARE_OPS, MAX_SEQ_LEN, replace_too_big, safe_binop
from .source_text import expr_text
from .values import Coll, Func, Lit, Obj, Unres, Val, coll_get, elements, is_lit, merge_deps, to_python, with_deps

MAX_INLINE_DEPTH = 8
MAX_INLINE_CALLS = 200
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "update", "pop", "remove", "clear", "setdefault", "add", "discard", "sort"}
)
STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "replace", "split"})
CAST_FUNCS = frozenset({"int", "float", "str", "bool", "abs", "round", "min", "max", "len"})


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


# --------------------------------------------------------------------------------------------------------
# Evaluator
# --------------------------------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """What the evaluator learned about a config module."""

    scope: dict[str, Val]
    bound_at: dict[str, int]  # name -> line of its last binding
    objects: list[Obj]  # every class call evaluated, in order
    env_reads: list[EnvRead]
    env_lookups: list[tuple[str, int, bool, bool, bool]]  # (name, line, required, supplied, conditional)
    invalid_casts: list[tuple[int, str, str]]  # (line, expr, error) e.g. int("abc") from an env value
    notes: list[str]


class ConfigEvaluator:
    """Evaluate a module's top-level statements; see the module docstring for the value kinds."""

    def __init__(
        self, env: dict[str, str] | None, lines: list[str] | None = None, unknown_env: frozenset[str] = frozenset()
    ) -> None:
        self.env = env
        self.unknown_env = unknown_env  # set at launch, to a value not known statically (a launch env file's)
        self.lines = lines
        self.scope: dict[str, Val] = {}
        self.bound_at: dict[str, int] = {}
        self.objects: list[Obj] = []
        self.env_lookups: list[tuple[str, int, bool, bool, bool]] = []
        self.invalid_casts: list[tuple[int, str, str]] = []
        self.notes: list[str] = []
        self.os_names: set[str] = set()  # names bound to the os module
        self.environ_names: set[str] = set()  # names bound to os.environ
        self.getenv_names: set[str] = set()  # names bound to os.getenv
        self._conditional_depth = 0
        self._inline_depth = 0
        self._inline_budget = MAX_INLINE_CALLS

    def text(self, node: ast.AST) -> str:
        return expr_text(node, self.lines)

    # ---- entry point --------------------------------------------------------------------------------

    def run(self, tree: ast.Module) -> Evaluation:
        self.exec_block(tree.body)
        return Evaluation(
            scope=self.scope,
            bound_at=self.bound_at,
            objects=self.objects,
            env_reads=collect_env_reads(tree, self.lines),
            env_lookups=self.env_lookups,
            invalid_casts=self.invalid_casts,
            notes=self.notes,
        )

    # ---- statements ---------------------------------------------------------------------------------

    def bind(self, name: str, val: Val, line: int) -> None:
        self.scope[name] = val
        self.bound_at[name] = line

    def exec_block(self, stmts: list[ast.stmt]) -> None:
        for st in stmts:
            self.exec_stmt(st)

    def exec_stmt(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Assign):
            val = self.ev(st.value)
            for t in st.targets:
                self.assign(t, val, st.lineno)
        elif isinstance(st, ast.AnnAssign):
            if st.value is not None:
                self.assign(st.target, self.ev(st.value), st.lineno)
        elif isinstance(st, ast.AugAssign):
            if isinstance(st.target, ast.Name):
                cur = self.scope.get(st.target.id)
                rhs = self.ev(st.value)
                node = ast.BinOp(left=st.target, op=st.op, right=st.value)
                ast.copy_location(node, st)
                self.bind(
                    st.target.id, self._binop(node, cur, rhs) if cur else self._unres(node, "undefined"), st.lineno
                )
        elif isinstance(st, ast.If):
            self.exec_if(st)
        elif isinstance(st, ast.For | ast.AsyncFor | ast.While):
            for name in assigned_names(st):
                self.bind(
                    name,
                    Unres(st.lineno, name, reason=f"assigned or modified in a loop at line {st.lineno}"),
                    st.lineno,
                )
        elif isinstance(st, ast.With | ast.AsyncWith):
            for item in st.items:
                if item.optional_vars is not None:
                    self.assign(
                        item.optional_vars, self._unres(item.context_expr, "bound by a with-statement"), st.lineno
                    )
            self.exec_block(st.body)
        elif isinstance(st, ast.Try):
            self.exec_block(st.body)
            for block in [h.body for h in st.handlers] + [st.orelse, st.finalbody]:
                for name in assigned_names(ast.Module(body=block, type_ignores=[])):
                    self.bind(
                        name, Unres(st.lineno, name, reason=f"assigned in a try/except at line {st.lineno}"), st.lineno
                    )
        elif isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            simple = st if isinstance(st, ast.FunctionDef) and _single_return(st) is not None else None
            self.bind(st.name, Func(st.lineno, st.name, name=st.name, node=simple), st.lineno)
        elif isinstance(st, ast.Import):
            for a in st.names:
                bound = a.asname or a.name.split(".")[0]
                if a.name == "os":
                    self.os_names.add(bound)
                self.bind(bound, Unres(st.lineno, a.name, reason=f"module {a.name}"), st.lineno)
        elif isinstance(st, ast.ImportFrom):
            for a in st.names:
                bound = a.asname or a.name
                if st.module == "os" and a.name == "environ":
                    self.environ_names.add(bound)
                if st.module == "os" and a.name == "getenv":
                    self.getenv_names.add(bound)
                self.bind(bound, Unres(st.lineno, a.name, reason=f"imported from {st.module}"), st.lineno)
        elif isinstance(st, ast.Expr):
            self.exec_expr_stmt(st)
        elif isinstance(st, ast.Delete):
            for t in st.targets:
                if isinstance(t, ast.Name):
                    self.scope.pop(t.id, None)
        # other statements (assert, raise, pass, global, match) do not bind module names we track

    def exec_expr_stmt(self, st: ast.Expr) -> None:
        call = st.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            base = call.func.value
            if isinstance(base, ast.Name) and call.func.attr in MUTATING_METHODS and base.id in self.scope:
                self.bind(
                    base.id,
                    Unres(st.lineno, base.id, reason=f"modified by .{call.func.attr}() at line {st.lineno}"),
                    self.bound_at.get(base.id, st.lineno),
                )
                return
        self.ev(call)  # evaluate for side records (objects built at load time)

    def exec_if(self, st: ast.If) -> None:
        test = self.ev(st.test)
        if is_lit(test):
            try:
                chosen = bool(to_python(test))
            except Exception:
                chosen = None
            if chosen is not None:
                self.exec_block(st.body if chosen else st.orelse)
                return
        before = dict(self.scope)
        before_at = dict(self.bound_at)
        self._conditional_depth += 1
        self.exec_block(st.body)
        body_scope, body_at = self.scope, self.bound_at
        self.scope, self.bound_at = dict(before), dict(before_at)
        self.exec_block(st.orelse)
        else_scope = self.scope
        self._conditional_depth -= 1
        merged = dict(before)
        merged_at = dict(before_at)
        reason = f"depends on `if {self.text(st.test)}` (line {st.lineno}), which cannot be resolved statically"
        for name in set(body_scope) | set(else_scope):
            a, b = body_scope.get(name), else_scope.get(name)
            if a is b and a is not None:
                merged[name] = a
            else:
                merged[name] = Unres(st.lineno, name, test.env, test.env_defaulted, reason=reason)
            merged_at[name] = max(body_at.get(name, 0), self.bound_at.get(name, 0)) or st.lineno
        self.scope, self.bound_at = merged, merged_at

    def assign(self, target: ast.expr, val: Val, line: int) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, val, line)
        elif isinstance(target, ast.Tuple | ast.List):
            items = elements(val)
            if items is not None and len(items) == len(target.elts):
                for t, v in zip(target.elts, items, strict=True):
                    self.assign(t, v, line)
            else:
                for t in target.elts:
                    self.assign(t, self._unres(target, "tuple unpacking"), line)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            base = self.scope.get(target.value.id)
            if isinstance(base, Obj):
                base.kwargs[target.attr] = val
                base.kw_lines[target.attr] = line
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            name = target.value.id
            if name in self.scope:
                self.bind(name, Unres(line, name, reason=f"modified by item assignment at line {line}"), line)

    # ---- expressions --------------------------------------------------------------------------------

    def _unres(self, node: ast.AST, reason: str, *deps: Val) -> Unres:
        env, dflt = merge_deps(*deps)
        return Unres(getattr(node, "lineno", 0), self.text(node), env, dflt, reason=reason)

    def _lit(self, node: ast.AST, value: Any, *deps: Val) -> Lit:
        env, dflt = merge_deps(*deps)
        return Lit(getattr(node, "lineno", 0), self.text(node), env, dflt, value=value)

    def ev(self, node: ast.expr) -> Val:
        try:
            return self._ev(node)
        except RecursionError:
            return self._unres(node, "expression too deeply nested")

    def _ev(self, node: ast.expr) -> Val:
        if isinstance(node, ast.Constant):
            return self._lit(node, node.value)
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                return self.scope[node.id]
            return self._unres(node, f"name {node.id!r} is not bound at module level (builtin or undefined)")
        env_val = self._env_access(node)
        if env_val is not None:
            return env_val
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node)
        if isinstance(node, ast.BinOp):
            return self._binop(node, self.ev(node.left), self.ev(node.right))
        if isinstance(node, ast.UnaryOp):
            v = self.ev(node.operand)
            if isinstance(v, Lit):
                try:
                    ops = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x}
                    fn = ops.get(type(node.op))
                    if fn is not None:
                        return self._lit(node, fn(v.value), v)
                except Exception:
                    pass
            return self._unres(node, "operand not resolved", v)
        if isinstance(node, ast.BoolOp):
            vals = [self.ev(x) for x in node.values]
            lits = [x for x in vals if isinstance(x, Lit)]
            if len(lits) == len(vals):
                res = lits[0].value
                for x in lits[1:]:
                    res = (res and x.value) if isinstance(node.op, ast.And) else (res or x.value)
                return self._lit(node, res, *vals)
            return self._unres(node, "operand not resolved", *vals)
        if isinstance(node, ast.Compare):
            left = self.ev(node.left)
            rights = [self.ev(c) for c in node.comparators]
            if is_lit(left) and all(is_lit(r) for r in rights):
                try:
                    a = to_python(left)
                    ok = True
                    for op, r in zip(node.ops, rights, strict=True):
                        b = to_python(r)
                        ok = ok and bool(COMPARE_OPS[type(op)](a, b))
                        a = b
                    return self._lit(node, ok, left, *rights)
                except Exception:
                    pass
            return self._unres(node, "comparison operand not resolved", left, *rights)
        if isinstance(node, ast.IfExp):
            test = self.ev(node.test)
            if isinstance(test, Lit):
                picked = self.ev(node.body if test.value else node.orelse)
                return with_deps(picked, test)
            return self._unres(node, "condition not resolved", test)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [self.ev(e) for e in node.elts if not isinstance(e, ast.Starred)]
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return self._unres(node, "starred element")
            kind = "tuple" if isinstance(node, ast.Tuple) else "list"
            env, dflt = merge_deps(*items)
            return Coll(node.lineno, self.text(node), env, dflt, kind=kind, items=items)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return self._unres(node, "dict unpacking")
            keys = [self.ev(k) for k in node.keys if k is not None]
            items = [self.ev(v) for v in node.values]
            env, dflt = merge_deps(*keys, *items)
            return Coll(node.lineno, self.text(node), env, dflt, kind="dict", items=items, keys=keys)
        if isinstance(node, ast.Subscript):
            base = self.ev(node.value)
            idx = self.ev(node.slice)
            if isinstance(idx, Lit):
                if isinstance(base, Coll):
                    if base.kind == "dict":
                        got = coll_get(base, idx.value)
                        if got is not None:
                            return got
                    elif isinstance(idx.value, int) and -len(base.items) <= idx.value < len(base.items):
                        return base.items[idx.value]
                if isinstance(base, Lit):
                    try:
                        return self._lit(node, base.value[idx.value], base, idx)
                    except Exception:
                        pass
            return self._unres(node, "subscript not resolved", base, idx)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Lambda):
            return Func(node.lineno, self.text(node), name="<lambda>")
        return self._unres(node, f"{type(node).__name__} expressions are not evaluated")

    def _binop(self, node: ast.BinOp, a: Val, b: Val) -> Val:
        if isinstance(a, Lit) and isinstance(b, Lit):
            try:
                return self._lit(node, safe_binop(node.op, a.value, b.value), a, b)
            except ValueError as exc:
                return self._unres(node, f"arithmetic not computed ({exc})", a, b)
        return self._unres(node, "operand not resolved", a, b)

    def _fstring(self, node: ast.JoinedStr) -> Val:
        parts: list[str] = []
        deps: list[Val] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and v.format_spec is None and v.conversion == -1:
                inner = self.ev(v.value)
                deps.append(inner)
                if not isinstance(inner, Lit):
                    return self._unres(node, "f-string part not resolved", *deps)
                parts.append(str(inner.value))
                if sum(len(x) for x in parts) > MAX_SEQ_LEN:
                    return self._unres(node, "f-string too long to evaluate", *deps)
            else:
                return self._unres(node, "formatted f-string part not evaluated")
        return self._lit(node, "".join(parts), *deps)

    def _attribute(self, node: ast.Attribute) -> Val:
        base = self.ev(node.value)
        if isinstance(base, Obj):
            if node.attr in base.kwargs:
                return base.kwargs[node.attr]
            fields = xc.fields_of(base.cls)
            if fields and node.attr in fields and fields[node.attr].has_literal_default:
                return self._lit(node, fields[node.attr].default, base)
        return self._unres(node, "attribute not resolved", base)

    # ---- env reads ----------------------------------------------------------------------------------

    def _is_environ(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.environ_names
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.os_names
        )

    def _is_getenv(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in self.getenv_names
        if isinstance(func, ast.Attribute):
            if func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id in self.os_names:
                return True
            if func.attr in ("get", "setdefault") and self._is_environ(func.value):
                return True
        return False

    def _env_access(self, node: ast.expr) -> Val | None:
        if isinstance(node, ast.Subscript) and self._is_environ(node.value):
            key = self.ev(node.slice)
            if not isinstance(key, Lit) or not isinstance(key.value, str):
                return self._unres(node, "environment key is not a literal")
            return self._env_value(node, key.value, required=True, default=None)
        if isinstance(node, ast.Call) and self._is_getenv(node.func) and node.args:
            key = self.ev(node.args[0])
            if not isinstance(key, Lit) or not isinstance(key.value, str):
                return self._unres(node, "environment key is not a literal")
            default_node = node.args[1] if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg in ("default", "value"):
                    default_node = kw.value
            return self._env_value(node, key.value, required=False, default=default_node)
        return None

    def _env_value(self, node: ast.expr, name: str, *, required: bool, default: ast.expr | None) -> Val:
        value = self.env.get(name) if self.env is not None else None
        supplied = value is not None or name in self.unknown_env
        self.env_lookups.append((name, node.lineno, required, supplied, self._conditional_depth > 0))
        if value is not None:
            return Lit(node.lineno, self.text(node), (name,), (), value=value)
        if name in self.unknown_env:
            why = f"env var {name} is set by the launch env file to a value not known statically"
            return Unres(node.lineno, self.text(node), (name,), (), reason=why)
        if required:
            why = "not in the supplied env" if self.env is not None else "no env supplied"
            return Unres(node.lineno, self.text(node), (name,), (), reason=f"required env var {name} ({why})")
        dv = self.ev(default) if default is not None else self._lit(node, None)
        env, dflt = merge_deps(dv)
        if isinstance(dv, Lit):
            return Lit(node.lineno, self.text(node), (name, *env), (name, *dflt), value=dv.value)
        return Unres(
            node.lineno, self.text(node), (name, *env), (name, *dflt), reason=f"default of env var {name}: {dv.expr}"
        )

    # ---- calls --------------------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> Val:
        name = _callee_name(node.func)
        # method calls on literal strings: "1".lower(), os.environ.get(...).strip()
        if isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
            base = self.ev(node.func.value)
            args = [self.ev(a) for a in node.args]
            lit_args = [a for a in args if isinstance(a, Lit)]
            if (
                isinstance(base, Lit)
                and isinstance(base.value, str)
                and len(base.value) <= MAX_SEQ_LEN
                and len(lit_args) == len(args)
                and all(len(str(a.value)) <= MAX_SEQ_LEN for a in lit_args)
                and not (node.func.attr == "replace" and replace_too_big(base.value, [a.value for a in lit_args]))
            ):
                try:
                    return self._lit(
                        node, getattr(base.value, node.func.attr)(*[a.value for a in lit_args]), base, *args
                    )
                except Exception:
                    pass
            return self._unres(node, "method call not resolved", base, *args)
        if isinstance(node.func, ast.Name) and node.func.id in CAST_FUNCS and node.func.id not in self.scope:
            return self._cast(node, node.func.id)
        if name in ("dict",) and isinstance(node.func, ast.Name) and not node.args:
            return self._dict_call(node)
        if name in ("Path", "PurePath") and len(node.args) == 1 and not node.keywords:
            v = self.ev(node.args[0])
            if isinstance(v, Lit) and isinstance(v.value, str):
                return self._lit(node, v.value, v)
            return self._unres(node, "path not resolved", v)
        if name in ("list", "tuple") and isinstance(node.func, ast.Name) and len(node.args) == 1:
            return self.ev(node.args[0])
        callee = self.scope.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if isinstance(callee, Func):
            if callee.node is not None and self._inline_depth < MAX_INLINE_DEPTH and self._inline_budget > 0:
                self._inline_budget -= 1
                return self._inline(node, callee)
            for a in node.args:
                self.ev(a)
            return self._unres(node, f"result of the config's own function {callee.name}()")
        if name and (xc.get(name) is not None or name[:1].isupper()):
            return self._obj(node, name)
        for a in node.args:
            self.ev(a)
        for kw in node.keywords:
            self.ev(kw.value)
        return self._unres(node, f"result of calling {self.text(node.func)}()")

    def _inline(self, node: ast.Call, fn: Func) -> Val:
        """Evaluate a call to a config-defined ``def f(a, b=1): return <expr>`` with its arguments bound."""
        fdef = fn.node
        assert fdef is not None
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or any(isinstance(x, ast.Starred) for x in node.args):
            return self._unres(node, f"call of {fn.name}() with *args/**kwargs not evaluated")
        names = [p.arg for p in a.args]
        bound: dict[str, Val] = {}
        for pname, arg in zip(names, node.args, strict=False):
            bound[pname] = self.ev(arg)
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in names:
                return self._unres(node, f"call of {fn.name}() with unknown keyword not evaluated")
            bound[kw.arg] = self.ev(kw.value)
        defaults = dict(zip(names[len(names) - len(a.defaults) :], a.defaults, strict=True))
        for pname in names:
            if pname not in bound:
                if pname not in defaults:
                    return self._unres(node, f"call of {fn.name}() misses argument {pname!r}")
                bound[pname] = self.ev(defaults[pname])
        ret = _single_return(fdef)
        assert ret is not None
        saved = self.scope
        self.scope = {**saved, **bound}
        self._inline_depth += 1
        try:
            out = self.ev(ret)
        finally:
            self._inline_depth -= 1
            self.scope = saved
        return out

    def _cast(self, node: ast.Call, fn: str) -> Val:
        args = [self.ev(a) for a in node.args]
        if node.keywords or not args or not all(is_lit(a) for a in args):
            return self._unres(node, f"{fn}() argument not resolved", *args)
        vals = [to_python(a) for a in args]
        try:
            if fn in ("min", "max") and len(vals) == 1 and len(vals[0]) > MAX_SEQ_LEN:
                raise ValueError("sequence too long")
            builtins_map: dict[str, Callable[..., Any]] = {"int": int, "float": float, "str": str, "bool": bool}
            builtins_map.update({"abs": abs, "round": round, "min": min, "max": max, "len": len})
            if fn == "int" and len(vals) == 1 and isinstance(vals[0], str) and len(vals[0]) > 100:
                raise ValueError("literal too long")
            out = builtins_map[fn](*vals)
        except Exception as exc:
            self.invalid_casts.append((node.lineno, self.text(node), f"{type(exc).__name__}: {exc}"))
            return self._unres(node, f"{fn}() fails: {type(exc).__name__}: {exc}", *args)
        return self._lit(node, out, *args)

    def _dict_call(self, node: ast.Call) -> Val:
        keys: list[Val] = []
        items: list[Val] = []
        for kw in node.keywords:
            if kw.arg is None:
                return self._unres(node, "dict(**...) not evaluated")
            keys.append(Lit(kw.value.lineno, repr(kw.arg), value=kw.arg))
            items.append(self.ev(kw.value))
        env, dflt = merge_deps(*items)
        return Coll(node.lineno, self.text(node), env, dflt, kind="dict", items=items, keys=keys)

    def _obj(self, node: ast.Call, cls: str) -> Obj:
        obj = Obj(node.lineno, self.text(node), cls=cls, conditional=self._conditional_depth > 0)
        obj.node = node if self._inline_depth == 0 else None
        obj.args = [self.ev(a) for a in node.args]
        for kw in node.keywords:
            val = self.ev(kw.value)
            if kw.arg is None:
                key_lits = [k for k in val.keys or [] if isinstance(k, Lit)] if isinstance(val, Coll) else []
                if isinstance(val, Coll) and val.kind == "dict" and len(key_lits) == len(val.keys or []):
                    for k, v in zip(key_lits, val.items, strict=False):
                        obj.kwargs[str(k.value)] = v
                        obj.kw_lines[str(k.value)] = kw.value.lineno
                else:
                    obj.splat = True
                continue
            obj.kwargs[kw.arg] = val
            obj.kw_lines[kw.arg] = kw.value.lineno
        env, dflt = merge_deps(*obj.args, *obj.kwargs.values())
        obj.env, obj.env_defaulted = env, dflt
        self.objects.append(obj)
        return obj


def _single_return(fdef: ast.FunctionDef) -> ast.expr | None:
    """The returned expression of ``def f(...): [docstring] return <expr>``, else None."""
    body = list(fdef.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None and not fdef.decorator_list:
        return body[0].value
    return None


def assigned_names(node: ast.AST) -> list[str]:
    """Names bound or mutated anywhere inside a statement (loop bodies, handlers)."""
    out: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id not in out:
            out.append(sub.id)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in MUTATING_METHODS:
            base = sub.func.value
            if isinstance(base, ast.Name) and base.id not in out:
                out.append(base.id)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and sub.name not in out:
            out.append(sub.name)
    return out


def evaluate(
    tree: ast.Module, env: dict[str, str] | None, source: str | None = None, unknown_env: frozenset[str] = frozenset()
) -> Evaluation:
    """Evaluate a parsed config module (``source``, when given, is used for the expression texts); ``unknown_env``:
    names the launch sets to values not known statically (their reads stay unresolved, but are not missing)."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n") if source is not None else None
    return ConfigEvaluator(env, lines, unknown_env).run(tree)
