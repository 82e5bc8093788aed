"""Environment → settings: defaults, every knob, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from watcher.errors import ConfigError
from watcher.webhook.settings import load_settings


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_text("x")
    return {
        "CA_CERT": str(tmp_path / "ca.crt"),
        "TLS_CERT": str(tmp_path / "tls.crt"),
        "TLS_KEY": str(tmp_path / "tls.key"),
    }


def test_defaults_are_upstreams(env: dict[str, str]) -> None:
    s = load_settings(env)
    assert (s.host, s.port, s.metrics_port) == ("0.0.0.0", 8443, 2112)
    assert s.kcp_addr is None and s.kcp_contract is None and s.kcp_base_url is None
    assert s.delivery.mode == "async"
    assert s.delivery.overflow_policy == "drop-oldest"
    assert s.log_level == "INFO"
    assert s.legacy_owner is False  # upstream 2.1+: no owner field


def test_every_variable(env: dict[str, str]) -> None:
    env |= {
        "KCP_ADDR": "gateway.kcp.example:443",
        "KCP_CONTRACT": "v2",
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": "0",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": "9000",
        "WATCHER_DELIVERY_MODE": "sync",
        "WATCHER_QUEUE_SIZE": "5",
        "WATCHER_OVERFLOW_POLICY": "reject-newest",
        "WATCHER_WORKERS": "2",
        "WATCHER_POOL_SIZE": "3",
        "WATCHER_KEEPALIVE_SECONDS": "0",
        "WATCHER_RETRY_BASE_SECONDS": "0.1",
        "WATCHER_RETRY_MAX_SECONDS": "2",
        "WATCHER_MAX_EVENT_AGE_SECONDS": "60",
        "WATCHER_REQUEST_TIMEOUT_SECONDS": "4",
        "WATCHER_SYNC_ATTEMPTS": "1",
        "WATCHER_SYNC_TIMEOUT_SECONDS": "1.5",
        "WATCHER_DRAIN_TIMEOUT_SECONDS": "7",
        "WATCHER_TLS_RELOAD_SECONDS": "0.5",
        "WATCHER_MAX_BODY_BYTES": "1024",
        "WATCHER_LOG_LEVEL": "debug",
        "WATCHER_LEGACY_OWNER": "true",
    }
    s = load_settings(env)
    d = s.delivery
    assert s.kcp_base_url == "https://gateway.kcp.example:443"
    assert (s.host, s.port, s.metrics_host, s.metrics_port) == ("127.0.0.1", 0, "127.0.0.1", 9000)
    assert (d.mode, d.queue_size, d.overflow_policy, d.workers, d.pool_size) == (
        "sync",
        5,
        "reject-newest",
        2,
        3,
    )
    assert (d.retry_base, d.retry_max, d.max_event_age, d.request_timeout) == (0.1, 2, 60, 4)
    assert (d.sync_attempts, d.sync_timeout, d.drain_timeout) == (1, 1.5, 7)
    assert (s.tls_reload_interval, s.max_body_bytes, s.log_level) == (0.5, 1024, "DEBUG")
    assert s.legacy_owner is True
    assert d.keepalive == 0


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("KCP_ADDR", "https://gateway:443", "host:port"),
        ("KCP_ADDR", "gateway", "host:port"),
        ("KCP_ADDR", "gateway:99999", "host:port"),
        ("KCP_CONTRACT", "v3", "v1 or v2"),
        ("WEBHOOK_PORT", "http", "port number"),
        ("METRICS_PORT", "-1", "port number"),
        ("WATCHER_DELIVERY_MODE", "later", "async or sync"),
        ("WATCHER_QUEUE_SIZE", "0", "positive integer"),
        ("WATCHER_OVERFLOW_POLICY", "drop-newest", "drop-oldest or reject-newest"),
        ("WATCHER_RETRY_BASE_SECONDS", "nan", "positive number"),
        ("WATCHER_RETRY_BASE_SECONDS", "60", "at most WATCHER_RETRY_MAX_SECONDS"),
        ("WATCHER_LOG_LEVEL", "chatty", "DEBUG, INFO"),
        ("WEBHOOK_HOST", "http://x", "IP address or host name"),
        ("WATCHER_LEGACY_OWNER", "maybe", "true or false"),
        ("WATCHER_KEEPALIVE_SECONDS", "-1", "seconds ≥ 0"),
    ],
)
def test_invalid_values_name_the_variable(
    env: dict[str, str], name: str, value: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env | {name: value})
    assert name in str(err.value) and expected in str(err.value)


@pytest.mark.parametrize("name", ["CA_CERT", "TLS_CERT", "TLS_KEY"])
def test_missing_or_absent_files(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} is not set"):
        load_settings({k: v for k, v in env.items() if k != name})
    with pytest.raises(ConfigError, match=f"{name}=.*no such file"):
        load_settings(env | {name: "/nonexistent/file.pem"})
