"""harness.skr.metrics: Prometheus text → flat samples."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from harness.skr.metrics import parse_metrics, sample_key, value


def test_parses_what_prometheus_client_exports() -> None:
    registry = CollectorRegistry()
    requests = Counter("watcher_admission_request", "help", registry=registry)
    failed = Counter("watcher_failed_kcp", "help", ["error_reason"], registry=registry)
    Gauge("watcher_queue_depth", "help", registry=registry).set(3)
    requests.inc(2)
    failed.labels("failed-request").inc()
    failed.labels("request-setup")
    samples = parse_metrics(generate_latest(registry).decode())
    assert samples["watcher_admission_request_total"] == 2.0
    assert samples['watcher_failed_kcp_total{error_reason="failed-request"}'] == 1.0
    assert value(samples, "watcher_failed_kcp_total", error_reason="request-setup") == 0.0
    assert value(samples, "watcher_queue_depth") == 3.0
    assert value(samples, "no_such_metric", a="b") == 0.0


def test_sample_keys_sort_labels() -> None:
    assert sample_key("m") == "m"
    assert sample_key("m", {"b": "2", "a": "1"}) == 'm{a="1",b="2"}'
    text = 'x{b="2",a="1"} 5\n'
    assert parse_metrics(text) == {'x{a="1",b="2"}': 5.0}
