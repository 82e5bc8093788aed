"""Prometheus metrics of one webhook, in a registry of its own.

A per-instance ``CollectorRegistry`` lets several webhooks run in one process (tests, the
harness) without sharing counters. Upstream's names are kept exactly so existing
dashboards and the e2e check on ``watcher_failed_kcp_total{error_reason="failed-request"}``
work; the delivery metrics are ours. ``/metrics`` shows what upstream's shows besides:
``watcher_fips_mode`` (0 off, 1 on: whether OpenSSL runs its FIPS provider) and the
standard ``process_*`` metrics (Python's stand-in for Go's ``process_*`` collector; there
are no ``go_*`` metrics), and — as upstream's Go client — no ``*_created`` samples.
"""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from watcher.exposition import UpstreamExposition


class FailReason(StrEnum):
    """Upstream's ``error_reason`` label values."""

    INVALID_SUBRESOURCE = "invalid-subresource"
    MISSING_ADDRESS_OR_CONTRACT = "missing-address-or-contract"
    REQUEST_SETUP = "request-setup"
    FAILED_REQUEST = "failed-request"
    UNKNOWN_OWNER = "unknown-owner"


class DropReason(StrEnum):
    """Why an event was given up without reaching the KCP."""

    OVERFLOW = "overflow"
    EXPIRED = "expired"
    SHUTDOWN = "shutdown"


def fips_mode() -> int:
    """Upstream's ``watcher_fips_mode`` value: 1 when OpenSSL runs in FIPS mode, else 0
    (Go's 2, "fips140=only", has no Python counterpart)."""
    try:
        from cryptography.hazmat.bindings._rust import openssl as rust_openssl
    except ImportError:  # a cryptography build without the binding: not in FIPS mode
        return 0
    return 1 if rust_openssl.is_fips_enabled() else 0


class WebhookMetrics:
    """All collectors; label values are pre-created so they export 0 from the start."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.admission_requests = Counter(
            "watcher_admission_request", "Admission requests received", registry=r
        )
        self.admission_errors = Counter(
            "watcher_admission_request_error",
            "Admission requests that could not be parsed (answered 4xx)",
            registry=r,
        )
        self.kcp_requests = Counter(
            "watcher_kcp_requests", "Events to send to the KCP (one per event)", registry=r
        )
        self.failed_kcp = Counter(
            "watcher_failed_kcp",
            "Events that did not reach the KCP, by reason",
            ["error_reason"],
            registry=r,
        )
        self.request_duration = Gauge(
            "watcher_request_duration", "Seconds the last admission request took", registry=r
        )
        self.queue_depth = Gauge("watcher_queue_depth", "Events waiting for delivery", registry=r)
        self.delivery_latency = Histogram(
            "watcher_delivery_latency_seconds",
            "Seconds from enqueue to a 2xx answer from the KCP",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.coalesced = Counter(
            "watcher_events_coalesced",
            "Events not queued because an identical one was still pending",
            registry=r,
        )
        self.retries = Counter(
            "watcher_delivery_retries", "Delivery attempts that are retried", registry=r
        )
        self.dropped = Counter(
            "watcher_events_dropped", "Events given up, by reason", ["reason"], registry=r
        )
        self.delivered = Counter(
            "watcher_events_delivered", "Events the KCP answered with 2xx", registry=r
        )
        self.spool_events = Gauge(
            "watcher_spool_events", "Events in the durable spool not yet acknowledged", registry=r
        )
        self.spool_bytes = Gauge(
            "watcher_spool_bytes", "Bytes of the durable spool's current segment", registry=r
        )
        self.spool_replayed = Counter(
            "watcher_spool_replayed",
            "Events read back from the spool at start (left by an earlier process)",
            registry=r,
        )
        self.spool_corrupt = Counter(
            "watcher_spool_corrupt_lines",
            "Spool lines skipped at start because they were torn or unreadable",
            registry=r,
        )
        self.spool_errors = Counter(
            "watcher_spool_errors",
            "Spool writes or fsyncs that failed (the event stays in memory only)",
            registry=r,
        )
        self.fips_mode = Gauge(
            "watcher_fips_mode", "FIPS mode of the crypto library: 0 off, 1 on", registry=r
        )
        self.fips_mode.set(fips_mode())
        ProcessCollector(registry=r)
        for fail in FailReason:
            self.failed_kcp.labels(error_reason=fail.value)
        for drop in DropReason:
            self.dropped.labels(reason=drop.value)

    def fail(self, reason: FailReason) -> None:
        self.failed_kcp.labels(error_reason=reason.value).inc()

    def drop(self, reason: DropReason, count: int = 1) -> None:
        self.dropped.labels(reason=reason.value).inc(count)

    def render(self) -> bytes:
        """The text exposition format, for ``/metrics``."""
        return generate_latest(UpstreamExposition(self.registry))

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Current sample value (0 when absent); for tests and the harness."""
        result = self.registry.get_sample_value(name, labels or {})
        return 0.0 if result is None else result
