"""Named background tasks, the one helper that stops them, and the base of every owner.

Every long-running harness component spawns its tasks with ``spawn`` (so they have names
in logs and leak reports) and stops them with ``stop_tasks``: cancel, wait up to a
deadline, log the stuck ones; a cancellation of the *caller* is never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from typing import Any, Self

logger = logging.getLogger("harness.aio")


async def gather_all(
    aws: Iterable[Awaitable[Any]], several: Callable[[list[BaseException]], Exception]
) -> None:
    """Await all of ``aws`` together, each to its end even when another fails; then raise
    the one error, or ``several(errors)`` when more than one failed."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise several(errors) from errors[0]


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
    """One owner of what it starts — processes, tasks, sessions, directories — that gives
    all of it back however it ends; ``async with``-able.

    As controller-runtime's runnables and kopf's operator tasks: :meth:`start` acquires,
    registering the undo of each step on :attr:`stack` (``callback``,
    ``push_async_callback``, ``enter_async_context``) and running background work in tasks
    from :meth:`spawn`; :meth:`close` unwinds that stack newest first. A start that fails
    part-way (an error, a timeout, a cancellation) is closed by ``__aenter__`` before the
    error propagates, so nothing outlives a failed start and no subclass writes
    ``__aenter__``/``__aexit__``.

    :meth:`stop` is by default that unwinding. A part that fault scenarios take down and
    bring back overrides :meth:`start` (the first call acquires, a later one starts the
    next incarnation) and :meth:`stop` (ends one incarnation, keeping on the stack what
    lives as long as the object: ports, session, directory, log reader); :meth:`close`
    calls :meth:`stop` before unwinding, so such a part needs nothing else. ``stop`` must
    be safe after a failed or partial start and a second time; the default one is. A part
    whose end must not begin with that graceful stop overrides :meth:`close` (an API server
    is killed; an SKR's webhook configuration goes before its webhook).
    """

    _exit_stack: AsyncExitStack | None = None

    @property
    def stack(self) -> AsyncExitStack:
        """The undo of everything started so far (created on first use)."""
        if self._exit_stack is None:
            self._exit_stack = AsyncExitStack()
        return self._exit_stack

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Start ``coro`` as a task named ``name`` that unwinding cancels (:func:`stop_tasks`),
        in its place on the stack: before what was acquired ahead of it."""
        task = spawn(coro, name)
        self.stack.push_async_callback(stop_tasks, [task])
        return task

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> object:
        """Unwind the stack. A part that restarts overrides this (see the class); one that
        owns a process may return its exit code, hence ``object``."""
        await self._unwind()
        return None

    async def close(self) -> None:
        """The end: :meth:`stop`, then unwind what is left on the stack."""
        try:
            await self.stop()
        finally:
            await self._unwind()

    async def _unwind(self) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
