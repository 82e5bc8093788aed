"""The pure parts of delivery: the coalescing queue, backoff, classification, Retry-After."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.webhook.coalesce import Offer, PendingQueue
from watcher.webhook.delivery import Verdict, backoff_delay, classify
from watcher.webhook.kcpclient import KcpResponse, parse_retry_after

keys = st.lists(st.sampled_from("abcdefgh"), max_size=40)


def drain(queue: PendingQueue[str]) -> list[str]:
    out = []
    while (item := queue.take()) is not None:
        out.append(item.key)
    return out


@given(keys)
def test_adding_twice_is_adding_once(events: list[str]) -> None:
    once: PendingQueue[str] = PendingQueue(100)
    twice: PendingQueue[str] = PendingQueue(100)
    for key in events:
        once.offer(key, 0.0)
        twice.offer(key, 0.0)
        assert twice.offer(key, 0.0).outcome is Offer.COALESCED
    assert drain(once) == drain(twice)


@given(keys)
def test_order_is_first_occurrence_order(events: list[str]) -> None:
    queue: PendingQueue[str] = PendingQueue(100)
    for key in events:
        queue.offer(key, 0.0)
    assert drain(queue) == list(dict.fromkeys(events))


@given(
    keys, st.integers(min_value=1, max_value=5), st.sampled_from(["drop-oldest", "reject-newest"])
)
def test_capacity_is_never_exceeded(events: list[str], capacity: int, policy: str) -> None:
    queue: PendingQueue[str] = PendingQueue(capacity, policy)  # type: ignore[arg-type]
    accepted: list[str] = []
    for key in events:
        result = queue.offer(key, 0.0)
        assert len(queue) <= capacity
        if result.outcome is Offer.QUEUED:
            accepted.append(key)
        if result.dropped is not None:
            accepted.remove(result.dropped.key)
        if policy == "drop-oldest":  # the newest event is never the one lost
            assert key in queue
    assert drain(queue) == accepted


def test_overflow_policies() -> None:
    drop: PendingQueue[str] = PendingQueue(2, "drop-oldest")
    reject: PendingQueue[str] = PendingQueue(2, "reject-newest")
    for q in (drop, reject):
        q.offer("a", 0.0)
        q.offer("b", 1.0)
    result = drop.offer("c", 2.0)
    assert result.outcome is Offer.QUEUED and result.dropped is not None
    assert result.dropped.key == "a"
    assert reject.offer("c", 2.0).outcome is Offer.REJECTED
    assert drain(drop) == ["b", "c"]
    assert drain(reject) == ["a", "b"]


def test_taken_events_queue_again_but_parked_ones_absorb() -> None:
    queue: PendingQueue[str] = PendingQueue(10)
    queue.offer("a", 0.0)
    item = queue.take()
    assert item is not None
    assert queue.offer("a", 1.0).outcome is Offer.QUEUED  # in flight: not coalesced
    assert queue.take() is not None
    queue.park(item)
    absorbed = queue.offer("a", 2.0)
    assert absorbed.outcome is Offer.COALESCED  # waiting for a retry: nudged, not queued
    assert absorbed.nudged is item
    assert queue.offer("b", 2.0).nudged is None
    assert queue.offer("b", 2.5).nudged is None  # coalesced with a queued one: no nudge
    queue.unpark(item)
    assert queue.offer("a", 3.0).outcome is Offer.QUEUED
    assert item.enqueued_at == 0.0


@given(st.integers(min_value=0, max_value=200), st.integers())
def test_backoff_is_full_jitter_below_the_cap(attempt: int, seed: int) -> None:
    delay = backoff_delay(attempt, base=0.5, cap=30.0, rng=random.Random(seed))
    assert 0.0 <= delay <= min(30.0, 0.5 * 2**attempt)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.OK),
        (204, Verdict.OK),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (400, Verdict.FINAL),
        (401, Verdict.FINAL),
        (404, Verdict.FINAL),
        (413, Verdict.FINAL),
        (302, Verdict.FINAL),
    ],
)
def test_classify(status: int, verdict: Verdict) -> None:
    assert classify(KcpResponse(status, "b")).verdict is verdict


def test_parse_retry_after() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == 30.0
    assert parse_retry_after(format_datetime(now, usegmt=True), now=now.timestamp() + 5) == 0.0
