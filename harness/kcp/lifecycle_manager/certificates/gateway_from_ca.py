"""The gateway Secret ``istio-system/klm-istio-gateway`` from cert-manager's CA, as upstream.

With cert-manager issuing KLM's CA (Secret ``istio-system/klm-watcher``), KLM keeps the
Secret Istio's ingress serves: every unexpired CA, newest first, and the CA itself as the
serving certificate, switched to a new CA only after the grace period so every SKR trusts
it first (klm-reference §3, decisions in :mod:`.policy`); one key, polled.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from cryptography import x509
from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.certificates import policy
from harness.kcp.lifecycle_manager.certificates.gateway_secret import KEY
from harness.kcp.lifecycle_manager.kyma.status import timestamp
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kcp.tls_secret import SecretLayoutError, ca_added_at, gateway_secret, tls_data
from harness.kube import SECRETS, KubeError, create_or_replace, get
from watcher import pki
from watcher.domain import (
    GATEWAY_SECRET_NAME,
    ISTIO_NAMESPACE,
)
from watcher.errors import CertificateError

logger = logging.getLogger("harness.kcp.lifecycle_manager.certificates")

DEFAULT_GRACE: Final = policy.CertificateTimings().grace

CA_SECRET: Final = "klm-watcher"
"""cert-manager's Secret of KLM's CA (``config/watcher`` in KLM's deployment)."""


@dataclass(eq=False)
class GatewaySecretFromCa:
    """The gateway Secret follows the CA (set up by :func:`setup_gateway_secret_from_ca`)."""

    api: ApiClient
    _: KW_ONLY
    grace: dt.timedelta = DEFAULT_GRACE
    poll: float = 1.0
    _bundle: list[policy.BundleEntry] = field(default_factory=list, init=False)
    _serving: tuple[bytes, bytes] | None = field(default=None, init=False)
    _newest: tuple[bytes, bytes] | None = field(default=None, init=False)

    async def sync(self, now: dt.datetime | None = None) -> bool:
        """One look at the CA Secret; True when the gateway Secret was written."""
        now = now or dt.datetime.now(dt.UTC)
        secret = await get(self.api, SECRETS, CA_SECRET, ISTIO_NAMESPACE)
        if secret is None:
            return False
        try:
            data = tls_data(secret)
            ca = pki.load_certificates(data["tls.crt"], CA_SECRET)[0]
        except (SecretLayoutError, CertificateError) as exc:
            logger.info("the CA Secret %s is not usable yet: %s", CA_SECRET, exc)
            return False
        pair = (data["tls.crt"], data["tls.key"])
        if self._newest is None:
            await self._adopt(ca, pair)
        changed = pair != self._newest
        if changed:
            self._newest = pair
            self._bundle.insert(0, policy.BundleEntry(ca, policy.whole_second(now)))
        self._bundle = policy.unexpired(self._bundle, now)
        serving = policy.serving_entry(self._bundle, now, self.grace)
        if serving == 0 or self._serving is None:
            switch = self._serving != pair
            self._serving = pair
        else:
            switch = False
        if not (changed or switch):
            return False
        bundle = pki.pem_bundle(e.certificate for e in self._bundle)
        added = timestamp(self._bundle[0].added_at)
        await create_or_replace(self.api, SECRETS, gateway_secret(*self._serving, bundle, added))
        logger.info("gateway Secret written: %d CA(s) in the bundle", len(self._bundle))
        return True

    async def _adopt(self, ca: x509.Certificate, pair: tuple[bytes, bytes]) -> None:
        """A restarted KLM takes over the gateway Secret it left when the CA has not
        changed since — as upstream's handler writes only for a new CA. Restamping
        ``caAddedToBundleAt`` would make every Kyma's certificate predate the newest CA
        and renew them all, rolling every SKR's webhook (a restart scenario lost an
        event in such a roll)."""
        existing = await get(self.api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        at = ca_added_at(existing)
        if existing is None or at is None:
            return
        try:
            data = tls_data(existing)
            certs = pki.load_certificates(data["ca.crt"], GATEWAY_SECRET_NAME)
        except (SecretLayoutError, CertificateError):
            return
        if certs[0] != ca:
            return
        self._newest = pair
        self._bundle = [
            policy.BundleEntry(certs[0], at),
            *(policy.BundleEntry(c, c.not_valid_before_utc) for c in certs[1:]),
        ]
        self._serving = (data["tls.crt"], data["tls.key"])

    async def __call__(self, _: str) -> Outcome | float:
        """One sync; due again after ``poll`` seconds (1 s after an API error)."""
        try:
            await self.sync()
        except KubeError as exc:
            logger.info("gateway Secret not synced: %s", exc)
            return Outcome.ERROR
        return self.poll


def setup_gateway_secret_from_ca(runtime: ControllerRuntime, **options: Any) -> GatewaySecretFromCa:
    """One key, reconciled from the start and then every ``poll`` seconds."""
    handler = GatewaySecretFromCa(runtime.api, **options)
    queue = runtime.controller("gateway-secret", handler, intervals=WATCH_DRIVEN, log=None)
    runtime.on_synced.append(lambda: queue.enqueue(KEY, Trigger.STARTUP))
    return handler
