"""KLM's CA and the gateway Secret ``istio-system/klm-istio-gateway`` (klm-reference §3).

:class:`GatewaySecretManager` owns the CAs and keeps the Secret true to :mod:`.policy`
through a controller of one key that is requeued at the next deadline (at most
:data:`MAX_SLEEP`). So that no delivery fails, a new CA issues client certificates only
after ``confirm`` returned for the bundle holding it — the environment waits there until
the gateway trusts the bundle, as Istio's SDS push would have. Upstream the CA doubles as
the serving certificate; ours issues one from it (with the SANs the SKR webhooks dial).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from kubernetes_asyncio.client import ApiClient

from harness.aio import Service
from harness.errors import HarnessError
from harness.kcp.lifecycle_manager.certificates import policy
from harness.kcp.lifecycle_manager.kyma.status import timestamp
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome, Reconciler
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kcp.tls_secret import gateway_secret
from harness.kube import SECRETS, KubeError, create_or_replace, ensure_namespace
from watcher import pki
from watcher.domain import (
    GATEWAY_SECRET_NAME,
    ISTIO_NAMESPACE,
)

logger = logging.getLogger("harness.kcp.lifecycle_manager.certificates")

SERVING_CA_ANNOTATION = "harness.kyma-project.io/serving-ca"
"""Ours: the CN of the CA whose certificate the gateway serves (for scenario asserts)."""
MAX_SLEEP = 30.0
"""The timer re-checks at least this often (seconds), whatever the deadlines say."""
KEY = f"{ISTIO_NAMESPACE}/{GATEWAY_SECRET_NAME}"

ServerCertificate = Callable[[pki.CertificateAuthority], pki.Issued]
"""CA → the gateway's serving certificate from it."""
Confirm = Callable[[bytes], Awaitable[None]]
"""Bundle PEM → returns once the gateway trusts it."""


_T = TypeVar("_T")


class RotationError(HarnessError, RuntimeError):
    """A CA step asked for in an order that would break deliveries."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class BundleCa(policy.BundleEntry):
    """A CA of ours in the bundle, with its key."""

    ca: pki.CertificateAuthority

    @classmethod
    def of(cls, ca: pki.CertificateAuthority, now: dt.datetime) -> BundleCa:
        return cls(ca.certificate, policy.whole_second(now), ca)


class GatewaySecretManager(Service):
    """``async with GatewaySecretManager(kcp_api, server_certificate=...) as cas:``"""

    def __init__(
        self,
        api: ApiClient,
        *,
        server_certificate: ServerCertificate,
        timings: policy.CertificateTimings = policy.CertificateTimings(),  # noqa: B008 - frozen
        confirm: Confirm | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self._api = api
        self.timings = timings
        self._server_certificate = server_certificate
        self.confirm = confirm
        """Awaited with each new bundle before its newest CA issues."""
        self._clock = clock
        self._bundle: list[BundleCa] = []
        self._issuing: pki.CertificateAuthority | None = None
        self._serving: tuple[pki.CertificateAuthority, pki.Issued] | None = None
        self._generation = 0
        self._lock = asyncio.Lock()
        self._controller = Reconciler(
            self._reconcile, name="gateway-secret", intervals=WATCH_DRIVEN, log=None
        )
        self.on_rotated: list[Callable[[pki.CertificateAuthority], None]] = []
        """Called with each new CA once it issues (after ``confirm``)."""

    @staticmethod
    def _started(value: _T | None) -> _T:
        if value is None:
            raise HarnessError("the gateway Secret manager has not started")
        return value

    @property
    def issuing_ca(self) -> pki.CertificateAuthority:
        """The CA client certificates are signed with: the newest the gateway trusts."""
        return self._started(self._issuing)

    @property
    def bundle_pem(self) -> bytes:
        """Every unexpired CA, newest first (the Secret's ``ca.crt``)."""
        return b"".join(b.ca.cert_pem for b in self._bundle)

    @property
    def cas(self) -> tuple[pki.CertificateAuthority, ...]:
        return tuple(b.ca for b in self._bundle)

    @property
    def ca_added_at(self) -> dt.datetime:
        """When the newest CA entered the bundle (whole seconds, as the annotation says)."""
        return self._started(self._bundle[0] if self._bundle else None).added_at

    @property
    def serving_ca(self) -> pki.CertificateAuthority:
        return self._started(self._serving)[0]

    @property
    def server_certificate(self) -> pki.Issued:
        return self._started(self._serving)[1]

    def secret(self) -> dict[str, object]:
        """The gateway Secret as it should be now."""
        served = self.server_certificate
        return gateway_secret(
            served.cert_pem,
            served.key_pem,
            self.bundle_pem,
            timestamp(self.ca_added_at),
            **{SERVING_CA_ANNOTATION: self.serving_ca.common_name},
        )

    async def start(self) -> None:
        """The first CA (serving at once), the Secret, the timer."""
        ca = await self._new_ca()
        self._bundle = [BundleCa.of(ca, self._clock())]
        self._serving = (ca, await asyncio.to_thread(self._server_certificate, ca))
        await ensure_namespace(self._api, ISTIO_NAMESPACE)
        await self._write()
        self._issuing = ca
        await self.stack.enter_async_context(self._controller)
        self._controller.enqueue(KEY, Trigger.STARTUP)

    async def _new_ca(self) -> pki.CertificateAuthority:
        self._generation += 1
        now = self._clock()
        return await asyncio.to_thread(
            pki.create_ca,
            f"kcp-ca-{self._generation}",
            validity=self.timings.ca_validity,
            now=now,
        )

    async def _write(self) -> None:
        await create_or_replace(self._api, SECRETS, self.secret())

    async def rotate(self) -> pki.CertificateAuthority:
        """A new CA now (``fault: {rotate: ca}``); it issues once ``confirm`` returned."""
        async with self._lock:
            return await self._rotate()

    async def _rotate(self) -> pki.CertificateAuthority:
        ca = await self._new_ca()
        now = self._clock()
        self._bundle = [BundleCa.of(ca, now), *policy.unexpired(self._bundle, now)]
        await self._write()
        if self.confirm is not None:
            await self.confirm(self.bundle_pem)
        self._issuing = ca
        logger.info("new CA %s in the gateway bundle (%d CAs)", ca.common_name, len(self._bundle))
        for callback in list(self.on_rotated):
            callback(ca)
        self._controller.enqueue(KEY, Trigger.CERTIFICATE_RENEWED)
        return ca

    async def drop_old(self) -> None:
        """Only the newest CA in the bundle, as if the older ones had expired; refused while
        the gateway still serves an older one."""
        async with self._lock:
            if len(self._bundle) < 2:
                raise RotationError("no old CA to drop: rotate the CA first")
            if self.serving_ca is not self._bundle[0].ca:
                left = self._bundle[0].added_at + self.timings.grace - self._clock()
                raise RotationError(
                    f"the gateway still serves a certificate of {self.serving_ca.common_name} "
                    f"(it switches to {self._bundle[0].ca.common_name} in "
                    f"{max(left.total_seconds(), 0):.0f} s, after the grace period)"
                )
            self._bundle = self._bundle[:1]
            await self._write()
            if self.confirm is not None:
                await self.confirm(self.bundle_pem)

    async def tick(self) -> None:
        """Do what is due now: a new CA, expired CAs out, the serving switch."""
        async with self._lock:
            now = self._clock()
            if policy.ca_renewal_due(self._bundle[0].ca.certificate, now, self.timings):
                await self._rotate()
                now = self._clock()
            changed = False
            kept = policy.unexpired(self._bundle, now)
            if len(kept) != len(self._bundle) and kept:
                self._bundle = kept
                changed = True
            index = policy.serving_entry(self._bundle, now, self.timings.grace)
            ca = self._bundle[index].ca
            if self._serving is None or self._serving[0] is not ca:
                self._serving = (ca, await asyncio.to_thread(self._server_certificate, ca))
                logger.info("the gateway serves a certificate of %s now", ca.common_name)
                changed = True
            if changed:
                await self._write()

    async def _reconcile(self, _: str) -> Outcome | float:
        """What is due now; the seconds until the next deadline."""
        try:
            await self.tick()
        except KubeError as exc:  # the KCP API server restarting: try again soon
            logger.info("gateway Secret not written: %s", exc)
            return Outcome.ERROR
        now = self._clock()
        index = policy.serving_entry(self._bundle, now, self.timings.grace)
        deadline = policy.next_deadline(self._bundle, index, now, self.timings)
        return min(max((deadline - now).total_seconds(), 0.05), MAX_SLEEP)
