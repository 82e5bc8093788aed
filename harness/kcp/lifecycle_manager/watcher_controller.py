"""The Watcher controller on the KCP: Watcher CR → VirtualService, status, finalizer.

A valid Watcher (one a Gateway matches) gets its VirtualService and ``Ready``; an invalid
one ``Error`` with the reasons and no VirtualService. On deletion the VirtualService is
deleted explicitly (these API servers run no garbage collector), but only after the SKRs
stopped sending its events. ``on_change`` callbacks get the valid Watchers whenever that
list changes, so every SKR's webhook configuration is re-rendered at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.kyma.status import condition, timestamp
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome
from harness.kcp.lifecycle_manager.queue.runtime import (
    ControllerRuntime,
    Informer,
    set_finalizers,
)
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import (
    GATEWAYS,
    VIRTUAL_SERVICES,
    WATCHERS,
    Conflict,
    KubeError,
    Obj,
    apply,
    delete,
    get,
    merge_patch,
    object_key,
)
from watcher.errors import InvalidWatcher
from watcher.render.virtualservice import render_virtual_service
from watcher.render.watcher_cr import Watcher, parse_watcher

logger = logging.getLogger("harness.kcp.lifecycle_manager.watcher_controller")

FINALIZER = "operator.kyma-project.io/watcher"
CONDITION_TYPE = "VirtualService"
FIELD_MANAGER = "watcher-controller"

WatchersChanged = Callable[[list[Watcher]], Awaitable[None]]


def valid_watcher(obj: Mapping[str, Any]) -> Watcher | None:
    """The parsed Watcher if it is valid and not being deleted."""
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return None
    try:
        return parse_watcher(obj)
    except InvalidWatcher:
        return None


class WatcherController:
    """The Watcher controller: :meth:`reconcile` plus :func:`setup_watcher_controller`."""

    def __init__(
        self,
        api: ApiClient,
        watchers: Informer,
        gateways: Informer,
        *,
        field_manager: str = FIELD_MANAGER,
        sync_timeout: float = 30.0,
    ) -> None:
        self._api = api
        self._watchers = watchers.objects
        self._gateways = gateways.objects
        self._field_manager = field_manager
        self._sync_timeout = sync_timeout
        self.on_change: list[WatchersChanged] = []
        self._valid: dict[str, Watcher] = {}
        self.notify: Callable[[], None] = lambda: None
        """Set by the setup: queue a :meth:`publish`."""
        self._published: frozenset[str] = frozenset()
        self._published_changed = asyncio.Condition()
        self.errors = 0

    def watchers(self) -> list[Watcher]:
        """The current valid Watchers, sorted by namespace/name (list order)."""
        return [self._valid[k] for k in sorted(self._valid)]

    def watcher_changed(self, kind: str, obj: Obj) -> None:
        """A Watcher event: the valid set (and after the first list the notifier) follows."""
        if kind == "SYNCED":
            self.notify()  # the installer gets the initial list too
            return
        key = object_key(obj)
        watcher = valid_watcher(obj) if kind != "DELETED" else None
        if watcher == self._valid.get(key):
            return
        if watcher is None:
            self._valid.pop(key, None)
        else:
            self._valid[key] = watcher
        self.notify()

    async def publish(self, _: str) -> Outcome:
        """Hand the valid Watchers to every ``on_change`` callback (a burst: one call)."""
        watchers = self.watchers()
        for callback in list(self.on_change):
            try:
                await callback(watchers)
            except Exception:
                self.errors += 1
                logger.exception("on_change callback %r failed", callback)
        async with self._published_changed:
            self._published = frozenset(f"{w.namespace}/{w.name}" for w in watchers)
            self._published_changed.notify_all()
        return Outcome.SUCCESS

    async def _unpublished(self, key: str) -> None:
        """Until the ``on_change`` callbacks ran without ``key`` (at most ``sync_timeout``):
        SKRs stop sending a deleted Watcher's events before its route goes (no 404s)."""
        try:
            async with asyncio.timeout(self._sync_timeout), self._published_changed:
                await self._published_changed.wait_for(lambda: key not in self._published)
        except TimeoutError:
            logger.warning(
                "SKRs still wired for %s after %g s; removing its route anyway",
                key,
                self._sync_timeout,
            )

    async def __call__(self, key: str) -> Outcome:
        """Reconcile ``key``; a conflict waits for the next event, other API errors retry."""
        try:
            await self.reconcile(key)
        except Conflict as exc:
            logger.debug("%s changed meanwhile, the next event reconciles it: %s", key, exc)
        except KubeError as exc:
            self.errors += 1
            logger.warning("reconcile of Watcher %s failed, retrying: %s", key, exc)
            return Outcome.ERROR
        return Outcome.SUCCESS

    async def reconcile(self, key: str) -> None:
        """Bring the VirtualService and status of Watcher ``key`` ("ns/name") in line."""
        obj = self._watchers.get(key)
        if obj is None:
            return
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if obj["metadata"].get("deletionTimestamp"):
            if FINALIZER in finalizers:
                await self._unpublished(key)
                await self._delete_virtual_service(obj)
                await set_finalizers(
                    self._api, WATCHERS, obj, [f for f in finalizers if f != FINALIZER]
                )
                logger.info("Watcher %s deleted: VirtualService removed, finalizer released", key)
            return
        if FINALIZER not in finalizers:
            obj = await set_finalizers(self._api, WATCHERS, obj, [*finalizers, FINALIZER])
        generation = int(obj["metadata"].get("generation") or 0)
        status = obj.get("status") or {}
        if status.get("observedGeneration") != generation or not status.get("state"):
            obj = await self._set_status(obj, "Processing", "rendering the VirtualService")
        try:
            watcher = parse_watcher(obj)
            virtual_service = render_virtual_service(watcher, list(self._gateways.values()))
        except InvalidWatcher as exc:
            await self._delete_virtual_service(obj)
            await self._set_status(obj, "Error", str(exc))
            return
        await apply(self._api, VIRTUAL_SERVICES, virtual_service, field_manager=self._field_manager)
        route = virtual_service["spec"]["http"][0]
        prefix = route["match"][0]["uri"]["prefix"]
        destination = route["route"][0]["destination"]
        gateways = ", ".join(virtual_service["spec"]["gateways"])
        await self._set_status(
            obj,
            "Ready",
            f"VirtualService {key} routes {prefix} to {destination['host']}:"
            f"{destination['port']['number']} via {gateways}",
        )

    async def _set_status(self, obj: Obj, state: str, message: str) -> Obj:
        """State and condition (reason ``Processing``, ``Invalid`` or ``Ready``), keeping
        lastTransitionTime while the condition holds; written only when it changed."""
        meta = obj["metadata"]
        current = obj.get("status") or {}
        generation = int(meta.get("generation") or 0)
        reason = {"Error": "Invalid"}.get(state, state)
        before = current.get("conditions") or []
        kept = condition(CONDITION_TYPE, state == "Ready", reason, message, before, timestamp())
        status = {
            "state": state,
            "observedGeneration": generation,
            "conditions": [{**kept, "observedGeneration": generation}],
        }
        if all(current.get(k) == v for k, v in status.items()):
            return obj
        name, namespace = meta["name"], meta["namespace"]
        patch = {"status": status}
        return await merge_patch(self._api, WATCHERS, name, namespace, patch, subresource="status")

    async def _delete_virtual_service(self, obj: Obj) -> None:
        """Delete the Watcher's VirtualService if it exists and this Watcher owns it."""
        meta = obj["metadata"]
        existing = await get(self._api, VIRTUAL_SERVICES, meta["name"], meta["namespace"])
        if existing is None:
            return
        owners = (existing.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("uid") == meta.get("uid") for o in owners):
            await delete(self._api, VIRTUAL_SERVICES, meta["name"], meta["namespace"])


def setup_watcher_controller(runtime: ControllerRuntime, **options: Any) -> WatcherController:
    """Watchers → their key; a Gateway change → every Watcher; a change of the valid set →
    the notifier (one key, so a burst coalesces)."""
    watchers = runtime.informer(WATCHERS)
    ctl = WatcherController(runtime.api, watchers, runtime.informer(GATEWAYS), **options)
    queue = runtime.controller("watcher", ctl, intervals=WATCH_DRIVEN, log=None)

    def watcher_event(kind: str, obj: Obj) -> None:
        if kind in ("ADDED", "MODIFIED"):
            queue.enqueue(object_key(obj), Trigger.WATCH_EVENT)
        ctl.watcher_changed(kind, obj)

    def gateway_event(kind: str, obj: Obj) -> None:
        for key in watchers.objects if kind != "SYNCED" else ():
            queue.enqueue(key, Trigger.WATCH_EVENT)

    runtime.watch(WATCHERS, watcher_event)
    runtime.watch(GATEWAYS, gateway_event)
    notifier = runtime.controller("watcher-notifier", ctl.publish, intervals=WATCH_DRIVEN, log=None)
    ctl.notify = lambda: notifier.enqueue("watchers", Trigger.WATCH_EVENT)
    return ctl
