"""The Runtime Watcher as upstream's KLM deploys it: resources applied to the SKR.

For the KLM process (``watcher-klm``): the certificate comes from cert-manager
(:mod:`.certificates.cert_manager_client`) and the SKR webhook set of
:func:`watcher.render.skr_manifests.render_skr_manifests` is applied into the SKR, with
the certificate's serial on the pod template so a new one restarts the pods. Until a
kubelet made the Deployment ready, :class:`WebhookPending` keeps the Kyma ``Processing``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final

from harness.kcp.lifecycle_manager.certificates.cert_manager_client import (
    CertManagerCertificates,
)
from harness.kcp.lifecycle_manager.kyma.reconcile import WatcherPending
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.skr_webhook import runtime_identity
from harness.kcp.tls_secret import SecretLayoutError, tls_data
from harness.kube import (
    DEPLOYMENTS,
    GATEWAYS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    KubeError,
    delete,
    get,
)
from harness.manifests.apply import apply_object, resource_for
from watcher import pki
from watcher.domain import KCP_NAMESPACE
from watcher.errors import CertificateError
from watcher.render.skr_bundle import NAME, NAMESPACE, TLS_SECRET
from watcher.render.skr_manifests import SkrManifestParams, render_skr_manifests
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import (
    CONFIGURATION_NAME,
    ServiceTarget,
    render_webhook_configuration,
)

Obj = Mapping[str, Any]
IMAGE_REPOSITORY: Final = "europe-docker.pkg.dev/kyma-project/prod/runtime-watcher"
GATEWAY: Final = ("klm-watcher", KCP_NAMESPACE)
"""KLM's Gateway: its host and port are the KCP address the SKR webhooks dial."""
RESTART_ANNOTATION: Final = "operator.kyma-project.io/pod-restart-trigger"
KEPT_KINDS: Final = frozenset({"Namespace", "PriorityClass"})


class WebhookPending(WatcherPending):
    """The SKR's webhook Deployment is not ready yet: the Kyma stays ``Processing``."""


def kcp_address(gateway: Obj | None) -> str:
    """``<host>:<port>`` of the Gateway's first server (IPv6 hosts bracketed)."""
    servers = ((gateway or {}).get("spec") or {}).get("servers") or []
    if not servers or not servers[0].get("hosts"):
        raise WebhookPending(f"Gateway {GATEWAY[1]}/{GATEWAY[0]} has no server with a host")
    host = str(servers[0]["hosts"][0]).rpartition("/")[2]
    port = (servers[0].get("port") or {}).get("number", 443)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def deployment_ready(deployment: Obj | None) -> bool:
    """Observed at its generation with every wanted replica ready."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    wanted = (deployment.get("spec") or {}).get("replicas", 1)
    observed = status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
    return bool(observed) and int(status.get("readyReplicas") or 0) >= int(wanted)


def skr_objects(
    *, image: str, kcp_addr: str, tls: Mapping[str, bytes], watchers: Sequence[Watcher]
) -> list[dict[str, Any]]:
    """What the SKR gets, in apply order; the pods' template names the certificate's
    serial so a new certificate rolls them (pure)."""
    params = SkrManifestParams(image=image, kcp_addr=kcp_addr, tls=tls, network_policies="portable")
    objects = [
        o for o in render_skr_manifests(params) if o["kind"] != "ValidatingWebhookConfiguration"
    ]
    serial = format(pki.load_certificates(tls["tls.crt"])[0].serial_number, "x")
    for obj in objects:
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"].setdefault("metadata", {})
            template.setdefault("annotations", {})[RESTART_ANNOTATION] = serial
    if watchers:
        objects.append(
            render_webhook_configuration(
                watchers,
                ca_bundle_pem=tls["ca.crt"],
                target=ServiceTarget(name=NAME, namespace=params.namespace, port=443),
                failure_policy=params.failure_policy,
                timeout_seconds=params.webhook_timeout_seconds,
            )
        )
    return objects


@dataclass(frozen=True)
class SkrDeployment:
    """The reconcile's Runtime Watcher step for a KLM process (``install``/``remove``)."""

    certificates: CertManagerCertificates
    skrs: SkrClients
    _: KW_ONLY
    watchers: Callable[[], Sequence[Watcher]]
    image_tag: str

    async def install(self, kyma: Obj) -> tuple[str, ...]:
        name, runtime_id, skr_domain = runtime_identity(kyma)
        cert = await self.certificates.ensure(name, runtime_id, skr_domain)
        gateway = await get(self.certificates.api, GATEWAYS, *GATEWAY)
        watchers = self.watchers()
        objects = skr_objects(
            image=f"{IMAGE_REPOSITORY}:{self.image_tag}",
            kcp_addr=kcp_address(gateway),
            tls=pki.secret_data(cert.issued, cert.ca_bundle_pem),
            watchers=watchers,
        )
        skr = await self.skrs.client(name)
        for obj in objects:
            await apply_object(skr, obj)
        if not watchers:
            with contextlib.suppress(KubeError):
                await delete(skr, VALIDATING_WEBHOOK_CONFIGURATIONS, CONFIGURATION_NAME, None)
        if not deployment_ready(await get(skr, DEPLOYMENTS, NAME, NAMESPACE)):
            raise WebhookPending(f"Deployment {NAME} in the SKR of {name} is not ready yet")
        return ()

    async def remove(self, kyma: Obj, *, skr_reachable: bool) -> None:
        """The webhook configuration first, then the rest of what ``install`` applied
        (named by rendering again from the SKR's Secret), then the certificate."""
        name = str((kyma.get("metadata") or {}).get("name"))
        if skr_reachable:
            skr = await self.skrs.client(name)
            with contextlib.suppress(KubeError):
                await delete(skr, VALIDATING_WEBHOOK_CONFIGURATIONS, CONFIGURATION_NAME, None)
            secret = await get(skr, SECRETS, TLS_SECRET, NAMESPACE)
            try:
                tls = tls_data(secret) if secret is not None else None
                applied = (
                    skr_objects(image="-", kcp_addr="-:1", tls=tls, watchers=()) if tls else []
                )
            except (SecretLayoutError, CertificateError, ValueError):
                applied = []
            for obj in reversed(applied):
                if obj["kind"] in KEPT_KINDS:
                    continue
                meta = obj["metadata"]
                with contextlib.suppress(KubeError):
                    await delete(skr, resource_for(obj), meta["name"], meta.get("namespace"))
        await self.certificates.remove(name)
