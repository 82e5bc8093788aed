"""All Watchers → the SKR ValidatingWebhookConfiguration ``skr-webhook``.

Pure. One webhook per Watcher, in list order, shaped as KLM renders it (reference §2).
The client config points either at the in-cluster Service (production) or at an URL
(test clusters without Services, as envtest wires webhooks).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cryptography import x509

from watcher.domain import MANAGED_BY_LABEL
from watcher.errors import CertificateError, InvalidWatcher
from watcher.paths import validate_path
from watcher.render.watcher_cr import Watcher

CONFIGURATION_NAME = "skr-webhook"
OPERATIONS = ("CREATE", "UPDATE", "DELETE")
DEFAULT_LABELS: Mapping[str, str] = {MANAGED_BY_LABEL: "lifecycle-manager"}

FailurePolicy = Literal["Ignore", "Fail"]


@dataclass(frozen=True)
class ServiceTarget:
    """The webhook Service in the SKR (``kyma-system/skr-webhook:443``)."""

    name: str = "skr-webhook"
    namespace: str = "kyma-system"
    port: int = 443


@dataclass(frozen=True)
class UrlTarget:
    """A webhook reachable by URL, ``https://<host>:<port>/validate/<manager>``."""

    host: str
    port: int

    def url(self, path: str) -> str:
        host = self.host
        try:
            if ipaddress.ip_address(host).version == 6:
                host = f"[{host}]"
        except ValueError:
            pass
        return f"https://{host}:{self.port}{path}"


WebhookTarget = ServiceTarget | UrlTarget


def ca_bundle_field(ca_bundle_pem: bytes) -> str:
    """``caBundle``: the base64 of a PEM bundle that holds at least one certificate."""
    try:
        certs = x509.load_pem_x509_certificates(ca_bundle_pem)
    except ValueError as exc:
        raise CertificateError(f"KCP CA bundle is not a PEM certificate bundle: {exc}") from None
    if not certs:  # pragma: no cover - cryptography raises on an empty bundle
        raise CertificateError("KCP CA bundle holds no certificate")
    return base64.b64encode(ca_bundle_pem).decode("ascii")


def _client_config(target: WebhookTarget, manager: str, ca_bundle: str) -> dict[str, Any]:
    path = validate_path(manager)
    if isinstance(target, ServiceTarget):
        return {
            "service": {
                "name": target.name,
                "namespace": target.namespace,
                "path": path,
                "port": target.port,
            },
            "caBundle": ca_bundle,
        }
    return {"url": target.url(path), "caBundle": ca_bundle}


def render_webhook(
    watcher: Watcher,
    *,
    ca_bundle: str,
    target: WebhookTarget = ServiceTarget(),
    failure_policy: FailurePolicy = "Ignore",
    timeout_seconds: int = 15,
) -> dict[str, Any]:
    """The webhook entry for one Watcher; ``ca_bundle`` is already base64 (see
    ``ca_bundle_field``)."""
    resource = watcher.spec.resource_to_watch
    plural = resource.resource
    if watcher.spec.field == "status":
        plural = f"{plural}/status"
    return {
        "name": watcher.webhook_name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": _client_config(target, watcher.manager, ca_bundle),
        "failurePolicy": failure_policy,
        "objectSelector": (
            {"matchLabels": dict(watcher.spec.labels_to_watch)}
            if watcher.spec.labels_to_watch
            else {}
        ),
        "rules": [
            {
                "apiGroups": [resource.group],
                "apiVersions": [resource.version],
                "operations": list(OPERATIONS),
                "resources": [plural],
            }
        ],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": timeout_seconds,
    }


def render_webhook_configuration(
    watchers: Iterable[Watcher],
    *,
    ca_bundle_pem: bytes,
    target: WebhookTarget = ServiceTarget(),
    failure_policy: FailurePolicy = "Ignore",
    timeout_seconds: int = 15,
    name: str = CONFIGURATION_NAME,
    labels: Mapping[str, str] = DEFAULT_LABELS,
) -> dict[str, Any]:
    """The ``admissionregistration.k8s.io/v1`` ValidatingWebhookConfiguration for all Watchers.

    Raises ``InvalidWatcher`` for two Watchers with the same namespace/name (the API
    server refuses duplicate webhook names) and ``CertificateError`` for an unusable CA
    bundle; nothing is returned half-built.
    """
    if not 1 <= timeout_seconds <= 30:
        raise ValueError(f"timeout_seconds must be 1..30 (API server limit), got {timeout_seconds}")
    bundle = ca_bundle_field(ca_bundle_pem)
    webhooks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for watcher in watchers:
        if watcher.webhook_name in seen:
            raise InvalidWatcher(
                f"Watcher {watcher.route_name} appears twice: webhook {watcher.webhook_name} "
                "would be duplicated"
            )
        seen.add(watcher.webhook_name)
        webhooks.append(
            render_webhook(
                watcher,
                ca_bundle=bundle,
                target=target,
                failure_policy=failure_policy,
                timeout_seconds=timeout_seconds,
            )
        )
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": webhooks,
    }
