"""One Kyma reconcile, in KLM's order (klm-reference §2), against the real API servers.

Read the KCP Kyma (with KLM's finalizer); reach the SKR through the kubeconfig Secret
(:mod:`.skr_access`); on first contact install the CRDs and create the SKR Kyma, whose spec
is the desired state from then on (never copied back); copy the catalog the Kyma may see;
one Manifest per resolved module (:mod:`.modules`); the Runtime Watcher (given a
``watcher``); then one status (:mod:`.status`) for both Kymas, whose state decides the
requeue. Deletion leaves the SKR as upstream's KLM does (``kyma-system`` stays); an SKR
that cannot be reached keeps the finalizer unless its kubeconfig Secret is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from kubernetes_asyncio.client import ApiClient

from harness.errors import HarnessError
from harness.kcp.lifecycle_manager.kyma import status as kyma_status
from harness.kcp.lifecycle_manager.kyma.modules import (
    Catalog,
    ModulePlan,
    catalog_visible,
    desired_manifest,
    plan_modules,
    stale_manifests,
)
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrAccessError, SkrClients
from harness.kcp.lifecycle_manager.queue.reconciler import Outcome
from harness.kcp.lifecycle_manager.queue.runtime import set_finalizers
from harness.kube import (
    CRDS,
    KYMAS,
    MANIFESTS,
    MODULE_RELEASE_METAS,
    MODULE_TEMPLATES,
    KubeError,
    NotFound,
    Resource,
    create,
    create_or_replace,
    delete,
    ensure_namespace,
    get,
    list_objects,
    merge_patch,
)
from harness.kube.crds import apply_crds, load_yaml_documents
from watcher.domain import (
    KCP_NAMESPACE,
    KYMA_FINALIZER,
    KYMA_NAME_LABEL,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
    RUNTIME_ID_LABEL,
    SKR_KYMA_NAME,
    SKR_NAMESPACE,
    WATCHED_BY_LABEL,
)

logger = logging.getLogger("harness.kcp.lifecycle_manager.kyma")

CRD_DIR: Final = Path(__file__).resolve().parents[4] / "fixtures" / "crds"
SKR_CRDS: Final = (CRD_DIR / "kyma.yaml", CRD_DIR / "catalog.yaml")
SKR_CRD_NAMES: Final = tuple(
    str(doc["metadata"]["name"]) for path in SKR_CRDS for doc in load_yaml_documents(path)
)
"""What KLM installs into an SKR on first contact, and a Kyma's deletion takes again."""
SKR_KYMA_LABELS: Final = {WATCHED_BY_LABEL: "kyma", MANAGED_BY_LABEL: LIFECYCLE_MANAGER}
"""Labels of every SKR Kyma KLM creates (plus its runtime id)."""
CATALOG: Final = (MODULE_TEMPLATES, MODULE_RELEASE_METAS)
MANAGED: Final = f"{MANAGED_BY_LABEL}={LIFECYCLE_MANAGER}"
"""Selects KLM's copies in an SKR."""

_OUTCOMES: Final = {
    kyma_status.READY: Outcome.SUCCESS,
    kyma_status.PROCESSING: Outcome.BUSY,
    kyma_status.WARNING: Outcome.WARNING,
    kyma_status.ERROR: Outcome.ERROR,
}

Obj = Mapping[str, Any]


class WatcherPending(Exception):
    """The watcher step is under way (a certificate being issued, a Deployment coming up):
    the Kyma stays ``Processing`` and is requeued at the busy interval."""


class RuntimeWatcher(Protocol):
    """The reconcile's watcher step (``SkrWebhookManager``, ``SkrDeployment``)."""

    async def install(self, kyma: Obj) -> tuple[str, ...]:
        """What changed; a ``HarnessError`` when it cannot."""
        ...

    async def remove(self, kyma: Obj, *, skr_reachable: bool) -> None: ...


class HealthProbe(Protocol):
    """Watcher health: a runtime is probed once its watcher is installed."""

    def watch(self, kyma: Obj) -> None: ...

    def forget(self, kyma: Obj) -> None: ...

    def condition(self, kyma: Obj) -> Mapping[str, Any] | None: ...


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def catalog_copy(entry: Obj) -> dict[str, Any]:
    """A KCP catalog object as KLM puts it into an SKR, labelled as KLM's (which is how
    stale copies are found)."""
    meta = _meta(entry)
    return {
        "apiVersion": entry["apiVersion"],
        "kind": entry["kind"],
        "metadata": {
            "name": meta["name"],
            "namespace": SKR_NAMESPACE,
            "labels": {**(meta.get("labels") or {}), MANAGED_BY_LABEL: LIFECYCLE_MANAGER},
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": entry.get("spec") or {},
    }


def _same_copy(a: Obj, b: Obj) -> bool:
    return a.get("spec") == b.get("spec") and (_meta(a).get("labels") or {}) == (
        _meta(b).get("labels") or {}
    )


@dataclass(eq=False)
class KymaReconcile:
    """``await reconcile("kcp-system/<kyma>")`` → the outcome; see the module doc."""

    kcp: ApiClient
    skrs: SkrClients
    _: KW_ONLY
    watcher: RuntimeWatcher | None = None
    """None: the watcher is left alone (no ``SKRWebhook`` condition)."""
    health: HealthProbe | None = None
    clock: Callable[[], float] = time.time
    _prepared: dict[str, ApiClient] = field(default_factory=dict, init=False)
    """Kyma → the SKR client whose CRDs and namespace are in place."""

    async def __call__(self, key: str) -> Outcome:
        namespace, _, name = key.partition("/")
        found = await get(self.kcp, KYMAS, name, namespace)
        if found is None:
            await self.skrs.forget(name)
            self._prepared.pop(name, None)
            return Outcome.GONE
        if _meta(found).get("deletionTimestamp"):
            return await self.delete(found)
        kyma = await self._ensure_finalizer(found)
        failures: list[str] = []
        entries: list[dict[str, Any]] = []
        catalog_synced = False
        webhook_installed: bool | None = None
        skr: ApiClient | None = None
        skr_kyma: Obj | None = None
        try:
            skr = await self.skrs.client(name)
            skr_kyma = await self._sync_kyma(skr, kyma)
            catalog = await self._sync_catalog(skr, kyma)
            catalog_synced = True
            plans = plan_modules(skr_kyma.get("spec") or {}, catalog)
            manifests = await self._sync_manifests(kyma, plans)
            entries = [kyma_status.module_entry(p, manifests.get(p.name)) for p in plans]
            if self.watcher is not None:
                webhook_installed = False
                changed = await self.watcher.install(kyma)
                webhook_installed = True
                if changed:
                    logger.info("reconcile of %s: watcher %s", key, ", ".join(changed))
                if self.health is not None:
                    self.health.watch(kyma)
        except WatcherPending as exc:  # not failed: still coming up (Processing)
            logger.info("reconcile of %s: %s", key, exc)
        except (SkrAccessError, KubeError, HarnessError) as exc:
            failures.append(str(exc))
            logger.info("reconcile of %s: %s", key, exc)
        status = kyma_status.kyma_status(
            kyma.get("status"),
            entries,
            catalog_synced=catalog_synced,
            webhook_installed=webhook_installed,
            failures=failures,
            extra_conditions=self._health_conditions(kyma),
            channel=((skr_kyma or kyma).get("spec") or {}).get("channel"),
            at=self.clock(),
        )
        await self._write_status(self.kcp, kyma, status)
        if skr is not None and skr_kyma is not None:
            try:
                await self._write_status(skr, skr_kyma, status)
            except KubeError as exc:
                logger.info("reconcile of %s: SKR Kyma status not written: %s", key, exc)
                return Outcome.ERROR
        return _OUTCOMES[status["state"]]

    def _health_conditions(self, kyma: Obj) -> list[Mapping[str, Any]]:
        condition = self.health.condition(kyma) if self.health is not None else None
        return [condition] if condition is not None else []

    async def _ensure_finalizer(self, kyma: Obj) -> Obj:
        finalizers = list(_meta(kyma).get("finalizers") or [])
        if KYMA_FINALIZER in finalizers:
            return kyma
        return await set_finalizers(self.kcp, KYMAS, kyma, [*finalizers, KYMA_FINALIZER])

    async def _sync_kyma(self, skr: ApiClient, kyma: Obj) -> Obj:
        """The SKR Kyma, created (with the CRDs it needs) on first contact."""
        name = _meta(kyma)["name"]
        if self._prepared.get(name) is not skr:
            await apply_crds(skr, SKR_CRDS)
            await ensure_namespace(skr, SKR_NAMESPACE)
            self._prepared[name] = skr
        current = await get(skr, KYMAS, SKR_KYMA_NAME, SKR_NAMESPACE)
        if current is not None:
            return current
        runtime_id = (_meta(kyma).get("labels") or {}).get(RUNTIME_ID_LABEL, "")
        labels = {**SKR_KYMA_LABELS, RUNTIME_ID_LABEL: runtime_id}
        body = {
            "apiVersion": kyma["apiVersion"],
            "kind": "Kyma",
            "metadata": {"name": SKR_KYMA_NAME, "namespace": SKR_NAMESPACE, "labels": labels},
            "spec": dict(kyma.get("spec") or {}),
        }
        logger.info("creating the SKR Kyma of %s", name)
        return await create(skr, KYMAS, body)

    async def _sync_catalog(self, skr: ApiClient, kyma: Obj) -> Catalog:
        """Copy what the Kyma may see of the KCP catalog to its SKR; the catalog it sees."""
        seen: dict[Resource, Sequence[Obj]] = {}
        listings = await asyncio.gather(
            *(list_objects(self.kcp, resource, KCP_NAMESPACE) for resource in CATALOG),
            *(
                list_objects(skr, resource, SKR_NAMESPACE, label_selector=MANAGED)
                for resource in CATALOG
            ),
        )
        for index, resource in enumerate(CATALOG):
            listed, _ = listings[index]
            entries = [e for e in listed if catalog_visible(e, kyma)]
            seen[resource] = entries
            copies, _ = listings[len(CATALOG) + index]
            present = {_meta(c)["name"]: c for c in copies}
            for entry in entries:
                copy = catalog_copy(entry)
                old = present.pop(copy["metadata"]["name"], None)
                if old is None or not _same_copy(old, copy):
                    await create_or_replace(skr, resource, copy)
            for stale in present:
                await delete(skr, resource, stale, SKR_NAMESPACE)
        return Catalog.build(seen[MODULE_TEMPLATES], seen[MODULE_RELEASE_METAS], kyma)

    async def _manifests_of(self, name: str) -> Sequence[Obj]:
        mine = f"{KYMA_NAME_LABEL}={name}"
        manifests, _ = await list_objects(self.kcp, MANIFESTS, KCP_NAMESPACE, label_selector=mine)
        return manifests

    async def _sync_manifests(self, kyma: Obj, plans: Sequence[ModulePlan]) -> dict[str, Obj]:
        """Create or update the Manifest of every resolved module, delete stale ones;
        module name → its Manifest as it is now."""
        name = _meta(kyma)["name"]
        existing = await self._manifests_of(name)
        by_name = {_meta(m)["name"]: m for m in existing}
        out: dict[str, Obj] = {}
        for plan in plans:
            if plan.template is None:
                continue
            desired = desired_manifest(kyma, plan)
            current = by_name.get(desired["metadata"]["name"])
            if current is None:
                current = await create(self.kcp, MANIFESTS, desired)
            elif current.get("spec") != desired["spec"]:
                labels = desired["metadata"]["labels"]
                patch = {"spec": desired["spec"], "metadata": {"labels": labels}}
                current = await merge_patch(
                    self.kcp, MANIFESTS, _meta(current)["name"], KCP_NAMESPACE, patch
                )
            out[plan.name] = current
        for stale in stale_manifests(existing, plans):
            await delete(self.kcp, MANIFESTS, stale, KCP_NAMESPACE)
        return out

    async def _write_status(self, api: ApiClient, kyma: Obj, status: Obj) -> None:
        if kyma_status.same_status(kyma.get("status"), status):
            return
        meta = _meta(kyma)
        patch = {"status": dict(status)}
        await merge_patch(api, KYMAS, meta["name"], meta["namespace"], patch, subresource="status")

    async def _clean_skr(self, skr: ApiClient, kyma: Obj) -> None:
        """The SKR as upstream's KLM leaves it: no watcher, SKR Kyma, catalog copies or
        KLM's CRDs (``kyma-system`` stays)."""
        if self.watcher is not None:
            await self.watcher.remove(kyma, skr_reachable=True)
        await delete(skr, KYMAS, SKR_KYMA_NAME, SKR_NAMESPACE)
        for resource in CATALOG:
            try:
                copies, _ = await list_objects(skr, resource, SKR_NAMESPACE, label_selector=MANAGED)
            except NotFound:  # KLM's CRDs went in an earlier pass
                continue
            for copy in copies:
                await delete(skr, resource, _meta(copy)["name"], SKR_NAMESPACE)
        for crd in SKR_CRD_NAMES:
            await delete(skr, CRDS, crd)

    async def delete(self, kyma: Obj) -> Outcome:
        """The finalizer's work: the state ``Deleting``, then Manifests, the SKR's Kyma,
        catalog copies and KLM's CRDs there, the finalizer."""
        meta = _meta(kyma)
        name = meta["name"]
        if (kyma.get("status") or {}).get("state") != kyma_status.DELETING:
            deleting = kyma_status.deleting(time.time())
            with contextlib.suppress(NotFound):  # the finalizer below needs its new version
                kyma = await merge_patch(
                    self.kcp,
                    KYMAS,
                    name,
                    meta["namespace"],
                    {"status": deleting},
                    subresource="status",
                )
                meta = _meta(kyma)
        if self.health is not None:
            self.health.forget(kyma)
        for manifest in await self._manifests_of(name):
            await delete(self.kcp, MANIFESTS, _meta(manifest)["name"], KCP_NAMESPACE)
        try:
            skr = await self.skrs.client(name)
        except SkrAccessError as exc:
            logger.info("deleting %s: SKR not reachable (%s); nothing to clean up there", name, exc)
            if self.watcher is not None:
                await self.watcher.remove(kyma, skr_reachable=False)
        else:
            await self._clean_skr(skr, kyma)
        finalizers = [f for f in meta.get("finalizers") or [] if f != KYMA_FINALIZER]
        if finalizers != list(meta.get("finalizers") or []):
            with contextlib.suppress(NotFound):  # already gone: nothing to release
                await set_finalizers(self.kcp, KYMAS, kyma, finalizers)
        await self.skrs.forget(name)
        self._prepared.pop(name, None)
        return Outcome.GONE
