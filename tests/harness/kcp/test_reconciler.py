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
