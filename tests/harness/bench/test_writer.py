"""The writers: markdown holds every table and target, JSON round-trips, plots are PNGs."""

from __future__ import annotations

import functools
import json

from bench_plans import TINY

from harness.bench.model import BenchResult, RunMeta, Table, Target
from harness.bench.requeue import run_requeue
from harness.bench.writer import (
    REQUEUE_PLOT,
    render_console,
    render_json,
    render_markdown,
    render_plots,
)
from harness.report.plot import PNG_SIGNATURE

META = RunMeta(
    command="python -m harness.bench --quick",
    date="2026-01-01 00:00 UTC",
    cores=2,
    load_before=(1.5, 1.0, 0.5),
    load_after=(0.2, 0.2, 0.2),
    seconds=61.0,
    versions={"Python": "3.11", "Envoy": "1.40.0"},
    quick=True,
)


@functools.cache
def requeue() -> BenchResult:
    """A small requeue run (two fleets, short ladder); 1 s reconciles saturate 1 worker at
    400 Kymas, so its 1-worker target is missed and explained."""
    return run_requeue(quick=True, plan=TINY)


def results() -> list[BenchResult]:
    other = BenchResult(
        name="demo",
        title="Demo",
        seconds=1.0,
        tables=(Table("t", ("a", "b"), ((1, 2.5), ("x", None))),),
        targets=(Target("thing", "≥ 1", "2", True),),
        figures={"a": [1, 2], "nan": float("nan")},
    )
    failed = BenchResult(name="broken", title="Broken", seconds=0.0, error="boom")
    return [requeue(), other, failed]


def test_markdown_has_command_cores_versions_tables_and_targets() -> None:
    text = render_markdown(results(), META, plots=[REQUEUE_PLOT])
    assert "`python -m harness.bench --quick`" in text
    assert "2-core" in text and "Envoy 1.40.0" in text
    assert "busy" in text  # load 1.5 on 2 cores
    assert "| thing | ≥ 1 | 2 | ✅ met | demo |" in text
    assert "❌ missed" in text and "over capacity in both modes" in text  # 1 worker, 400 Kymas
    assert "**Reconciles per Kyma-hour at the same reaction p99**" in text
    assert "**Failed:** `boom`" in text
    assert f"![{REQUEUE_PLOT}]({REQUEUE_PLOT})" in text


def test_json_round_trips_every_figure() -> None:
    doc = json.loads(render_json(results(), META))
    assert doc["meta"]["cores"] == 2 and doc["meta"]["busy"] is True
    demo = doc["benchmarks"][1]
    assert demo["figures"] == {"a": [1, 2], "nan": None}
    assert doc["benchmarks"][2]["error"] == "boom"
    fleets = doc["benchmarks"][0]["figures"]["fleets"]
    assert [f["kymas"] for f in fleets] == [20, 400]
    assert all(len(run["polling_curve"]) == 5 for f in fleets for run in f["runs"])


def test_plots_are_png_and_console_lists_targets() -> None:
    plots = render_plots(results())
    assert set(plots) == {REQUEUE_PLOT}
    assert plots[REQUEUE_PLOT].startswith(PNG_SIGNATURE)
    console = render_console(results())
    assert "thing" in console and "requeue" in console and "failed" in console
