"""``events``: WatchEvents a manager's listener received in the window, counted."""

from __future__ import annotations

from harness.expect.check import Check, bounds
from harness.expect.checks import EventFilter, check_count
from harness.expect.observations import Observations
from harness.scenario import EventExpectation


def judge(e: EventExpectation, obs: Observations) -> Check:
    """WatchEvents the manager's listener received in the window (one SKR, one object)."""
    runtime = e.runtime_id or (obs.runtime_ids.get(e.cluster) if e.cluster else None)
    where = EventFilter(
        manager=e.manager,
        runtime_id=runtime,
        namespace=e.object.namespace if e.object else None,
        name=e.object.name if e.object else None,
        kind=e.object.kind if e.object else None,
        since=obs.since,
    )
    bound = bounds(*e.bounds)
    verdict = check_count(obs.events, bound, where)
    count = int(verdict.actual)
    above = bound.at_most is not None and count > bound.at_most
    return Check("events", f"events {where.describe()}", verdict, above, bound.at_most is not None)
