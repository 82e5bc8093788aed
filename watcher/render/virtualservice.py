"""Watcher + the KCP Gateways → the Istio VirtualService that routes its events.

Pure. One VirtualService per Watcher (same name and namespace, owned by the Watcher):
route ``<ns>/<name>``, ``uri.prefix: /v2/<manager>/event`` → the Watcher's service.
It binds to every Gateway the Watcher's ``spec.gateway.selector`` matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from watcher.errors import InvalidWatcher
from watcher.model import Contract
from watcher.paths import event_path
from watcher.render.watcher_cr import API_VERSION, KIND, LabelSelector, Watcher

VIRTUAL_SERVICE_API_VERSION = "networking.istio.io/v1beta1"


def _meta(obj: Mapping[str, Any], what: str) -> tuple[str, str, Mapping[str, Any]]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidWatcher(f"{what} has no metadata")
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        raise InvalidWatcher(f"{what} has no metadata.name")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise InvalidWatcher(f"{what} {namespace}/{name}: metadata.labels is not a map")
    return namespace, name, labels


def select_gateways(
    selector: LabelSelector, gateways: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The Gateways whose labels the selector matches, sorted by namespace/name."""
    selected = [g for g in gateways if selector.matches(_meta(g, "Gateway")[2])]
    return sorted(selected, key=lambda g: _meta(g, "Gateway")[:2])


def _server_hosts(gateway: Mapping[str, Any]) -> list[str]:
    spec = gateway.get("spec") or {}
    hosts: list[str] = []
    for server in spec.get("servers") or []:
        for host in server.get("hosts") or []:
            # A Gateway host may be "<namespace>/<host>"; a VirtualService host may not.
            hosts.append(str(host).rpartition("/")[2])
    return hosts


def render_virtual_service(
    watcher: Watcher,
    gateways: Iterable[Mapping[str, Any]],
    *,
    contract: Contract = "v2",
    owner_reference: bool = True,
) -> dict[str, Any]:
    """The VirtualService for ``watcher``, bound to the Gateways its selector matches.

    Raises ``InvalidWatcher`` when the Watcher has no uid (the owner reference needs one),
    when no Gateway matches, or when the matching Gateways declare no hosts.
    ``owner_reference=False`` renders it without the owner reference (and without needing
    a uid): for install manifests written before the Watcher exists in a cluster.
    """
    if owner_reference and not watcher.metadata.uid:
        raise InvalidWatcher(
            f"Watcher {watcher.route_name} has no metadata.uid; read it from the API server "
            "before rendering its VirtualService (the owner reference needs the uid)"
        )
    all_gateways = list(gateways)
    selected = select_gateways(watcher.spec.gateway.selector, all_gateways)
    if not selected:
        raise InvalidWatcher(
            f"Watcher {watcher.route_name}: spec.gateway.selector matches none of the "
            f"{len(all_gateways)} Gateway(s)"
        )
    gateway_refs: list[str] = []
    hosts: list[str] = []
    for gateway in selected:
        namespace, name, _ = _meta(gateway, "Gateway")
        gateway_refs.append(f"{namespace}/{name}")
        hosts.extend(h for h in _server_hosts(gateway) if h not in hosts)
    if not hosts:
        raise InvalidWatcher(
            f"Watcher {watcher.route_name}: the matching Gateways {', '.join(gateway_refs)} "
            "declare no hosts"
        )
    service = watcher.spec.service_info
    metadata: dict[str, Any] = {"name": watcher.name, "namespace": watcher.namespace}
    if owner_reference:
        metadata["ownerReferences"] = [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": watcher.name,
                "uid": watcher.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": VIRTUAL_SERVICE_API_VERSION,
        "kind": "VirtualService",
        "metadata": metadata,
        "spec": {
            "gateways": gateway_refs,
            "hosts": hosts,
            "http": [
                {
                    "name": watcher.route_name,
                    "match": [{"uri": {"prefix": event_path(contract, watcher.manager)}}],
                    "route": [
                        {"destination": {"host": service.host, "port": {"number": service.port}}}
                    ],
                }
            ],
        },
    }


def gateway_dict(
    name: str = "klm-watcher",
    *,
    namespace: str = "kcp-system",
    hosts: Iterable[str] = ("listener.kyma.local",),
    labels: Mapping[str, str] | None = None,
    port: int = 443,
    credential_name: str = "klm-istio-gateway",
) -> dict[str, Any]:
    """An Istio Gateway like KLM's: HTTPS, mutual TLS 1.3, labelled as the default gateway."""
    return {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "Gateway",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(
                labels
                if labels is not None
                else {"operator.kyma-project.io/watcher-gateway": "default"}
            ),
        },
        "spec": {
            "selector": {"istio": "ingressgateway"},
            "servers": [
                {
                    "hosts": list(hosts),
                    "port": {"name": "https", "number": port, "protocol": "HTTPS"},
                    "tls": {
                        "mode": "MUTUAL",
                        "credentialName": credential_name,
                        "minProtocolVersion": "TLSV1_3",
                        "maxProtocolVersion": "TLSV1_3",
                    },
                }
            ],
        },
    }
