"""The requeue-economics simulation on a tiny trace: deterministic, and the watcher saves."""

from __future__ import annotations

from harness.bench.requeue import MODES, Mode, SimSettings, churn_trace, simulate


def test_trace_is_seeded_and_sorted() -> None:
    a = churn_trace(5, 1.0, changes_per_hour=4.0, seed=7, quiet_tail=600.0)
    b = churn_trace(5, 1.0, changes_per_hour=4.0, seed=7, quiet_tail=600.0)
    assert a == b
    assert a.changes and list(a.changes) == sorted(a.changes)
    assert all(t < 3000 for t, _ in a.changes)
    assert churn_trace(5, 1.0, changes_per_hour=4.0, seed=8, quiet_tail=600.0) != a


def test_watcher_reconciles_less_than_30s_polling_and_reacts_faster() -> None:
    trace = churn_trace(5, 1.0, changes_per_hour=4.0, seed=7, quiet_tail=600.0)
    settings = SimSettings(workers=2, reconcile_seconds=0.1, delivery_delays=(0.05, 0.2))
    poll30, poll300, watcher = (simulate(trace, mode, settings) for mode in MODES)
    assert watcher.reconciles < poll30.reconciles
    assert poll300.reconciles <= watcher.reconciles
    assert watcher.reaction_p99_s < poll30.reaction_p99_s < poll300.reaction_p99_s
    assert watcher.event_triggered == len(trace.changes)
    assert {r.unseen_changes for r in (poll30, poll300, watcher)} == {0}
    # 30 s polling: one reconcile per Kyma every 30 s (+ startup), no change waits longer
    assert poll30.reconciles_per_kyma_hour == 120.0
    assert poll30.reaction_max_s <= 30.0 + settings.reconcile_seconds
    assert watcher.reaction_max_s <= 0.2 + settings.reconcile_seconds * 5


def test_simulation_is_deterministic() -> None:
    trace = churn_trace(5, 1.0, changes_per_hour=4.0, seed=7, quiet_tail=600.0)
    mode = Mode("watcher", 300.0, events=True)
    settings = SimSettings(delivery_delays=(0.01, 0.05, 0.3), seed=3)
    assert simulate(trace, mode, settings) == simulate(trace, mode, settings)


def test_a_busy_worker_pool_delays_reactions() -> None:
    trace = churn_trace(20, 1.0, changes_per_hour=4.0, seed=1, quiet_tail=600.0)
    mode = Mode("polling 30 s", 30.0, events=False)
    fast = simulate(trace, mode, SimSettings(workers=4, reconcile_seconds=0.1))
    slow = simulate(trace, mode, SimSettings(workers=1, reconcile_seconds=1.4))
    assert slow.reconciles < fast.reconciles  # 20 Kymas x 1.4 s no longer fit in 30 s
