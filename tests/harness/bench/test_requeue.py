"""The requeue-economics simulation: the trace, the queue model, the search and the verdicts.

Small fleets and short spans, so the whole file runs in a few seconds; the properties are
the ones the benchmark's claims rest on (a polling Kyma never waits longer than one cycle
when workers are free, one worker saturates and then the queue sets the reaction, the
searched interval never misses the target).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

from bench_plans import TINY
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.bench.requeue import (
    BURST_CYCLE_S,
    BURST_S,
    LADDER,
    Comparison,
    Plan,
    Search,
    SimSettings,
    comparison_target,
    longest_interval_within,
    polling,
    run_requeue,
    run_workers,
    simulate,
    span_for,
    target_met,
    watcher,
    write_trace,
)

D = 0.1
ROUNDING = 0.0005 + 1e-9
"""Reaction figures are rounded to the millisecond: 1.5129 s reads 1.513 s."""


def test_trace_is_seeded_skewed_and_bursty() -> None:
    trace = write_trace(300, 7200, seed=7)
    assert trace == write_trace(300, 7200, seed=7)
    assert trace != write_trace(300, 7200, seed=8)
    assert list(trace.changes) == sorted(trace.changes)
    assert all(0 <= t < 7200 and 0 <= k < 300 for t, k in trace.changes)
    expected = 3.0 * 300 * 2  # 3 per Kyma-hour over 2 h
    assert abs(len(trace.changes) - expected) < 0.15 * expected
    assert math.isclose(sum(trace.rates) / len(trace.rates), 3.0)
    # skew: the median Kyma is well below the mean, the busiest tenth makes a large share
    per_kyma = sorted(Counter(k for _, k in trace.changes).values())
    assert sorted(trace.rates)[150] < 1.5
    assert sum(per_kyma[-30:]) > 0.35 * len(trace.changes)
    # busy-hour bursts: 2.2x vs 0.6x intensity, i.e. ~3.7x the rate in the first 15 min
    burst = sum(1 for t, _ in trace.changes if t % BURST_CYCLE_S < BURST_S) / BURST_S
    quiet = sum(1 for t, _ in trace.changes if t % BURST_CYCLE_S >= BURST_S) / (
        BURST_CYCLE_S - BURST_S
    )
    assert 2.8 < burst / quiet < 4.8


@settings(max_examples=25, deadline=None)
@given(
    kymas=st.integers(1, 6),
    interval=st.floats(1.0, 60.0),
    seed=st.integers(0, 1000),
)
def test_polling_with_free_workers_reacts_within_one_cycle(
    kymas: int, interval: float, seed: int
) -> None:
    trace = write_trace(kymas, 900, changes_per_hour=60.0, seed=seed)
    result = simulate(trace, polling(interval), SimSettings(workers=None, seed=seed))
    assert result.unseen_changes == 0
    if result.changes:
        assert result.reaction_max_s <= interval + D + ROUNDING
    # every Kyma reconciles once per interval + reconcile, nothing else
    assert abs(result.reconciles - kymas * 900 / (interval + D)) <= kymas
    assert result.event_triggered == 0 and not result.saturated


@settings(max_examples=25, deadline=None)
@given(
    kymas=st.integers(1, 6),
    delays=st.lists(st.floats(0.001, 2.0), min_size=1, max_size=5),
    seed=st.integers(0, 1000),
)
def test_watcher_with_free_workers_reacts_within_delay_plus_one_reconcile(
    kymas: int, delays: list[float], seed: int
) -> None:
    trace = write_trace(kymas, 1200, changes_per_hour=60.0, seed=seed)
    settings_ = SimSettings(workers=None, delivery_delays=tuple(delays), seed=seed)
    result = simulate(trace, watcher(300.0), settings_)
    assert result.unseen_changes == 0
    if result.changes:
        assert result.reaction_max_s <= max(delays) + D + ROUNDING
    # the safety timer (+1 per Kyma at the span's edges) plus at most one per change
    assert result.reconciles <= kymas * (1200 / (300 + D) + 1) + result.changes
    assert result.event_triggered <= result.changes


def test_one_worker_saturates_and_the_queue_sets_the_reaction() -> None:
    """1 worker x 100 ms is 10 reconciles/s: at 0.5 s polling 50 Kymas would need 83/s, so
    every Kyma waits for a pass over the queue (5 s) and 200 Kymas wait 4x as long."""
    small, large = write_trace(50, 1800, seed=3), write_trace(200, 1800, seed=3)
    one = SimSettings(workers=1)
    fast = simulate(small, polling(0.5), one)
    assert fast.saturated and fast.utilization >= 0.99
    assert math.isclose(fast.reconciles_per_kyma_hour, 3600 / (50 * D), rel_tol=0.01)
    assert 4.5 <= fast.reaction_p99_s <= 5.1  # the pass over 50 Kymas, not the interval
    slow = simulate(large, polling(0.5), one)
    assert 18 <= slow.reaction_p99_s <= 20.2
    assert slow.reconciles_per_kyma_hour < fast.reconciles_per_kyma_hour / 3.9
    # below saturation the interval decides again
    calm = simulate(small, polling(30.0), one)
    assert not calm.saturated and 27 <= calm.reaction_p99_s <= 30.2


def test_simulation_is_deterministic() -> None:
    trace = write_trace(5, 3600, seed=7)
    settings_ = SimSettings(delivery_delays=(0.01, 0.05, 0.3), seed=3)
    assert simulate(trace, watcher(300.0), settings_) == simulate(trace, watcher(300.0), settings_)


@settings(max_examples=200, deadline=None)
@given(
    slope=st.floats(0.01, 100.0),
    offset=st.floats(0.0, 50.0),
    power=st.floats(0.3, 2.0),
    target=st.floats(0.05, 5000.0),
    tolerance=st.floats(0.01, 0.3),
)
def test_search_finds_the_longest_interval_within_tolerance(
    slope: float, offset: float, power: float, target: float, tolerance: float
) -> None:
    """For a nondecreasing p99(interval) the result meets the target and the next step of
    ``tolerance`` would not."""

    def p99(interval: float) -> float:
        return offset + slope * math.pow(interval, power)

    found = longest_interval_within(p99, target, LADDER, tolerance=tolerance)
    if p99(LADDER[0]) > target:
        assert found.found is None
        return
    assert found.found is not None
    assert p99(found.found) <= target
    assert found.found == LADDER[-1] or p99(found.found * (1 + tolerance)) > target
    assert [i for i, _ in found.evaluations[: len(LADDER)]] == sorted(LADDER)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0.0, 100.0), min_size=len(LADDER), max_size=len(LADDER)),
    target=st.floats(0.0, 100.0),
    noise=st.integers(0, 2**32),
)
def test_search_never_returns_an_interval_that_misses_the_target(
    values: list[float], target: float, noise: int
) -> None:
    """Whatever the noise (p99 need not be monotone in a simulation), the found interval
    was evaluated and met the target: its p99 ≤ the watcher's."""
    table = dict(zip(LADDER, values, strict=True))

    def p99(interval: float) -> float:
        return table.get(interval, (hash((interval, noise)) % 1000) / 10)

    found = longest_interval_within(p99, target, LADDER)
    assert (found.found is None) == all(v > target for v in values)
    if found.found is not None:
        assert p99(found.found) <= target
        assert dict(found.evaluations)[found.found] <= target


@settings(max_examples=200, deadline=None)
@given(
    kymas=st.integers(1, 10_000),
    workers=st.integers(1, 10_000),
    a=st.floats(0.01, 5000.0),
    b=st.floats(0.01, 5000.0),
    events=st.booleans(),
)
def test_span_grows_with_the_interval(
    kymas: int, workers: int, a: float, b: float, events: bool
) -> None:
    """The trace is drawn once per fleet for the longest planned interval: that only bounds
    every searched interval if the span never shrinks as the interval grows."""
    plan = Plan()
    short, long = sorted((a, b))
    span = span_for(plan, kymas=kymas, interval=short, workers=workers, events=events)
    assert span <= span_for(plan, kymas=kymas, interval=long, workers=workers, events=events)
    assert span >= plan.min_cycles * (short + plan.reconcile_seconds)


def test_the_floor_replaces_a_watcher_p99_polling_cannot_reach() -> None:
    assert comparison_target(0.05, 1.0) == (1.0, "the floor (the watcher's p99 is lower)")
    assert comparison_target(272.0, 1.0) == (272.0, "the watcher's p99")


def test_matched_polling_needs_far_more_reconciles_with_free_workers() -> None:
    plan = dataclasses.replace(
        TINY, reconcile_seconds=D, floor_s=1.0, reconcile_budget=6000, tolerance=0.1
    )
    trace = write_trace(20, 7200, seed=plan.seed)
    run = run_workers(trace, None, plan, (0.05,))
    main = run.comparisons[0]
    assert main.target_p99_s == 1.0 and main.reachable
    assert main.found_interval_s is not None and 0.5 <= main.found_interval_s < 2.0
    assert main.polling.reaction_p99_s <= main.target_p99_s
    assert main.watcher.reaction_p99_s <= 0.05 + D
    assert main.ratio > 100 and target_met(main)
    # a longer safety requeue costs fewer reconciles for the same reaction
    assert run.comparisons[1].ratio > main.ratio
    # with one worker the same 20 Kymas take 2 s a pass: polling never gets to 1 s
    one = run_workers(trace, 1, plan, (0.05,))
    assert not one.comparisons[0].reachable and one.comparisons[0].polling.saturated
    assert one.comparisons[0].polling.reaction_p99_s >= 1.8
    assert target_met(one.comparisons[0])


def test_a_saturated_watcher_never_counts_as_a_saving() -> None:
    trace = write_trace(400, 3600, seed=1)
    run = run_workers(trace, 1, dataclasses.replace(TINY, fleets=(400,)), (0.05,))
    main = run.comparisons[0]
    assert main.watcher.saturated
    assert not target_met(main)
    unsaturated = dataclasses.replace(main.watcher, saturated=False)
    reached = Comparison(unsaturated, 1.0, "x", 600.0, main.polling, Search(1.0, 600.0, ()))
    assert target_met(reached) == (reached.ratio >= 100)


def test_benchmark_reports_both_fleets_the_curve_and_a_target_per_worker_setting() -> None:
    result = run_requeue(quick=True, delivery_delays=(0.01, 0.02), delay_source="test", plan=TINY)
    assert [t.title for t in result.tables] == [
        "Reconciles per Kyma-hour at the same reaction p99",
        "20 Kymas: every configuration (the curve)",
        "400 Kymas: every configuration (the curve)",
    ]
    assert len(result.tables[0].rows) == 2 * 2 * 2  # fleets x worker settings x requeues
    assert len(result.targets) == 2
    one, unlimited = result.targets
    assert one.met is False and "over capacity" in one.note  # 400 Kymas x 1 s > 1 worker
    assert "one per Kyma" in unlimited.what
    fleets = json.loads(json.dumps(result.figures["fleets"], allow_nan=False))
    assert [f["kymas"] for f in fleets] == [20, 400]
    for fleet in fleets:
        for run in fleet["runs"]:
            assert [p["interval_s"] for p in run["polling_curve"]] == list(TINY.ladder)
            assert len(run["watcher_points"]) == len(TINY.safety_requeues)
            assert all(p["reconciles_per_kyma_hour"] > 0 for p in run["polling_curve"])
    assert result.figures["delivery_delay_source"] == "test"
    assert result.figures["simulated_reconciles"] > 0
