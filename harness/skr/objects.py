"""The Kubernetes objects a host-run SKR install writes, and how it writes them.

Pure renderers (the TLS Secret, ``skr-webhook`` with a URL client config), the bind rule
for a host address, and :class:`SkrObjects`, which writes them (through
:mod:`harness.kube`). Split from :mod:`harness.skr.install` so that module is only the
lifecycle of one installation.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from collections.abc import Sequence
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.clusters import ports
from harness.kube import (
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Obj,
    create_or_replace,
    delete,
    ensure_namespace,
    get,
)
from harness.skr.errors import as_install_error
from harness.skr.webhook import WebhookConfig
from watcher.domain import SKR_NAMESPACE
from watcher.render.skr_bundle import TLS_SECRET
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import (
    CONFIGURATION_NAME,
    FailurePolicy,
    UrlTarget,
    render_webhook_configuration,
)

NAMESPACE = SKR_NAMESPACE
SECRET_NAME = TLS_SECRET


def secret_manifest(data: dict[str, bytes], *, name: str = SECRET_NAME) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret cert-manager would write (pure)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in sorted(data.items())},
    }


def render_skr_configuration(
    watchers: Sequence[Watcher],
    *,
    webhook_port: int,
    ca_bundle_pem: bytes,
    failure_policy: FailurePolicy = "Ignore",
    timeout_seconds: int = 15,
    host_address: str = ports.LOOPBACK,
) -> dict[str, Any] | None:
    """``skr-webhook`` for a host-run webhook: every webhook calls
    ``<host_address>:<webhook_port>`` (loopback by default). None when there are no
    Watchers (the configuration is then deleted)."""
    if not watchers:
        return None
    return render_webhook_configuration(
        watchers,
        ca_bundle_pem=ca_bundle_pem,
        target=UrlTarget(host_address, webhook_port),
        failure_policy=failure_policy,
        timeout_seconds=timeout_seconds,
    )


def bind_address(host_address: str) -> str:
    """What a host-run server binds to be reachable at ``host_address``: that IP, or every
    interface (``0.0.0.0``) for a DNS name, which cannot be bound."""
    try:
        ipaddress.ip_address(host_address)
    except ValueError:
        return "0.0.0.0"  # a DNS name: the API server may come from anywhere
    return host_address


def delivery_is_async(config: WebhookConfig) -> bool:
    """The spool only serves async delivery (sync mode sends inside the admission)."""
    return config.extra_env.get("WATCHER_DELIVERY_MODE", config.delivery_mode) == "async"


class SkrObjects:
    """The namespace, the TLS Secret and ``skr-webhook`` in SKR ``skr``, written through
    ``api`` (replaced whole, so a field someone else added does not survive); an API error
    becomes an :class:`SkrInstallError` naming the SKR."""

    def __init__(self, api: ApiClient, skr: str) -> None:
        self.api = api
        self.skr = skr

    async def ensure_namespace(self) -> None:
        with as_install_error(self.skr):
            await ensure_namespace(self.api, NAMESPACE)

    async def stored(self) -> tuple[Obj | None, Obj | None]:
        """``skr-webhook`` and the Secret as the SKR has them (None: missing)."""
        return await asyncio.gather(
            get(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS, CONFIGURATION_NAME),
            get(self.api, SECRETS, SECRET_NAME, NAMESPACE),
        )

    async def put_secret(self, data: dict[str, bytes]) -> None:
        with as_install_error(self.skr):
            await create_or_replace(self.api, SECRETS, secret_manifest(data))

    async def delete_secret(self) -> None:
        with as_install_error(self.skr):
            await delete(self.api, SECRETS, SECRET_NAME, NAMESPACE)

    async def put_configuration(self, body: dict[str, Any]) -> None:
        with as_install_error(self.skr):
            await create_or_replace(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS, body)

    async def delete_configuration(self) -> None:
        with as_install_error(self.skr):
            await delete(self.api, VALIDATING_WEBHOOK_CONFIGURATIONS, CONFIGURATION_NAME)
