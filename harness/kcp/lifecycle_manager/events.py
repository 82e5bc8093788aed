"""One manager's event listener that can be stopped and started again on the same port.

A :class:`~watcher.listener.Listener` cannot be restarted (its event stream ends when it
stops), so :class:`ListenerHost` owns successive incarnations of one
:class:`~watcher.listener.ListenerConfig`: later ones bind the port the first got (the
gateway's route stays valid), all feed the same callback, and metrics are summed over
them so counters never go backwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Final

from harness.aio import Service, spawn
from harness.errors import HarnessError
from harness.kcp.listeners import EventCallback, EventCounts, Series, drain, summed_series
from watcher.listener import Listener, ListenerConfig


class ListenerHostError(HarnessError, RuntimeError):
    """The listener is not running (or already is) when the call needs the other state."""


class ListenerHost(EventCounts, Service):
    """``async with ListenerHost(config, callback) as host:`` — then ``stop``/``start`` at will."""

    implementation: Final = "ours"

    def __init__(
        self, config: ListenerConfig, callback: EventCallback, *, drain_timeout: float = 5.0
    ) -> None:
        self._config = config
        self._callback = callback
        self._drain_timeout = drain_timeout
        self._port = config.port
        self._listener: Listener | None = None
        self._consumer: asyncio.Task[None] | None = None
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
        return self.listener.url

    async def start(self) -> None:
        if self._listener is not None:
            raise ListenerHostError(f"listener {self.component!r} is already running")
        listener = Listener(dataclasses.replace(self._config, port=self._port))
        await listener.start()
        name = f"events-{self.component}-{len(self.incarnations)}"
        self._consumer = spawn(self.deliver(listener.events(), self._callback, name), name)
        self._port = listener.port
        self._listener = listener
        self.incarnations.append(listener)

    async def stop(self) -> None:
        """Stop the listener (new requests are refused) after its accepted events are handled."""
        listener, consumer = self._listener, self._consumer
        self._listener = self._consumer = None
        if listener is not None:
            await listener.stop()
        await drain(consumer, self._drain_timeout, f"listener {self.component}")

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample summed over every incarnation (0 when never observed)."""
        return sum(listener.metrics.value(name, labels) for listener in self.incarnations)

    async def read_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        return self.metric(name, dict(labels) if labels else None)

    def samples(self, name: str) -> Series:
        registries = [listener.metrics.registry for listener in self.incarnations]
        return summed_series(
            [[s for f in r.collect() for s in f.samples] for r in registries], name
        )

    def __repr__(self) -> str:
        return f"ListenerHost({self.component!r}, port={self._port}, running={self.running})"
