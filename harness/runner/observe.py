"""Gathering one :class:`~harness.expect.observations.Observations` snapshot for an
``expect``: the session's events, reconciles and rejection counters, the metric samples
the expectation names (fetched now), and the run's churns and writes so far."""

from __future__ import annotations

import asyncio

from harness.environment import ObservedEvent
from harness.expect.match import ReceivedEvent
from harness.expect.observations import (
    ChurnSeen,
    Mark,
    MetricKey,
    Observations,
    WriteSeen,
    metric_key,
)
from harness.expect.prom import Sample, histogram_quantile, parse_samples, sample_sum
from harness.report.model import TimelineKind
from harness.runner.context import ChurnRecord, RunContext
from harness.scenario import Expect
from watcher.model import GroupVersionKind


def received(event: ObservedEvent) -> ReceivedEvent:
    return ReceivedEvent(
        event.manager,
        event.runtime_id,
        event.namespace,
        event.name,
        GroupVersionKind(event.group, event.version, event.kind),
        event.received_at,
    )


STEP_PHASES = frozenset({"start", "passed", "failed"})
"""The details of a step's own timeline entries (``capture`` puts others there)."""


def marks(ctx: RunContext, expect: Expect) -> tuple[Mark, ...]:
    """The step boundaries and faults on the report's timeline, if ``expect``'s
    ``timeline`` entries name any."""
    keys = {o.key for t in expect.timeline for o in (t.first, t.then)}
    if not keys & {"step", "fault"}:
        return ()
    return tuple(
        Mark(t.kind.value, t.source, t.object, t.detail, t.at)
        for t in ctx.report.timeline
        if (t.kind is TimelineKind.STEP and t.detail in STEP_PHASES) or t.kind is TimelineKind.FAULT
    )


def churn_seen(churn: ChurnRecord) -> ChurnSeen:
    return ChurnSeen(
        spec=churn.spec,
        started_at=churn.started_at,
        executed=tuple(churn.executed),
        ended_at=churn.ended_at,
        verified=churn.verified,
        admissions_before=dict(churn.admissions_before),
        admissions_after=dict(churn.admissions_after),
        admission_gaps={cluster: tuple(gaps) for cluster, gaps in churn.admission_gaps.items()},
    )


async def observe(ctx: RunContext, expect: Expect, since: float) -> Observations:
    """What ``expect`` needs, as of now, for the window that opened at ``since``."""
    session = ctx.session
    metrics: dict[MetricKey, float] = {}
    apiservers: dict[str, list[Sample]] = {}
    for m in expect.metrics:
        key = metric_key(m.target, m.name, m.labels, m.quantile)
        kind, _, cluster = m.target.partition("/")
        if kind != "apiserver":
            metrics[key] = await session.metric(m.target, m.name, m.labels)
            continue
        if cluster not in apiservers:
            text = await session.apiserver_metrics(cluster)
            apiservers[cluster] = await asyncio.to_thread(parse_samples, text or "")
        samples = apiservers[cluster]
        metrics[key] = (
            histogram_quantile(samples, m.name, m.labels, m.quantile)
            if m.quantile is not None
            else sample_sum(samples, m.name, m.labels)
        )
    rejections = {
        (r.listener, r.reason): session.rejections(r.listener, r.reason)
        - ctx.baselines.get((r.listener, r.reason), 0.0)
        for r in expect.rejections
    }
    run_start = ctx.report.started_at
    whole_run = any(t.since == "run" for t in expect.timeline)
    return Observations(
        since=since,
        now=ctx.clock(),
        events=tuple(received(e) for e in session.events),
        reconciles=tuple(
            session.reconciles(None, None, min(since, run_start) if whole_run else since)
        ),
        rejections=rejections,
        metrics=metrics,
        churns=tuple(churn_seen(c) for c in ctx.churns),
        writes=tuple(WriteSeen(w.cluster, w.namespace, w.name, w.sent_at) for w in ctx.writes),
        rules=ctx.rules(),
        runtime_ids=ctx.runtime_ids,
        webhook_managers=ctx.webhook_managers(),
        settle=ctx.settle,
        run_start=run_start,
        object_changes=tuple(ctx.object_changes) if expect.timeline else (),
        marks=marks(ctx, expect),
    )
