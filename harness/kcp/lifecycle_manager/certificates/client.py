"""Per-Kyma client certificates ``istio-system/<kyma>-webhook-tls`` (klm-reference §3).

Each Kyma reconcile makes sure its runtime has a certificate, issued here from
:attr:`GatewaySecretManager.issuing_ca` and again when :func:`~.policy
.client_renewal_reason` names a reason (above all: it predates ``caAddedToBundleAt``).
``lifecycle_mgr_self_signed_cert_not_renew{kyma_name}`` is 1 from the moment one is due
until it has been issued again. ``pinned`` Kymas keep a fault's deliberately broken one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.certificates import policy
from harness.kcp.lifecycle_manager.certificates.gateway_secret import GatewaySecretManager, utcnow
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.tls_secret import (
    SecretLayoutError,
    tls_data,
    tls_secret,
)
from harness.kube import SECRETS, create_or_replace, get
from watcher import pki
from watcher.domain import (
    CERT_MANAGER_PURPOSE,
    CLIENT_CERTIFICATE_SUFFIX,
    ISTIO_NAMESPACE,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
    PURPOSE_LABEL,
)
from watcher.errors import CertificateError

logger = logging.getLogger("harness.kcp.lifecycle_manager.certificates")

Issue = Callable[[pki.CertificateAuthority, str, str, str], pki.Issued]
"""(CA, Kyma name, runtime id, skr-domain) → the Kyma's client certificate."""


def default_issue(
    ca: pki.CertificateAuthority, kyma: str, runtime_id: str, skr_domain: str
) -> pki.Issued:
    """KLM's certificate for ``kyma`` (no host-specific SANs)."""
    return pki.issue_runtime_certificate(ca, runtime_id, skr_domain)


ISSUER_ANNOTATION = "harness.kyma-project.io/issuer"
"""Ours, on a client certificate Secret: the CN of the CA that signed it (for asserts)."""


def secret_name(kyma: str) -> str:
    return f"{kyma}{CLIENT_CERTIFICATE_SUFFIX}"


class ParsedCertificates:
    """Per Kyma, its certificate Secret as last parsed — shared by both certificate clients.

    Loading an RSA 4096 key checks it (~250 ms of CPU), and a reconcile reads the Secret
    every time: without this, 94 % of ``watcher-klm``'s reconcile time was this one call."""

    def __init__(self) -> None:
        self._by_kyma: dict[str, tuple[bytes, bytes, pki.Issued]] = {}

    def load(self, kyma: str, cert_pem: bytes, key_pem: bytes, what: str) -> pki.Issued:
        """The parsed pair; ``CertificateError`` when it does not parse or match."""
        cached = self._by_kyma.get(kyma)
        if cached is not None and cached[:2] == (cert_pem, key_pem):
            return cached[2]
        issued = pki.load_issued(cert_pem, key_pem, what)
        self._by_kyma[kyma] = (cert_pem, key_pem, issued)
        return issued

    def remember(self, kyma: str, issued: pki.Issued) -> None:
        """What was just written needs no parse when it is read back."""
        self._by_kyma[kyma] = (issued.cert_pem, issued.key_pem, issued)

    def forget(self, kyma: str) -> None:
        self._by_kyma.pop(kyma, None)


@dataclass(frozen=True)
class KymaCertificate:
    """What the reconcile copies to the SKR: the certificate and the CA bundle to trust."""

    issued: pki.Issued
    ca_bundle_pem: bytes
    reissued: str | None = None
    """Why it was issued in this call (None: the stored one was fine)."""


class KymaCertificates:
    """``await certs.ensure(kyma, runtime_id, skr_domain)`` → the Kyma's certificate."""

    def __init__(
        self,
        api: ApiClient,
        cas: GatewaySecretManager,
        *,
        issue: Issue = default_issue,
        pinned: Collection[str] = (),
        metrics: KlmMetrics | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.api = api
        self.cas = cas
        self._issue = issue
        self.pinned: set[str] = set(pinned)
        self.metrics = metrics or KlmMetrics()
        self._clock = clock
        self._known: set[str] = set()
        self._forced: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._parsed = ParsedCertificates()
        cas.on_rotated.append(self._ca_rotated)

    def _ca_rotated(self, ca: pki.CertificateAuthority) -> None:
        """Every certificate issued so far now predates ``caAddedToBundleAt``."""
        for kyma in self._known - self.pinned:
            self.metrics.not_renewed(kyma, True)

    def pin(self, kyma: str) -> None:
        """Keep ``kyma``'s certificate as next issued (a fault's broken one)."""
        self.pinned.add(kyma)

    def unpin(self, kyma: str) -> None:
        self.pinned.discard(kyma)

    def renew(self, kyma: str) -> None:
        """Issue ``kyma``'s certificate again at its next :meth:`ensure` (``cmctl renew``)."""
        self._forced.add(kyma)
        self.metrics.not_renewed(kyma, True)

    async def ensure(self, kyma: str, runtime_id: str, skr_domain: str) -> KymaCertificate:
        """The Kyma's certificate from its KCP Secret, issued (again) when needed."""
        lock = self._locks.setdefault(kyma, asyncio.Lock())
        async with lock:
            name = secret_name(kyma)
            secret = await get(self.api, SECRETS, name, ISTIO_NAMESPACE)
            stored: pki.Issued | None = None
            reason: str | None = "there is none"
            if secret is not None:
                try:
                    data = tls_data(secret)
                    stored = self._parsed.load(
                        kyma, data["tls.crt"], data["tls.key"], f"Secret {secret_name(kyma)}"
                    )
                except (SecretLayoutError, CertificateError) as exc:
                    reason = f"the stored one is unusable: {exc}"
                else:
                    reason = self._reason(kyma, stored, runtime_id, skr_domain)
            bundle = self.cas.bundle_pem
            self._known.add(kyma)
            if reason is None and stored is not None:
                if data["ca.crt"] != bundle:  # the bundle changed since: keep it current
                    await self._write(kyma, stored, bundle)
                return KymaCertificate(stored, bundle)
            self.metrics.not_renewed(kyma, True)
            ca = self.cas.issuing_ca
            issued = await asyncio.to_thread(self._issue, ca, kyma, runtime_id, skr_domain)
            await self._write(kyma, issued, bundle)
            self._forced.discard(kyma)
            self.metrics.not_renewed(kyma, False)
            logger.info("issued the certificate of %s from %s: %s", kyma, ca.common_name, reason)
            return KymaCertificate(issued, bundle, reissued=reason)

    def _reason(
        self, kyma: str, stored: pki.Issued, runtime_id: str, skr_domain: str
    ) -> str | None:
        if kyma in self._forced:
            return "a renewal was asked for"
        if kyma in self.pinned:
            return None
        return policy.client_renewal_reason(
            stored.certificate,
            runtime_id=runtime_id,
            skr_domain=skr_domain,
            issuing_ca=self.cas.issuing_ca.certificate,
            ca_added_at=self.cas.ca_added_at,
            now=self._clock(),
            timings=self.cas.timings,
        )

    async def _write(self, kyma: str, issued: pki.Issued, bundle: bytes) -> None:
        body = tls_secret(
            secret_name(kyma),
            ISTIO_NAMESPACE,
            pki.secret_data(issued, bundle),
            labels={PURPOSE_LABEL: CERT_MANAGER_PURPOSE, MANAGED_BY_LABEL: LIFECYCLE_MANAGER},
            annotations={ISSUER_ANNOTATION: policy.issuer_name(issued.certificate)},
        )
        await create_or_replace(self.api, SECRETS, body)
        self._parsed.remember(kyma, issued)

    def forget(self, kyma: str) -> None:
        """The Kyma is gone: no gauge, no state."""
        self._known.discard(kyma)
        self._forced.discard(kyma)
        self._locks.pop(kyma, None)
        self._parsed.forget(kyma)
        self.metrics.not_renewed(kyma, None)
