"""A small PNG of a run's main curves. matplotlib (the optional ``plot`` extra) is imported only here, only when a
picture is asked for, with the non-interactive Agg backend.

Nothing is written under the user's home: matplotlib's config and font cache go to a private temporary directory,
made on first use and removed when the process exits. Non-finite values are left out of the curves and huge ones
clipped (an axis spanning ±1e308 overflows matplotlib's tick layout).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PANELS = (
    ("reward_mean", "reward mean"),
    ("no_signal_groups_pct", "groups without signal %"),
    ("truncated_pct", "truncated %"),
    ("response_len_mean", "response length"),
    ("entropy_rollout", "entropy (rollout)"),
    ("step_time_s", "step time s"),
)
WIDTH_IN, HEIGHT_IN, DPI = 9.0, 5.0, 80
#: Values beyond this magnitude are drawn at it.
MAX_ABS_VALUE = 1e15
#: What matplotlib reads to place its config and cache (MPLCONFIGDIR first, the XDG dirs as its fallback).
MATPLOTLIB_DIR_VARS = ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")

_import_lock = threading.Lock()
_figure: type[Figure] | None = None  # once imported


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


@contextlib.contextmanager
def _private_matplotlib_dirs() -> Iterator[None]:
    """matplotlib's dir variables pointed at a new private temp dir (removed at exit) for the duration of the
    import only: matplotlib resolves and caches its dirs then, and the rest of the server never sees them."""
    private = tempfile.mkdtemp(prefix="xtuner-rl-mcp-matplotlib-")
    atexit.register(shutil.rmtree, private, True)
    saved = {name: os.environ.get(name) for name in MATPLOTLIB_DIR_VARS}
    os.environ.update({name: private for name in MATPLOTLIB_DIR_VARS})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _figure_class() -> type[Figure]:
    """matplotlib's ``Figure``, imported on first use with private config and cache dirs."""
    global _figure
    with _import_lock:
        if _figure is None:
            try:
                with _private_matplotlib_dirs():
                    import matplotlib

                    matplotlib.use("Agg", force=True)
                    matplotlib.get_configdir()
                    matplotlib.get_cachedir()
                    from matplotlib.figure import Figure  # loads (or builds) the font cache, in the private dir
            except ImportError as exc:
                raise PlotUnavailable(str(exc)) from None
            _figure = Figure
    return _figure


def _points(xs: list[float | None], ys: list[float | None]) -> list[tuple[float, float]]:
    """Finite (x, y) pairs, y clipped to ±``MAX_ABS_VALUE``."""
    out = []
    for x, y in zip(xs, ys, strict=False):
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        out.append((x, max(-MAX_ABS_VALUE, min(MAX_ABS_VALUE, y))))
    return out


def render(
    series: dict[str, list[float | None]], eval_series: dict[str, list[float | None]], title: str
) -> tuple[bytes, list[str], tuple[int, int]]:
    """PNG bytes, the curves drawn and the pixel size."""
    figure_class = _figure_class()
    panels = [(k, label) for k, label in PANELS if any(v is not None for v in series.get(k, []))]
    eval_key = next((k for k in eval_series if k != "step"), None)
    if eval_key:
        panels.append(("eval:" + eval_key, f"eval {eval_key}"))
    panels = panels[:6] or [("reward_mean", "reward mean")]
    fig = figure_class(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    cols = 3 if len(panels) > 2 else len(panels)
    rows = (len(panels) + cols - 1) // cols
    steps = series.get("step", [])
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        if key.startswith("eval:"):
            xs, ys = eval_series.get("step", []), eval_series.get(key[5:], [])
        else:
            xs, ys = steps, series.get(key, [])
        pts = _points(xs, ys)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if len(pts) < 40 else None, linewidth=1.2)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue(), [label for _, label in panels], (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
