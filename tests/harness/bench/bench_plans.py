"""Small benchmark plans the tests share (fast, deterministic)."""

from __future__ import annotations

from harness.bench.requeue import Plan

TINY = Plan(
    fleets=(20, 400),
    ladder=(0.5, 2.0, 10.0, 60.0, 600.0),
    safety_requeues=(300.0, 1800.0),
    target_changes=60,
    reconcile_budget=2000,
    reconcile_seconds=1.0,
    floor_s=3.0,
)
"""1 s reconciles: 1 worker saturates at 400 Kymas even under the 5 min requeue (1.3/s)."""
