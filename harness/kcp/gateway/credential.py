"""The gateway's credential follows its Secret, as Istio's SDS serves ``credentialName``.

KLM's Gateway names ``credentialName: klm-istio-gateway``; Istio reads that Secret in
``istio-system`` and pushes its ``tls.crt``/``tls.key`` (serving certificate) and ``ca.crt``
(the CAs trusted for client certificates) to the ingress gateway whenever it changes.
:class:`GatewayCredentialSync` does the same for our Envoy: it watches the Secret and hands
what changed to :meth:`EnvoyGateway.rotate_tls` (an LDS swap: new connections use it, open
ones drain). :meth:`GatewayCredentialSync.wait_trusted` returns once a given bundle is
live — the Lifecycle Manager's CA waits there before it signs anything with a new CA.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from kubernetes_asyncio.client import ApiClient

from harness.aio import Service
from harness.errors import HarnessError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.errors import GatewayError
from harness.kcp.tls_secret import SecretLayoutError, tls_data
from harness.kube import SECRETS
from harness.kube.watch import watch_objects
from watcher.domain import GATEWAY_SECRET_NAME, ISTIO_NAMESPACE

logger = logging.getLogger("harness.kcp.gateway.credential")


class GatewayCredentialSync(Service):
    """``async with GatewayCredentialSync(kcp_api, gateway, applied=initial_data):``

    ``applied``: the ``tls.crt``/``tls.key``/``ca.crt`` the gateway started with (so the
    first look at the Secret swaps nothing when they agree)."""

    def __init__(
        self,
        api: ApiClient,
        gateway: EnvoyGateway,
        *,
        applied: Mapping[str, bytes],
        name: str = GATEWAY_SECRET_NAME,
        namespace: str = ISTIO_NAMESPACE,
    ) -> None:
        self._api = api
        self._gateway = gateway
        self._applied = dict(applied)
        self._name = name
        self._namespace = namespace
        self._changed = asyncio.Condition()
        self.swaps = 0
        """How many times the Secret changed the gateway."""

    @property
    def trusted_bundle(self) -> bytes:
        """The CA bundle the gateway verifies client certificates with right now."""
        return self._applied.get("ca.crt", b"")

    async def _run(self) -> None:
        async for kind, obj in watch_objects(self._api, SECRETS, namespace=self._namespace):
            if kind not in ("ADDED", "MODIFIED"):
                continue  # a deleted Secret leaves the gateway as it is (as Istio's does)
            if (obj.get("metadata") or {}).get("name") != self._name:
                continue
            try:
                await self._apply(tls_data(obj))
            except SecretLayoutError as exc:
                logger.warning("gateway Secret not applied: %s", exc)
            except GatewayError as exc:
                logger.error("the gateway refused its new credential: %s", exc)

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
        self.swaps += 1
        async with self._changed:
            self._changed.notify_all()

    async def wait_trusted(self, bundle_pem: bytes, within: float = 15.0) -> None:
        """Until the gateway verifies client certificates against ``bundle_pem``."""
        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(lambda: self.trusted_bundle == bundle_pem)
        except TimeoutError:
            raise HarnessError(
                f"the gateway did not take the new CA bundle from Secret "
                f"{self._namespace}/{self._name} within {within:g} s"
            ) from None

    async def start(self) -> None:
        self.spawn(self._run(), "gateway-credential-sync")


__all__ = ["GatewayCredentialSync"]
