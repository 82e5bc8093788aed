"""Results → ``docs/benchmarks.md``, ``docs/benchmarks.json``, PNG plots, console table (pure).

Data in, text or bytes out; the suite writes the files. The markdown keeps a short section
of facts measured by other commands (builds), which this suite does not re-measure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.bench.model import BenchResult, Cell, RunMeta, Table, Target
from harness.report.plot import bar_chart_png, line_chart_png

E2E_PLOT = "benchmarks-e2e-latency.png"
RECONCILE_PLOT = "benchmarks-reconciles.png"

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
    """File name → PNG for the benchmarks present (e2e latency, reconciles per mode)."""
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
    requeue = by_name.get("requeue")
    if requeue:
        modes = requeue.figures["modes"]
        plots[RECONCILE_PLOT] = bar_chart_png(
            [m["mode"].replace(" + ", "\n+ ") for m in modes],
            {"reconciles per Kyma-hour": [m["reconciles_per_kyma_hour"] for m in modes]},
            title="Reconciles per Kyma-hour by mode (same churn trace)",
            ylabel="reconciles / Kyma / hour",
            width=8.0,
        )
    return plots


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
