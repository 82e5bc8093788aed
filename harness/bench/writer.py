"""Results → ``docs/benchmarks.md``, ``docs/benchmarks.json``, PNG plots, console table (pure).

Data in, text or bytes out; the suite writes the files. The markdown keeps a short section
of facts measured by other commands (builds), which this suite does not re-measure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.bench.klm_scale_report import timeline_png
from harness.bench.model import BenchResult, Cell, RunMeta, Table, Target
from harness.report.plot import _PALETTE, _figure, _png, _style, line_chart_png

E2E_PLOT = "benchmarks-e2e-latency.png"
REQUEUE_PLOT = "benchmarks-requeue.png"
FLEET_PLOT = "benchmarks-fleet-queue.png"
ADMISSION_PLOT = "benchmarks-admission-cdf.png"
KLM_SCALE_PLOT = "benchmarks-klm-scale.png"

MEASURED_ELSEWHERE = (
    ("first `kube-apiserver` build (cold module cache)", "3 min 44 s wall", "`make binaries`"),
    ("rebuild with warm Go caches / already cached", "10 s / 0.15 s", "`make binaries`"),
    (
        "webhook ↔ listener admission latency and events/s without API servers",
        "see [benchmarks-loopback.md](benchmarks-loopback.md)",
        "`python -m harness.bench.loopback`",
    ),
)


def _cell(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return value


def _met(target: Target) -> str:
    return {True: "✅ met", False: "❌ missed", None: "- not measured"}[target.met]


def table_markdown(table: Table) -> list[str]:
    lines = [f"**{table.title}**", "", "| " + " | ".join(table.columns) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return [*lines, ""]


def targets_table(results: Sequence[BenchResult]) -> Table:
    rows: list[tuple[Cell, ...]] = []
    for result in results:
        for target in result.targets:
            rows.append((target.what, target.target, target.measured, _met(target), result.name))
        if result.error and not result.targets:
            rows.append(
                (result.title, "", f"failed: {result.error[:120]}", "- failed", result.name)
            )
    return Table("Targets", ("target", "wanted", "measured", "", "benchmark"), tuple(rows))


def _load(load: Sequence[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def render_markdown(
    results: Sequence[BenchResult], meta: RunMeta, *, plots: Sequence[str] = ()
) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in meta.versions.items())
    busy = (
        " **The machine was busy with other work during the run** (load above half the "
        "cores): absolute figures are pessimistic; compare rows of one run."
        if meta.busy
        else ""
    )
    lines = [
        "# Benchmarks",
        "",
        f"Produced by `{meta.command}` on {meta.date} in {meta.seconds / 60:.1f} min on a "
        f"{meta.cores}-core machine (load average 1/5/15 min: {_load(meta.load_before)} "
        f"before, {_load(meta.load_after)} after).{busy} Versions: {versions}. Everything "
        "runs on 127.0.0.1; every load loop is bounded in count and time. Every figure is "
        "also in [benchmarks.json](benchmarks.json). Regenerate with `make bench` "
        "(`python -m harness.bench [--quick] [--only NAME ...]`).",
        "",
    ]
    lines += table_markdown(targets_table(results))
    missed = [(r, t) for r in results for t in r.targets if t.met is not True and t.note.strip()]
    if missed:
        lines += ["### Why a target was missed, and what would lift it", ""]
        for result, target in missed:
            lines += [f"- **{target.what}** ({result.name}): {target.note}", ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p}]({p})" for p in plots]
        lines.append("")
    for result in results:
        lines += [f"## {result.title}", ""]
        if result.description:
            lines += [result.description, ""]
        if result.error:
            lines += [f"**Failed:** `{result.error}`", ""]
        for table in result.tables:
            lines += table_markdown(table)
        for note in result.notes:
            lines += [f"- {note}"]
        if result.notes:
            lines.append("")
        lines += [f"_Benchmark time: {result.seconds:.0f} s._", ""]
    lines += [
        "## Measured by other commands (not re-run by `make bench`)",
        "",
        "| what | result | command |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in MEASURED_ELSEWHERE),
        "",
    ]
    return "\n".join(lines)


def _clean(value: Any) -> Any:
    """NaN → None, recursively, so the JSON is standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def render_json(results: Sequence[BenchResult], meta: RunMeta) -> str:
    doc = {"meta": meta.to_json(), "benchmarks": [r.to_json() for r in results]}
    return json.dumps(_clean(doc), indent=2, ensure_ascii=False) + "\n"


def render_plots(results: Sequence[BenchResult]) -> dict[str, bytes]:
    """File name → PNG for the benchmarks present (e2e latency, requeue curve, fleet queue)."""
    by_name = {r.name: r for r in results if not r.error}
    plots: dict[str, bytes] = {}
    e2e = by_name.get("e2e")
    rates = [r for r in (e2e.figures.get("rates", []) if e2e else []) if r.get("reconcile")]
    if rates:
        x = [float(r["achieved_rate"]) for r in rates]
        plots[E2E_PLOT] = line_chart_png(
            x,
            {
                "write → listener p50": [r["listener"]["p50"] for r in rates],
                "write → listener p99": [r["listener"]["p99"] for r in rates],
                "write → reconcile p50": [r["reconcile"]["p50"] for r in rates],
                "write → reconcile p99": [r["reconcile"]["p99"] for r in rates],
            },
            title="End-to-end latency vs achieved write rate (3 SKRs)",
            xlabel="writes/s achieved",
            ylabel="latency (ms)",
            log_y=True,
        )
    admission = by_name.get("admission")
    alone = admission.figures.get("webhook_alone", []) if admission else []
    if admission and alone:
        plots[ADMISSION_PLOT] = admission_cdf_png(admission.figures["curve_percentiles"], alone)
    requeue = by_name.get("requeue")
    if requeue and requeue.figures.get("fleets"):
        plots[REQUEUE_PLOT] = requeue_curve_png(
            requeue.figures["fleets"], floor_s=requeue.figures["plan"]["floor_s"]
        )
    fleet = by_name.get("fleet")
    if fleet and fleet.figures.get("timeline"):
        plots[FLEET_PLOT] = fleet_queue_png(fleet)
    klm_scale = by_name.get("klm-scale")
    if klm_scale and klm_scale.figures.get("runs"):
        plots[KLM_SCALE_PLOT] = timeline_png(klm_scale.figures["runs"])
    return plots


def requeue_curve_png(fleets: Sequence[Mapping[str, Any]], *, floor_s: float) -> bytes:
    """Reconciles per Kyma-hour vs reaction p99, both log, one panel per fleet size.

    Per worker setting the polling ladder is a line (its points labelled with the interval)
    and the watcher's safety requeues are markers on the same axes, so "how much more does
    polling pay for the same reaction" is the vertical gap at equal x; a star marks the
    polling interval matched to the 5 min watcher, the dotted line the floor of the search.
    """
    fig = _figure(5.4 * len(fleets), 4.6)
    axes = fig.subplots(1, len(fleets), sharey=True, squeeze=False)[0]
    markers = ("^", "s", "D", "v", "P")
    for ax, fleet in zip(axes, fleets, strict=True):
        _style(ax)
        ax.grid(axis="x", color="#eeeeee", linewidth=0.6)
        ax.axvline(floor_s, color="#999999", linestyle=":", linewidth=1)
        for n, run in enumerate(fleet["runs"]):
            color = _PALETTE[n % len(_PALETTE)]
            who = (
                "unlimited workers"
                if run["workers"] == fleet["kymas"] and run["workers"] > 1
                else f"{run['workers']} worker" + ("s" if run["workers"] > 1 else "")
            )
            curve = [p for p in run["polling_curve"] if p["reaction_p99_s"] is not None]
            ax.plot(
                [p["reaction_p99_s"] for p in curve],
                [p["reconciles_per_kyma_hour"] for p in curve],
                marker="o",
                markersize=3,
                linewidth=1.2,
                linestyle="-" if n == 0 else "--",
                color=color,
                label=f"polling, {who}",
            )
            stuck = [p for p in curve if p["saturated"]]
            if len(stuck) > 1:  # several intervals, one point: the queue sets the reaction
                ax.annotate(
                    f"{who}: {stuck[0]['mode'].removeprefix('polling ')} … "
                    f"{stuck[-1]['mode'].removeprefix('polling ')} all saturate here",
                    (stuck[0]["reaction_p99_s"], stuck[0]["reconciles_per_kyma_hour"]),
                    textcoords="offset points",
                    xytext=(-150, -22),
                    fontsize=7,
                    color=color,
                    arrowprops={"arrowstyle": "->", "color": color, "linewidth": 0.8},
                )
            if n == len(fleet["runs"]) - 1:  # label once: the curves share the long intervals
                for p in curve:
                    ax.annotate(
                        p["mode"].removeprefix("polling "),
                        (p["reaction_p99_s"], p["reconciles_per_kyma_hour"]),
                        textcoords="offset points",
                        xytext=(4, 3),
                        fontsize=6,
                        color="#555555",
                    )
            outlined = {"color": color, "edgecolors": "black", "linewidths": 0.6}
            for m, p in enumerate(run["watcher_points"]):
                if p["reaction_p99_s"] is None:  # a change never reconciled: no point
                    continue
                marker = markers[m % len(markers)]
                label = f"{p['mode']}, {who}"
                xy = ([p["reaction_p99_s"]], [p["reconciles_per_kyma_hour"]])
                ax.scatter(*xy, marker=marker, s=42, zorder=3, label=label, **outlined)
            main = run["comparisons"][0] if run["comparisons"] else None
            if main and main["reachable"] and (p := main["polling"])["reaction_p99_s"] is not None:
                label = f"polling matched to the watcher, {who}"
                xy = ([p["reaction_p99_s"]], [p["reconciles_per_kyma_hour"]])
                ax.scatter(*xy, marker="*", s=110, zorder=4, label=label, **outlined)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("reaction p99 (s): change → next reconcile starts")
        ax.set_title(f"{fleet['kymas']:,} Kymas", fontsize=10)
    axes[0].set_ylabel("reconciles per Kyma-hour")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    title = f"Reconciles vs reaction p99 on one write trace (dotted: the {floor_s:g} s floor)"
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def fleet_queue_png(fleet: BenchResult) -> bytes:
    """The fleet run's work queue over its window: depth (max per second), events sent and
    reconciles started per second — so a queue that grows shows what fed it."""
    line = fleet.figures["timeline"]
    kymas = fleet.figures["config"]["kymas"]
    return line_chart_png(
        [float(s) for s in line["second"]],
        {
            "queue depth (max sampled)": line["depth_max"],
            "events sent /s": line["events"],
            "reconciles started /s": line["reconciles"],
        },
        title=f"KLM work queue with {kymas:,} Kymas (1 worker, 5 min requeue)",
        xlabel="seconds into the measured window",
        ylabel="keys / per second",
        width=8.0,
    )


def render_console(results: Sequence[BenchResult]) -> str:
    """The targets table as fixed-width text for the terminal."""
    table = targets_table(results)
    rows = [table.columns, *((tuple(_cell(c) for c in row)) for row in table.rows)]
    widths = [min(60, max(len(str(r[i])) for r in rows)) for i in range(len(table.columns))]
    out = []
    for n, row in enumerate(rows):
        out.append("  ".join(str(c)[:60].ljust(w) for c, w in zip(row, widths, strict=True)))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def admission_cdf_png(percentiles: Sequence[float], rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Latency at each percentile per KCP state (a CDF turned on its side): x in "nines"
    (1 = p90, 2 = p99, 3 = p99.9) so the tail gets the room; the maximum is left out."""
    kept = [i for i, q in enumerate(percentiles) if q < 100.0]
    x = [round(-math.log10(1 - percentiles[i] / 100), 3) for i in kept]
    return line_chart_png(
        x,
        {f"KCP {r['kcp']}": [r["curve_ms"][i] for i in kept] for r in rows},
        title="Webhook admission latency per KCP state (async, spool on)",
        xlabel="percentile in nines (0.3 = p50, 1 = p90, 2 = p99, 3 = p99.9)",
        ylabel="POST → answer (ms)",
        log_y=True,
        width=7.2,
    )
