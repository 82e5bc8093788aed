"""The async runner around the pure work queue: real clock, workers, dedup, delays."""

from __future__ import annotations

import asyncio

import pytest

from harness.kcp.lifecycle_manager.queue.runner import QueueRunner
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkItem

S, W, R = Trigger.STARTUP, Trigger.WATCH_EVENT, Trigger.REQUEUE_TIMER


class Recorder:
    """A handler that records items and can be held at a gate per key."""

    def __init__(self) -> None:
        self.items: list[WorkItem[str]] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.entered: dict[str, asyncio.Event] = {}
        self.running: set[str] = set()
        self.overlaps = 0
        self.changed = asyncio.Event()

    async def __call__(self, item: WorkItem[str]) -> None:
        if item.key in self.running:
            self.overlaps += 1
        self.running.add(item.key)
        self.entered.setdefault(item.key, asyncio.Event()).set()
        try:
            gate = self.gates.get(item.key)
            if gate is not None:
                await gate.wait()
            self.items.append(item)
            self.changed.set()
        finally:
            self.running.discard(item.key)

    async def wait_count(self, n: int, within: float = 2.0) -> None:
        async with asyncio.timeout(within):
            while len(self.items) < n:
                self.changed.clear()
                await self.changed.wait()


async def test_duplicates_collapse_and_a_key_readded_while_processing_runs_again() -> None:
    rec = Recorder()
    rec.gates["a"] = asyncio.Event()
    rec.entered["a"] = asyncio.Event()
    async with QueueRunner(rec, workers=3) as runner:
        runner.add("a", S)
        await asyncio.wait_for(rec.entered["a"].wait(), 2)
        for _ in range(5):
            runner.add("a", W)  # while processing: collapse into one re-run
        runner.add("a", R)
        rec.gates["a"].set()
        await rec.wait_count(2)
        assert len(runner) == 0
    assert [i.triggers for i in rec.items] == [frozenset({S}), frozenset({W, R})]
    assert rec.overlaps == 0


async def test_pending_duplicates_collapse_with_merged_triggers() -> None:
    rec = Recorder()
    runner: QueueRunner[str] = QueueRunner(rec)
    runner.add("a", S)  # not started yet: all three wait in the queue as one entry
    runner.add("a", W)
    runner.add("b", W)
    async with runner:
        await rec.wait_count(2)
    assert [(i.key, i.triggers) for i in rec.items] == [
        ("a", frozenset({S, W})),
        ("b", frozenset({W})),
    ]


async def test_delayed_add_waits_and_an_earlier_time_wins() -> None:
    rec = Recorder()
    async with QueueRunner(rec) as runner:
        start = runner.now()
        runner.add_after("a", R, 10.0)
        runner.add_after("a", R, 0.05)  # earlier wins
        await rec.wait_count(1)
        waited = runner.now() - start
    assert 0.05 <= waited < 1.0
    assert rec.items[0].triggers == {R}
    assert rec.items[0].queued_at == pytest.approx(start + 0.05, abs=0.01)


async def test_workers_run_different_keys_concurrently() -> None:
    rec = Recorder()
    release = asyncio.Event()
    for key in "abc":
        rec.gates[key] = release
    async with QueueRunner(rec, workers=3) as runner:
        for key in "abc":
            runner.add(key, S)
        async with asyncio.timeout(2):
            while len(rec.running) < 3:
                await asyncio.sleep(0.005)
        release.set()
        await rec.wait_count(3)


async def test_a_failing_handler_is_counted_and_the_runner_continues() -> None:
    seen: list[str] = []
    done = asyncio.Event()

    async def handler(item: WorkItem[str]) -> None:
        seen.append(item.key)
        if item.key == "bad":
            raise RuntimeError("boom")
        done.set()

    async with QueueRunner(handler) as runner:
        runner.add("bad", S)
        runner.add("good", S)
        await asyncio.wait_for(done.wait(), 2)
        assert runner.handler_errors == 1
    assert seen == ["bad", "good"]


async def test_stop_cancels_a_handler_in_progress() -> None:
    rec = Recorder()
    rec.gates["a"] = asyncio.Event()  # never released
    rec.entered["a"] = asyncio.Event()
    runner: QueueRunner[str] = QueueRunner(rec, workers=2)
    async with runner:
        runner.add("a", S)
        await asyncio.wait_for(rec.entered["a"].wait(), 2)
    assert rec.items == []
    assert runner.processing == frozenset()  # done() ran on cancellation


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="workers"):
        QueueRunner(Recorder(), workers=0)
