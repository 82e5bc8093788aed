"""Every entry of one ``expect`` judged against one snapshot, in the file's order. The
counting kinds (``events``, ``rejections``, ``metrics``) are judged here; the others have a
module each."""

from __future__ import annotations

from harness.expect import latency, reconciles, timeline, truth, writes
from harness.expect.check import Check, counted
from harness.expect.checks import CountBound, EventFilter, check_count, check_metric
from harness.expect.observations import Observations, metric_key
from harness.scenario import EventExpectation, Expect, MetricExpectation, RejectionExpectation


def judge(expect: Expect, obs: Observations) -> list[Check]:
    checks = [judge_events(e, obs) for e in expect.events]
    if expect.truth is not None:
        checks.append(truth.judge(expect.truth, obs))
    checks += [reconciles.judge(r, obs) for r in expect.reconciles]
    checks += [judge_rejections(r, obs) for r in expect.rejections]
    checks += [judge_metric(m, obs) for m in expect.metrics]
    if expect.latency is not None:
        checks.append(latency.judge(expect.latency, obs))
    if expect.writes is not None:
        checks.append(writes.judge(expect.writes, obs))
    checks += [timeline.judge(t, obs) for t in expect.timeline]
    return checks


def judge_events(e: EventExpectation, obs: Observations) -> Check:
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
    bound = CountBound(*e.bounds)
    verdict = check_count(obs.events, bound, where)
    count = int(verdict.actual)
    above = bound.at_most is not None and count > bound.at_most
    return Check("events", f"events {where.describe()}", verdict, above, bound.at_most is not None)


def judge_rejections(r: RejectionExpectation, obs: Observations) -> Check:
    """Requests a listener refused with ``reason`` since the window opened."""
    count = round(obs.rejections.get((r.listener, r.reason), 0.0))
    subject = f"listener={r.listener} reason={r.reason}"
    return counted("rejections", f"rejections {subject}", count, CountBound(*r.bounds), "rejection")


def judge_metric(m: MetricExpectation, obs: Observations) -> Check:
    """One sample (or a histogram quantile) compared with ``op``; a series that does not
    exist reads 0."""
    value = obs.metrics.get(metric_key(m.target, m.name, m.labels, m.quantile), 0.0)
    name = m.name if m.quantile is None else f"{m.name} quantile {m.quantile:g}"
    verdict = check_metric(name, value, m.op, m.value, labels=m.labels)
    return Check("metrics", f"{m.target} {verdict.expected}", verdict)
