"""Envoy xDS building blocks: type URLs, and the frozen settings the renderers take."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

_T = "type.googleapis.com/"
LISTENER_TYPE = _T + "envoy.config.listener.v3.Listener"
CLUSTER_TYPE = _T + "envoy.config.cluster.v3.Cluster"
ROUTE_CONFIGURATION_TYPE = _T + "envoy.config.route.v3.RouteConfiguration"
HCM_TYPE = _T + "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
DOWNSTREAM_TLS_TYPE = _T + "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
UPSTREAM_TLS_TYPE = _T + "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
HTTP_PROTOCOL_OPTIONS_TYPE = _T + "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
FAULT_TYPE = _T + "envoy.extensions.filters.http.fault.v3.HTTPFault"
ROUTER_TYPE = _T + "envoy.extensions.filters.http.router.v3.Router"
FILE_ACCESS_LOG_TYPE = _T + "envoy.extensions.access_loggers.file.v3.FileAccessLog"

FAULT_FILTER = "envoy.filters.http.fault"
ROUTER_FILTER = "envoy.filters.http.router"
HCM_FILTER = "envoy.filters.network.http_connection_manager"
TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"
HTTP_PROTOCOL_OPTIONS_KEY = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
CATCH_ALL_ROUTE = "catch-all"

Resolver = Mapping[str, tuple[str, int]]
"""``<svc>.<ns>.svc.cluster.local:<port>`` → the (ip, port) that actually serves it."""


def _duration(ms: int) -> str:
    """A protobuf JSON Duration (``"1.250s"``) from milliseconds."""
    return f"{ms // 1000}.{ms % 1000:03d}s" if ms % 1000 else f"{ms // 1000}s"


def _percent(value: float) -> dict[str, Any]:
    """A FractionalPercent with millionths, exact for percentages with 4 decimals."""
    return {"numerator": round(value * 10_000), "denominator": "MILLION"}


@dataclass(frozen=True)
class TlsFiles:
    """PEM file paths: the certificate chain and key Envoy presents, and the CA it trusts."""

    cert_chain: str
    private_key: str
    ca: str


@dataclass(frozen=True)
class UpstreamTls(TlsFiles):
    """Gateway → listener mTLS: the gateway's client certificate (``cert_chain``,
    ``private_key``), the CA the listeners' serving certificates chain to (``ca``), TLS
    1.3. The listener's certificate must carry ``server_name`` as a SAN (also sent as
    SNI); ``None`` pins each cluster's own destination host
    (``<svc>.<ns>.svc.cluster.local``)."""

    server_name: str | None = None


@dataclass(frozen=True)
class FaultInjection:
    """Envoy fault filter settings: abort a share of requests and/or delay a share of them.

    Percentages are 0..100; the default injects nothing.
    """

    abort_percent: float = 0.0
    abort_status: int = 503
    delay_percent: float = 0.0
    delay_ms: int = 0

    def __post_init__(self) -> None:
        for name in ("abort_percent", "delay_percent"):
            value = getattr(self, name)
            if not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be within 0..100, got {value}")
        if not 200 <= self.abort_status < 600:
            raise ValueError(f"abort_status must be within 200..599, got {self.abort_status}")
        if self.delay_ms < 0:
            raise ValueError(f"delay_ms must not be negative, got {self.delay_ms}")

    def http_fault(self) -> dict[str, Any]:
        """The ``HTTPFault`` message; without faults it is empty and the filter is inert."""
        fault: dict[str, Any] = {"@type": FAULT_TYPE}
        if self.abort_percent > 0:
            fault["abort"] = {
                "http_status": self.abort_status,
                "percentage": _percent(self.abort_percent),
            }
        if self.delay_percent > 0 and self.delay_ms > 0:
            fault["delay"] = {
                "fixed_delay": _duration(self.delay_ms),
                "percentage": _percent(self.delay_percent),
            }
        return fault


NO_FAULT = FaultInjection()


@dataclass(frozen=True)
class XdsLayout:
    """Where the dynamic resources live: one watched directory, one file per xDS type."""

    directory: str
    lds_file: str = "lds.yaml"
    cds_file: str = "cds.yaml"
    rds_file: str = "rds.yaml"

    def path(self, file: str) -> str:
        return f"{self.directory.rstrip('/')}/{file}"

    def config_source(self, file: str) -> dict[str, Any]:
        """A ConfigSource reading ``file``, reloaded when something is renamed into the dir."""
        return {
            "path_config_source": {
                "path": self.path(file),
                "watched_directory": {"path": self.directory},
            },
            "resource_api_version": "V3",
        }


@dataclass(frozen=True)
class GatewayListener:
    """The gateway's HTTPS listener (Istio's ``klm-watcher`` Gateway server)."""

    port: int
    tls: TlsFiles
    """Serving certificate, its key, and the KCP CA bundle client certificates must chain to."""
    address: str = "127.0.0.1"
    name: str = "kcp_gateway"
    stat_prefix: str = "kcp_gateway"
    route_config_name: str = "kcp_watcher"
    fault: FaultInjection = NO_FAULT
    """Listener-wide fault filter config; changing it needs an LDS swap (drains
    connections). Prefer ``route_fault`` of ``render_envoy``, which is delivered by RDS."""
    access_log_path: str | None = None
    tls_version: Literal["TLSv1_2", "TLSv1_3"] = "TLSv1_3"


@dataclass(frozen=True)
class ClusterSettings:
    connect_timeout_ms: int = 1000
    idle_timeout_ms: int = 30_000
    """Below aiohttp's 75 s keep-alive, so Envoy never reuses a connection the backend closed."""
    upstream_tls: UpstreamTls | None = None
    plaintext: frozenset[str] = frozenset()
    """Destinations (``host:port``) reached over plain HTTP even with ``upstream_tls``: a
    workload outside the mesh, such as upstream's listener, which serves plain HTTP and
    relies on its Istio sidecar for mTLS (Istio's auto-mTLS sends plain text to it)."""
