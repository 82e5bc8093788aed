"""A stand-in for KLM's Manifest controller: Manifests become Ready after a delay.

KLM's Manifest controller installs a module into the SKR; ours does not install anything
(``docs/klm.md``): a Manifest whose status does not describe its current generation gets,
``ready_after`` seconds later, ``status.state: Ready`` — or ``Error`` when its module's
ModuleTemplate is the harness's broken fixture (annotation ``harness.kyma-project.io/
install: fail``, copied to the Manifest). A Manifest whose state changes (or that goes
away) is reported to ``on_change`` with its Kyma's key, as KLM's Kyma controller is
triggered by the Manifests it owns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.aio import Service, spawn, stop_tasks
from harness.kcp.lifecycle_manager.kyma.modules import INSTALL_ANNOTATION
from harness.kcp.lifecycle_manager.kyma.status import ERROR, READY
from harness.kube import MANIFESTS, KubeError, NotFound, merge_patch, object_key
from harness.kube.watch import watch_objects
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


class ManifestController(Service):
    """``async with ManifestController(kcp_api, ready_after=1.0, on_change=...)``."""

    def __init__(
        self,
        api: ApiClient,
        *,
        ready_after: float = 0.5,
        on_change: Callable[[str], None] | None = None,
        namespace: str = KCP_NAMESPACE,
    ) -> None:
        self._api = api
        self.ready_after = ready_after
        self.on_change = on_change
        self.namespace = namespace
        self._installs: dict[str, asyncio.Task[None]] = {}
        self._states: dict[str, str] = {}

    async def _run(self) -> None:
        async for kind, obj in watch_objects(self._api, MANIFESTS, namespace=self.namespace):
            if kind == "SYNCED":
                continue
            key = object_key(obj)
            state = str((obj.get("status") or {}).get("state") or "")
            changed = self._states.get(key) != state
            if kind == "DELETED":
                self._states.pop(key, None)
                task = self._installs.pop(key, None)
                if task is not None:
                    task.cancel()
                changed = True
            else:
                self._states[key] = state
                if needs_install(obj) and key not in self._installs:
                    self._installs[key] = spawn(self._install(key, obj), f"install-{key}")
            kyma = ((obj.get("metadata") or {}).get("labels") or {}).get(KYMA_NAME_LABEL)
            if changed and kyma and self.on_change is not None:
                self.on_change(f"{self.namespace}/{kyma}")

    async def _install(self, key: str, manifest: Obj) -> None:
        meta = manifest.get("metadata") or {}
        status = {"state": target_state(manifest), "observedGeneration": meta.get("generation")}
        try:
            await asyncio.sleep(self.ready_after)
            while True:  # until written, gone, or the controller stops
                try:
                    await merge_patch(
                        self._api, MANIFESTS, meta["name"], meta["namespace"],
                        {"status": status}, subresource="status",
                    )  # fmt: skip
                    return
                except NotFound:
                    return
                except KubeError as exc:  # e.g. the KCP API server restarting
                    logger.info("Manifest %s: status not written yet: %s", key, exc)
                    await asyncio.sleep(1.0)
        finally:
            self._installs.pop(key, None)

    async def start(self) -> None:
        self.stack.push_async_callback(self._stop_installs)  # after the watch that adds them
        self.spawn(self._run(), "manifest-controller")

    async def _stop_installs(self) -> None:
        installs, self._installs = self._installs, {}
        await stop_tasks(installs.values())
