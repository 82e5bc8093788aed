"""Soak windows, growth and the pass/fail decision (pure)."""

from __future__ import annotations

import pytest

from harness.soak.model import (
    Growth,
    OracleCounts,
    Sample,
    Thresholds,
    Windows,
    achieved_rate,
    decide,
    growth,
    passed,
)

MIB = 1024 * 1024


def oracle(**changes: int) -> OracleCounts:
    base = {
        "writes_planned": 100,
        "writes_sent": 100,
        "writes_failed": 0,
        "writes_skipped": 0,
        "send_decisions": 60,
        "groups": 20,
        "events_received": 60,
        "matched": 20,
        "missing": 0,
        "spurious": 0,
        "duplicates": 0,
        "wrong_listener": 0,
        "wrong_runtime": 0,
    }
    base.update(changes)
    return OracleCounts(**base)


def series(process: str, rss: list[int], fds: list[int], *, step: float = 10.0) -> list[Sample]:
    return [
        Sample(i * step, process, 42, r, f) for i, (r, f) in enumerate(zip(rss, fds, strict=True))
    ]


def test_windows_of_600_s_warm_up_120_and_60_s_windows() -> None:
    w = Windows.of(600)
    assert (w.warmup, w.first_end, w.last_start, w.end) == (120, 180, 540, 600)


def test_windows_warm_up_is_at_least_min_warmup() -> None:
    w = Windows.of(100, min_warmup=60)
    assert (w.warmup, w.first_end, w.last_start) == (60, 70, 90)


def test_a_short_run_shrinks_its_warm_up_to_fit() -> None:
    """`SOAK_DURATION=60 make soak` (the README's short run) has room for both windows."""
    w = Windows.of(60)  # 60 s warm-up would not fit: 42 s, a 6 s gap between the windows
    assert (w.warmup, w.first_end, w.last_start, w.end) == (42, 48, 54, 60)
    w = Windows.of(30)
    assert w.first_end < w.last_start


def test_windows_refuse_what_cannot_hold_them() -> None:
    with pytest.raises(ValueError, match="no room"):
        Windows.of(100, warmup_fraction=0.9)
    with pytest.raises(ValueError, match="positive"):
        Windows.of(0)


def test_growth_compares_window_means_and_fd_floors() -> None:
    w = Windows.of(100, min_warmup=20)  # first [20, 30], last [90, 100]
    rss = [100, 100, 10, 10, 99, 99, 99, 99, 99, 110, 120]  # t = 0..100 step 10
    fds = [5, 5, 30, 12, 50, 50, 50, 50, 50, 13, 14]
    g = growth(series("p", [r * MIB for r in rss], fds), w, "p", "watcher")
    assert g.rss_start == pytest.approx(10 * MIB)  # samples at t=20, 30
    assert g.rss_end == pytest.approx(115 * MIB)  # samples at t=90, 100
    assert g.rss_growth == pytest.approx(10.5)
    assert (g.fd_floor_start, g.fd_floor_end) == (12, 13)
    assert (g.fd_peak_start, g.fd_peak_end) == (30, 14)
    assert g.fd_growth == 1
    assert not g.restarted


def test_growth_ignores_other_processes_and_marks_restarts() -> None:
    w = Windows.of(100, min_warmup=20)
    samples = series("a", [MIB] * 11, [3] * 11) + series("b", [2 * MIB] * 11, [4] * 11)
    samples.append(Sample(95, "a", 43, MIB, 3))  # a new pid inside the measured span
    g = growth(samples, w, "a", "watcher")
    assert g.rss_growth == pytest.approx(0.0)
    assert g.restarted
    assert growth(samples, w, "b", "watcher").fd_floor_end == 4


def test_growth_without_samples_in_a_window_is_unknown() -> None:
    g = growth(series("p", [MIB, MIB], [1, 1]), Windows.of(100, min_warmup=20), "p", "watcher")
    assert g.rss_growth is None and g.fd_growth is None


def _growth(
    name: str, start: float, end: float, fd0: int, fd1: int, *, restarted: bool = False
) -> Growth:
    return Growth(name, "watcher", start, end, fd0, fd1, fd0, fd1, 10, restarted)


def test_decide_passes_when_every_criterion_holds() -> None:
    growths = [
        _growth("webhook/a", 100, 109, 11, 11),
        Growth("harness", "info", 100, 300, 5, 50, 5, 50, 10, False),
    ]
    criteria = decide(oracle(), growths, target_rate=50, achieved=48)
    assert passed(criteria)
    names = [c.name for c in criteria]
    assert "webhook/a: RSS growth" in names and "webhook/a: fd growth (excl. connections)" in names
    assert not any(n.startswith("harness") for n in names)  # info only, never judged


@pytest.mark.parametrize(
    ("counts", "failing"),
    [
        ({"missing": 1}, "oracle: nothing missing"),
        ({"spurious": 2}, "oracle: nothing spurious"),
        ({"duplicates": 1}, "oracle: no duplicates beyond the coalescing rule"),
        ({"wrong_runtime": 1}, "oracle: routing"),
        ({"groups": 0, "matched": 0}, "oracle: nothing missing"),
    ],
)
def test_decide_fails_on_any_oracle_finding(counts: dict[str, int], failing: str) -> None:
    criteria = decide(oracle(**counts), [], target_rate=50, achieved=50)
    assert not passed(criteria)
    assert [c.name for c in criteria if not c.ok] == [failing]


def test_decide_fails_on_rss_growth_of_ten_percent_and_any_fd_growth() -> None:
    criteria = decide(
        oracle(),
        [_growth("webhook/a", 100, 110, 11, 11), _growth("envoy", 100, 100, 30, 31)],
        target_rate=50,
        achieved=50,
    )
    failed = {c.name: c.actual for c in criteria if not c.ok}
    assert failed == {
        "webhook/a: RSS growth": "+10.0%",
        "envoy: fd growth (excl. connections)": "+1",
    }


def test_decide_fd_tolerance_and_restarts() -> None:
    g = _growth("envoy", 100, 100, 30, 32)
    assert passed(
        decide(oracle(), [g], target_rate=1, achieved=1, thresholds=Thresholds(fd_tolerance=2))
    )
    restarted = _growth("webhook/a", 100, 100, 11, 11, restarted=True)
    failed = [c for c in decide(oracle(), [restarted], target_rate=1, achieved=1) if not c.ok]
    assert [c.actual for c in failed] == ["restarted", "restarted"]


def test_decide_fails_below_95_percent_of_the_target_rate() -> None:
    ok = decide(oracle(), [], target_rate=50, achieved=47.5)
    low = decide(oracle(), [], target_rate=50, achieved=47.4)
    assert passed(ok) and not passed(low)
    assert not passed(())


def test_achieved_rate_uses_the_longer_of_plan_and_run() -> None:
    assert achieved_rate(3000, 60, 55) == 50
    assert achieved_rate(3000, 60, 75) == 40


def test_fd_floors_leave_out_established_connections() -> None:
    w = Windows.of(100, min_warmup=20)
    # (fds, connections): a burst at t=50 opens 3 pooled connections that stay warm.
    readings = [(10, 2)] * 5 + [(13, 5)] * 6
    samples = [Sample(i * 10.0, "p", 1, MIB, f, c) for i, (f, c) in enumerate(readings)]
    g = growth(samples, w, "p", "watcher")
    assert (g.fd_floor_start, g.fd_floor_end, g.fd_growth) == (8, 8, 0)
    assert (g.conn_peak_start, g.conn_peak_end) == (2, 5)
    assert (g.fd_peak_start, g.fd_peak_end) == (10, 13)
    leaked = [*samples[:-1], Sample(100.0, "p", 1, MIB, 14, 5)]  # one more non-socket fd
    assert growth(leaked, w, "p", "watcher").fd_growth == 0  # the floor of [90, 100] is 8
    leaked = [*samples[:-2], Sample(90.0, "p", 1, MIB, 14, 5), Sample(100.0, "p", 1, MIB, 14, 5)]
    assert growth(leaked, w, "p", "watcher").fd_growth == 1
