"""A stand-in for KLM's Manifest controller: Manifests become Ready after a delay.

Ours installs nothing (``docs/klm.md``): a Manifest whose status lags its generation gets
``Ready`` ``ready_after`` seconds after it was first seen so — or ``Error`` for the broken
fixture (``harness.kyma-project.io/install: fail``). A state change or deletion enqueues its
Kyma, as KLM's Kyma controller owns its Manifests."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.kyma.modules import INSTALL_ANNOTATION
from harness.kcp.lifecycle_manager.kyma.status import ERROR, READY
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome, Reconciler
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime, Informer
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import MANIFESTS, KubeError, NotFound, merge_patch, object_key
from watcher.domain import KCP_NAMESPACE, KYMA_NAME_LABEL

logger = logging.getLogger("harness.kcp.manifest")

Obj = Mapping[str, Any]


def target_state(manifest: Obj) -> str:
    """What the stand-in makes of a Manifest: ``Error`` for the broken fixture."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    return ERROR if annotations.get(INSTALL_ANNOTATION) == "fail" else READY


def needs_install(manifest: Obj) -> bool:
    """Whether the Manifest's status does not describe its current generation yet."""
    status = manifest.get("status") or {}
    generation = (manifest.get("metadata") or {}).get("generation")
    return status.get("observedGeneration") != generation or not status.get("state")


class ManifestController:
    """The Manifest controller's reconcile: a Manifest due for its install gets its state."""

    def __init__(self, api: ApiClient, manifests: Informer, *, ready_after: float = 0.5) -> None:
        self._api = api
        self._manifests = manifests.objects
        self.ready_after = ready_after

    async def __call__(self, key: str) -> Outcome:
        manifest = self._manifests.get(key)
        if manifest is None or not needs_install(manifest):
            return Outcome.GONE
        meta = manifest.get("metadata") or {}
        status = {"state": target_state(manifest), "observedGeneration": meta.get("generation")}
        try:
            await merge_patch(
                self._api, MANIFESTS, meta["name"], meta["namespace"],
                {"status": status}, subresource="status",
            )  # fmt: skip
        except NotFound:
            return Outcome.GONE
        except KubeError as exc:  # e.g. the KCP API server restarting
            logger.info("Manifest %s: status not written yet: %s", key, exc)
            return Outcome.ERROR
        return Outcome.SUCCESS


def setup_manifest_controller(
    runtime: ControllerRuntime,
    kymas: Reconciler,
    *,
    ready_after: float = 0.5,
    namespace: str = KCP_NAMESPACE,
) -> ManifestController:
    """A Manifest whose status lags → its key after ``ready_after`` s; a state change or
    deletion → its Kyma (``manifest-changed``)."""
    informer = runtime.informer(MANIFESTS, namespace)
    ctl = ManifestController(runtime.api, informer, ready_after=ready_after)
    queue = runtime.controller("manifest", ctl, intervals=WATCH_DRIVEN, log=None)
    states: dict[str, str] = {}

    def manifest_event(kind: str, obj: Obj) -> None:
        if kind == "SYNCED":
            return
        key = object_key(obj)
        state = str((obj.get("status") or {}).get("state") or "")
        changed = kind == "DELETED" or states.get(key) != state
        if kind == "DELETED":
            states.pop(key, None)
        else:
            states[key] = state
            if needs_install(obj):
                queue.enqueue_after(key, Trigger.MANIFEST_CHANGED, ready_after)
        kyma = ((obj.get("metadata") or {}).get("labels") or {}).get(KYMA_NAME_LABEL)
        if changed and kyma:
            kymas.enqueue(f"{namespace}/{kyma}", Trigger.MANIFEST_CHANGED)

    runtime.watch(MANIFESTS, manifest_event, namespace)
    return ctl
