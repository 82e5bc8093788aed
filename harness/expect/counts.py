"""Judges of counted expectations: ``events``, ``reconciles``, ``rejections``, and the
``metrics`` sample comparison."""

from __future__ import annotations

from harness.expect.check import Check, bounds, counted
from harness.expect.checks import EventFilter, check_count, check_metric
from harness.expect.observations import Observations, metric_key
from harness.scenario import (
    EventExpectation,
    MetricExpectation,
    ReconcileExpectation,
    RejectionExpectation,
)

KCP_NAMESPACE = "kcp-system"
"""Where a KCP Kyma named without a namespace lives."""


def events(e: EventExpectation, obs: Observations) -> Check:
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


def kyma_key(kyma: str) -> str:
    return kyma if "/" in kyma else f"{KCP_NAMESPACE}/{kyma}"


def reconciles(r: ReconcileExpectation, obs: Observations) -> Check:
    """Reconciles of one KCP Kyma in the window, by trigger and outcome."""
    key = kyma_key(r.kyma)
    count = sum(
        1
        for seen in obs.reconciles
        if seen.kyma == key
        and seen.at >= obs.since
        and (r.trigger is None or r.trigger in seen.triggers)
        and (r.outcome is None or seen.outcome == r.outcome)
    )
    subject = f"kyma={key}" + (f" trigger={r.trigger}" if r.trigger else "")
    subject += f" outcome={r.outcome}" if r.outcome else ""
    return counted("reconciles", f"reconciles {subject}", count, bounds(*r.bounds), "reconcile")


def rejections(r: RejectionExpectation, obs: Observations) -> Check:
    """Requests a listener refused with ``reason`` since the window opened."""
    count = round(obs.rejections.get((r.listener, r.reason), 0.0))
    subject = f"listener={r.listener} reason={r.reason}"
    return counted("rejections", f"rejections {subject}", count, bounds(*r.bounds), "rejection")


def metric(m: MetricExpectation, obs: Observations) -> Check:
    """One sample compared with ``op``; a series that does not exist reads 0."""
    value = obs.metrics.get(metric_key(m.target, m.name, m.labels, m.quantile), 0.0)
    name = m.name if m.quantile is None else f"{m.name} quantile {m.quantile:g}"
    verdict = check_metric(name, value, m.op, m.value, labels=m.labels)
    return Check("metrics", f"{m.target} {verdict.expected}", verdict)
