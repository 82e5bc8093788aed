"""The KLM stand-in without a cluster: requeue by outcome, record, event → Kyma routing."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from harness.kcp.lifecycle_manager.manager import (
    LifecycleManager,
    Outcome,
    Reconciler,
    ReconcileTimeout,
    RequeueIntervals,
    Trigger,
)
from watcher.listener import ListenerEvent
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent

S, W, R = Trigger.STARTUP, Trigger.WATCH_EVENT, Trigger.REQUEUE_TIMER
FAST = RequeueIntervals(success=0.05, busy=0.02, error=0.01, warning=0.03)
NEVER = RequeueIntervals(success=3600, busy=3600, error=3600, warning=3600)


def outcomes(*sequence: Outcome | Exception) -> Any:
    """A reconcile function returning (or raising) ``sequence`` in turn, then SUCCESS."""
    remaining = list(sequence)

    async def reconcile(key: str) -> Outcome:
        item = remaining.pop(0) if remaining else Outcome.SUCCESS
        if isinstance(item, Exception):
            raise item
        return item

    return reconcile


async def test_startup_then_requeue_after_the_success_interval() -> None:
    async with Reconciler(outcomes(), intervals=FAST) as rec:
        rec.enqueue("kcp-system/a", S)
        first = await rec.wait_for_reconcile("kcp-system/a", S, timeout=2)
        second = await rec.wait_for_reconcile("kcp-system/a", R, timeout=2)
    assert first.triggers == {S} and first.outcome is Outcome.SUCCESS
    assert second.at - first.at >= FAST.success - 0.005
    assert rec.counters["outcome:success"] >= 2 and rec.counters["enqueued:startup"] == 1


@pytest.mark.parametrize(
    ("result", "outcome", "interval"),
    [
        (Outcome.BUSY, Outcome.BUSY, FAST.busy),
        (Outcome.WARNING, Outcome.WARNING, FAST.warning),
        (RuntimeError("kcp down"), Outcome.ERROR, FAST.error),
    ],
)
async def test_requeue_interval_follows_the_outcome(
    result: Outcome | Exception, outcome: Outcome, interval: float
) -> None:
    intervals = RequeueIntervals(
        success=3600, busy=FAST.busy, error=FAST.error, warning=FAST.warning
    )
    async with Reconciler(outcomes(result), intervals=intervals) as rec:
        rec.enqueue("ns/k", S)
        first = await rec.wait_for_reconcile("ns/k", S, timeout=2)
        again = await rec.wait_for_reconcile("ns/k", R, timeout=2)
    assert first.outcome is outcome
    assert again.at - first.at >= interval - 0.005
    if isinstance(result, Exception):
        assert "kcp down" in first.error


async def test_gone_is_not_requeued() -> None:
    async with Reconciler(outcomes(Outcome.GONE), intervals=FAST) as rec:
        rec.enqueue("ns/gone", S)
        await rec.wait_for_reconcile("ns/gone", S, timeout=2)
        with pytest.raises(ReconcileTimeout):
            await rec.wait_for_reconcile("ns/gone", R, timeout=FAST.success * 3)


async def test_events_during_a_reconcile_collapse_into_one_more() -> None:
    gate, entered = asyncio.Event(), asyncio.Event()

    async def slow(key: str) -> Outcome:
        entered.set()
        await gate.wait()
        return Outcome.SUCCESS

    async with Reconciler(slow, intervals=NEVER) as rec:
        rec.enqueue("ns/a", S)
        await asyncio.wait_for(entered.wait(), 2)
        for _ in range(10):
            rec.enqueue("ns/a", W)
        gate.set()
        event_run = await rec.wait_for_reconcile("ns/a", W, timeout=2)
    assert [r.triggers for r in rec.reconciles("ns/a")] == [{S}, {W}]
    assert event_run.latency >= 0 and rec.counters["enqueued:watch-event"] == 10


async def test_wait_for_reconcile_reports_what_it_saw() -> None:
    async with Reconciler(outcomes(), intervals=NEVER) as rec:
        rec.enqueue("ns/a", S)
        await rec.wait_for_reconcile("ns/a", S, timeout=2)
        with pytest.raises(ReconcileTimeout, match=r"no reconcile of ns/a \(watch-event.*startup"):
            await rec.wait_for_reconcile("ns/a", W, timeout=0.05)
    assert rec.reconciles(trigger=W) == [] and len(rec.reconciles(since=0)) == 1
    assert rec.reconciles(since=time.time() + 60) == []


def kyma(name: str, runtime_id: str, namespace: str = "kcp-system") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kyma-project.io/runtime-id": runtime_id},
            "annotations": {"skr-domain": f"{name}.example.com"},
        }
    }


def event(runtime_id: str) -> ListenerEvent:
    watched = WatchEvent(
        ObjectKey("kyma-system", "default"),
        GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma"),
    )
    return ListenerEvent(runtime_id=runtime_id, event=watched, received_at=time.time())


async def test_events_route_to_the_one_kyma_with_the_runtime_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    klm = LifecycleManager(cast(Any, None), reconcile=outcomes(), intervals=NEVER)
    for obj in (kyma("a", "rt-a"), kyma("b", "rt-b"), kyma("c1", "rt-c"), kyma("c2", "rt-c")):
        klm.cache.apply("ADDED", obj)
    klm.cache.apply("ADDED", kyma("x", "rt-x", namespace="other"))
    caplog.set_level("INFO", logger="harness.kcp.lifecycle_manager.manager")
    async with klm.reconciler:
        await klm.handle_event(event("rt-a"))
        hit = await klm.wait_for_reconcile("kcp-system/a", W, timeout=2)
        await klm.handle_event(event("rt-unknown"))
        await klm.handle_event(event("rt-c"))
        await klm.handle_event(event("rt-x"))  # its Kyma is outside kcp-system
    assert hit.triggers == {W}
    assert [r.kyma for r in klm.reconciles()] == ["kcp-system/a"]
    assert "event received from SKR, adding kcp-system/a to queue" in caplog.messages
    assert klm.counters["events:received"] == 4
    assert klm.counters["events:dropped-unknown-runtime"] == 2
    assert klm.counters["events:dropped-ambiguous-runtime"] == 1
    assert await klm.cache.lookup("rt-b", None) == {"skr-domain": "b.example.com"}
    assert await klm.cache.lookup("rt-c", None) is None
    assert await klm.cache.lookup("", ObjectKey("kcp-system", "c1")) == {
        "skr-domain": "c1.example.com"
    }


# workers over the queue ---------------------------------------------------------------

NO_REQUEUE = RequeueIntervals(requeue=False)


class Gated:
    """A reconcile that can be held at a gate per key; counts overlapping runs of a key."""

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.entered: dict[str, asyncio.Event] = {}
        self.running: set[str] = set()
        self.overlaps = 0

    async def __call__(self, key: str) -> Outcome:
        if key in self.running:
            self.overlaps += 1
        self.running.add(key)
        self.entered.setdefault(key, asyncio.Event()).set()
        try:
            gate = self.gates.get(key)
            if gate is not None:
                await gate.wait()
            return Outcome.SUCCESS
        finally:
            self.running.discard(key)


async def wait_count(rec: Reconciler, n: int, within: float = 2.0) -> None:
    async with asyncio.timeout(within):
        while len(rec.reconciles()) < n:
            await asyncio.sleep(0.005)


async def test_duplicates_collapse_and_a_key_readded_while_processing_runs_again() -> None:
    gated = Gated()
    gated.gates["a"] = asyncio.Event()
    gated.entered["a"] = asyncio.Event()
    async with Reconciler(gated, workers=3, intervals=NO_REQUEUE) as rec:
        rec.enqueue("a", S)
        await asyncio.wait_for(gated.entered["a"].wait(), 2)
        for _ in range(5):
            rec.enqueue("a", W)  # while processing: collapse into one re-run
        rec.enqueue("a", R)
        gated.gates["a"].set()
        await wait_count(rec, 2)
        assert rec.depth == 0
    assert [r.triggers for r in rec.reconciles()] == [frozenset({S}), frozenset({W, R})]
    assert gated.overlaps == 0


async def test_pending_duplicates_collapse_with_merged_triggers() -> None:
    rec = Reconciler(Gated(), intervals=NO_REQUEUE)
    rec.enqueue("a", S)  # not started yet: all three wait in the queue as one entry
    rec.enqueue("a", W)
    rec.enqueue("b", W)
    async with rec:
        await wait_count(rec, 2)
    assert [(r.kyma, r.triggers) for r in rec.reconciles()] == [
        ("a", frozenset({S, W})),
        ("b", frozenset({W})),
    ]


async def test_delayed_add_waits_and_an_earlier_time_wins() -> None:
    async with Reconciler(Gated(), intervals=NO_REQUEUE) as rec:
        start = rec.now()
        rec.enqueue_after("a", R, 10.0)
        rec.enqueue_after("a", R, 0.05)  # earlier wins
        await wait_count(rec, 1)
        waited = rec.now() - start
    assert 0.05 <= waited < 1.0
    assert rec.reconciles()[0].triggers == {R}


async def test_workers_run_different_keys_concurrently() -> None:
    gated = Gated()
    release = asyncio.Event()
    for key in "abc":
        gated.gates[key] = release
    async with Reconciler(gated, workers=3, intervals=NO_REQUEUE) as rec:
        for key in "abc":
            rec.enqueue(key, S)
        async with asyncio.timeout(2):
            while len(gated.running) < 3:
                await asyncio.sleep(0.005)
        assert rec.in_progress == 3
        release.set()
        await wait_count(rec, 3)


async def test_a_failing_observer_is_logged_and_the_workers_continue() -> None:
    async with Reconciler(Gated(), intervals=NO_REQUEUE) as rec:

        def observe(record: Any) -> None:
            if record.kyma == "bad":
                raise RuntimeError("boom")

        rec.observers.append(observe)
        rec.enqueue("bad", S)
        rec.enqueue("good", S)
        await wait_count(rec, 2)
    assert [r.kyma for r in rec.reconciles()] == ["bad", "good"]


async def test_stop_cancels_a_reconcile_in_progress() -> None:
    gated = Gated()
    gated.gates["a"] = asyncio.Event()  # never released
    gated.entered["a"] = asyncio.Event()
    async with Reconciler(gated, workers=2, intervals=NO_REQUEUE) as rec:
        rec.enqueue("a", S)
        await asyncio.wait_for(gated.entered["a"].wait(), 2)
    assert rec.reconciles() == []
    assert rec.in_progress == 0  # done() ran on cancellation


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="workers"):
        Reconciler(Gated(), workers=0)
