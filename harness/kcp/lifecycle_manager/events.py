"""One manager's event listener that can be stopped and started again on the same port.

A :class:`~watcher.listener.Listener` cannot be restarted (its event stream ends when it
stops). :class:`ListenerHost` owns successive incarnations built from one
:class:`~watcher.listener.ListenerConfig`: the first binds the configured port (0 = a free
one) and later ones bind the port the first got, so the gateway's route stays valid. Each
incarnation gets its own :class:`EventConsumer` calling the same callback, so a consumer of
the host sees one uninterrupted flow across restarts. Metrics are summed over all
incarnations, so counters never go backwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from harness.aio import Service
from harness.errors import HarnessError
from watcher.listener import Listener, ListenerConfig, ListenerEvent

logger = logging.getLogger("harness.kcp.lifecycle_manager.events")

EventCallback = Callable[[ListenerEvent], Awaitable[None]]


class ListenerHostError(HarnessError, RuntimeError):
    """The listener is not running (or already is) when the call needs the other state."""


class EventConsumer(Service):
    """Hands every event of ``listener`` to ``callback``, one at a time, until stopped.

    The stream ends when the listener stops; a failing callback is logged and counted and
    the next event is taken (the SKR already got its 200).
    """

    def __init__(
        self,
        listener: Listener,
        callback: EventCallback,
        *,
        name: str | None = None,
    ) -> None:
        self._listener = listener
        self._callback = callback
        self._name = name or f"events-{listener.config.component}"
        self._task: asyncio.Task[None] | None = None
        self.consumed = 0
        self.callback_errors = 0

    async def _run(self) -> None:
        async for event in self._listener.events():
            self.consumed += 1
            try:
                await self._callback(event)
            except Exception:
                self.callback_errors += 1
                logger.exception("%s: handling event %s failed", self._name, event)

    async def start(self) -> None:
        self._task = self.spawn(self._run(), self._name)

    async def drained(self) -> None:
        """Until the stream ended (the listener stopped) and every accepted event was handled."""
        if self._task is not None:
            await asyncio.wait({self._task})


class ListenerHost(Service):
    """``async with ListenerHost(config, callback) as host:`` — then ``stop``/``start`` at will."""

    implementation: Final = "ours"

    def __init__(
        self,
        config: ListenerConfig,
        callback: EventCallback,
        *,
        drain_timeout: float = 5.0,
    ) -> None:
        self._config = config
        self._callback = callback
        self._drain_timeout = drain_timeout
        self._port = config.port
        self._listener: Listener | None = None
        self._consumer: EventConsumer | None = None
        self.incarnations: list[Listener] = []
        """Every listener this host started, oldest first (for metrics)."""

    @property
    def component(self) -> str:
        return self._config.component

    @property
    def running(self) -> bool:
        return self._listener is not None

    @property
    def listener(self) -> Listener:
        """The running incarnation."""
        if self._listener is None:
            raise ListenerHostError(f"listener {self.component!r} is not running")
        return self._listener

    @property
    def port(self) -> int:
        """The port every incarnation binds (known after the first start)."""
        if not self._port:
            raise ListenerHostError(f"listener {self.component!r} was never started")
        return self._port

    @property
    def url(self) -> str:
        """Base URL of the running incarnation (``https://`` when it serves TLS)."""
        return self.listener.url

    async def start(self) -> None:
        """Start a new incarnation on the same port and consume its events."""
        if self._listener is not None:
            raise ListenerHostError(f"listener {self.component!r} is already running")
        listener = Listener(dataclasses.replace(self._config, port=self._port))
        await listener.start()
        consumer = EventConsumer(
            listener, self._callback, name=f"events-{self.component}-{len(self.incarnations)}"
        )
        await consumer.start()
        self._port = listener.port
        self._listener, self._consumer = listener, consumer
        self.incarnations.append(listener)

    async def stop(self) -> None:
        """Stop the listener (new requests are refused) after its accepted events are handled."""
        listener, consumer = self._listener, self._consumer
        self._listener = self._consumer = None
        if listener is not None:
            await listener.stop()
        if consumer is not None:
            try:
                async with asyncio.timeout(self._drain_timeout):
                    await consumer.drained()
            except TimeoutError:
                logger.warning("%s: accepted events not handled within the drain timeout", self)
            await consumer.stop()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample summed over every incarnation (0 when never observed)."""
        return sum(listener.metrics.value(name, labels) for listener in self.incarnations)

    async def read_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """:meth:`metric`, for callers that read any implementation's metrics."""
        return self.metric(name, dict(labels) if labels else None)

    def samples(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every labelled sample named ``name``, summed over incarnations (labels sorted)."""
        out: dict[tuple[tuple[str, str], ...], float] = {}
        for listener in self.incarnations:
            for family in listener.metrics.registry.collect():
                for sample in family.samples:
                    if sample.name == name:
                        key = tuple(sorted(sample.labels.items()))
                        out[key] = out.get(key, 0.0) + sample.value
        return out

    def __repr__(self) -> str:
        return f"ListenerHost({self.component!r}, port={self._port}, running={self.running})"
