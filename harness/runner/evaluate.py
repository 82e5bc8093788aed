"""One evaluation of each kind of expectation against what the session observed so far.

Each evaluator returns a :class:`Check`: the verdict (expected vs actual text from
:mod:`harness.expect.checks`), whether waiting can still change it (``final``: a count
already above its upper bound only grows) and whether it has an upper bound that a late
arrival could break (``bounded``: checked once more after a short grace period).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.churn.admissions import admissions_made, admissions_routed, repeated_admissions
from harness.churn.model import ExecutedMutation
from harness.churn.truth import Truth as ChurnTruth
from harness.churn.truth import ground_truth
from harness.environment import KCP_NAMESPACE, ObservedEvent
from harness.expect.checks import (
    CountBound,
    EventFilter,
    LatencyBounds,
    Verdict,
    check_count,
    check_latency,
    check_metric,
    count_verdict,
)
from harness.expect.match import MatchResult, ReceivedEvent, match_events
from harness.runner.context import ChurnRecord, RunContext
from harness.scenario import (
    EventExpectation,
    Latency,
    MetricExpectation,
    ReconcileExpectation,
    RejectionExpectation,
    Truth,
    WriteLatency,
)
from watcher.model import GroupVersionKind


@dataclass(frozen=True)
class Check:
    kind: str
    description: str
    verdict: Verdict
    final: bool = False
    bounded: bool = False
    latencies: tuple[float, ...] = ()  # seconds, for the report's histogram

    @property
    def ok(self) -> bool:
        return self.verdict.ok


def received(events: Iterable[ObservedEvent]) -> list[ReceivedEvent]:
    return [
        ReceivedEvent(
            e.manager,
            e.runtime_id,
            e.namespace,
            e.name,
            GroupVersionKind(e.group, e.version, e.kind),
            e.received_at,
        )
        for e in events
    ]


def _bound(low: int, high: int | None) -> CountBound:
    return CountBound(low, high)


def _counted(kind: str, description: str, count: int, bound: CountBound, noun: str) -> Check:
    verdict = count_verdict(count, bound, description, noun=noun)
    above = bound.at_most is not None and count > bound.at_most
    return Check(kind, description, verdict, final=above, bounded=bound.at_most is not None)


def events(ctx: RunContext, e: EventExpectation, since: float) -> Check:
    runtime = e.runtime_id or (ctx.runtime_ids.get(e.cluster) if e.cluster else None)
    where = EventFilter(
        manager=e.manager,
        runtime_id=runtime,
        namespace=e.object.namespace if e.object else None,
        name=e.object.name if e.object else None,
        kind=e.object.kind if e.object else None,
        since=since,
    )
    bound = _bound(*e.bounds)
    verdict = check_count(received(ctx.session.events), bound, where)
    count = int(verdict.actual)
    above = bound.at_most is not None and count > bound.at_most
    return Check("events", f"events {where.describe()}", verdict, above, bound.at_most is not None)


def kyma_key(kyma: str) -> str:
    return kyma if "/" in kyma else f"{KCP_NAMESPACE}/{kyma}"


def reconciles(ctx: RunContext, r: ReconcileExpectation, since: float) -> Check:
    key = kyma_key(r.kyma)
    count = len(ctx.session.reconciles(key, r.trigger, since))
    subject = f"kyma={key}" + (f" trigger={r.trigger}" if r.trigger else "")
    return _counted("reconciles", f"reconciles {subject}", count, _bound(*r.bounds), "reconcile")


def rejections(ctx: RunContext, r: RejectionExpectation, baseline: float) -> Check:
    count = round(ctx.session.rejections(r.listener, r.reason) - baseline)
    subject = f"listener={r.listener} reason={r.reason}"
    return _counted("rejections", f"rejections {subject}", count, _bound(*r.bounds), "rejection")


async def metric(ctx: RunContext, m: MetricExpectation) -> Check:
    value = await ctx.session.metric(m.target, m.name, m.labels)
    verdict = check_metric(m.name, value, m.op, m.value, labels=m.labels)
    return Check("metrics", f"{m.target} {verdict.expected}", verdict)


def churns_for_truth(ctx: RunContext) -> list[ChurnRecord]:
    """The churns a ``truth`` expectation covers: those no truth has checked yet, or (none
    left) every churn of the scenario."""
    pending = [c for c in ctx.churns if not c.verified]
    return pending or list(ctx.churns)


def repeats(
    ctx: RunContext, churns: Sequence[ChurnRecord], truth: ChurnTruth
) -> dict[tuple[str, str], int]:
    """(manager, runtime id) → admissions the SKR API servers made beyond one per routed
    write during ``churns`` (see :mod:`harness.churn.admissions`). A cluster whose churns
    overlap in time, or whose counters could not be read, gets none."""
    webhooks = ctx.webhook_managers()
    made: dict[str, dict[str, int] | None] = {}
    intervals: dict[str, list[tuple[float, float]]] = {}
    for churn in churns:
        end = churn.ended_at
        for cluster in churn.spec.clusters:
            counted = admissions_made(
                churn.admissions_before.get(cluster), churn.admissions_after.get(cluster), webhooks
            )
            if end is None or counted is None or (cluster in made and made[cluster] is None):
                made[cluster] = None
                continue
            spans = intervals.setdefault(cluster, [])
            if any(s < end and churn.started_at < e for s, e in spans):
                made[cluster] = None  # overlapping churns would count each other's writes
                continue
            spans.append((churn.started_at, end))
            total = made.setdefault(cluster, {})
            assert total is not None
            for m, n in counted.items():
                total[m] = total.get(m, 0) + n
    executed = [e for c in churns for e in c.executed]
    other_writes = {
        cluster: sum(
            1
            for w in ctx.writes
            if w.cluster == cluster and any(s <= w.sent_at <= e for s, e in spans)
        )
        for cluster, spans in intervals.items()
    }
    return repeated_admissions(
        admissions_routed(truth, executed), made, ctx.runtime_ids, other_writes=other_writes
    )


def match(ctx: RunContext, churns: Sequence[ChurnRecord], manager: str | None) -> MatchResult:
    executed = [e for c in churns for e in c.executed]
    truth = ground_truth(executed, ctx.rules(), ctx.runtime_ids, settle=ctx.settle)
    repeated = repeats(ctx, churns, truth)
    if manager is not None:
        truth = dataclasses.replace(truth, expected=truth.for_manager(manager))
    start = min(c.started_at for c in churns)
    got = [
        e
        for e in received(ctx.session.events)
        if e.received_at >= start and (manager is None or e.manager == manager)
    ]
    return match_events(truth, got, repeats=repeated)


def truth(ctx: RunContext, t: Truth) -> Check:
    churns = churns_for_truth(ctx)
    subject = f"manager={t.manager}" if t.manager else "every manager"
    description = f"events equal the churn's ground truth for {subject}"
    if not churns:
        verdict = Verdict(False, "no churn ran before this expectation", "a churn", "none")
        return Check("truth", description, verdict, final=True)
    result = match(ctx, churns, t.manager)
    expected_groups = result.matched + len(result.missing)
    expected = f"{expected_groups} objects with the events the truth requires, nothing else"
    actual = result.describe()
    text = actual if result.ok else f"expected {expected}; got {actual}"
    irrevocable = any(
        (result.spurious, result.duplicates, result.wrong_listener, result.wrong_runtime)
    )
    return Check(
        "truth",
        description,
        Verdict(result.ok, text, expected, actual),
        final=irrevocable,
        bounded=True,
        latencies=result.latency_values,
    )


def write_latencies(ctx: RunContext, manager: str | None, since: float) -> list[float]:
    """For every apply/patch/delete since ``since``: its first matching event's delay."""
    runtime_ids = ctx.runtime_ids
    got = [
        e
        for e in received(ctx.session.events)
        if e.received_at >= since and (manager is None or e.manager == manager)
    ]
    samples = []
    for w in ctx.writes:
        if w.sent_at < since or w.cluster not in runtime_ids:
            continue
        first = min(
            (
                e.received_at
                for e in got
                if e.runtime_id == runtime_ids[w.cluster]
                and e.namespace == w.namespace
                and e.name == w.name
                and e.received_at >= w.sent_at
            ),
            default=None,
        )
        if first is not None:
            samples.append(first - w.sent_at)
    return samples


def latency(ctx: RunContext, lat: Latency, since: float) -> Check:
    churns = [c for c in ctx.churns if c.started_at >= since or not c.verified]
    if churns:
        samples: Sequence[float] = match(ctx, churns, lat.manager).latency_values
        source = "churn writes"
    else:
        samples = write_latencies(ctx, lat.manager, since)
        source = "writes"
    subject = f"latency ({source} → {lat.manager or 'any manager'})"
    verdicts = check_latency(samples, LatencyBounds(lat.p50, lat.p99, lat.max), subject=subject)
    ok = all(v.ok for v in verdicts)
    verdict = Verdict(
        ok,
        "; ".join(v.text for v in verdicts),
        "; ".join(v.expected for v in verdicts),
        "; ".join(v.actual for v in verdicts) + f" (n={len(samples)})",
    )
    return Check("latency", subject, verdict, latencies=tuple(samples))


def window_writes(ctx: RunContext, cluster: str | None, since: float) -> list[ExecutedMutation]:
    """Every churn write of the window (``cluster``: one SKR's)."""
    churns = [c for c in ctx.churns if c.started_at >= since or not c.verified]
    return [
        e for c in churns for e in c.executed if cluster is None or e.mutation.cluster == cluster
    ]


def write_round_trips(ctx: RunContext, cluster: str | None, since: float) -> list[float]:
    """acked - sent of every accepted churn write in the window (``cluster``: one SKR's)."""
    return [e.acked_at - e.sent_at for e in window_writes(ctx, cluster, since) if e.ok]


def writes(ctx: RunContext, w: WriteLatency, since: float) -> Check:
    done = window_writes(ctx, w.cluster, since)
    samples = [e.acked_at - e.sent_at for e in done if e.ok]
    subject = f"write round trip ({w.cluster or 'every SKR'}, admission included)"
    verdicts: list[Verdict] = []
    if w.has_latency_bound:
        bounds = LatencyBounds(w.p50, w.p99, w.max)
        verdicts += check_latency(samples, bounds, subject=subject)
    if w.failed is not None:
        failed = sum(1 for e in done if not e.ok)
        bound = CountBound(w.failed.at_least or 0, w.failed.at_most)
        if w.failed.exactly is not None:
            bound = CountBound(w.failed.exactly, w.failed.exactly)
        verdicts.append(
            count_verdict(
                failed, bound, f"writes of {w.cluster or 'every SKR'}", noun="failed write"
            )
        )
        subject = f"writes ({w.cluster or 'every SKR'}): round trip and failures"
    ok = all(v.ok for v in verdicts)
    verdict = Verdict(
        ok,
        "; ".join(v.text for v in verdicts),
        "; ".join(v.expected for v in verdicts),
        "; ".join(v.actual for v in verdicts) + f" (n={len(samples)})",
    )
    return Check("writes", subject, verdict)
