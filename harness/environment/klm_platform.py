"""What a KCP gives any Lifecycle Manager before it starts, as KLM's deployment writes it.

KLM's cert-manager chain for the Runtime Watcher and its Istio Gateway (docs/any-klm.md
lists the objects), adapted only where a loopback machine differs from a landscape: the
CA's SANs and the Gateway's host and port name the real gateway's loopback address, so
KLM's ``KCP_ADDR`` is right without ``--listener-port-overwrite``. Pure: dicts only.
"""

from __future__ import annotations

from typing import Any

from harness.kcp.lifecycle_manager.certificates.policy import CA_ISSUER, KLM_SUBJECT
from watcher.domain import CERT_MANAGER_PURPOSE, ISTIO_NAMESPACE, KCP_NAMESPACE, PURPOSE_LABEL
from watcher.pki import is_ip
from watcher.render.virtualservice import gateway_dict

ROOT_ISSUER = "klm-watcher-root"
CA_CERTIFICATE = "klm-watcher-serving"
CA_SECRET = "klm-watcher"
GATEWAY_NAME = "klm-watcher"

MANAGED_BY = {"operator.kyma-project.io/managed-by": "lifecycle-manager"}


def _issuer(
    name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": ISTIO_NAMESPACE}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": metadata,
        "spec": spec,
    }


def watcher_ca_chain(gateway_host: str, *, key_size: int = 4096) -> list[dict[str, Any]]:
    """Root issuer → CA certificate (its SANs: ``gateway_host``) → CA issuer, in the order
    they must exist."""
    sans: dict[str, list[str]] = (
        {"ipAddresses": [gateway_host]} if is_ip(gateway_host) else {"dnsNames": [gateway_host]}
    )
    certificate = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": CA_CERTIFICATE, "namespace": ISTIO_NAMESPACE},
        "spec": {
            **sans,
            "isCA": True,
            "commonName": "klm-watcher-selfsigned-ca",
            "subject": KLM_SUBJECT,
            "secretName": CA_SECRET,
            "secretTemplate": {"labels": dict(MANAGED_BY)},
            "privateKey": {"rotationPolicy": "Always", "algorithm": "RSA", "size": key_size},
            "issuerRef": {"name": ROOT_ISSUER, "kind": "Issuer", "group": "cert-manager.io"},
            "duration": "2160h",
            "renewBefore": "1464h",
        },
    }
    return [
        _issuer(ROOT_ISSUER, {"selfSigned": {}}),
        certificate,
        _issuer(
            CA_ISSUER,
            {"ca": {"secretName": CA_SECRET}},
            labels={PURPOSE_LABEL: CERT_MANAGER_PURPOSE, **MANAGED_BY},
        ),
    ]


def watcher_gateway(host: str, port: int) -> dict[str, Any]:
    """KLM's Gateway with the gateway's real address (what becomes ``KCP_ADDR``)."""
    return gateway_dict(GATEWAY_NAME, namespace=KCP_NAMESPACE, hosts=(host,), port=port)
