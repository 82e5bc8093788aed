"""The KLM scale run's pure parts: reactions from recorded times, the figures, the
side-by-side tables and the plot, from made-up runs (no clusters)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.bench.common import first_at_or_after
from harness.bench.klm_scale_report import (
    QUICK,
    KlmRun,
    Sample,
    ScaleConfig,
    Seen,
    Write,
    event_to_reconcile,
    klm_scale_result,
    run_figures,
    timeline_png,
    write_to_event,
)
from harness.bench.writer import KLM_SCALE_PLOT, render_plots
from harness.report.plot import PNG_SIGNATURE

KYMA_OF = {"runtime-01": "kcp-system/kyma-skr-01", "runtime-02": "kcp-system/kyma-skr-02"}


def a_run(label: str = "ours", **changes: object) -> KlmRun:
    run = KlmRun(
        label=label,
        command="watcher-klm",
        config=QUICK,
        t0=1000.0,
        startup={"clusters": 4.0, "klm": 0.7},
        ready_after={"kyma-skr-01": 12.0, "kyma-skr-02": 18.0},
        samples=[Sample(1.0, 0, 2.0, 3.0), Sample(2.0, 1, 1.0, 5.0), Sample(25.0, 2, 0.0, 9.0)],
        window=(1020.0, 1050.0),
        writes=[Write(1021.0, "runtime-01"), Write(1022.0, "runtime-02")],
        events=[
            Seen(1021.01, "runtime-01"),
            Seen(1022.2, "runtime-02"),
            Seen(1060.0, "runtime-01"),
        ],
        reconcile_starts={
            "kcp-system/kyma-skr-01": [1010.0, 1021.02, 1030.0],
            "kcp-system/kyma-skr-02": [1015.0],
        },
        kyma_of=KYMA_OF,
        requests_per_s={"startup": 50.0, "window": 20.0},
        cpu_s={"KLM": 3.0, "Envoy gateway": None},
        rss_mib={"KLM": 100.0, "Envoy gateway": 60.0},
    )
    for name, value in changes.items():
        setattr(run, name, value)
    return run


@given(st.lists(st.floats(0, 100), max_size=20), st.floats(-10, 110))
def test_first_at_or_after_is_the_smallest_time_not_before(times: list[float], at: float) -> None:
    found = first_at_or_after(sorted(times), at)
    later = [t for t in times if t >= at]
    assert found == (min(later) if later else None)


def test_an_event_reacts_with_its_kymas_next_reconcile_and_none_counts_as_missing() -> None:
    reactions = event_to_reconcile(a_run())
    # the third event falls after the window; the second's Kyma never reconciled again
    assert len(reactions) == 2
    assert abs((reactions[0] or 0) - 0.01) < 1e-6
    assert reactions[1] is None


def test_a_write_is_delivered_by_the_first_event_from_its_runtime_after_it() -> None:
    delivered = write_to_event(a_run())
    assert [round(d or 0, 3) for d in delivered] == [0.01, 0.2]
    late = write_to_event(a_run(events=[Seen(1020.0, "runtime-01")]))
    assert late == [None, None]  # an event before the write does not deliver it


def test_figures_count_the_window_and_cost_per_component() -> None:
    figures = run_figures(a_run())
    assert figures["ready"] == {"kymas": 2, "all_ready_s": 18.0, "p50_s": 18.0}
    assert figures["events"] == 2
    assert figures["reconciles"] == 2  # 1021.02 and 1030.0 lie in the window
    assert figures["reconciles_per_s"] == round(2 / 30, 2)
    assert figures["event_to_reconcile_ms"]["missing"] == 1
    assert figures["depth"] == {"max": 0.0, "mean": 0.0}  # only samples in the window
    assert figures["cpu_cores"] == {"KLM": 0.1, "Envoy gateway": None}


def test_two_klms_side_by_side_in_one_table_and_one_plot() -> None:
    figures = [run_figures(a_run("ours")), run_figures(a_run("upstream"))]
    result = klm_scale_result(figures, 60.0)
    main, cost = result.tables
    assert main.columns == ("", "ours", "upstream")
    assert ("failed reconciles", 0, 0) in main.rows
    assert [row[0] for row in cost.rows] == ["Envoy gateway", "KLM"]
    assert "not measured" in str(cost.rows[0][1])
    assert any("requeue load of" in note for note in result.notes)
    assert timeline_png(figures).startswith(PNG_SIGNATURE)
    assert render_plots([result])[KLM_SCALE_PLOT].startswith(PNG_SIGNATURE)


def test_a_scaled_interval_stands_for_more_kymas_at_the_default() -> None:
    config = ScaleConfig(skrs=30, success_interval_s=5.0, window_s=120.0, writes_per_s=3.0)
    assert config.equivalent_kymas == 1800
    assert config.writes == 360
