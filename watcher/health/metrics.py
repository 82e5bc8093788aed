"""Watcher health as Prometheus metrics: what a dashboard, an alert and ``python -m watcher
health`` read.

Counters and the round-trip histogram are updated as heartbeats go and come; the
per-runtime series are computed at scrape time from the monitor's snapshot, so a runtime
that leaves the fleet leaves the metrics with it (no stale series to clean up):

* ``watcher_health_state{runtime_id,state,reason,detail}`` — 1, one series per runtime;
* ``watcher_health_heartbeat_age_seconds{runtime_id}`` — since the last echo (since the
  runtime was added while none came yet);
* ``watcher_health_consecutive_misses{runtime_id}``;
* ``watcher_health_last_round_trip_seconds{runtime_id}``;
* ``watcher_health_runtimes{state}`` — how many runtimes are in each state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from watcher.exposition import summed_sample
from watcher.health.state import RuntimeHealth, State

ROUND_TRIP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class RuntimeStatus:
    """One runtime as the monitor sees it at ``now`` (monotonic seconds)."""

    runtime_id: str
    health: RuntimeHealth
    age: float
    """Seconds since the last echo, or since the runtime was added when none came yet."""
    since: float
    """Wall-clock time (epoch seconds) the state last changed."""


Snapshot = Callable[[], Sequence[RuntimeStatus]]


class _FleetCollector(Collector):
    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "watcher_health_state",
            "1 for each runtime, labelled with its watcher health state and the reason.",
            labels=["runtime_id", "state", "reason", "detail"],
        )
        age = GaugeMetricFamily(
            "watcher_health_heartbeat_age_seconds",
            "Seconds since the runtime's last heartbeat echo (since it was added, if none).",
            labels=["runtime_id"],
        )
        misses = GaugeMetricFamily(
            "watcher_health_consecutive_misses",
            "Heartbeats missed in a row (not echoed in time, refused, or not written).",
            labels=["runtime_id"],
        )
        round_trip = GaugeMetricFamily(
            "watcher_health_last_round_trip_seconds",
            "The runtime's last heartbeat round trip: SKR write to listener.",
            labels=["runtime_id"],
        )
        counts = GaugeMetricFamily(
            "watcher_health_runtimes", "Runtimes per watcher health state.", labels=["state"]
        )
        per_state = dict.fromkeys(State, 0)
        for status in self._snapshot():
            h, rid = status.health, status.runtime_id
            per_state[h.state] += 1
            state.add_metric([rid, h.state.value, h.reason.value, h.detail], 1.0)
            age.add_metric([rid], status.age)
            misses.add_metric([rid], float(h.misses))
            if h.round_trip is not None:
                round_trip.add_metric([rid], h.round_trip)
        for value, count in per_state.items():
            counts.add_metric([value.value], float(count))
        yield from (state, age, misses, round_trip, counts)


class HealthMetrics:
    """One registry for a monitor; pass ``registry`` to add them to an operator's own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.sent = Counter(
            "watcher_health_heartbeats_sent",
            "Heartbeats written (or attempted) into SKRs.",
            registry=self.registry,
        )
        self.write_failures = Counter(
            "watcher_health_heartbeat_write_failures",
            "Heartbeats whose SKR write failed.",
            registry=self.registry,
        )
        self.echoes = Counter(
            "watcher_health_echoes",
            "Heartbeat echoes received through the listener.",
            registry=self.registry,
        )
        self.refusals = Counter(
            "watcher_health_refusals",
            "Heartbeat echoes the listener refused, by category.",
            ["category"],
            registry=self.registry,
        )
        self.round_trip = Histogram(
            "watcher_health_round_trip_seconds",
            "Heartbeat round trip: SKR write to listener, through webhook and gateway.",
            buckets=ROUND_TRIP_BUCKETS,
            registry=self.registry,
        )
        self._collector: _FleetCollector | None = None

    def track(self, snapshot: Snapshot) -> None:
        """Serve the per-runtime series from ``snapshot`` (once per registry)."""
        if self._collector is not None:
            self.registry.unregister(self._collector)
        self._collector = _FleetCollector(snapshot)
        self.registry.register(self._collector)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """One sample (0 when absent); labels not given are summed over."""
        return summed_sample(self.registry, name, labels)


__all__ = ["ROUND_TRIP_BUCKETS", "HealthMetrics", "RuntimeStatus", "Snapshot"]
