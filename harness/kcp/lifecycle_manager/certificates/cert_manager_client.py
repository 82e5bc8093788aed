"""Per-Kyma client certificates through cert-manager, as upstream's KLM gets them.

``watcher-klm`` signs nothing itself: it writes a cert-manager ``Certificate``
``istio-system/<kyma>-webhook-tls`` and waits for the Secret cert-manager issues, keeping
the Kyma ``Processing`` meanwhile (:class:`CertificatePending`). One issued before
``caAddedToBundleAt`` is re-issued through the ``Issuing`` condition (``cmctl renew``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from cryptography import x509
from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.certificates.client import (
    KymaCertificate,
    ParsedCertificates,
    secret_name,
)
from harness.kcp.lifecycle_manager.certificates.policy import CA_ISSUER, KLM_SUBJECT
from harness.kcp.lifecycle_manager.kyma.reconcile import WatcherPending
from harness.kcp.lifecycle_manager.kyma.status import timestamp
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.tls_secret import SecretLayoutError, ca_added_at, tls_data
from harness.kube import (
    CERTIFICATES,
    SECRETS,
    KubeError,
    create_or_replace,
    delete,
    get,
    merge_patch,
)
from watcher.domain import (
    CERT_MANAGER_PURPOSE,
    GATEWAY_SECRET_NAME,
    ISTIO_NAMESPACE,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
    PURPOSE_LABEL,
)
from watcher.errors import CertificateError
from watcher.pki import WEBHOOK_SERVICE_SANS

logger = logging.getLogger("harness.kcp.lifecycle_manager.certificates")


class CertificatePending(WatcherPending):
    """The Kyma's certificate is not issued (yet): the Kyma stays ``Processing``."""


def client_certificate(kyma: str, runtime_id: str, skr_domain: str) -> dict[str, Any]:
    """The Certificate KLM writes for ``kyma`` (pure)."""
    labels = {PURPOSE_LABEL: CERT_MANAGER_PURPOSE, MANAGED_BY_LABEL: LIFECYCLE_MANAGER}
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": secret_name(kyma), "namespace": ISTIO_NAMESPACE, "labels": labels},
        "spec": {
            "commonName": runtime_id,
            "subject": KLM_SUBJECT,
            "dnsNames": [skr_domain, *WEBHOOK_SERVICE_SANS],
            "isCA": False,
            "usages": ["digital signature", "key encipherment"],
            "duration": "1440h",
            "renewBefore": "720h",
            "secretName": secret_name(kyma),
            "secretTemplate": {"labels": labels},
            "privateKey": {
                "algorithm": "RSA",
                "encoding": "PKCS1",
                "size": 4096,
                "rotationPolicy": "Always",
            },
            "issuerRef": {"name": CA_ISSUER, "kind": "Issuer", "group": "cert-manager.io"},
        },
    }


def issued_before_bundle(certificate: x509.Certificate, gateway: Any) -> bool:
    """True when ``certificate`` predates the gateway Secret's ``caAddedToBundleAt``."""
    at = ca_added_at(gateway)
    return at is not None and certificate.not_valid_before_utc < at.replace(
        microsecond=0
    ) - dt.timedelta(seconds=1)


@dataclass(eq=False)
class CertManagerCertificates:
    """``await certs.ensure(kyma, runtime_id, skr_domain)`` → the issued certificate, or
    :class:`CertificatePending` while cert-manager has not issued it."""

    api: ApiClient
    _: KW_ONLY
    metrics: KlmMetrics = field(default_factory=KlmMetrics)
    _parsed: ParsedCertificates = field(default_factory=ParsedCertificates, init=False)

    async def ensure(self, kyma: str, runtime_id: str, skr_domain: str) -> KymaCertificate:
        wanted = client_certificate(kyma, runtime_id, skr_domain)
        current = await get(self.api, CERTIFICATES, secret_name(kyma), ISTIO_NAMESPACE)
        if current is None or current.get("spec") != wanted["spec"]:
            await create_or_replace(self.api, CERTIFICATES, wanted)
            self.metrics.not_renewed(kyma, True)
            raise CertificatePending(f"certificate {secret_name(kyma)} requested")
        secret = await get(self.api, SECRETS, secret_name(kyma), ISTIO_NAMESPACE)
        if secret is None:
            raise CertificatePending(f"certificate {secret_name(kyma)} not issued yet")
        try:
            data = tls_data(secret)
            issued = self._parsed.load(kyma, data["tls.crt"], data["tls.key"], secret_name(kyma))
        except (SecretLayoutError, CertificateError) as exc:
            raise CertificatePending(f"certificate {secret_name(kyma)}: {exc}") from None
        gateway = await get(self.api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        if issued_before_bundle(issued.certificate, gateway):
            await self._renew(kyma, current)
            raise CertificatePending(f"certificate {secret_name(kyma)} predates the newest CA")
        self.metrics.not_renewed(kyma, False)
        bundle = tls_data(gateway)["ca.crt"] if gateway is not None else data["ca.crt"]
        return KymaCertificate(issued, bundle)

    async def _renew(self, kyma: str, current: Any) -> None:
        """Ask cert-manager for a new certificate (the ``Issuing`` condition), once."""
        self.metrics.not_renewed(kyma, True)
        conditions = list((current.get("status") or {}).get("conditions") or [])
        if any(c.get("type") == "Issuing" and c.get("status") == "True" for c in conditions):
            return
        issuing = {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "the certificate predates the newest CA in the gateway bundle",
            "lastTransitionTime": timestamp(),
        }
        kept = [c for c in conditions if c.get("type") != "Issuing"]
        body = {"status": {"conditions": [*kept, issuing]}}
        logger.info("renewing the certificate of %s: it predates the newest CA", kyma)
        await merge_patch(
            self.api, CERTIFICATES, secret_name(kyma), ISTIO_NAMESPACE, body, subresource="status"
        )

    async def remove(self, kyma: str) -> None:
        """The Kyma is gone: its Certificate and Secret, and its gauge."""
        self._parsed.forget(kyma)
        for resource in (CERTIFICATES, SECRETS):
            with contextlib.suppress(KubeError):
                await delete(self.api, resource, secret_name(kyma), ISTIO_NAMESPACE)
        self.metrics.not_renewed(kyma, None)
