"""The admission and throughput targets are judged from rows (pure): what counts, what not."""

from __future__ import annotations

from typing import Any

from harness.bench.admission import _alone_target
from harness.bench.throughput import _targets
from harness.bench.webhook_latency import CURVE, quantile_curve
from harness.bench.writer import admission_cdf_png


def _alone(kcp: str, p99: float) -> dict[str, Any]:
    return {
        "kcp": kcp,
        "p50_ms": 1.0,
        "p99_ms": p99,
        "webhook_run_queue_wait_ms_per_admission": 0.2,
        "load_1min": 1.0,
        "curve_ms": [1.0] * len(CURVE),
    }


def test_the_fsync_row_is_shown_but_not_judged() -> None:
    rows = [_alone("answers at once", 1.5), _alone("answers at once, spool fsync on", 9.0)]
    target = _alone_target(rows)
    assert target.met and "1.5 ms" in target.measured


def test_the_worst_judged_state_decides_and_the_note_says_why() -> None:
    target = _alone_target([_alone("answers at once", 1.5), _alone("answers after 2 s", 2.5)])
    assert not target.met
    assert "2.5 ms" in target.measured and "after 2 s" in target.measured
    assert "waited 0.2 ms" in target.note


def test_quantile_curve_is_monotone_and_ends_at_the_maximum() -> None:
    samples = [float(i) for i in range(1, 1001)]
    curve = quantile_curve(samples)
    assert curve == sorted(curve) and curve[-1] == 1000.0 and curve[0] == 500.0


def _thr(key: str, per_1000: float) -> dict[str, Any]:
    return {
        "variant": key,
        "webhook_cpu_s_per_1000": per_1000,
        "one_core_capacity_per_s": round(1000 / per_1000),
        "admissions_per_s": 3000.0,
    }


def test_throughput_targets_name_the_floor_and_the_upstream_ratio() -> None:
    rows = [
        _thr("create", 0.4),
        _thr("create-upstream-like", 3.2),
        _thr("update-unchanged", 0.14),
        _thr("floor", 0.1),
    ]
    create, update = _targets(rows, [("aiohttp", 1.0, 0.5)])
    assert not create.met and not update.met
    assert "8.0x ours" in create.note and "5,000" in create.note
    assert "floor of the HTTP stack: 10,000/s" in update.measured
    met, _ = _targets([_thr("create", 0.19), *rows[1:]], [])
    assert met.met


def test_admission_cdf_plot_is_a_png() -> None:
    png = admission_cdf_png(CURVE, [_alone("answers at once", 1.5)])
    assert png.startswith(b"\x89PNG")


def test_harness_cost_targets_ready_and_e2e() -> None:
    from harness.bench.cost import _targets as cost_targets

    slow = {"ready_s": 4.3, "environment": {"ready_s": 7.2}}
    ready, e2e = cost_targets(slow, 2.9, 774.0)
    assert not ready.met and "4.3 s" in ready.measured and "2.9 s" in ready.measured
    assert "pool" in ready.note
    assert not e2e.met and e2e.measured == "12.9 min"
    (fast,) = cost_targets({"ready_s": 0.2, "environment": {"ready_s": 1.2}}, 2.9, None)
    assert fast.met
