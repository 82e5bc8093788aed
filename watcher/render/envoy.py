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

The pieces: ``envoy_settings`` (type URLs and settings) → ``envoy_routes``
(VirtualService → routes) → ``envoy_resources`` (one Envoy resource each) → this module
(everything at once, and the safe order of file writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watcher.render.envoy_resources import (
    discovery_response,
    render_bootstrap,
    render_cluster,
    render_listener,
    render_route_configuration,
)
from watcher.render.envoy_routes import (
    Destination,
    Route,
    routes_from_virtual_service,
)
from watcher.render.envoy_settings import (
    CLUSTER_TYPE,
    FAULT_FILTER,
    LISTENER_TYPE,
    ROUTE_CONFIGURATION_TYPE,
    ClusterSettings,
    FaultInjection,
    GatewayListener,
    Resolver,
    TlsFiles,
    UpstreamTls,
    XdsLayout,
)
from watcher.render.errors import RenderError


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
    clusters: ClusterSettings = ClusterSettings(),  # noqa: B008 - frozen
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


__all__ = [
    "CLUSTER_TYPE",
    "FAULT_FILTER",
    "LISTENER_TYPE",
    "ROUTE_CONFIGURATION_TYPE",
    "ClusterSettings",
    "EnvoyConfig",
    "FaultInjection",
    "GatewayListener",
    "TlsFiles",
    "UpstreamTls",
    "XdsLayout",
    "discovery_response",
    "render_bootstrap",
    "render_envoy",
    "routes_from_virtual_service",
    "update_sequence",
]
