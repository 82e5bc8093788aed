"""The webhook's /metrics as upstream's dashboards read it."""

from __future__ import annotations

from watcher.webhook.metrics import WebhookMetrics


def test_the_exposition_has_upstreams_extras_and_no_created_samples() -> None:
    metrics = WebhookMetrics()
    metrics.admission_requests.inc()
    text = metrics.render().decode()
    assert "watcher_admission_request_total 1.0" in text
    assert "_created" not in text
    assert "watcher_fips_mode 0.0" in text  # this machine's OpenSSL is not in FIPS mode
    assert "process_open_fds " in text
    assert metrics.value("watcher_admission_request_created") > 0  # still in the registry
