"""KLM's SKR webhook manager: the Runtime Watcher deployed by every Kyma reconcile.

Each reconcile (klm-reference §2.5) keeps the runtime's certificate current and puts the
SKR's webhook Secret and configuration (from **all** Watchers) back as they should be, so
whatever the SKR lost is back after the next reconcile. This decides *what* each SKR gets;
its :class:`SkrWebhook` (a process on this host, or a Deployment) knows *how*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

from harness.errors import HarnessError
from harness.kcp.lifecycle_manager.certificates.client import KymaCertificates, secret_name
from harness.kube import SECRETS, delete
from watcher import pki
from watcher.domain import ISTIO_NAMESPACE, RUNTIME_ID_LABEL, SKR_DOMAIN_ANNOTATION
from watcher.render.watcher_cr import Watcher

Obj = Mapping[str, Any]


class SkrWebhook(Protocol):
    """The watcher in one SKR, as the reconcile drives it."""

    async def repair(
        self,
        watchers: Callable[[], Sequence[Watcher]] | None = None,
        certificate: tuple[pki.Issued, bytes] | None = None,
    ) -> tuple[str, ...]:
        """Take ``certificate``, render from ``watchers``, put back what differs (said)."""
        ...

    async def remove(self) -> None:
        """Delete the SKR's watcher resources (configuration, Secret)."""
        ...


def runtime_identity(kyma: Obj) -> tuple[str, str, str]:
    """The Kyma's name, runtime id and ``skr-domain`` (its certificate needs all three)."""
    meta = kyma.get("metadata") or {}
    name = str(meta.get("name"))
    runtime_id = (meta.get("labels") or {}).get(RUNTIME_ID_LABEL)
    skr_domain = (meta.get("annotations") or {}).get(SKR_DOMAIN_ANNOTATION)
    if not runtime_id or not skr_domain:
        lacks = {
            f"label {RUNTIME_ID_LABEL}": runtime_id,
            f"annotation {SKR_DOMAIN_ANNOTATION}": skr_domain,
        }
        missing = " and ".join(what for what, value in lacks.items() if not value)
        raise HarnessError(f"Kyma {name} has no {missing}: no certificate can be issued")
    return name, str(runtime_id), str(skr_domain)


@dataclass(frozen=True)
class SkrWebhookManager:
    """``await manager.install(kyma)`` in each reconcile; ``remove(kyma)`` on deletion."""

    certificates: KymaCertificates
    _: KW_ONLY
    watchers: Callable[[], Sequence[Watcher]]
    target: Callable[[str], SkrWebhook | None]
    """Runtime id (a Kyma may be called anything) → its SKR's webhook."""

    def _skr(self, name: str, runtime_id: str) -> SkrWebhook:
        target = self.target(runtime_id)
        if target is None:
            raise HarnessError(
                f"no Runtime Watcher installation for Kyma {name} (runtime {runtime_id})"
            )
        return target

    async def install(self, kyma: Obj) -> tuple[str, ...]:
        """Certificate, Secret and configuration of the Kyma's SKR put right; what changed."""
        name, runtime_id, skr_domain = runtime_identity(kyma)
        skr = self._skr(name, runtime_id)
        cert = await self.certificates.ensure(name, runtime_id, skr_domain)
        return await skr.repair(self.watchers, (cert.issued, cert.ca_bundle_pem))

    async def remove(self, kyma: Obj, *, skr_reachable: bool = True) -> None:
        """Its SKR's watcher resources (when reachable), then its KCP certificate."""
        meta = kyma.get("metadata") or {}
        name = str(meta.get("name"))
        runtime_id = (meta.get("labels") or {}).get(RUNTIME_ID_LABEL)
        target = self.target(runtime_id) if runtime_id else None
        if target is not None and skr_reachable:
            await target.remove()
        await delete(self.certificates.api, SECRETS, secret_name(name), ISTIO_NAMESPACE)
        self.certificates.forget(name)
