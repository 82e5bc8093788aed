"""VirtualServices in the KCP → routes in the gateway, as Istio's control plane would do.

A controller on Istio's runtime (:func:`setup_route_sync`) pushes every VirtualService to
the gateway, debounced, whenever they or the :class:`ServiceRegistry` (cluster DNS for
the listeners the harness starts) change. One the gateway cannot map is left out and
reported in :attr:`VirtualServiceSync.invalid`, as Istio skips a bad route.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import UserDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kubernetes_asyncio.client import ApiClient

from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.errors import GatewayError
from harness.kcp.lifecycle_manager.queue.reconciler import WATCH_DRIVEN, Outcome
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime, Informer
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import VIRTUAL_SERVICES, get
from watcher.render.envoy import routes_from_virtual_service
from watcher.render.errors import RenderError

logger = logging.getLogger("harness.kcp.gateway.routes")

GROUP, VERSION, PLURAL = VIRTUAL_SERVICES.group, VIRTUAL_SERVICES.version, VIRTUAL_SERVICES.plural

Address = tuple[str, int]


def service_key(service: str, namespace: str, port: int) -> str:
    """The destination a VirtualService names: ``<svc>.<ns>.svc.cluster.local:<port>``."""
    return f"{service}.{namespace}.svc.cluster.local:{port}"


class ServiceRegistry(UserDict[str, Address]):
    """Service DNS for the gateway: destination key → (ip, port); changes through
    :meth:`register` and :meth:`unregister` trigger a re-sync."""

    def __init__(self) -> None:
        super().__init__()
        self._subscribers: list[Callable[[], None]] = []

    def register(self, service: str, namespace: str, port: int, address: Address) -> str:
        """Route ``<service>.<namespace>.svc.cluster.local:<port>`` to ``address``."""
        key = service_key(service, namespace, port)
        if self.data.get(key) != address:
            self.data[key] = address
            self._notify()
        return key

    def unregister(self, service: str, namespace: str, port: int) -> None:
        if self.data.pop(service_key(service, namespace, port), None) is not None:
            self._notify()

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every change; returns the function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def _notify(self) -> None:
        for callback in list(self._subscribers):
            callback()


class Gateway(Protocol):
    async def update(
        self, virtual_services: list[Mapping[str, Any]], resolver: Mapping[str, Address]
    ) -> object: ...


ROUTES: Final = "istio-system/routes"
"""The one key of the route sync: every VirtualService goes to the gateway at once."""


@dataclass(eq=False)
class VirtualServiceSync:
    """The route sync's reconcile: the gateway's routes := the KCP's VirtualServices."""

    gateway: Gateway
    registry: ServiceRegistry
    informer: Informer
    applied: int = field(default=0, init=False)
    """How many times the gateway accepted the current set."""
    last_error: Exception | None = field(default=None, init=False)
    """Why the last push to the gateway failed (None after a success)."""
    invalid: dict[str, str] = field(default_factory=dict, init=False)
    """``<ns>/<name>`` → why that VirtualService was left out."""

    async def wait_listed(self) -> None:
        """Until the first list has been taken in (bound it with ``asyncio.timeout``)."""
        await self.informer.synced.wait()

    async def __call__(self, _: str) -> Outcome:
        """Push every mappable VirtualService; a refusal waits for the next change."""
        services: list[Mapping[str, Any]] = []
        invalid: dict[str, str] = {}
        objects = self.informer.objects
        for key in sorted(objects):
            try:
                routes_from_virtual_service(objects[key])
            except RenderError as exc:
                invalid[key] = str(exc)
                continue
            services.append(objects[key])
        for key in invalid.keys() - self.invalid.keys():
            logger.warning("VirtualService %s left out: %s", key, invalid[key])
        self.invalid = invalid
        try:
            await self.gateway.update(services, dict(self.registry))
        except GatewayError as exc:
            logger.warning("gateway refused %d VirtualService(s): %s", len(services), exc)
            self.last_error = exc
        else:
            self.applied += 1
            logger.debug("pushed %d VirtualService(s)", len(services))
            self.last_error = None
        return Outcome.SUCCESS


def setup_route_sync(
    runtime: ControllerRuntime,
    gateway: Gateway,
    registry: ServiceRegistry,
    *,
    debounce: float = 0.05,
) -> VirtualServiceSync:
    """VirtualServices (all namespaces) and registry changes → one push, ``debounce`` s
    after the first change of a burst; the first push once they are listed."""
    sync = VirtualServiceSync(gateway, registry, runtime.informer(VIRTUAL_SERVICES))
    queue = runtime.controller("virtualservice-sync", sync, intervals=WATCH_DRIVEN, log=None)

    def changed(*_: object) -> None:
        queue.enqueue_after(ROUTES, Trigger.WATCH_EVENT, debounce)

    runtime.watch(VIRTUAL_SERVICES, changed)
    unsubscribe = registry.subscribe(changed)
    runtime.stack.callback(unsubscribe)
    return sync


async def wait_route(
    api: ApiClient,
    gateway: EnvoyGateway,
    name: str,
    namespace: str,
    *,
    present: bool,
    within: float = 15.0,
) -> None:
    """Until the Watcher's VirtualService exists (or not) in the KCP and Envoy confirmed
    that route (or its absence)."""
    route = f"{namespace}/{name}"
    async with asyncio.timeout(within):
        while True:
            vs = await get(api, VIRTUAL_SERVICES, name, namespace)
            config = gateway.config
            routed = config is not None and f'"{route}"' in json.dumps(config.rds())
            if (vs is not None) == present and routed == present:
                return
            await asyncio.sleep(0.05)
