"""The async runner around the pure ``WorkQueue``: real clock, N workers, delayed adds.

``QueueRunner`` feeds the queue the event loop's clock, wakes workers when a key becomes
ready (now or at its delayed time), and hands each ``WorkItem`` to a handler. Its
guarantees come from the queue: a key is processed by one worker at a time and
waits in the queue at most once. Handler errors are logged and counted, never fatal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from harness.aio import Service, spawn, stop_tasks
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkItem, WorkQueue

logger = logging.getLogger("harness.kcp.lifecycle_manager.queue.runner")

K = TypeVar("K", bound=Hashable)
Handler = Callable[[WorkItem[K]], Awaitable[None]]


class QueueRunner(Generic[K], Service):
    """``async with QueueRunner(handler, workers=2) as runner: runner.add(key, trigger)``."""

    def __init__(
        self,
        handler: Handler[K],
        *,
        workers: int = 1,
        name: str = "queue",
        clock: Callable[[], float] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._handler = handler
        self._workers = workers
        self._name = name
        self._clock = clock
        self._queue: WorkQueue[K] = WorkQueue()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.handler_errors = 0

    def now(self) -> float:
        """The queue's clock (the event loop's ``time()`` unless one was injected)."""
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def add(self, key: K, trigger: Trigger) -> None:
        """Make ``key`` ready now (collapses with a pending entry)."""
        self._queue.add(key, trigger, self.now())
        self._wake.set()

    def add_after(self, key: K, trigger: Trigger, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending time for it wins."""
        self._queue.add_after(key, trigger, self.now() + max(0.0, delay))
        self._wake.set()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def processing(self) -> frozenset[K]:
        return self._queue.processing

    def next_wakeup(self) -> float | None:
        return self._queue.next_wakeup()

    async def _next(self) -> WorkItem[K]:
        while True:
            now = self.now()
            self._queue.promote(now)
            item = self._queue.get()
            if item is not None:
                if len(self._queue):
                    self._wake.set()  # more is ready: let another worker take it
                return item
            self._wake.clear()
            wakeup = self._queue.next_wakeup()
            try:
                async with asyncio.timeout(None if wakeup is None else max(0.0, wakeup - now)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _work(self) -> None:
        while True:
            item = await self._next()
            try:
                await self._handler(item)
            except Exception:
                self.handler_errors += 1
                logger.exception("%s: handler failed for %s", self._name, item.key)
            finally:
                self._queue.done(item.key)
                self._wake.set()

    async def start(self) -> None:
        if self._tasks:
            raise RuntimeError(f"{self._name} is already running")
        self._tasks = [
            spawn(self._work(), f"{self._name}-worker-{i}") for i in range(self._workers)
        ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await stop_tasks(tasks)
