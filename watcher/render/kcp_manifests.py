"""Everything a KCP needs for the watcher, as installable manifests.

Pure. ``render_kcp_manifests(params)`` returns, in apply order: the Namespace
``kcp-system``, the CRDs (given by the caller: Watcher, Kyma, Istio Gateway and
VirtualService), the Istio Gateway ``klm-watcher``, the Watcher CRs, one KCP Kyma per
runtime (runtime-id label and ``skr-domain`` annotation: what the listener's SAN pinning
and the Lifecycle-Manager stand-in look up), the VirtualServices the Watcher controller
would create, and the gateway that stands in for Istio's ingress: Envoy, configured from
the same VirtualServices (``envoy``), in a Deployment with its TLS Secret, its
configuration ConfigMap and a Service.

The VirtualServices are rendered without an owner reference (the Watchers have no uid
before they exist); the Watcher controller adopts and rewrites them when it runs. Inside
a cluster Envoy resolves the destinations itself (``STRICT_DNS``), and reloads routes when
the ConfigMap changes: it watches the mount directory, where the kubelet swaps the
``..data`` link by rename.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watcher.domain import KCP_NAMESPACE, MANAGED_BY_LABEL, RUNTIME_ID_LABEL, SKR_DOMAIN_ANNOTATION
from watcher.errors import CertificateError
from watcher.model import Contract
from watcher.render.envoy import (
    GatewayListener,
    TlsFiles,
    XdsLayout,
    discovery_response,
    render_bootstrap,
    render_envoy,
)
from watcher.render.errors import RenderError
from watcher.render.virtualservice import gateway_dict, render_virtual_service
from watcher.render.watcher_cr import parse_watchers
from watcher.render.webhook_config import ca_bundle_field

GATEWAY_NAME = "watcher-gateway"
GATEWAY_TLS_SECRET = "watcher-gateway-tls"
GATEWAY_CONFIG = "watcher-gateway-envoy"
GATEWAY_PORT = 8443
ENVOY_ADMIN_PORT = 9901
ENVOY_IMAGE = "envoyproxy/envoy:v1.40.0"
ENVOY_UID = 101  # the envoy user of the official image
CONFIG_DIR = "/etc/envoy/config"
TLS_DIR = "/etc/envoy/tls"
BOOTSTRAP_FILE = "envoy.json"
MANAGED_BY = {MANAGED_BY_LABEL: "lifecycle-manager"}
_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


@dataclass(frozen=True)
class Runtime:
    """One SKR as the KCP knows it: its Kyma, the runtime id (the client certificate's
    CN) and the skr-domain its certificate must carry as a SAN."""

    runtime_id: str
    skr_domain: str
    kyma_name: str = ""
    """Defaults to the runtime id."""


@dataclass(frozen=True)
class KcpManifestParams:
    """What differs between KCP installations."""

    crds: Sequence[Mapping[str, Any]]
    """CustomResourceDefinition dicts (the harness ships them in ``fixtures/crds``)."""
    gateway_tls: Mapping[str, bytes]
    """PEM ``tls.crt`` / ``tls.key`` (the gateway's serving certificate; its SANs must cover
    the host SKRs dial) and ``ca.crt`` (the CA that signs the SKR client certificates)."""
    watchers: Sequence[Mapping[str, Any]] = ()
    runtimes: Sequence[Runtime] = ()
    namespace: str = KCP_NAMESPACE
    gateway_hosts: Sequence[str] = ("listener.kyma.local",)
    """Hosts of the Istio Gateway, copied into every VirtualService."""
    envoy_image: str = ENVOY_IMAGE
    image_pull_policy: str = "IfNotPresent"
    node_port: int | None = None
    """Expose the gateway on this node port (kind maps it to the host); ``None``: ClusterIP."""
    contract: Contract = "v2"


def _labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**MANAGED_BY, **(extra or {})}


def _clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without status and the fields the API server owns, ready to apply."""
    out = json.loads(json.dumps(dict(obj)))
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    return dict(out)


def _crds(crds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, crd in enumerate(crds):
        if crd.get("kind") != "CustomResourceDefinition":
            raise RenderError(f"crds[{i}] is a {crd.get('kind')!r}, not a CustomResourceDefinition")
        out.append(_clean(crd))
    return out


def kyma(runtime: Runtime, namespace: str) -> dict[str, Any]:
    """The KCP Kyma of one runtime, labelled and annotated as KLM does."""
    if not runtime.runtime_id or not runtime.skr_domain:
        raise RenderError("a runtime needs a runtime id and an skr-domain")
    return {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {
            "name": runtime.kyma_name or runtime.runtime_id,
            "namespace": namespace,
            "labels": _labels({RUNTIME_ID_LABEL: runtime.runtime_id}),
            "annotations": {SKR_DOMAIN_ANNOTATION: runtime.skr_domain},
        },
        "spec": {"channel": "regular"},
    }


def _tls_data(tls: Mapping[str, bytes]) -> dict[str, str]:
    missing = [k for k in ("tls.crt", "tls.key", "ca.crt") if not tls.get(k)]
    if missing:
        raise CertificateError(f"gateway TLS material lacks {', '.join(missing)}")
    ca_bundle_field(tls["ca.crt"])  # a clear error for a CA that is not PEM
    return {k: base64.b64encode(tls[k]).decode("ascii") for k in ("tls.crt", "tls.key", "ca.crt")}


def gateway_secret(params: KcpManifestParams) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": GATEWAY_TLS_SECRET,
            "namespace": params.namespace,
            "labels": _labels({"app": GATEWAY_NAME}),
        },
        "type": "kubernetes.io/tls",
        "data": _tls_data(params.gateway_tls),
    }


def _strict_dns(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The renderer's STATIC cluster, turned into one whose endpoint is a DNS name Envoy
    resolves itself (in a cluster the destinations are Service names, not addresses)."""
    return {**cluster, "type": "STRICT_DNS", "dns_lookup_family": "V4_PREFERRED"}


def envoy_config_map(
    virtual_services: Sequence[Mapping[str, Any]], params: KcpManifestParams
) -> dict[str, Any]:
    """Envoy's bootstrap and its file-based LDS/CDS/RDS, one ConfigMap key each (JSON,
    which Envoy reads as YAML)."""
    layout = XdsLayout(CONFIG_DIR)
    resolver = {
        f"{r['destination']['host']}:{r['destination']['port']['number']}": (
            r["destination"]["host"],
            r["destination"]["port"]["number"],
        )
        for vs in virtual_services
        for http in vs["spec"]["http"]
        for r in http["route"]
    }
    config = render_envoy(
        virtual_services,
        resolver=resolver,
        gateway=GatewayListener(
            port=GATEWAY_PORT,
            address="0.0.0.0",
            tls=TlsFiles(f"{TLS_DIR}/tls.crt", f"{TLS_DIR}/tls.key", f"{TLS_DIR}/ca.crt"),
        ),
        layout=layout,
        strict=True,
    )
    clusters = [_strict_dns(c) for c in config.clusters]
    files = {
        BOOTSTRAP_FILE: render_bootstrap(layout, admin_port=ENVOY_ADMIN_PORT),
        layout.cds_file: discovery_response(clusters),
        layout.rds_file: config.rds(),
        layout.lds_file: config.lds(),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": GATEWAY_CONFIG,
            "namespace": params.namespace,
            "labels": _labels({"app": GATEWAY_NAME}),
        },
        "data": {
            name: json.dumps(content, indent=1, sort_keys=True) for name, content in files.items()
        },
    }


def gateway_deployment(params: KcpManifestParams) -> dict[str, Any]:
    """Envoy as the KCP gateway: non-root, read-only root, no capabilities; the admin
    endpoint stays on loopback, so probes check the TLS port."""
    labels = _labels({"app": GATEWAY_NAME})
    probe = {"tcpSocket": {"port": "https"}, "timeoutSeconds": 2, "failureThreshold": 3}
    container = {
        "name": "envoy",
        "image": params.envoy_image,
        "imagePullPolicy": params.image_pull_policy,
        "args": [
            "-c",
            f"{CONFIG_DIR}/{BOOTSTRAP_FILE}",
            "--disable-hot-restart",
            "--log-level",
            "info",
        ],
        "ports": [{"name": "https", "containerPort": GATEWAY_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": ENVOY_UID,
            "runAsGroup": ENVOY_UID,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tls", "mountPath": TLS_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "periodSeconds": 10},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": GATEWAY_NAME, "namespace": params.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": GATEWAY_NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": ENVOY_UID,
                        "runAsGroup": ENVOY_UID,
                        "fsGroup": ENVOY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": GATEWAY_CONFIG}},
                        {
                            "name": "tls",
                            "secret": {"secretName": GATEWAY_TLS_SECRET, "defaultMode": 0o440},
                        },
                        {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
                    ],
                },
            },
        },
    }


def gateway_service(params: KcpManifestParams) -> dict[str, Any]:
    port: dict[str, Any] = {
        "name": "https",
        "port": 443,
        "targetPort": GATEWAY_PORT,
        "protocol": "TCP",
    }
    if params.node_port is not None:
        if not 30000 <= params.node_port <= 32767:
            raise RenderError(f"node port must be within 30000..32767, got {params.node_port}")
        port["nodePort"] = params.node_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": GATEWAY_NAME,
            "namespace": params.namespace,
            "labels": _labels({"app": GATEWAY_NAME}),
        },
        "spec": {
            "type": "ClusterIP" if params.node_port is None else "NodePort",
            "selector": {"app": GATEWAY_NAME},
            "ports": [port],
        },
    }


def render_kcp_manifests(params: KcpManifestParams) -> list[dict[str, Any]]:
    """All KCP objects in apply order: definitions before the objects that use them, the
    gateway's inputs (Secret, ConfigMap) before the Deployment that mounts them.

    Raises ``InvalidWatcher`` for a bad Watcher (or one whose gateway selector matches
    no Gateway), ``RenderError`` for other bad input, ``CertificateError`` for missing or
    unparsable gateway TLS material.
    """
    watchers = parse_watchers(list(params.watchers))
    gateway = gateway_dict(namespace=params.namespace, hosts=params.gateway_hosts)
    virtual_services = [
        render_virtual_service(w, [gateway], contract=params.contract, owner_reference=False)
        for w in watchers
    ]
    names = [r.kyma_name or r.runtime_id for r in params.runtimes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RenderError(f"runtime(s) {', '.join(duplicates)} appear more than once")
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": params.namespace, "labels": _labels()},
    }
    return [
        namespace,
        *_crds(params.crds),
        gateway,
        *(_clean(w) for w in params.watchers),
        *(kyma(r, params.namespace) for r in params.runtimes),
        *virtual_services,
        gateway_secret(params),
        envoy_config_map(virtual_services, params),
        gateway_deployment(params),
        gateway_service(params),
    ]
