"""The Kubernetes objects a host-run SKR install writes, and how it writes them.

Pure renderers (the TLS Secret, ``skr-webhook`` with a URL client config), the bind rule
for a host address, and a create-or-replace that survives conflicts. Split from
:mod:`harness.skr.install` so that module is only the lifecycle of one installation.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from kubernetes_asyncio import client

from harness.clusters import ports
from harness.skr.errors import SkrInstallError
from harness.skr.webhook import WebhookConfig
from watcher.domain import SKR_NAMESPACE
from watcher.render.skr_bundle import TLS_SECRET
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import FailurePolicy, UrlTarget, render_webhook_configuration

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


def is_status(e: client.ApiException, *codes: int) -> bool:
    """Whether the API answered one of ``codes`` (e.g. 404 on delete: already gone)."""
    return e.status in codes


REPLACE_ATTEMPTS = 5


async def create_or_replace(
    what: str,
    body: dict[str, Any],
    *,
    create: Callable[[dict[str, Any]], Awaitable[Any]],
    read: Callable[[], Awaitable[Any]],
    replace: Callable[[dict[str, Any]], Awaitable[Any]],
) -> None:
    """Create ``body``; if it exists, replace it at its current resourceVersion (some kinds,
    like webhook configurations, refuse unconditional updates), retrying on conflicts."""
    for _ in range(REPLACE_ATTEMPTS):
        try:
            await create(body)
            return
        except client.ApiException as e:
            if not is_status(e, 409):
                raise SkrInstallError(
                    f"cannot create {what}: {e.status} {e.reason}: {e.body!r}"
                ) from e
        try:
            current = await read()
        except client.ApiException as e:
            if is_status(e, 404):
                continue  # deleted in between: create again
            raise SkrInstallError(f"cannot read {what}: {e.status} {e.reason}") from e
        update = {
            **body,
            "metadata": {**body["metadata"], "resourceVersion": current.metadata.resource_version},
        }
        try:
            await replace(update)
            return
        except client.ApiException as e:
            if not is_status(e, 409, 404):
                raise SkrInstallError(
                    f"cannot replace {what}: {e.status} {e.reason}: {e.body!r}"
                ) from e
    raise SkrInstallError(f"cannot create or replace {what}: {REPLACE_ATTEMPTS} conflicts in a row")
