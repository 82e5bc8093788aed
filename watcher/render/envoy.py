"""VirtualServices → Envoy file-based xDS: what Istio's gateway would run, without Istio.

Pure. Produces plain, JSON/YAML-serialisable dicts with Envoy v3 field names and ``@type``
URLs (see ``/work/shared/spec/envoy-gateway.md``):

- a bootstrap whose LDS and CDS come from files in a watched directory;
- a Listener: mTLS (client certificate required, TLS 1.3 only), HTTP connection manager
  with ``forward_client_cert_details: SANITIZE_SET``, the fault filter (inert unless
  configured) and the router; routes come by RDS from the same directory;
- a RouteConfiguration: one route per VirtualService match, longest path first, then a
  catch-all 404;
- STATIC Clusters, one per destination, resolved through a caller-supplied mapping (there
  is no cluster DNS locally). A destination the resolver does not know is *reported* in
  ``EnvoyConfig.unresolved`` and its route answers 503, as a gateway without endpoints would.

Writing the files (atomically, by rename) and running Envoy belong to the caller;
``update_sequence`` says in which order to write them so no route ever names a missing
cluster.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from watcher.render.errors import RenderError

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


# --------------------------------------------------------------------------------------
# Settings


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
    """Gateway → listener mTLS; ``server_name`` sets SNI and pins the listener's SAN."""

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


# --------------------------------------------------------------------------------------
# VirtualService → routes


@dataclass(frozen=True, order=True)
class Destination:
    host: str
    port: int

    @property
    def key(self) -> str:
        """The resolver key, ``<host>:<port>``."""
        return f"{self.host}:{self.port}"

    @property
    def cluster_name(self) -> str:
        """Dot-free, so ``cluster.<name>.*`` stats stay parseable: ``<svc>_<ns>_<port>``."""
        base = self.host.removesuffix(".svc.cluster.local").replace(".", "_")
        return f"{base}_{self.port}"


@dataclass(frozen=True)
class Route:
    """One Envoy route taken from a VirtualService http route."""

    name: str
    match: Literal["prefix", "path"]
    value: str
    destination: Destination
    source: str
    """``<namespace>/<name>`` of the VirtualService it came from."""

    def sort_key(self) -> tuple[int, str, int, str, str]:
        # Longest path first, so a more specific prefix wins; exact before prefix.
        return (
            -len(self.value),
            self.value,
            0 if self.match == "path" else 1,
            self.name,
            self.source,
        )


def routes_from_virtual_service(vs: Mapping[str, Any]) -> list[Route]:
    """The routes of one VirtualService; ``RenderError`` for shapes the gateway cannot map."""
    meta = vs.get("metadata") or {}
    source = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    spec = vs.get("spec")
    if not isinstance(spec, Mapping):
        raise RenderError(f"VirtualService {source} has no spec")
    routes: list[Route] = []
    problems: list[str] = []
    for i, http in enumerate(spec.get("http") or []):
        where = f"VirtualService {source} spec.http[{i}]"
        name = http.get("name") or f"{source}#{i}"
        targets = http.get("route") or []
        if len(targets) != 1:
            problems.append(f"{where}: needs exactly one route destination, got {len(targets)}")
            continue
        dest = targets[0].get("destination") or {}
        host, port = dest.get("host"), (dest.get("port") or {}).get("number")
        if not isinstance(host, str) or not host:
            problems.append(f"{where}.route[0].destination.host is missing")
            continue
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            problems.append(f"{where}.route[0].destination.port.number must be 1..65535")
            continue
        matches = http.get("match") or []
        if not matches:
            problems.append(f"{where}: needs at least one uri match (no catch-all routes)")
        for j, match in enumerate(matches):
            uri = match.get("uri") or {}
            if set(match) - {"uri"} or len(uri) != 1 or not set(uri) <= {"prefix", "exact"}:
                problems.append(f"{where}.match[{j}]: only uri.prefix or uri.exact is supported")
                continue
            kind, value = next(iter(uri.items()))
            if not isinstance(value, str) or not value.startswith("/"):
                problems.append(f"{where}.match[{j}].uri.{kind} must be a path starting with /")
                continue
            routes.append(
                Route(
                    name=name,
                    match="prefix" if kind == "prefix" else "path",
                    value=value,
                    destination=Destination(host, port),
                    source=source,
                )
            )
    if problems:
        raise RenderError("; ".join(problems))
    return routes


# --------------------------------------------------------------------------------------
# Resources


def render_cluster(
    destination: Destination, address: tuple[str, int], settings: ClusterSettings
) -> dict[str, Any]:
    """A STATIC cluster with one endpoint."""
    ip, port = address
    cluster: dict[str, Any] = {
        "@type": CLUSTER_TYPE,
        "name": destination.cluster_name,
        "type": "STATIC",
        "connect_timeout": _duration(settings.connect_timeout_ms),
        "load_assignment": {
            "cluster_name": destination.cluster_name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {"socket_address": {"address": ip, "port_value": port}}
                            }
                        }
                    ]
                }
            ],
        },
        "typed_extension_protocol_options": {
            HTTP_PROTOCOL_OPTIONS_KEY: {
                "@type": HTTP_PROTOCOL_OPTIONS_TYPE,
                "common_http_protocol_options": {
                    "idle_timeout": _duration(settings.idle_timeout_ms)
                },
                "explicit_http_config": {"http_protocol_options": {}},
            }
        },
    }
    tls = settings.upstream_tls
    if tls is not None:
        context: dict[str, Any] = {
            "@type": UPSTREAM_TLS_TYPE,
            "common_tls_context": {
                "tls_params": {
                    "tls_minimum_protocol_version": "TLSv1_3",
                    "tls_maximum_protocol_version": "TLSv1_3",
                },
                "tls_certificates": [_tls_certificate(tls)],
                "validation_context": _validation_context(tls.ca, tls.server_name),
            },
        }
        if tls.server_name:
            context["sni"] = tls.server_name
        cluster["transport_socket"] = {"name": TLS_TRANSPORT_SOCKET, "typed_config": context}
    return cluster


def _tls_certificate(files: TlsFiles) -> dict[str, Any]:
    return {
        "certificate_chain": {"filename": files.cert_chain},
        "private_key": {"filename": files.private_key},
    }


def _validation_context(ca: str, server_name: str | None = None) -> dict[str, Any]:
    context: dict[str, Any] = {"trusted_ca": {"filename": ca}}
    if server_name:
        san_type = "IP_ADDRESS" if _is_ip(server_name) else "DNS"
        context["match_typed_subject_alt_names"] = [
            {"san_type": san_type, "matcher": {"exact": server_name}}
        ]
    return context


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _envoy_route(route: Route, resolved: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": route.name, "match": {route.match: route.value}}
    if resolved:
        out["route"] = {"cluster": route.destination.cluster_name}
    else:
        out["direct_response"] = {
            "status": 503,
            "body": {"inline_string": f"no endpoint for {route.destination.key}\n"},
        }
    return out


def render_route_configuration(
    routes: Iterable[Route],
    resolved: Iterable[Destination],
    *,
    name: str,
    fault: FaultInjection | None = None,
) -> dict[str, Any]:
    """The RouteConfiguration: sorted routes, then the catch-all 404.

    Routes whose destination is not in ``resolved`` answer 503 instead of naming a
    cluster that does not exist. ``fault`` overrides the fault filter for the virtual host.
    """
    known = set(resolved)
    ordered = sorted(routes, key=Route.sort_key)
    virtual_host: dict[str, Any] = {
        "name": "kcp_watcher",
        "domains": ["*"],
        "routes": [_envoy_route(r, r.destination in known) for r in ordered]
        + [{"name": CATCH_ALL_ROUTE, "match": {"prefix": "/"}, "direct_response": {"status": 404}}],
    }
    if fault is not None:
        virtual_host["typed_per_filter_config"] = {FAULT_FILTER: fault.http_fault()}
    return {"@type": ROUTE_CONFIGURATION_TYPE, "name": name, "virtual_hosts": [virtual_host]}


def render_listener(gateway: GatewayListener, layout: XdsLayout) -> dict[str, Any]:
    """The mTLS listener; its routes come by RDS from ``layout``."""
    hcm: dict[str, Any] = {
        "@type": HCM_TYPE,
        "stat_prefix": gateway.stat_prefix,
        "codec_type": "AUTO",
        "use_remote_address": True,
        "normalize_path": True,
        "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "forward_client_cert_details": "SANITIZE_SET",
        "set_current_client_cert_details": {
            "subject": True,
            "cert": True,
            "dns": True,
            "uri": True,
        },
        "rds": {
            "route_config_name": gateway.route_config_name,
            "config_source": layout.config_source(layout.rds_file),
        },
        "http_filters": [
            {"name": FAULT_FILTER, "typed_config": gateway.fault.http_fault()},
            {"name": ROUTER_FILTER, "typed_config": {"@type": ROUTER_TYPE}},
        ],
    }
    if gateway.access_log_path:
        hcm["access_log"] = [
            {
                "name": "envoy.access_loggers.file",
                "typed_config": {"@type": FILE_ACCESS_LOG_TYPE, "path": gateway.access_log_path},
            }
        ]
    tls_context = {
        "@type": DOWNSTREAM_TLS_TYPE,
        "require_client_certificate": True,
        "common_tls_context": {
            "tls_params": {
                "tls_minimum_protocol_version": gateway.tls_version,
                "tls_maximum_protocol_version": "TLSv1_3",
            },
            "tls_certificates": [_tls_certificate(gateway.tls)],
            "validation_context": _validation_context(gateway.tls.ca),
        },
    }
    return {
        "@type": LISTENER_TYPE,
        "name": gateway.name,
        "address": {"socket_address": {"address": gateway.address, "port_value": gateway.port}},
        "filter_chains": [
            {
                "filters": [{"name": HCM_FILTER, "typed_config": hcm}],
                "transport_socket": {"name": TLS_TRANSPORT_SOCKET, "typed_config": tls_context},
            }
        ],
    }


def render_bootstrap(
    layout: XdsLayout,
    *,
    admin_port: int,
    node_id: str = "kcp-gateway",
    node_cluster: str = "kcp-gateway",
    admin_address: str = "127.0.0.1",
) -> dict[str, Any]:
    """Envoy's bootstrap: node identity, admin endpoint, LDS and CDS from watched files."""
    return {
        "node": {"id": node_id, "cluster": node_cluster},
        "admin": {
            "address": {"socket_address": {"address": admin_address, "port_value": admin_port}}
        },
        "dynamic_resources": {
            "lds_config": layout.config_source(layout.lds_file),
            "cds_config": layout.config_source(layout.cds_file),
        },
    }


def discovery_response(resources: list[dict[str, Any]]) -> dict[str, Any]:
    """The file content Envoy reads: a DiscoveryResponse whose version is a content hash.

    Equal resources give equal versions, so a caller can skip rewriting unchanged files
    and can confirm a swap via ``version_text`` on the admin endpoint.
    """
    canonical = json.dumps(resources, sort_keys=True, separators=(",", ":"))
    return {
        "version_info": hashlib.sha256(canonical.encode()).hexdigest()[:16],
        "resources": resources,
    }


# --------------------------------------------------------------------------------------
# Everything at once


@dataclass(frozen=True)
class EnvoyConfig:
    """The dynamic resources for one set of VirtualServices."""

    layout: XdsLayout
    listener: dict[str, Any]
    clusters: list[dict[str, Any]]
    route_configuration: dict[str, Any]
    unresolved: tuple[str, ...] = ()
    """Destinations (``host:port``) the resolver did not know; their routes answer 503."""
    shadowed: tuple[str, ...] = field(default=())
    """Routes that can never match because an earlier route has the same match."""

    def lds(self) -> dict[str, Any]:
        return discovery_response([self.listener])

    def cds(self) -> dict[str, Any]:
        return discovery_response(self.clusters)

    def rds(self) -> dict[str, Any]:
        return discovery_response([self.route_configuration])

    def files(self) -> dict[str, dict[str, Any]]:
        """File name → content, in a safe order for a first write (CDS, RDS, LDS)."""
        return {
            self.layout.cds_file: self.cds(),
            self.layout.rds_file: self.rds(),
            self.layout.lds_file: self.lds(),
        }


def render_envoy(
    virtual_services: Iterable[Mapping[str, Any]],
    *,
    resolver: Resolver,
    gateway: GatewayListener,
    layout: XdsLayout,
    clusters: ClusterSettings = ClusterSettings(),
    route_fault: FaultInjection | None = None,
    strict: bool = False,
) -> EnvoyConfig:
    """All dynamic resources for ``virtual_services``; independent of their order.

    ``strict`` raises ``RenderError`` for unresolved destinations instead of reporting them.
    ``route_fault`` injects faults through RDS (no listener drain); ``None`` injects none.
    """
    routes: list[Route] = []
    problems: list[str] = []
    for vs in virtual_services:
        try:
            routes.extend(routes_from_virtual_service(vs))
        except RenderError as exc:
            problems.append(str(exc))
    if problems:
        raise RenderError("; ".join(problems))
    destinations = sorted({r.destination for r in routes}, key=lambda d: (d.cluster_name, d))
    resolved = [d for d in destinations if d.key in resolver]
    unresolved = tuple(d.key for d in destinations if d.key not in resolver)
    if strict and unresolved:
        raise RenderError(f"no address for destination(s) {', '.join(unresolved)}")
    names: dict[str, Destination] = {}
    for d in resolved:
        if names.setdefault(d.cluster_name, d) != d:
            raise RenderError(
                f"destinations {names[d.cluster_name].key} and {d.key} map to the same "
                f"cluster name {d.cluster_name}"
            )
    seen: set[tuple[str, str]] = set()
    shadowed: list[str] = []
    for r in sorted(routes, key=Route.sort_key):
        if (r.match, r.value) in seen:
            shadowed.append(f"{r.source} {r.name} ({r.match} {r.value})")
        seen.add((r.match, r.value))
    return EnvoyConfig(
        layout=layout,
        listener=render_listener(gateway, layout),
        clusters=[render_cluster(d, resolver[d.key], clusters) for d in resolved],
        route_configuration=render_route_configuration(
            routes, resolved, name=gateway.route_config_name, fault=route_fault
        ),
        unresolved=unresolved,
        shadowed=tuple(shadowed),
    )


def update_sequence(
    previous: EnvoyConfig | None, new: EnvoyConfig
) -> list[tuple[str, dict[str, Any]]]:
    """(file name, content) writes that move Envoy from ``previous`` to ``new`` safely.

    Clusters are added before the routes that name them and removed after: first CDS with
    the union of old and new clusters, then RDS, then LDS if it changed, then the final CDS
    if it differs from the union. Unchanged files are not rewritten.
    """
    layout = new.layout
    if previous is None:
        return list(new.files().items())
    steps: list[tuple[str, dict[str, Any]]] = []
    by_name = {c["name"]: c for c in previous.clusters}
    by_name.update({c["name"]: c for c in new.clusters})
    union = discovery_response([by_name[n] for n in sorted(by_name)])
    current = previous.cds()
    if union["version_info"] != current["version_info"]:
        steps.append((layout.cds_file, union))
        current = union
    if new.rds()["version_info"] != previous.rds()["version_info"]:
        steps.append((layout.rds_file, new.rds()))
    if new.lds()["version_info"] != previous.lds()["version_info"]:
        steps.append((layout.lds_file, new.lds()))
    final = new.cds()
    if final["version_info"] != current["version_info"]:
        steps.append((layout.cds_file, final))
    return steps
