"""Prometheus metrics of one listener, in a registry of its own.

Several listeners run in one process during tests (and could in an operator), so nothing
goes to prometheus-client's global registry.

Upstream's listener metrics are here under their names, each labelled
``server_name="listener"`` as upstream labels them, so a dashboard built on upstream's
listener reads ours: ``watcher_listener_requests_total`` (ours also carries ``code``),
``watcher_listener_request_duration`` (gauge: the last request's seconds),
``watcher_listener_request_errors_total`` (answers ≥ 400),
``watcher_listener_inflight_requests``,
``watcher_listener_exceeding_size_limit_requests_total`` (413) and
``watcher_listener_failed_verification_requests_total{request_uri_label}`` (403 from a
verify hook). The rest are ours. As upstream's Go client, no ``*_created`` samples.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from watcher.exposition import UpstreamExposition, summed_sample

SERVER_NAME = "listener"
"""Upstream's ``server_name`` label value on its listener metrics."""

# Request-level rejection reasons (label values of ``rejected_total``).
REJECT_BODY_TOO_LARGE = "body-too-large"
REJECT_METHOD = "method-not-allowed"
REJECT_CONTRACT = "wrong-contract"
REJECT_UNREADABLE = "unreadable-body"
REJECT_BODY_TIMEOUT = "body-timeout"
REJECT_EXPECTATION = "expectation-failed"
REJECT_INVALID_EVENT = "invalid-event"
REJECT_CLIENT_CERT = "invalid-client-cert"
REJECT_UNTRUSTED_PROXY = "untrusted-proxy"
REJECT_COMMON_NAME = "invalid-common-name"
REJECT_VERIFY_ERROR = "verify-hook-error"
REJECT_VERIFICATION = "verification-failed"
REJECT_BACKPRESSURE = "backpressure-timeout"
REJECT_SHUTDOWN = "shutting-down"


class ListenerMetrics:
    """The counters the handler updates, plus gauges read from the stream on scrape."""

    def __init__(self, *, buffered: Callable[[], int], waiting: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "watcher_listener_requests",
            "HTTP requests answered, by status code.",
            ["server_name", "code"],
            registry=self.registry,
        )
        self.last_duration = Gauge(
            "watcher_listener_request_duration",
            "Seconds the last request took (upstream's gauge).",
            ["server_name"],
            registry=self.registry,
        ).labels(SERVER_NAME)
        self.request_errors = Counter(
            "watcher_listener_request_errors",
            "Requests answered with an error (status 400 or above).",
            ["server_name"],
            registry=self.registry,
        ).labels(SERVER_NAME)
        self.inflight = Gauge(
            "watcher_listener_inflight_requests",
            "Requests being answered right now.",
            ["server_name"],
            registry=self.registry,
        ).labels(SERVER_NAME)
        self.too_large = Counter(
            "watcher_listener_exceeding_size_limit_requests",
            "Requests refused for a body over the size limit (413).",
            ["server_name"],
            registry=self.registry,
        ).labels(SERVER_NAME)
        self.failed_verification = Counter(
            "watcher_listener_failed_verification_requests",
            "Requests a verify hook refused (403), by request path.",
            ["server_name", "request_uri_label"],
            registry=self.registry,
        )
        self.accepted = Counter(
            "watcher_listener_events_accepted",
            "Events handed to the event stream.",
            registry=self.registry,
        )
        self.rejected = Counter(
            "watcher_listener_events_rejected",
            "Requests answered with an error, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.verification_failed = Counter(
            "watcher_listener_verification_failed",
            "Events a verify hook refused (HTTP 403), by the hook's reason category.",
            ["reason"],
            registry=self.registry,
        )
        self.backpressure_timeouts = Counter(
            "watcher_listener_backpressure_timeouts",
            "Events answered 503 because the consumer did not keep up.",
            registry=self.registry,
        )
        self.duration = Histogram(
            "watcher_listener_request_duration_seconds",
            "Time from request start to response, including backpressure waits.",
            registry=self.registry,
        )
        buffered_gauge = Gauge(
            "watcher_listener_buffered_events",
            "Events accepted but not yet consumed.",
            registry=self.registry,
        )
        buffered_gauge.set_function(lambda: float(buffered()))
        waiting_gauge = Gauge(
            "watcher_listener_waiting_requests",
            "Requests waiting for room in the event buffer.",
            registry=self.registry,
        )
        waiting_gauge.set_function(lambda: float(waiting()))

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when never observed), summed over the labels not
        given; for tests and health checks."""
        return summed_sample(self.registry, name, labels)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (without ``*_created``, as upstream)."""
        return generate_latest(UpstreamExposition(self.registry))
