"""VirtualServices in the KCP → routes in the gateway, as Istio's control plane would do.

:class:`VirtualServiceSync` lists and watches ``networking.istio.io/v1beta1``
VirtualServices in all namespaces (re-listing on 410 Gone and after watch errors, with a
bounded backoff) and pushes the current set to the gateway, debounced, whenever it or the
:class:`ServiceRegistry` changes. The registry stands in for cluster DNS: the harness
registers ``<svc>.<ns>.svc.cluster.local:<port>`` → the real loopback address when it
starts a listener.

A VirtualService the gateway cannot map (e.g. a regex match) is left out and reported in
:attr:`VirtualServiceSync.invalid`, as Istio skips a bad route instead of dropping all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self

import aiohttp
from kubernetes_asyncio.client import ApiClient, ApiException, CustomObjectsApi
from kubernetes_asyncio.watch import Watch

from harness.kcp.gateway import GatewayError
from watcher.render.envoy import routes_from_virtual_service
from watcher.render.errors import RenderError

logger = logging.getLogger("harness.kcp.gateway_sync")

GROUP, VERSION, PLURAL = "networking.istio.io", "v1beta1", "virtualservices"

Address = tuple[str, int]


def service_key(service: str, namespace: str, port: int) -> str:
    """The destination a VirtualService names: ``<svc>.<ns>.svc.cluster.local:<port>``."""
    return f"{service}.{namespace}.svc.cluster.local:{port}"


class ServiceRegistry(Mapping[str, Address]):
    """Service DNS for the gateway: destination key → (ip, port); changes trigger a re-sync."""

    def __init__(self) -> None:
        self._addresses: dict[str, Address] = {}
        self._subscribers: list[Callable[[], None]] = []

    def register(self, service: str, namespace: str, port: int, address: Address) -> str:
        """Route ``<service>.<namespace>.svc.cluster.local:<port>`` to ``address``."""
        key = service_key(service, namespace, port)
        if self._addresses.get(key) != address:
            self._addresses[key] = address
            self._notify()
        return key

    def unregister(self, service: str, namespace: str, port: int) -> None:
        if self._addresses.pop(service_key(service, namespace, port), None) is not None:
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

    def __getitem__(self, key: str) -> Address:
        return self._addresses[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._addresses)

    def __len__(self) -> int:
        return len(self._addresses)


class Gateway(Protocol):
    async def update(
        self, virtual_services: list[Mapping[str, Any]], resolver: Mapping[str, Address]
    ) -> object: ...


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.1
    maximum: float = 5.0


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class VirtualServiceSync:
    """Keeps the gateway's routes equal to the KCP's VirtualServices; use as ``async with``."""

    def __init__(
        self,
        api: ApiClient,
        gateway: Gateway,
        registry: ServiceRegistry,
        *,
        debounce: float = 0.05,
        backoff: Backoff = Backoff(),
        watch_timeout_seconds: int = 60,
    ) -> None:
        self._api = CustomObjectsApi(api)
        self._gateway = gateway
        self._registry = registry
        self._debounce = debounce
        self._backoff = backoff
        self._watch_timeout = watch_timeout_seconds
        self._objects: dict[str, Mapping[str, Any]] = {}
        self._dirty = asyncio.Event()
        self._listed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: Callable[[], None] | None = None
        self.lists = 0
        """How many times the VirtualServices were (re-)listed."""
        self.applied = 0
        """How many times the gateway accepted the current set."""
        self.last_error: Exception | None = None
        """Why the last push to the gateway failed (None after a success)."""
        self.invalid: dict[str, str] = {}
        """``<ns>/<name>`` → why that VirtualService was left out."""

    @property
    def virtual_services(self) -> dict[str, Mapping[str, Any]]:
        """The VirtualServices currently known (``<ns>/<name>`` → object)."""
        return dict(self._objects)

    async def __aenter__(self) -> Self:
        self._unsubscribe = self._registry.subscribe(self._dirty.set)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._watch_loop(), name="virtualservice-watch"),
            loop.create_task(self._sync_loop(), name="virtualservice-sync"),
        ]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        for task in self._tasks:
            task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        for task, result in zip(self._tasks, results, strict=True):
            if isinstance(result, Exception):
                logger.error("task %s had failed", task.get_name(), exc_info=result)

    async def wait_listed(self) -> None:
        """Until the first list has been taken in (bound it with ``asyncio.timeout``)."""
        await self._listed.wait()

    # -- watch ------------------------------------------------------------------------

    async def _watch_loop(self) -> None:
        delay = self._backoff.initial
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    rv = await self._list()
                rv = await self._watch(rv)
                delay = self._backoff.initial
            except ApiException as exc:
                if exc.status == 410:
                    logger.info("VirtualService watch expired (410 Gone); listing again")
                    rv = None
                    continue
                logger.warning("VirtualService list/watch failed: %s %s", exc.status, exc.reason)
                rv, delay = None, await self._pause(delay)
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                logger.warning("VirtualService list/watch failed: %s", exc)
                rv, delay = None, await self._pause(delay)

    async def _pause(self, delay: float) -> float:
        await asyncio.sleep(delay)  # backoff before retrying the API server
        return min(delay * 2, self._backoff.maximum)

    async def _list(self) -> str:
        listing = await self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        self._objects = {_key(item): item for item in listing.get("items", [])}
        self.lists += 1
        self._listed.set()
        self._dirty.set()
        return str(listing["metadata"]["resourceVersion"])

    async def _watch(self, rv: str) -> str:
        """Watch from ``rv`` until the server ends the watch; return the last version seen."""
        async with Watch() as watch:
            async for event in watch.stream(
                self._api.list_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                resource_version=rv,
                timeout_seconds=self._watch_timeout,
                allow_watch_bookmarks=True,
            ):
                obj = event["raw_object"]
                rv = str(obj.get("metadata", {}).get("resourceVersion") or rv)
                kind = event["type"]
                logger.debug("watch event %s %s", kind, _key(obj))
                if kind == "DELETED":
                    self._objects.pop(_key(obj), None)
                elif kind in ("ADDED", "MODIFIED"):
                    self._objects[_key(obj)] = obj
                else:
                    continue
                self._dirty.set()
        return rv

    # -- sync -------------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        await self._listed.wait()
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self._debounce)  # let a burst of changes settle
            self._dirty.clear()
            await self._push()

    async def _push(self) -> None:
        services: list[Mapping[str, Any]] = []
        invalid: dict[str, str] = {}
        for key in sorted(self._objects):
            try:
                routes_from_virtual_service(self._objects[key])
            except RenderError as exc:
                invalid[key] = str(exc)
                continue
            services.append(self._objects[key])
        for key in invalid.keys() - self.invalid.keys():
            logger.warning("VirtualService %s left out: %s", key, invalid[key])
        self.invalid = invalid
        try:
            await self._gateway.update(services, dict(self._registry))
        except GatewayError as exc:
            logger.warning("gateway refused %d VirtualService(s): %s", len(services), exc)
            self.last_error = exc
        else:
            self.applied += 1
            logger.debug("pushed %d VirtualService(s)", len(services))
            self.last_error = None
