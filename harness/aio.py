"""Named background tasks, the one helper that stops them, and the start/stop base.

Every long-running harness component spawns its tasks with ``spawn`` (so they have names
in logs and leak reports) and stops them with ``stop_tasks``: cancel, wait up to a
deadline, log the stuck ones; a cancellation of the *caller* is never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from types import TracebackType
from typing import Any, Self

logger = logging.getLogger("harness.aio")


def spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    """Start ``coro`` as a task named ``name``."""
    return asyncio.get_running_loop().create_task(coro, name=name)


async def stop_tasks(tasks: Iterable[asyncio.Task[Any]], *, within: float = 5.0) -> None:
    """Cancel ``tasks`` and wait for them; log those that do not end within ``within`` seconds.

    A task that had already failed has its exception logged (it would otherwise be lost).
    If the caller itself is cancelled while waiting, the cancellation propagates.
    """
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    all_tasks = list(tasks)
    if pending:
        _, stuck = await asyncio.wait(pending, timeout=within)
        for task in stuck:
            logger.error("task %s did not stop within %.1f s", task.get_name(), within)
    for task in all_tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            logger.error("task %s had failed", task.get_name(), exc_info=task.exception())


class Service:
    """A component with ``start()``/``stop()`` that is also ``async with``-able.

    Subclasses implement the two methods; ``stop`` must be safe to call after a failed or
    partial ``start``, because leaving the context always calls it.
    """

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
