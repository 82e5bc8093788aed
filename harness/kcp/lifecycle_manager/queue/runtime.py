"""One controller runtime for every KCP controller: shared informers, controllers, runnables.

controller-runtime's manager as KLM uses it: a controller's setup function asks for a
:meth:`~ControllerRuntime.controller`, :meth:`~ControllerRuntime.watch`\\ es a shared
:class:`Informer` (one list+watch per resource and namespace, as the manager's cache) and
:meth:`~ControllerRuntime.add`\\ s what else runs as long as the manager. ``async with``
starts the informers and waits for their caches, then the controllers, then the runnables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.aio import Service
from harness.kcp.lifecycle_manager.queue.reconciler import (
    ReconcileFn,
    Reconciler,
    RequeueIntervals,
)
from harness.kube import KubeError, Obj, Resource, merge_patch, object_key
from harness.kube.watch import watch_objects

Handler = Callable[[str, Obj], None]
"""``(kind, obj)``: ``ADDED``/``MODIFIED``/``DELETED`` with the object, ``SYNCED`` after a
(re-)list has been reported in full."""


async def set_finalizers(
    api: ApiClient, resource: Resource, obj: Mapping[str, Any], finalizers: Sequence[str]
) -> Obj:
    """``obj`` with ``finalizers``, written only over the version read (else ``Conflict``)."""
    meta = obj["metadata"]
    patch = {
        "metadata": {"finalizers": list(finalizers), "resourceVersion": meta["resourceVersion"]}
    }
    return await merge_patch(api, resource, meta["name"], meta["namespace"], patch)


@dataclass(eq=False)
class Informer(Service):
    """One list+watch of ``resource`` (in ``namespace``, or all), its store and handlers."""

    api: ApiClient
    resource: Resource
    namespace: str | None = None
    sync_timeout: float = 30.0
    objects: dict[str, Obj] = field(default_factory=dict, init=False)
    """``<ns>/<name>`` → the object as last seen."""
    handlers: list[Handler] = field(default_factory=list, init=False)
    synced: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    async def _run(self) -> None:
        async for kind, obj in watch_objects(self.api, self.resource, namespace=self.namespace):
            if kind == "SYNCED":
                self.synced.set()
            elif kind == "DELETED":
                self.objects.pop(object_key(obj), None)
            else:
                self.objects[object_key(obj)] = obj
            for handle in list(self.handlers):
                handle(kind, obj)

    async def start(self) -> None:
        self.spawn(self._run(), f"informer-{self.resource.plural}")
        try:
            async with asyncio.timeout(self.sync_timeout):
                await self.synced.wait()
        except TimeoutError:
            raise KubeError(
                f"{self.resource.plural} in {self.namespace or 'all namespaces'} not listed "
                f"within {self.sync_timeout:g} s; are the CRDs applied (fixtures/crds)? "
                "see harness.kube warnings"
            ) from None


class ControllerRuntime(Service):
    """``mgr = ControllerRuntime(api); setup_x(mgr, ...); async with mgr: ...``."""

    def __init__(self, api: ApiClient, *, clock: Callable[[], float] | None = None) -> None:
        self.api = api
        self._clock = clock
        self._informers: dict[tuple[Resource, str | None], Informer] = {}
        self.controllers: dict[str, Reconciler] = {}
        self._runnables: list[AbstractAsyncContextManager[Any]] = []
        self.on_synced: list[Callable[[], None]] = []
        """Called once the caches have synced and the controllers run (before the
        runnables): a controller's startup, e.g. every Kyma queued."""

    def informer(self, resource: Resource, namespace: str | None = None) -> Informer:
        """The shared informer of ``resource`` in ``namespace`` (created on first use)."""
        key = (resource, namespace)
        if key not in self._informers:
            self._informers[key] = Informer(self.api, resource, namespace)
        return self._informers[key]

    def watch(self, resource: Resource, handler: Handler, namespace: str | None = None) -> Informer:
        """Call ``handler`` with every event of ``resource``'s informer; the informer."""
        informer = self.informer(resource, namespace)
        informer.handlers.append(handler)
        return informer

    def controller(
        self,
        name: str,
        reconcile: ReconcileFn,
        *,
        intervals: RequeueIntervals,
        workers: int = 1,
        log: logging.Logger | None = None,
    ) -> Reconciler:
        """A controller named ``name`` (its queue, workers, requeue rules and record)."""
        if name in self.controllers:
            raise ValueError(f"controller {name!r} is already set up")
        self.controllers[name] = Reconciler(
            reconcile, name=name, workers=workers, intervals=intervals, clock=self._clock, log=log
        )
        return self.controllers[name]

    def add(self, runnable: AbstractAsyncContextManager[Any]) -> None:
        """Run ``runnable`` while the runtime runs (after the controllers start)."""
        self._runnables.append(runnable)

    async def start(self) -> None:
        for informer in self._informers.values():
            await self.stack.enter_async_context(informer)
        for controller in self.controllers.values():
            await self.stack.enter_async_context(controller)
        for call in self.on_synced:
            call()
        for runnable in self._runnables:
            await self.stack.enter_async_context(runnable)
