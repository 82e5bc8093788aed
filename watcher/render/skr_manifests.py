"""Everything an SKR needs to run the Python webhook in-cluster, as installable manifests.

Pure. ``render_skr_manifests(params)`` returns the objects in apply order: the Namespace,
the webhook's ServiceAccount and PriorityClass, the install bundle of ``skr_bundle``
(TLS Secret, webhook and metrics Services, Deployment), upstream's four NetworkPolicies and
the ValidatingWebhookConfiguration ``skr-webhook`` with a *service* clientConfig
(``webhook_config`` renders it; the in-cluster Service replaces the loopback URL).

Upstream facts followed here (KLM's ``skr-webhook/resources.yaml``): PriorityClass
``skr-webhook-priority`` (value 1e9), pod user 10001 / group 30001, non-root, read-only
root, no capabilities, seccomp ``RuntimeDefault``, and the NetworkPolicies
``kyma-project.io--seed-to-watcher`` (ingress from Gardener's ``vpn-shoot``, through which
the API server of a Gardener shoot reaches webhooks), ``--watcher-to-apiserver`` (egress to
the KCP gateway's port, despite its name), ``--metrics-to-watcher`` (ingress to 2112) and
``--watcher-to-dns`` (egress to cluster DNS).

The TLS Secret always carries real material: the same CA signs the webhook's serving
certificate and is the webhook configuration's ``caBundle``, so a placeholder Secret would
give a webhook the API server cannot call (``watcher-harness render`` generates the PKI
when none is given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from watcher.domain import MANAGED_BY_LABEL
from watcher.errors import CertificateError
from watcher.model import Contract
from watcher.render.skr_bundle import (
    METRICS_PORT,
    NAME,
    NAMESPACE,
    WEBHOOK_PORT,
    SkrBundleSettings,
    render_skr_bundle,
)
from watcher.render.watcher_cr import parse_watchers
from watcher.render.webhook_config import (
    FailurePolicy,
    ServiceTarget,
    render_webhook_configuration,
)

# Upstream runs the webhook pod as 10001:30001; the image's USER says the same.
RUN_AS_USER = 10001
RUN_AS_GROUP = 30001
PRIORITY_CLASS = "skr-webhook-priority"
PRIORITY_VALUE = 1_000_000_000
MANAGED_BY = {MANAGED_BY_LABEL: "lifecycle-manager"}

NetworkPolicyMode = Literal["upstream", "portable", "none"]
"""``upstream``: the API server reaches the webhook through Gardener's ``vpn-shoot`` (as in
KLM); ``portable``: any source may reach the webhook port (kind, plain clusters, where the
API server is on the host network); ``none``: no NetworkPolicies."""


@dataclass(frozen=True)
class SkrManifestParams:
    """What differs between SKR installations; the rest is upstream's layout."""

    image: str
    """The webhook image (``Dockerfile`` builds it), e.g. ``kyma-watcher:0.1.0``."""
    kcp_addr: str
    """``<host>:<port>`` of the KCP gateway as the SKR reaches it (``KCP_ADDR``)."""
    tls: Mapping[str, bytes]
    """PEM ``tls.crt`` / ``tls.key`` (the runtime certificate: CN = runtime id, SANs = the
    skr-domain and the webhook Service names) and ``ca.crt`` (the KCP CA bundle)."""
    watchers: Sequence[Mapping[str, Any]] = ()
    """Watcher CR dicts; one webhook each, in order (validated here)."""
    namespace: str = NAMESPACE
    contract: Contract = "v2"
    image_pull_policy: str = "IfNotPresent"
    network_policies: NetworkPolicyMode = "upstream"
    priority_class: bool = True
    failure_policy: FailurePolicy = "Ignore"
    webhook_timeout_seconds: int = 15
    memory_request: str = "64Mi"
    memory_limit: str = "256Mi"
    """A Python process needs more than upstream's Go binary (20Mi/200Mi)."""
    cpu_request: str = "10m"


def kcp_port(kcp_addr: str) -> int:
    """The port of ``<host>:<port>`` (``[v6]:<port>`` too); ``ValueError`` otherwise."""
    host, sep, port = kcp_addr.rpartition(":")
    bad = not sep or not host or "/" in kcp_addr or (":" in host and not host.startswith("["))
    if bad or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(
            f"KCP address must be <host>:<port> without scheme or path, got {kcp_addr!r}"
        )
    return int(port)


def _labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {"app": NAME, **MANAGED_BY, **(extra or {})}


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
    }


def service_account(params: SkrManifestParams) -> dict[str, Any]:
    """The webhook's own identity; it never calls the API server, so no token is mounted."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": params.namespace, "labels": _labels()},
        "automountServiceAccountToken": False,
    }


def priority_class() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS, "labels": _labels()},
        "value": PRIORITY_VALUE,
        "globalDefault": False,
        "description": "Keeps the Kyma runtime watcher webhook scheduled under load.",
    }


def _policy(
    name: str, params: SkrManifestParams, kind: Literal["Ingress", "Egress"], rules: list[Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": params.namespace, "labels": _labels()},
        "spec": {
            "podSelector": {"matchLabels": {"app": NAME}},
            "policyTypes": [kind],
            kind.lower(): rules,
        },
    }


def _tcp(port: int) -> dict[str, Any]:
    return {"protocol": "TCP", "port": port}


def _kube_system(app_label: str) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": app_label}},
    }


def network_policies(params: SkrManifestParams, gateway_port: int) -> list[dict[str, Any]]:
    """Upstream's four policies; ``portable`` opens the webhook port to any source instead
    of Gardener's ``vpn-shoot`` only."""
    if params.network_policies == "none":
        return []
    if params.network_policies == "upstream":
        vpn_shoot = {
            "namespaceSelector": {"matchLabels": {"gardener.cloud/purpose": "kube-system"}},
            "podSelector": {"matchLabels": {"app": "vpn-shoot"}},
        }
        from_api_server: list[Any] = [{"from": [vpn_shoot]}]
    else:
        from_api_server = [{"ports": [_tcp(WEBHOOK_PORT)]}]
    dns_ports = [{"protocol": p, "port": 53} for p in ("UDP", "TCP")]
    coredns_ports = [{"protocol": p, "port": 8053} for p in ("UDP", "TCP")]
    return [
        _policy("kyma-project.io--seed-to-watcher", params, "Ingress", from_api_server),
        _policy(
            "kyma-project.io--watcher-to-apiserver",
            params,
            "Egress",
            [{"ports": [_tcp(gateway_port)]}],
        ),
        _policy(
            "kyma-project.io--metrics-to-watcher",
            params,
            "Ingress",
            [{"ports": [_tcp(METRICS_PORT)]}],
        ),
        _policy(
            "kyma-project.io--watcher-to-dns",
            params,
            "Egress",
            [
                {
                    "ports": dns_ports,
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0"}},
                        _kube_system("node-local-dns"),
                        _kube_system("kube-dns"),
                    ],
                },
                {"ports": coredns_ports, "to": [_kube_system("kube-dns")]},
            ],
        ),
    ]


def bundle_settings(params: SkrManifestParams) -> SkrBundleSettings:
    """The Deployment knobs for the Python webhook: probes on the metrics server's
    ``/healthz`` and ``/readyz``, upstream's user and priority, a small writable ``/tmp``."""
    return SkrBundleSettings(
        namespace=params.namespace,
        contract=params.contract,
        image_pull_policy=params.image_pull_policy,
        health_path="/healthz",
        readiness_path="/readyz",
        probe_port="metrics",
        probe_scheme="HTTP",
        cpu_request=params.cpu_request,
        memory_request=params.memory_request,
        memory_limit=params.memory_limit,
        run_as_user=RUN_AS_USER,
        run_as_group=RUN_AS_GROUP,
        service_account=NAME,
        priority_class=PRIORITY_CLASS if params.priority_class else None,
        writable_tmp=True,
    )


def render_skr_manifests(params: SkrManifestParams) -> list[dict[str, Any]]:
    """All SKR objects in apply order (cluster-scoped and namespace first, webhook
    configuration last, so the API server never calls a webhook that is not there yet).

    Raises ``InvalidWatcher`` for a bad Watcher, ``CertificateError`` for missing or
    unparsable TLS material, ``ValueError`` for a bad image or KCP address.
    """
    if not params.image:
        raise ValueError("image must not be empty")
    port = kcp_port(params.kcp_addr)
    ca = params.tls.get("ca.crt")
    if not ca:
        raise CertificateError("TLS material lacks ca.crt (the KCP CA bundle)")
    watchers = parse_watchers(list(params.watchers))
    target = ServiceTarget(name=NAME, namespace=params.namespace, port=443)
    objects: list[dict[str, Any]] = [namespace(params.namespace), service_account(params)]
    if params.priority_class:
        objects.append(priority_class())
    objects.extend(
        render_skr_bundle(
            image=params.image,
            kcp_addr=params.kcp_addr,
            tls=params.tls,
            settings=bundle_settings(params),
        )
    )
    objects.extend(network_policies(params, port))
    objects.append(
        render_webhook_configuration(
            watchers,
            ca_bundle_pem=ca,
            target=target,
            failure_policy=params.failure_policy,
            timeout_seconds=params.webhook_timeout_seconds,
        )
    )
    return objects
