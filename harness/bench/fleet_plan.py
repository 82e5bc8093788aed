"""The fleet benchmark's pure parts: the event plan, reactions, queue depth and rates.

No I/O and no clock: the plan comes from a seed, the summaries from recorded times, so
they are tested without clusters (``tests/harness/bench/test_fleet_plan.py``) and the
benchmark (:mod:`harness.bench.fleet`) only gathers the times.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from pydantic import TypeAdapter

from harness.bench.common import first_at_or_after
from harness.bench.model import summary
from harness.report.stats import percentile

REQUEST_TOTAL = "apiserver_request_total"
ACCEPTED = 200


@dataclass(frozen=True)
class Phase:
    """Events at ``rate`` per second for ``seconds``."""

    name: str
    rate: float
    seconds: float

    @property
    def count(self) -> int:
        return round(self.rate * self.seconds)


@dataclass(frozen=True)
class PlannedEvent:
    """One event to send: ``at`` seconds after the load starts, from ``runtime_id``."""

    at: float
    runtime_id: str
    phase: str


def plan_events(
    phases: Sequence[Phase], runtime_ids: Sequence[str], *, seed: int
) -> list[PlannedEvent]:
    """Each phase's events at uniformly random times within it (a Poisson process
    conditioned on its count: SKRs do not coordinate), sorted by time.

    Runtimes come from one shuffled cycle, so none sends twice before every runtime has
    sent once: at a few events per runtime-hour a runtime rarely sends twice within a
    few minutes, and one event per Kyma keeps "which event led to which reconcile" exact.
    """
    if not runtime_ids:
        raise ValueError("no runtimes to send from")
    rng = random.Random(seed)
    order = list(runtime_ids)
    rng.shuffle(order)
    events: list[PlannedEvent] = []
    start = 0.0
    for phase in phases:
        times = sorted(start + rng.uniform(0.0, phase.seconds) for _ in range(phase.count))
        events += [
            PlannedEvent(round(t, 4), order[(len(events) + i) % len(order)], phase.name)
            for i, t in enumerate(times)
        ]
        start += phase.seconds
    return events


def spread_delays(keys: Iterable[str], interval: float, *, seed: int) -> dict[str, float]:
    """A delay uniformly in [0, ``interval``) per key (KLM's spread of requeues)."""
    rng = random.Random(seed)
    return {key: rng.uniform(0.0, interval) for key in keys}


@dataclass(frozen=True)
class SentEvent:
    """What the load generator reports per event (wall-clock times, ``time.time()``)."""

    runtime_id: str
    phase: str
    sent: float
    answered: float
    status: int  # 0: no answer (connection error or timeout)
    error: str = ""

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    def to_json(self) -> str:
        return _SENT_EVENT.dump_json(self).decode()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SentEvent:
        return _SENT_EVENT.validate_python(data)


_SENT_EVENT = TypeAdapter(SentEvent)


@dataclass(frozen=True)
class Reaction:
    """An accepted event and the start of the first reconcile it led to (None: none)."""

    event: SentEvent
    kyma: str
    reconciled_at: float | None

    @property
    def seconds(self) -> float | None:
        return None if self.reconciled_at is None else self.reconciled_at - self.event.sent


def reactions(
    events: Iterable[SentEvent],
    kyma_of: Mapping[str, str],
    watch_starts: Mapping[str, Sequence[float]],
) -> list[Reaction]:
    """For each accepted event, the first reconcile of its runtime's Kyma (``kyma_of``)
    that a watch event triggered (among others) and that started at or after the send.

    ``watch_starts``: Kyma key → sorted start times of its reconciles with the watch-event
    trigger. A reconcile merges every trigger that arrived while the key waited, so an
    event that collapsed into a pending requeue still names that reconcile.
    """
    out = []
    for event in events:
        if not event.accepted:
            continue
        kyma = kyma_of.get(event.runtime_id, "")
        starts = watch_starts.get(kyma, ())
        out.append(Reaction(event, kyma, first_at_or_after(starts, event.sent)))
    return out


def reaction_summary(found: Sequence[Reaction]) -> dict[str, Any]:
    """Reaction times in ms (count / p50 / p99 / max) and how many events found none."""
    values = [r.seconds * 1000 for r in found if r.seconds is not None]
    return {**summary(values), "unreconciled": sum(r.reconciled_at is None for r in found)}


@dataclass(frozen=True)
class DepthSample:
    """The work queue at ``at`` seconds into the window: keys waiting, keys in a reconcile."""

    at: float
    depth: int
    processing: int


def depth_summary(samples: Sequence[DepthSample]) -> dict[str, float | int]:
    """Max, p99 and mean of the sampled queue depth, the share of samples with keys
    waiting, and the share with a reconcile running (the worker's utilisation)."""
    if not samples:
        return {"samples": 0}
    depths = [s.depth for s in samples]
    return {
        "samples": len(samples),
        "max": max(depths),
        "p99": percentile(depths, 99),
        "mean": round(sum(depths) / len(depths), 3),
        "nonzero_share": round(sum(d > 0 for d in depths) / len(depths), 4),
        "busy_share": round(sum(s.processing > 0 for s in samples) / len(samples), 4),
    }


def per_second(times: Iterable[float], start: float, seconds: int) -> list[int]:
    """How many of ``times`` fall into each second [start + k, start + k + 1), k < seconds."""
    counts = [0] * max(0, seconds)
    for t in times:
        k = math.floor(t - start)
        if 0 <= k < len(counts):
            counts[k] += 1
    return counts


def max_depth_per_second(samples: Iterable[DepthSample], seconds: int) -> list[int]:
    """The largest sampled depth in each second of the window (0 where none was sampled)."""
    out = [0] * max(0, seconds)
    for s in samples:
        k = math.floor(s.at)
        if 0 <= k < len(out):
            out[k] = max(out[k], s.depth)
    return out


def request_totals(metrics_text: str) -> dict[str, float]:
    """``apiserver_request_total`` summed per verb from kube-apiserver's ``/metrics``."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == REQUEST_TOTAL:
                verb = sample.labels.get("verb", "")
                totals[verb] = totals.get(verb, 0.0) + sample.value
    return totals


def requests_per_second(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None, seconds: float
) -> dict[str, float] | None:
    """Per verb and ``total``: requests per second between two ``request_totals`` (None
    when either was not read)."""
    if before is None or after is None:
        return None
    delta = {verb: after[verb] - before.get(verb, 0.0) for verb in after}
    rates = {v: round(d / seconds, 2) for v, d in sorted(delta.items()) if d > 0}
    return {**rates, "total": round(sum(delta.values()) / seconds, 2)}
