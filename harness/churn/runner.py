"""Execute a churn plan: each mutation at its offset, through a caller-supplied write.

Thin on purpose: the scenario runner supplies ``write(mutation)`` (the real kube call) and
the clock. Writes to one object run in plan order, one after the other; writes to
different objects may overlap (at most ``max_in_flight``). A failed write (a conflict, a
404, a timeout) is recorded with its error and the churn goes on. Mutations whose time
comes after ``duration + slack`` seconds (the runner fell behind) are not sent; they are
returned as ``skipped``, so no more than the plan is ever written. Cancelling the run
cancels writes in flight (recorded as failed with ``error="cancelled"``) and re-raises.

Times (``sent_at``, ``acked_at``) come from ``clock``; pass the clock that timestamps the
received events (the listeners' ``received_at``), or the ground truth compares apples with
oranges.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.aio import spawn, stop_tasks
from harness.churn.model import (
    ExecutedMutation,
    Mutation,
    ObjectId,
    WriteFailed,
    WriteFailure,
    frozen_map,
    labels_of,
)

logger = logging.getLogger("harness.churn")

Write = Callable[[Mutation], Awaitable[Any]]
"""Sends one mutation; may return the object the API server answered (labels are taken
from it), raises on failure."""


@dataclass(frozen=True)
class ChurnRun:
    executed: tuple[ExecutedMutation, ...]
    skipped: tuple[Mutation, ...]
    started_at: float

    @property
    def failed(self) -> tuple[ExecutedMutation, ...]:
        return tuple(e for e in self.executed if not e.ok)


async def run_churn(
    plan: Sequence[Mutation],
    write: Write,
    *,
    duration: float | None = None,
    slack: float = 5.0,
    max_in_flight: int = 8,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    on_executed: Callable[[ExecutedMutation], None] | None = None,
) -> ChurnRun:
    """Run ``plan``; ``duration`` defaults to the last offset. See the module doc."""
    if max_in_flight < 1:
        raise ValueError("max_in_flight must be at least 1")
    horizon = duration if duration is not None else max((m.at for m in plan), default=0.0)
    started = clock()
    cutoff = started + horizon + slack
    writes = _Writes(write, clock, asyncio.Semaphore(max_in_flight), on_executed)
    last: dict[ObjectId, asyncio.Task[None]] = {}
    tasks: list[asyncio.Task[None]] = []
    skipped: list[Mutation] = []
    try:
        for index, m in enumerate(plan):
            due = started + m.at
            now = clock()
            if due > now:
                await sleep(due - now)
            await writes.slots.acquire()
            if clock() > cutoff or due > cutoff:
                writes.slots.release()
                skipped.extend(plan[index:])
                logger.warning(
                    "churn fell behind: %d of %d mutations not sent by the deadline",
                    len(plan) - index,
                    len(plan),
                )
                break
            task = spawn(writes.one(m, last.get(m.object_id)), f"churn-{m.id}")
            last[m.object_id] = task
            tasks.append(task)
        if tasks:
            await asyncio.wait(tasks)
    except asyncio.CancelledError:
        await stop_tasks(tasks)
        raise
    executed = sorted(writes.executed, key=lambda e: e.id)
    return ChurnRun(tuple(executed), tuple(skipped), started)


@dataclass
class _Writes:
    """One run's writes: each after the previous write to its object, holding one of the
    ``slots`` (released when it ends), recorded as it ends."""

    write: Write
    clock: Callable[[], float]
    slots: asyncio.Semaphore
    on_executed: Callable[[ExecutedMutation], None] | None
    executed: list[ExecutedMutation] = field(default_factory=list)
    labels: dict[ObjectId, Mapping[str, str]] = field(default_factory=dict)

    def record(self, item: ExecutedMutation) -> None:
        self.executed.append(item)
        if self.on_executed is not None:
            self.on_executed(item)

    async def one(self, m: Mutation, previous: asyncio.Task[None] | None) -> None:
        try:
            if previous is not None:
                await asyncio.wait([previous])
            before = self.labels.get(m.object_id, m.labels_before)
            sent_at = self.clock()
            try:
                answer = await self.write(m)
            except asyncio.CancelledError:
                unknown = WriteFailure.UNKNOWN  # it may have reached the server
                cancelled = ExecutedMutation(
                    m, sent_at, self.clock(), False, "cancelled", before, before, unknown
                )
                self.record(cancelled)
                raise
            except Exception as exc:  # recorded, not fatal: the churn goes on
                failed = isinstance(exc, WriteFailed)
                error = str(exc) if failed else f"{type(exc).__name__}: {exc}"
                failure = exc.failure if isinstance(exc, WriteFailed) else WriteFailure.REFUSED
                logger.debug("churn write %s failed (%s): %s", m.describe(), failure, error)
                self.record(
                    ExecutedMutation(
                        m, sent_at, self.clock(), False, error, before, before, failure
                    )
                )
                return
            acked_at = self.clock()
            after = _labels_after(m, answer)
            self.labels[m.object_id] = after
            self.record(ExecutedMutation(m, sent_at, acked_at, True, "", before, after))
        finally:
            self.slots.release()


def _labels_after(m: Mutation, answer: Any) -> Mapping[str, str]:
    if m.operation == "delete":
        return frozen_map()
    if isinstance(answer, Mapping) and isinstance(answer.get("metadata"), Mapping):
        return frozen_map(labels_of(answer))
    return m.labels_after
