"""Envoy v3 resources (Cluster, RouteConfiguration, Listener, bootstrap), one function each."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from watcher.pki import is_ip
from watcher.render.envoy_routes import (
    Destination,
    Route,
)
from watcher.render.envoy_settings import (
    CATCH_ALL_ROUTE,
    CLUSTER_TYPE,
    DOWNSTREAM_TLS_TYPE,
    FAULT_FILTER,
    FILE_ACCESS_LOG_TYPE,
    HCM_FILTER,
    HCM_TYPE,
    HTTP_PROTOCOL_OPTIONS_KEY,
    HTTP_PROTOCOL_OPTIONS_TYPE,
    LISTENER_TYPE,
    ROUTE_CONFIGURATION_TYPE,
    ROUTER_FILTER,
    ROUTER_TYPE,
    TLS_TRANSPORT_SOCKET,
    UPSTREAM_TLS_TYPE,
    ClusterSettings,
    FaultInjection,
    GatewayListener,
    TlsFiles,
    XdsLayout,
    _duration,
)


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
    tls = settings.upstream_tls if destination.key not in settings.plaintext else None
    if tls is not None:
        # The listener's serving certificate must name the destination it serves (as
        # Istio pins a service's identity), unless one name is configured for all.
        server_name = tls.server_name or destination.host
        context: dict[str, Any] = {
            "@type": UPSTREAM_TLS_TYPE,
            "common_tls_context": {
                "tls_params": {
                    "tls_minimum_protocol_version": "TLSv1_3",
                    "tls_maximum_protocol_version": "TLSv1_3",
                },
                "tls_certificates": [_tls_certificate(tls)],
                "validation_context": _validation_context(tls.ca, server_name),
            },
            "sni": server_name,
        }
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
        san_type = "IP_ADDRESS" if is_ip(server_name) else "DNS"
        context["match_typed_subject_alt_names"] = [
            {"san_type": san_type, "matcher": {"exact": server_name}}
        ]
    return context


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
