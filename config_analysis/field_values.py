"""Fields of evaluated config objects as XTuner sees them: the keyword given, else the class default."""

from __future__ import annotations

import re
from typing import Any

from ..xtuner_rules import classes as xc
from .values import Coll, Func, Lit, Obj, Unres, Val, to_python


def synth(cls: str, line: int) -> Obj:
    """A class default such as ``SyncReplayBufferConfig()`` that the config did not write."""
    return Obj(line, f"{cls}() (XTuner default)", cls=cls, synthetic=True)


def field_val(obj: Obj, name: str) -> tuple[Val, str]:
    """The value of a field on an object: the keyword given, else XTuner's default. Returns (value, origin)."""
    if name in obj.kwargs:
        v = obj.kwargs[name]
        return v, origin_of(v)
    spec = (xc.fields_of(obj.cls) or {}).get(name)
    if spec is not None and spec.has_literal_default:
        return Lit(obj.line, f"{obj.cls}.{name} default", value=spec.default), "default"
    if spec is not None and spec.default_expr:
        m = re.fullmatch(r"([A-Za-z_]\w*)\(\)", spec.default_expr)
        if m:
            return synth(m.group(1), obj.line), "default"
        return Unres(obj.line, spec.default_expr, reason="non-literal XTuner default"), "default"
    return Unres(obj.line, f"{obj.cls}.{name}", reason="not given and no default"), "unresolved"


def origin_of(v: Val) -> str:
    if isinstance(v, Unres):
        return "unresolved"
    if v.env_defaulted:
        return "env_default"
    if v.env:
        return "env"
    return "literal"


def lit(v: Val) -> tuple[bool, Any]:
    """(True, python value) if the value is literal."""
    if isinstance(v, Lit | Coll):
        try:
            return True, to_python(v)
        except (ValueError, TypeError):
            return False, None
    return False, None


def json_value(v: Val) -> Any:
    ok, py = lit(v)
    if ok:
        return py if isinstance(py, int | float | str | bool | type(None) | list | dict) else repr(py)
    if isinstance(v, Obj):
        return f"{v.cls}(...)"
    if isinstance(v, Func):
        return f"<function {v.name}>"
    return None


def lit_field(obj: Obj, name: str) -> tuple[bool, Any]:
    """(True, python value) if the field (given or XTuner's default) is literal."""
    return lit(field_val(obj, name)[0])


def json_field(obj: Obj, name: str) -> Any:
    """The field (given or XTuner's default) as a JSON value for the report."""
    return json_value(field_val(obj, name)[0])
