"""Charts as PNG bytes (pure: data in, bytes out; nothing written, no global pyplot state).

matplotlib is imported lazily and driven through ``Figure`` + the Agg canvas directly, so
importing this module is cheap and the process-wide backend is left alone.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from harness.report.stats import LatencySummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_DPI = 100
_BAR = "#4c78a8"
_P50 = "#2e7d32"
_P99 = "#c62828"
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    return fig


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _style(ax: object) -> None:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)


def _axes(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure with one styled plot."""
    fig = _figure(width, height)
    ax = fig.add_subplot()
    _style(ax)
    return fig, ax


def latency_histogram_png(
    values_ms: Sequence[float],
    *,
    title: str = "delivery latency",
    width: float = 6.4,
    height: float = 2.8,
) -> bytes:
    """A histogram of latencies in ms with p50 and p99 marked; "no samples" when empty."""
    summary = LatencySummary.of(values_ms)
    if summary is None:
        fig = _figure(3.2, 0.8)
        fig.text(0.5, 0.5, "no latency samples", ha="center", va="center", color="#777777")
        return _png(fig)
    fig, ax = _axes(width, height)
    lo, hi = min(values_ms), max(values_ms)
    bins = max(1, min(60, len(set(values_ms)), int(len(values_ms) ** 0.5) + 5))
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    ax.hist(values_ms, bins=bins, range=(lo, hi), color=_BAR, edgecolor="white", linewidth=0.4)
    for name, value, colour in (("p50", summary.p50, _P50), ("p99", summary.p99, _P99)):
        ax.axvline(
            value, color=colour, linestyle="--", linewidth=1.4, label=f"{name} {value:.1f} ms"
        )
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("events")
    ax.set_title(f"{title} (n={summary.count}, max {summary.max:.1f} ms)", fontsize=10)
    ax.legend(frameon=False, fontsize=9)
    return _png(fig)


def line_chart_png(
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    log_y: bool = False,
    width: float = 6.4,
    height: float = 3.2,
) -> bytes:
    """Lines with markers: one per series over the shared ``x`` (e.g. rate → p99 latency)."""
    for name, values in series.items():
        if len(values) != len(x):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(x)} x values")
    fig, ax = _axes(width, height)
    for i, (name, values) in enumerate(series.items()):
        ax.plot(x, values, marker="o", markersize=3, label=name, color=_PALETTE[i % len(_PALETTE)])
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(frameon=False, fontsize=9)
    return _png(fig)
