"""The Watcher controller on the KCP: Watcher CR → VirtualService, status, finalizer.

For each ``operator.kyma-project.io/v1beta2`` Watcher (all namespaces by default): add the
finalizer ``operator.kyma-project.io/watcher``; report ``Processing`` for a generation not
yet handled; validate (``parse_watcher``) and render (``render_virtual_service`` with the
Gateways its ``spec.gateway.selector`` matches); apply the VirtualService (owned by the
Watcher); report ``Ready`` with condition ``VirtualService=True``. An invalid Watcher (or
one no Gateway matches) gets ``Error`` with the reasons in the condition message and no
VirtualService. On deletion the VirtualService is deleted explicitly (these API servers run
no garbage collector) and the finalizer removed. Gateway changes re-reconcile every Watcher.

``on_change`` callbacks receive the current valid Watchers (sorted by namespace/name)
whenever that list changes, so the SKR installer can re-render every SKR's webhook
configuration at once (bursts coalesce into one call).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.aio import Service
from harness.kcp.lifecycle_manager.queue.runner import QueueRunner
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkItem
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
from harness.kube.watch import watch_objects
from watcher.errors import InvalidWatcher
from watcher.render.virtualservice import render_virtual_service
from watcher.render.watcher_cr import Watcher, parse_watcher

logger = logging.getLogger("harness.kcp.lifecycle_manager.watcher_controller")

FINALIZER = "operator.kyma-project.io/watcher"
CONDITION_TYPE = "VirtualService"
FIELD_MANAGER = "watcher-controller"

WatchersChanged = Callable[[list[Watcher]], Awaitable[None]]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(
    current: Mapping[str, Any] | None,
    *,
    state: str,
    ready: bool,
    reason: str,
    message: str,
    generation: int,
) -> dict[str, Any]:
    """The Watcher status to write; keeps lastTransitionTime while the condition holds."""
    status = "True" if ready else "False"
    old = next(
        (c for c in (current or {}).get("conditions") or [] if c.get("type") == CONDITION_TYPE),
        None,
    )
    transition = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {
        "state": state,
        "observedGeneration": generation,
        "conditions": [
            {
                "type": CONDITION_TYPE,
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": transition or _now(),
            }
        ],
    }


def valid_watcher(obj: Mapping[str, Any]) -> Watcher | None:
    """The parsed Watcher if it is valid and not being deleted."""
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return None
    try:
        return parse_watcher(obj)
    except InvalidWatcher:
        return None


class WatcherController(Service):
    """``async with WatcherController(api) as ctl:`` — returns once Gateways and Watchers
    are listed (their first reconciles are then queued)."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str | None = None,
        field_manager: str = FIELD_MANAGER,
        retry_after: float = 1.0,
        sync_timeout: float = 30.0,
    ) -> None:
        self._api = api
        self.namespace = namespace
        self._field_manager = field_manager
        self._retry_after = retry_after
        self._sync_timeout = sync_timeout
        self.on_change: list[WatchersChanged] = []
        self._watchers: dict[str, Obj] = {}
        self._gateways: dict[str, Obj] = {}
        self._valid: dict[str, Watcher] = {}
        self._runner: QueueRunner[str] = QueueRunner(self._handle, name="watcher-controller")
        self._gateways_synced = asyncio.Event()
        self._watchers_synced = asyncio.Event()
        self._notify = asyncio.Event()
        self._published: frozenset[str] = frozenset()
        self._published_changed = asyncio.Condition()
        self.reconciles = 0
        self.errors = 0
        self.notifications = 0

    def watchers(self) -> list[Watcher]:
        """The current valid Watchers, sorted by namespace/name (list order)."""
        return [self._valid[k] for k in sorted(self._valid)]

    # watch feeds -----------------------------------------------------------------------

    async def _watch_gateways(self) -> None:
        async for kind, obj in watch_objects(self._api, GATEWAYS):
            if kind == "SYNCED":
                self._gateways_synced.set()
                continue
            if kind == "DELETED":
                self._gateways.pop(object_key(obj), None)
            else:
                self._gateways[object_key(obj)] = obj
            for key in self._watchers:
                self._runner.add(key, Trigger.WATCH_EVENT)

    async def _watch_watchers(self) -> None:
        async for kind, obj in watch_objects(self._api, WATCHERS, namespace=self.namespace):
            if kind == "SYNCED":
                self._watchers_synced.set()
                self._notify.set()  # the installer gets the initial list too
                continue
            key = object_key(obj)
            if kind == "DELETED":
                self._watchers.pop(key, None)
            else:
                self._watchers[key] = obj
                self._runner.add(key, Trigger.WATCH_EVENT)
            self._update_valid(key)

    def _update_valid(self, key: str) -> None:
        obj = self._watchers.get(key)
        watcher = valid_watcher(obj) if obj is not None else None
        if watcher == self._valid.get(key):
            return
        if watcher is None:
            self._valid.pop(key, None)
        else:
            self._valid[key] = watcher
        self._notify.set()

    async def _notifier(self) -> None:
        while True:
            await self._notify.wait()
            self._notify.clear()
            watchers = self.watchers()
            self.notifications += 1
            for callback in list(self.on_change):
                try:
                    await callback(watchers)
                except Exception:
                    self.errors += 1
                    logger.exception("on_change callback %r failed", callback)
            async with self._published_changed:
                self._published = frozenset(f"{w.namespace}/{w.name}" for w in watchers)
                self._published_changed.notify_all()

    async def _unpublished(self, key: str) -> None:
        """Until the ``on_change`` callbacks have run with a set that lacks ``key``.

        Break after make: SKRs stop sending a deleted Watcher's events before its route
        goes, so no event meets a 404 at the gateway. Bounded; a stuck callback only
        delays the deletion by ``sync_timeout``.
        """
        try:
            async with asyncio.timeout(self._sync_timeout), self._published_changed:
                await self._published_changed.wait_for(lambda: key not in self._published)
        except TimeoutError:
            logger.warning(
                "SKRs still wired for %s after %g s; removing its route anyway",
                key,
                self._sync_timeout,
            )

    # reconcile -------------------------------------------------------------------------

    async def _handle(self, item: WorkItem[str]) -> None:
        try:
            await self.reconcile(item.key)
        except Conflict as exc:
            logger.debug("%s changed meanwhile, the next event reconciles it: %s", item.key, exc)
        except KubeError as exc:
            self.errors += 1
            logger.warning("reconcile of Watcher %s failed, retrying: %s", item.key, exc)
            self._runner.add_after(item.key, Trigger.REQUEUE_TIMER, self._retry_after)

    async def reconcile(self, key: str) -> None:
        """Bring the VirtualService and status of Watcher ``key`` ("ns/name") in line."""
        obj = self._watchers.get(key)
        if obj is None:
            return
        self.reconciles += 1
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                await self._unpublished(key)
                await self._delete_virtual_service(obj)
                finalizers.remove(FINALIZER)
                rv = meta["resourceVersion"]
                patch = {"metadata": {"finalizers": finalizers, "resourceVersion": rv}}
                await merge_patch(self._api, WATCHERS, name, namespace, patch)
                logger.info("Watcher %s deleted: VirtualService removed, finalizer released", key)
            return
        if FINALIZER not in finalizers:
            added = [*finalizers, FINALIZER]
            patch = {"metadata": {"finalizers": added, "resourceVersion": meta["resourceVersion"]}}
            obj = await merge_patch(self._api, WATCHERS, name, namespace, patch)
        generation = int(obj["metadata"].get("generation") or 0)
        status = obj.get("status") or {}
        if status.get("observedGeneration") != generation or not status.get("state"):
            obj = await self._set_status(
                obj,
                state="Processing",
                ready=False,
                reason="Processing",
                message="rendering the VirtualService",
            )
        try:
            watcher = parse_watcher(obj)
            virtual_service = render_virtual_service(watcher, list(self._gateways.values()))
        except InvalidWatcher as exc:
            await self._delete_virtual_service(obj)
            await self._set_status(
                obj, state="Error", ready=False, reason="Invalid", message=str(exc)
            )
            return
        await apply(self._api, VIRTUAL_SERVICES, virtual_service, field_manager=self._field_manager)
        route = virtual_service["spec"]["http"][0]
        prefix = route["match"][0]["uri"]["prefix"]
        destination = route["route"][0]["destination"]
        await self._set_status(
            obj,
            state="Ready",
            ready=True,
            reason="Ready",
            message=f"VirtualService {key} routes {prefix} to {destination['host']}:"
            f"{destination['port']['number']} via {', '.join(virtual_service['spec']['gateways'])}",
        )

    async def _set_status(
        self, obj: Obj, *, state: str, ready: bool, reason: str, message: str
    ) -> Obj:
        meta = obj["metadata"]
        current = obj.get("status") or {}
        status = desired_status(
            current,
            state=state,
            ready=ready,
            reason=reason,
            message=message,
            generation=int(meta.get("generation") or 0),
        )
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

    # lifecycle -------------------------------------------------------------------------

    async def _wait(self, event: asyncio.Event, what: str) -> None:
        try:
            async with asyncio.timeout(self._sync_timeout):
                await event.wait()
        except TimeoutError:
            raise KubeError(
                f"{what} not listed within {self._sync_timeout:g} s; are the Watcher and "
                "Istio CRDs applied (fixtures/crds)? see harness.kube warnings"
            ) from None

    async def start(self) -> None:
        await self.stack.enter_async_context(self._runner)
        self.spawn(self._watch_gateways(), "watcher-controller-gateways")
        await self._wait(self._gateways_synced, "Gateways")
        self.spawn(self._watch_watchers(), "watcher-controller-watchers")
        self.spawn(self._notifier(), "watcher-controller-notifier")
        await self._wait(self._watchers_synced, "Watchers")
