"""The fleet benchmark's pure parts: the event plan, requeue spread, reactions, queue depth,
rates, KCP request counting, and the report built from a made-up run (no clusters)."""

from __future__ import annotations

import json
import math

import pytest

from harness.bench.fleet_load import LoadPlan
from harness.bench.fleet_plan import (
    DepthSample,
    Phase,
    SentEvent,
    depth_summary,
    max_depth_per_second,
    per_second,
    plan_events,
    reaction_summary,
    reactions,
    request_totals,
    requests_per_second,
    spread_delays,
)
from harness.bench.fleet_report import FleetConfig, FleetRun, Window, fleet_result
from harness.bench.writer import FLEET_PLOT, render_plots
from harness.kcp.lifecycle_manager.queue.reconciler import Outcome, Reconcile
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report.plot import PNG_SIGNATURE

PHASES = (Phase("steady", 2.0, 10.0), Phase("burst", 20.0, 2.0), Phase("recovery", 2.0, 5.0))
RUNTIMES = [f"runtime-{i:04d}" for i in range(100)]


def test_plan_paces_each_phase_within_its_bounds_and_sorted() -> None:
    events = plan_events(PHASES, RUNTIMES, seed=1)
    assert [sum(e.phase == p.name for e in events) for p in PHASES] == [20, 40, 10]
    assert [e.at for e in events] == sorted(e.at for e in events)
    bounds = {"steady": (0.0, 10.0), "burst": (10.0, 12.0), "recovery": (12.0, 17.0)}
    for e in events:
        low, high = bounds[e.phase]
        assert low <= e.at <= high, e


def test_plan_uses_each_runtime_once_before_any_repeats_and_is_reproducible() -> None:
    events = plan_events(PHASES, RUNTIMES, seed=1)
    assert len({e.runtime_id for e in events}) == len(events)  # 70 events, 100 runtimes
    assert plan_events(PHASES, RUNTIMES, seed=1) == events
    assert plan_events(PHASES, RUNTIMES, seed=2) != events
    small = plan_events(PHASES, RUNTIMES[:30], seed=1)  # 70 events over 30 runtimes
    first = [e.runtime_id for e in small[:30]]
    assert sorted(first) == sorted(RUNTIMES[:30])
    with pytest.raises(ValueError):
        plan_events(PHASES, [], seed=1)


def test_spread_delays_are_uniform_over_the_interval() -> None:
    keys = [f"kcp-system/kyma-{i:04d}" for i in range(5000)]
    delays = spread_delays(keys, 300.0, seed=15)
    assert set(delays) == set(keys)
    assert all(0.0 <= d < 300.0 for d in delays.values())
    per_minute = [sum(60 * m <= d < 60 * (m + 1) for d in delays.values()) for m in range(5)]
    assert all(900 < n < 1100 for n in per_minute), per_minute  # 1,000 expected each


def sent(runtime: str, at: float, status: int = 200, phase: str = "steady") -> SentEvent:
    return SentEvent(runtime, phase, at, at + 0.01, status)


def test_a_sent_event_round_trips_through_its_json_line() -> None:
    event = SentEvent("rt-a", "burst", 1_760_000_000.125, 1_760_000_010.0, 0, error="timeout")
    assert json.loads(event.to_json()) == vars(event)
    assert SentEvent.from_json(json.loads(event.to_json())) == event


def test_a_load_plan_round_trips_through_its_file() -> None:
    events = tuple(plan_events([Phase("steady", 5.0, 2.0)], ["rt-a", "rt-b"], seed=1))
    plan = LoadPlan("https://gw/v2/x/event", "/ca.crt", "/certs", events, 3.0, 8)
    assert LoadPlan.from_json(plan.to_json()) == plan


def test_reaction_is_the_first_watch_reconcile_of_the_events_kyma_after_the_send() -> None:
    kyma_of = {"rt-a": "kcp-system/kyma-a", "rt-b": "kcp-system/kyma-b"}
    starts = {"kcp-system/kyma-a": [9.0, 10.2, 10.5], "kcp-system/kyma-b": [3.0]}
    found = reactions(
        [sent("rt-a", 10.0), sent("rt-b", 5.0), sent("rt-a", 11.0, status=503)], kyma_of, starts
    )
    assert len(found) == 2  # the refused event is not expected to reconcile
    first, second = found
    assert (first.kyma, first.reconciled_at) == ("kcp-system/kyma-a", 10.2)
    assert first.seconds is not None and math.isclose(first.seconds, 0.2)
    assert (second.kyma, second.reconciled_at, second.seconds) == ("kcp-system/kyma-b", None, None)
    figures = reaction_summary(found)
    assert figures["count"] == 1 and figures["unreconciled"] == 1
    assert figures["p99"] == pytest.approx(200.0)


def test_queue_depth_summary_and_per_second_series() -> None:
    samples = [
        DepthSample(0.1, 0, 0),
        DepthSample(0.6, 3, 1),
        DepthSample(1.2, 1, 1),
        DepthSample(2.9, 0, 0),
    ]
    figures = depth_summary(samples)
    assert (figures["max"], figures["p99"], figures["mean"]) == (3, 3, 1.0)
    assert (figures["nonzero_share"], figures["busy_share"]) == (0.5, 0.5)
    assert depth_summary([]) == {"samples": 0}
    assert max_depth_per_second(samples, 3) == [3, 1, 0]
    assert per_second([100.2, 100.9, 101.0, 103.5, 99.0], 100.0, 3) == [2, 1, 0]


METRICS = """\
# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="kymas",verb="GET"} 10
apiserver_request_total{code="404",resource="kymas",verb="GET"} 2
apiserver_request_total{code="200",resource="kymas",verb="PATCH"} 4
apiserver_request_total{code="0",resource="kymas",verb="WATCH"} 1
apiserver_current_inflight_requests{request_kind="readOnly"} 3
"""


def test_kcp_requests_are_summed_per_verb_and_turned_into_rates() -> None:
    before = request_totals(METRICS)
    assert before == {"GET": 12.0, "PATCH": 4.0, "WATCH": 1.0}
    after = {"GET": 52.0, "PATCH": 4.0, "WATCH": 1.0, "LIST": 2.0}
    assert requests_per_second(before, after, 10.0) == {"GET": 4.0, "LIST": 0.2, "total": 4.2}


def made_up_run(reaction_s: float) -> FleetRun:
    """Two events, one reconciled after ``reaction_s``; a window of 3 s."""
    config = FleetConfig(kymas=2, steady_s=1.0, burst_rate=1.0, burst_s=1.0, recovery_s=1.0)
    start = 1000.0
    events = [sent("rt-0", start + 0.5), sent("rt-1", start + 1.5, phase="burst")]
    reconciles = [
        Reconcile(
            at=start + 0.5 + reaction_s,
            kyma="kcp-system/kyma-0000",
            triggers=frozenset({Trigger.WATCH_EVENT}),
            queued_at=start + 0.51,
            latency=0.004,
            outcome=Outcome.SUCCESS,
            duration=0.005,
        ),
        Reconcile(
            at=start + 1.6,
            kyma="kcp-system/kyma-0001",
            triggers=frozenset({Trigger.WATCH_EVENT, Trigger.REQUEUE_TIMER}),
            queued_at=start + 1.55,
            latency=0.05,
            outcome=Outcome.SUCCESS,
            duration=0.005,
        ),
    ]
    kyma_of = {"rt-0": "kcp-system/kyma-0000", "rt-1": "kcp-system/kyma-0001"}
    starts = {r.kyma: [r.at] for r in reconciles}
    window = Window(
        start=start,
        end=start + 3.0,
        events=events,
        load={"done": 2, "cpu_s": 0.5, "max_rss_mib": 60.0},
        samples=[DepthSample(0.25 * i, i % 2, 1) for i in range(12)],
        cpu_s={"KLM + listener + Kyma cache (this process)": 0.3, "Envoy gateway": None},
        rss_mib={"KLM + listener + Kyma cache (this process)": 100.0, "Envoy gateway": None},
        requests_per_s={"GET": 1.0, "total": 1.0},
        reconciles=reconciles,
    )
    setup = {
        "kymas": 2,
        "backend": "local",
        "kcp_ready_s": 3.0,
        "kymas_created_s": 0.1,
        "kymas_per_s": 20.0,
        "create_in_flight": 32,
        "certificates_s": 0.01,
        "certificate_ms": 5.0,
        "startup_wave": {
            "reconciles": 2,
            "seconds": 0.1,
            "cache_synced_s": 0.05,
            "per_s": 20.0,
            "duration_ms": {"count": 2, "p50": 5.0, "p99": 6.0, "max": 6.0},
        },
    }
    found = reactions(events, kyma_of, starts)
    return FleetRun(config, setup, window, found, kyma_of, {"events:received": 2})


def test_report_judges_the_realistic_phases_and_plots_the_queue() -> None:
    result = fleet_result(made_up_run(0.02), seconds=9.0)
    (target,) = result.targets
    assert target.met is True and target.measured == "20.0 ms"
    phases = result.figures["phases"]
    assert phases["steady"]["reaction_ms"]["count"] == 1
    assert phases["burst"]["reaction_ms"]["p99"] == pytest.approx(100.0)
    assert phases["realistic"]["events"] == 1 and phases["all"]["events"] == 2
    assert result.figures["timeline"]["events"] == [1, 1, 0]
    assert result.figures["timeline"]["reconciles"] == [1, 1, 0]
    assert result.figures["load"]["cpu_percent"]["Envoy gateway"] is None
    assert len(result.tables) == 4
    png = render_plots([result])[FLEET_PLOT]
    assert png.startswith(PNG_SIGNATURE)


def test_report_misses_the_target_with_a_reason() -> None:
    (target,) = fleet_result(made_up_run(1.5), seconds=9.0).targets
    assert target.met is False and target.measured == "1500.0 ms"
    assert "one concurrent reconcile" in target.note
