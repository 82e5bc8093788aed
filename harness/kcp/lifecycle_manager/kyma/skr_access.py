"""How KLM reaches a Kyma's SKR: the kubeconfig in the one KCP Secret labelled with its name.

KLM finds it by the label ``operator.kyma-project.io/kyma-name``, whatever it is called, in
every reconcile (klm-reference §2.1); anything but exactly one usable Secret is an
:class:`SkrAccessError` (the Kyma ``Error``, backed off). A client is kept while the
Secret's resourceVersion stays, so a rotated kubeconfig is picked up.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import ConfigException, new_client_from_config_dict

from harness.clusters.plane import USER_AGENT
from harness.errors import HarnessError
from harness.kube import SECRETS, list_objects, resource_version
from watcher.domain import KCP_NAMESPACE, KUBECONFIG_KEY, KYMA_NAME_LABEL


class SkrAccessError(HarnessError):
    """The SKR of a Kyma cannot be reached from what the KCP holds."""


def kubeconfig_secret(kyma: str, kubeconfig: str) -> dict[str, Any]:
    """The Secret provisioning writes for ``kyma`` (what :class:`SkrClients` reads)."""
    encoded = base64.b64encode(kubeconfig.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": kyma, "namespace": KCP_NAMESPACE, "labels": {KYMA_NAME_LABEL: kyma}},
        "type": "Opaque",
        "data": {KUBECONFIG_KEY: encoded},
    }


class SkrClients:
    """Kyma name → API client for its SKR; ``aclose()`` closes them all."""

    def __init__(self, kcp_api: ApiClient) -> None:
        self._kcp = kcp_api
        self._clients: dict[str, tuple[str, ApiClient]] = {}

    async def client(self, kyma: str) -> ApiClient:
        label = f"{KYMA_NAME_LABEL}={kyma}"
        found, _ = await list_objects(self._kcp, SECRETS, KCP_NAMESPACE, label_selector=label)
        if len(found) != 1:
            names = ", ".join(sorted(s["metadata"]["name"] for s in found))
            raise SkrAccessError(
                f"no SKR kubeconfig: {len(found)} Secrets in {KCP_NAMESPACE} are labelled "
                f"{label}" + (f" ({names}); KLM needs exactly one" if found else "")
            )
        secret = found[0]
        where = f"Secret {KCP_NAMESPACE}/{secret['metadata']['name']}"
        version = resource_version(secret)
        cached = self._clients.get(kyma)
        if cached is not None and cached[0] == version:
            return cached[1]
        encoded = (secret.get("data") or {}).get(KUBECONFIG_KEY)
        if not encoded:
            raise SkrAccessError(f"no SKR kubeconfig: {where} has no key {KUBECONFIG_KEY!r}")
        try:
            config = yaml.safe_load(base64.b64decode(encoded, validate=True))
            client = await new_client_from_config_dict(config)
        except (binascii.Error, yaml.YAMLError, ConfigException, TypeError, KeyError) as exc:
            raise SkrAccessError(f"unusable SKR kubeconfig in {where}: {exc}") from None
        client.user_agent = USER_AGENT  # the harness's field manager: a shared cluster's
        # clean-up (harness.clusters.ownership) then knows what the stand-in wrote there
        await self.forget(kyma)
        self._clients[kyma] = (version, client)
        return client

    async def cached(self, kyma: str) -> ApiClient:
        """The client last built, without a KCP read (heartbeats); callers go back to
        :meth:`client` after a failure."""
        cached = self._clients.get(kyma)
        return cached[1] if cached is not None else await self.client(kyma)

    async def forget(self, kyma: str) -> None:
        cached = self._clients.pop(kyma, None)
        if cached is not None:
            await cached[1].close()

    async def aclose(self) -> None:
        for kyma in list(self._clients):
            await self.forget(kyma)
