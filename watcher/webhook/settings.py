"""Webhook configuration, read once from the environment into frozen dataclasses.

Upstream's variables keep their names and defaults so the Deployment KLM renders works
unchanged; ours start with ``WEBHOOK_``/``METRICS_``/``WATCHER_``. Every bad value raises
``ConfigError`` naming the variable and what it accepts, so ``watcher-webhook`` can exit
with one readable line instead of failing later inside a request.

==================================  ==============  ===========================================
Variable                            Default         Meaning
==================================  ==============  ===========================================
``CA_CERT``                         (required)      PEM file, one or more CA certificates; used
                                                    to verify the KCP gateway
``TLS_CERT``                        (required)      PEM certificate: serving cert and mTLS
                                                    client cert towards KCP
``TLS_KEY``                         (required)      PEM private key for ``TLS_CERT``
``KCP_ADDR``                        (unset)         ``host:port`` of the KCP gateway, no scheme;
                                                    unset → every event fails with
                                                    ``missing-address-or-contract`` (upstream)
``KCP_CONTRACT``                    (unset)         ``v1`` or ``v2``: only the path
                                                    ``/<contract>/<manager>/event`` differs, the
                                                    body is the same (upstream 2.1+); unset as
                                                    ``KCP_ADDR``
``WATCHER_LEGACY_OWNER``            ``false``       ``true``: upstream before 2.1: every event
                                                    carries ``owner`` from the annotation
                                                    ``operator.kyma-project.io/owned-by``; an
                                                    object without it sends nothing
                                                    (``unknown-owner``)
``WEBHOOK_HOST``                    ``0.0.0.0``     address the HTTPS server binds
``WEBHOOK_PORT``                    ``8443``        its port (0 = any free port)
``METRICS_HOST``                    ``0.0.0.0``     address of the plain-HTTP metrics server
``METRICS_PORT``                    ``2112``        its port (0 = any free port)
``WATCHER_DELIVERY_MODE``           ``async``       ``async``: queue and answer at once;
                                                    ``sync``: POST inside the admission call
                                                    (upstream behaviour)
``WATCHER_QUEUE_SIZE``              ``10000``       pending events held at most (async)
``WATCHER_OVERFLOW_POLICY``         ``drop-oldest`` ``drop-oldest`` or ``reject-newest``
``WATCHER_WORKERS``                 ``4``           concurrent delivery tasks (async)
``WATCHER_POOL_SIZE``               ``16``          max. TCP connections to the KCP
``WATCHER_KEEPALIVE_SECONDS``       ``30``          how long an idle KCP connection is kept;
                                                    ``0``: a new connection per event
                                                    (upstream's behaviour)
``WATCHER_RETRY_BASE_SECONDS``      ``0.5``         first backoff ceiling (full jitter)
``WATCHER_RETRY_MAX_SECONDS``       ``30``          backoff ceiling cap, also caps Retry-After
``WATCHER_MAX_EVENT_AGE_SECONDS``   ``300``         an undelivered event older than this is
                                                    dropped (``reason="expired"``)
``WATCHER_REQUEST_TIMEOUT_SECONDS`` ``10``          timeout of one POST to the KCP (async)
``WATCHER_SYNC_ATTEMPTS``           ``3``           attempts per event in sync mode
``WATCHER_SYNC_TIMEOUT_SECONDS``    ``3``           timeout of one POST in sync mode
``WATCHER_DRAIN_TIMEOUT_SECONDS``   ``10``          how long shutdown waits for the queue
``WATCHER_SPOOL_DIR``               (unset)         directory of the durable spool (async);
                                                    unset → queued events live in memory only
``WATCHER_SPOOL_FSYNC``             ``false``       ``true``: fsync each admission's event
                                                    before answering (survives power loss)
``WATCHER_SPOOL_SEGMENT_BYTES``     ``4194304``     segment size that triggers compaction
``WATCHER_TLS_RELOAD_SECONDS``      ``1``           how often the cert files are stat()ed
``WATCHER_MAX_BODY_BYTES``          ``8388608``     admission bodies larger than this → 413
``WATCHER_HEADER_TIMEOUT_SECONDS``  ``15``          a request head not complete this long after
                                                    the connect or the previous answer closes
                                                    the connection (also the idle keep-alive)
``WATCHER_BODY_TIMEOUT_SECONDS``    ``10``          a body not complete this long after its
                                                    head → 408 and the connection is closed
``WATCHER_LOG_LEVEL``               ``INFO``        ``DEBUG`` logs every admission
==================================  ==============  ===========================================
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from watcher.errors import ConfigError
from watcher.model import CONTRACTS, Contract

DeliveryMode = Literal["async", "sync"]
OverflowPolicy = Literal["drop-oldest", "reject-newest"]
DELIVERY_MODES: tuple[DeliveryMode, ...] = ("async", "sync")
OVERFLOW_POLICIES: tuple[OverflowPolicy, ...] = ("drop-oldest", "reject-newest")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclass(frozen=True)
class TLSFiles:
    """Where the certificate material lives; read by ``tlsreload``, never here."""

    ca_cert: Path
    tls_cert: Path
    tls_key: Path


@dataclass(frozen=True)
class DeliverySettings:
    """How events travel to the KCP; the defaults favour a never-stalled API server."""

    mode: DeliveryMode = "async"
    queue_size: int = 10_000
    overflow_policy: OverflowPolicy = "drop-oldest"
    workers: int = 4
    pool_size: int = 16
    keepalive: float = 30.0
    """Idle seconds a pooled KCP connection is kept; 0: a new connection per event."""
    retry_base: float = 0.5
    retry_max: float = 30.0
    max_event_age: float = 300.0
    request_timeout: float = 10.0
    sync_attempts: int = 3
    sync_timeout: float = 3.0
    drain_timeout: float = 10.0
    spool_dir: Path | None = None
    spool_fsync: bool = False
    spool_segment_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True)
class WebhookSettings:
    """Everything ``watcher-webhook`` needs; ``kcp_addr``/``kcp_contract`` may be unset."""

    tls: TLSFiles
    kcp_addr: str | None = None
    kcp_contract: Contract | None = None
    legacy_owner: bool = False
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 2112
    delivery: DeliverySettings = DeliverySettings()
    tls_reload_interval: float = 1.0
    max_body_bytes: int = 8 * 1024 * 1024
    header_timeout: float = 15.0
    body_timeout: float = 10.0
    log_level: str = "INFO"

    @property
    def kcp_base_url(self) -> str | None:
        """``https://<KCP_ADDR>`` or None when the address is not configured."""
        return f"https://{self.kcp_addr}" if self.kcp_addr else None


T = TypeVar("T")


def _get(
    env: Mapping[str, str], name: str, default: T, parse: Callable[[str], T], allowed: str
) -> T:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is invalid: expected {allowed}") from None


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 65535:
        raise ValueError(raw)
    return value


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(raw)
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0 or value == float("inf"):
        raise ValueError(raw)
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0 or value == float("inf"):
        raise ValueError(raw)
    return value


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(raw)


def _directory(raw: str) -> Path | None:
    path = Path(raw)
    if path.exists() and not path.is_dir():
        raise ValueError(raw)
    return path


def _choice(choices: tuple[T, ...]) -> Callable[[str], T]:
    def parse(raw: str) -> T:
        for choice in choices:
            if raw == choice or (isinstance(choice, str) and raw.upper() == choice.upper()):
                return choice
        raise ValueError(raw)

    return parse


def _host(raw: str) -> str:
    if any(c in raw for c in "/ ?#@"):
        raise ValueError(raw)
    return raw


def parse_kcp_addr(raw: str) -> str:
    """``host:port`` as upstream expects it; a scheme or path is a common mistake."""
    if "://" in raw or "/" in raw:
        raise ValueError(raw)
    host, sep, port = raw.rpartition(":")
    if not sep or not host:
        raise ValueError(raw)
    if host.startswith("["):
        ipaddress.IPv6Address(host.strip("[]"))
    elif ":" in host:
        raise ValueError(raw)
    if not 1 <= int(port) <= 65535:
        raise ValueError(raw)
    return raw


def _file(env: Mapping[str, str], name: str) -> Path:
    raw = env.get(name, "").strip()
    if not raw:
        raise ConfigError(f"{name} is not set: expected the path of a PEM file")
    path = Path(raw)
    if not path.is_file():
        raise ConfigError(f"{name}={raw!r}: no such file")
    return path


def load_settings(env: Mapping[str, str] | None = None) -> WebhookSettings:
    """Parse ``env`` (default ``os.environ``); raises ``ConfigError`` on the first bad value."""
    env = os.environ if env is None else env
    tls = TLSFiles(
        ca_cert=_file(env, "CA_CERT"),
        tls_cert=_file(env, "TLS_CERT"),
        tls_key=_file(env, "TLS_KEY"),
    )
    pos_f, pos_i = "a positive number of seconds", "a positive integer"
    delivery = DeliverySettings(
        mode=_get(env, "WATCHER_DELIVERY_MODE", "async", _choice(DELIVERY_MODES), "async or sync"),
        queue_size=_get(env, "WATCHER_QUEUE_SIZE", 10_000, _positive_int, pos_i),
        overflow_policy=_get(
            env,
            "WATCHER_OVERFLOW_POLICY",
            "drop-oldest",
            _choice(OVERFLOW_POLICIES),
            "drop-oldest or reject-newest",
        ),
        workers=_get(env, "WATCHER_WORKERS", 4, _positive_int, pos_i),
        pool_size=_get(env, "WATCHER_POOL_SIZE", 16, _positive_int, pos_i),
        keepalive=_get(
            env, "WATCHER_KEEPALIVE_SECONDS", 30.0, _non_negative_float, "a number of seconds ≥ 0"
        ),
        retry_base=_get(env, "WATCHER_RETRY_BASE_SECONDS", 0.5, _positive_float, pos_f),
        retry_max=_get(env, "WATCHER_RETRY_MAX_SECONDS", 30.0, _positive_float, pos_f),
        max_event_age=_get(env, "WATCHER_MAX_EVENT_AGE_SECONDS", 300.0, _positive_float, pos_f),
        request_timeout=_get(env, "WATCHER_REQUEST_TIMEOUT_SECONDS", 10.0, _positive_float, pos_f),
        sync_attempts=_get(env, "WATCHER_SYNC_ATTEMPTS", 3, _positive_int, pos_i),
        sync_timeout=_get(env, "WATCHER_SYNC_TIMEOUT_SECONDS", 3.0, _positive_float, pos_f),
        drain_timeout=_get(env, "WATCHER_DRAIN_TIMEOUT_SECONDS", 10.0, _positive_float, pos_f),
        spool_dir=_get(env, "WATCHER_SPOOL_DIR", None, _directory, "a directory path"),
        spool_fsync=_get(env, "WATCHER_SPOOL_FSYNC", False, _bool, "true or false"),
        spool_segment_bytes=_get(
            env, "WATCHER_SPOOL_SEGMENT_BYTES", 4 * 1024 * 1024, _positive_int, pos_i
        ),
    )
    if delivery.retry_base > delivery.retry_max:
        raise ConfigError(
            f"WATCHER_RETRY_BASE_SECONDS={delivery.retry_base} is invalid: expected at most "
            f"WATCHER_RETRY_MAX_SECONDS={delivery.retry_max}"
        )
    contract_raw = env.get("KCP_CONTRACT", "").strip()
    contract: Contract | None = None
    if contract_raw:
        contract = _get(env, "KCP_CONTRACT", "v2", _choice(CONTRACTS), " or ".join(CONTRACTS))
    kcp_addr = _get(env, "KCP_ADDR", None, parse_kcp_addr, "host:port without scheme or path")
    level = _get(env, "WATCHER_LOG_LEVEL", "INFO", _choice(LOG_LEVELS), ", ".join(LOG_LEVELS))
    return WebhookSettings(
        tls=tls,
        kcp_addr=kcp_addr,
        kcp_contract=contract,
        legacy_owner=_get(env, "WATCHER_LEGACY_OWNER", False, _bool, "true or false"),
        host=_get(env, "WEBHOOK_HOST", "0.0.0.0", _host, "an IP address or host name"),
        port=_get(env, "WEBHOOK_PORT", 8443, _port, "a port number 0..65535"),
        metrics_host=_get(env, "METRICS_HOST", "0.0.0.0", _host, "an IP address or host name"),
        metrics_port=_get(env, "METRICS_PORT", 2112, _port, "a port number 0..65535"),
        delivery=delivery,
        tls_reload_interval=_get(env, "WATCHER_TLS_RELOAD_SECONDS", 1.0, _positive_float, pos_f),
        max_body_bytes=_get(env, "WATCHER_MAX_BODY_BYTES", 8 * 1024 * 1024, _positive_int, pos_i),
        header_timeout=_get(env, "WATCHER_HEADER_TIMEOUT_SECONDS", 15.0, _positive_float, pos_f),
        body_timeout=_get(env, "WATCHER_BODY_TIMEOUT_SECONDS", 10.0, _positive_float, pos_f),
        log_level=level,
    )
