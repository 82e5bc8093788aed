"""The gateway's credential follows its Secret, as Istio's SDS serves ``credentialName``.

A controller on Istio's runtime (:func:`setup_credential_sync`) hands a changed
``istio-system/klm-istio-gateway`` to :meth:`EnvoyGateway.rotate_tls`;
:meth:`GatewayCredentialSync.wait_trusted` returns once a bundle is live — KLM's CA waits
there before it signs anything with a new CA."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from harness.errors import HarnessError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.errors import GatewayError
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime, Informer
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kcp.tls_secret import SecretLayoutError, tls_data
from harness.kube import SECRETS, Obj, object_key
from watcher.domain import GATEWAY_SECRET_NAME, ISTIO_NAMESPACE

logger = logging.getLogger("harness.kcp.gateway.credential")


class GatewayCredentialSync:
    """``applied``: what the gateway started with (the first look swaps nothing if equal)."""

    def __init__(
        self,
        gateway: EnvoyGateway,
        secrets: Informer,
        *,
        applied: Mapping[str, bytes],
        name: str = GATEWAY_SECRET_NAME,
    ) -> None:
        self._gateway = gateway
        self._secrets = secrets
        self._applied = dict(applied)
        self.key = f"{secrets.namespace}/{name}"
        self._changed = asyncio.Condition()

    @property
    def trusted_bundle(self) -> bytes:
        """The CA bundle the gateway verifies client certificates with right now."""
        return self._applied.get("ca.crt", b"")

    async def __call__(self, key: str) -> Outcome:
        secret = self._secrets.objects.get(key)
        if secret is None:
            return Outcome.GONE  # a deleted Secret leaves the gateway as it is (as Istio's)
        try:
            await self._apply(tls_data(secret))
        except SecretLayoutError as exc:
            logger.warning("gateway Secret not applied: %s", exc)
        except GatewayError as exc:
            logger.error("the gateway refused its new credential: %s", exc)
        return Outcome.SUCCESS

    async def _apply(self, data: Mapping[str, bytes]) -> None:
        bundle = data["ca.crt"] if data["ca.crt"] != self._applied.get("ca.crt") else None
        serving = (data["tls.crt"], data["tls.key"])
        if serving == (self._applied.get("tls.crt"), self._applied.get("tls.key")):
            cert, key = None, None
        else:
            cert, key = serving
        if bundle is None and cert is None:
            return
        await self._gateway.rotate_tls(ca_bundle_pem=bundle, cert_pem=cert, key_pem=key)
        self._applied = dict(data)
        async with self._changed:
            self._changed.notify_all()

    async def wait_trusted(self, bundle_pem: bytes, within: float = 15.0) -> None:
        """Until the gateway verifies client certificates against ``bundle_pem``."""
        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(lambda: self.trusted_bundle == bundle_pem)
        except TimeoutError:
            raise HarnessError(
                f"the gateway did not take the new CA bundle from Secret {self.key} "
                f"within {within:g} s"
            ) from None


def setup_credential_sync(
    runtime: ControllerRuntime, gateway: EnvoyGateway, *, applied: Mapping[str, bytes]
) -> GatewayCredentialSync:
    """Secrets of ``istio-system`` → the gateway Secret's key, when it is added or changed."""
    secrets = runtime.informer(SECRETS, ISTIO_NAMESPACE)
    sync = GatewayCredentialSync(gateway, secrets, applied=applied)
    queue = runtime.controller("gateway-credential", sync, intervals=WATCH_DRIVEN, log=None)

    def secret_event(kind: str, obj: Obj) -> None:
        if kind in ("ADDED", "MODIFIED") and object_key(obj) == sync.key:
            queue.enqueue(sync.key, Trigger.WATCH_EVENT)

    runtime.watch(SECRETS, secret_event, ISTIO_NAMESPACE)
    return sync
