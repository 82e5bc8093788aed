"""harness.aio.Service: what start acquired is given back in reverse, also after a failure."""

from __future__ import annotations

import asyncio

import pytest

from harness.aio import Service


class Steps(Service):
    """Acquires ``a``, ``b`` and a task, then fails if told to."""

    def __init__(self, log: list[str], *, fail: BaseException | None = None) -> None:
        self.log = log
        self.fail = fail
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.stack.callback(self.log.append, "undo a")
        self.stack.callback(self.log.append, "undo b")
        self.task = self.spawn(asyncio.sleep(3600), "sleeper")
        self.stack.callback(self.log.append, "undo c")
        if self.fail is not None:
            raise self.fail


async def test_leaving_unwinds_newest_first_and_cancels_the_tasks() -> None:
    log: list[str] = []
    async with Steps(log) as steps:
        assert log == [] and steps.task is not None and not steps.task.done()
    assert log == ["undo c", "undo b", "undo a"]
    assert steps.task.cancelled()


@pytest.mark.parametrize("failure", [RuntimeError("boom"), asyncio.CancelledError()])
async def test_a_failed_start_is_rolled_back_before_the_error_propagates(
    failure: BaseException,
) -> None:
    log: list[str] = []
    steps = Steps(log, fail=failure)
    with pytest.raises(type(failure)):
        async with steps:
            pytest.fail("entered")
    assert log == ["undo c", "undo b", "undo a"]
    assert steps.task is not None and steps.task.cancelled()
    await steps.close()  # a second time: nothing left
    assert len(log) == 3


class Incarnations(Service):
    """A part that restarts: ``stop`` ends one incarnation, the stack holds the rest."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.running = False

    async def start(self) -> None:
        if not self.log:
            self.stack.callback(self.log.append, "session closed")
        self.log.append("up")
        self.running = True

    async def stop(self) -> None:
        if self.running:
            self.log.append("down")
        self.running = False


async def test_a_restartable_part_is_stopped_then_unwound() -> None:
    log: list[str] = []
    async with Incarnations(log) as part:
        await part.stop()
        await part.start()
    assert log == ["up", "down", "up", "down", "session closed"]
