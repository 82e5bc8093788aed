"""What the environment asks of a manager's listener, whichever implementation serves it.

Ours runs in the harness process (:class:`~harness.kcp.lifecycle_manager.events.ListenerHost`),
upstream's Go listener as a process of its own
(:class:`~harness.kcp.listener_process.ListenerProcess`). Both hand every accepted event to
the same callback (:func:`deliver`), keep their port across ``stop``/``start`` (so the
gateway's route stays valid) and sum their metrics over incarnations (:func:`summed_series`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

from harness.aio import stop_tasks
from watcher.listener import ListenerEvent

logger = logging.getLogger("harness.kcp.listeners")

Implementation = Literal["ours", "upstream"]
"""Which listener serves a component: ``watcher.listener`` or upstream's Go package."""
EventCallback = Callable[[ListenerEvent], Awaitable[None]]
Series = dict[tuple[tuple[str, str], ...], float]
"""Labels (sorted) → value."""


def summed_series(scrapes: Iterable[Iterable[Any]], name: str) -> Series:
    """Every series named ``name`` in ``scrapes`` (one per incarnation; Prometheus samples
    as parsed or as collected), summed."""
    out: Series = {}
    for samples in scrapes:
        for sample in samples:
            if sample.name == name:
                key = tuple(sorted(sample.labels.items()))
                out[key] = out.get(key, 0.0) + sample.value
    return out


class EventCounts:
    """Events handed to the callback, and how many of those calls failed."""

    consumed = 0
    callback_errors = 0

    async def deliver(
        self, events: AsyncIterator[ListenerEvent], callback: EventCallback, name: str
    ) -> None:
        """Every event to ``callback``, in order; a failing callback is logged and counted
        and the next event is taken (the SKR already got its answer)."""
        async for event in events:
            self.consumed += 1
            try:
                await callback(event)
            except Exception:
                self.callback_errors += 1
                logger.exception("%s: handling event %s failed", name, event)


async def drain(task: asyncio.Task[None] | None, within: float, name: str) -> None:
    """Until ``task`` handed over its incarnation's events (at most ``within`` s); stop it."""
    if task is None:
        return
    try:
        async with asyncio.timeout(within):
            await asyncio.wait({task})
    except TimeoutError:
        logger.warning("%s: accepted events not handed over within %g s", name, within)
    await stop_tasks([task])


class ManagerListener(Protocol):
    """A component's listener behind the gateway: restartable on the same port."""

    @property
    def component(self) -> str: ...

    @property
    def implementation(self) -> Implementation: ...

    @property
    def running(self) -> bool: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str:
        """``https://`` (ours behind the mesh) or ``http://`` base URL of its own port."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> object: ...

    async def restart(self) -> None: ...

    async def read_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """One metric now, summed over incarnations (0 when never observed)."""
        ...

    def samples(self, name: str) -> Series: ...
