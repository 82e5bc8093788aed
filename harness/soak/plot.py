"""RSS and open descriptors of every sampled process over time, as one PNG. Pure.

Two panels sharing the time axis (RSS in MiB above, descriptors below); the warm-up and
the two comparison windows are shaded so the growth figures can be read off the chart.
Built like ``harness.report.plot``: ``Figure`` + Agg canvas, no global pyplot state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.report.plot import PNG_SIGNATURE, _figure, _png, _style

MIB = 1024 * 1024
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")

Row = Sequence[float | int | None]
"""``[t_s, pid, rss_bytes, fds, established_connections]`` as in ``docs/soak.json``."""


def rss_fd_png(
    by_process: Mapping[str, Sequence[Row]],
    windows: Mapping[str, float],
    *,
    title: str = "",
    width: float = 8.0,
    height: float = 6.0,
) -> bytes:
    """The chart; processes without any reading are left out."""
    fig = _figure(width, height)
    rss_ax, fd_ax = fig.subplots(2, 1, sharex=True)
    for ax in (rss_ax, fd_ax):
        _style(ax)
        ax.axvspan(0, windows["warmup"], color="#eeeeee", label="_warm-up")
        ax.axvspan(windows["warmup"], windows["first_end"], color="#e3f2fd")
        ax.axvspan(windows["last_start"], windows["end"], color="#fff3e0")
    for i, (name, rows) in enumerate(sorted(by_process.items())):
        color = _PALETTE[i % len(_PALETTE)]
        rss = [(r[0], r[2]) for r in rows if r[0] is not None and r[2] is not None]
        fds = [(r[0], r[3]) for r in rows if r[0] is not None and r[3] is not None]
        other = [
            (r[0], r[3] - (r[4] or 0))
            for r in rows
            if len(r) > 4 and r[0] is not None and r[3] is not None
        ]
        if rss:
            rss_ax.plot(
                [t for t, _ in rss], [v / MIB for _, v in rss], label=name, color=color, lw=1.2
            )
        if fds:
            fd_ax.plot([t for t, _ in fds], [v for _, v in fds], color=color, lw=0.8, ls="--")
        if other:
            fd_ax.plot([t for t, _ in other], [v for _, v in other], color=color, lw=1.2)
    rss_ax.set_ylabel("RSS (MiB)")
    rss_ax.set_ylim(bottom=0)
    fd_ax.set_ylabel(
        "fds (dashed: all; solid: judged,\nwithout established connections)", fontsize=8
    )
    fd_ax.set_xlabel("seconds since the churn started (grey: warm-up; blue/orange: windows)")
    if title:
        rss_ax.set_title(title, fontsize=10)
    rss_ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


__all__ = ["PNG_SIGNATURE", "rss_fd_png"]
