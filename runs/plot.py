"""A small PNG of a run's main curves. matplotlib (the optional ``plot`` extra) is imported only here, only when a
picture is asked for, with the non-interactive Agg backend; nothing is written to disk."""

from __future__ import annotations

import io

PANELS = (
    ("reward_mean", "reward mean"),
    ("no_signal_groups_pct", "groups without signal %"),
    ("truncated_pct", "truncated %"),
    ("response_len_mean", "response length"),
    ("entropy_rollout", "entropy (rollout)"),
    ("step_time_s", "step time s"),
)
WIDTH_IN, HEIGHT_IN, DPI = 9.0, 5.0, 80


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def render(
    series: dict[str, list[float | None]], eval_series: dict[str, list[float | None]], title: str
) -> tuple[bytes, list[str], tuple[int, int]]:
    """PNG bytes, the curves drawn and the pixel size."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotUnavailable(str(exc)) from None
    panels = [(k, label) for k, label in PANELS if any(v is not None for v in series.get(k, []))]
    eval_key = next((k for k in eval_series if k != "step"), None)
    if eval_key:
        panels.append(("eval:" + eval_key, f"eval {eval_key}"))
    panels = panels[:6] or [("reward_mean", "reward mean")]
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    cols = 3 if len(panels) > 2 else len(panels)
    rows = (len(panels) + cols - 1) // cols
    steps = series.get("step", [])
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        if key.startswith("eval:"):
            xs, ys = eval_series.get("step", []), eval_series.get(key[5:], [])
        else:
            xs, ys = steps, series.get(key, [])
        pts = [(x, y) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]
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
