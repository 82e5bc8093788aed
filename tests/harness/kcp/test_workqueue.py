"""The KLM stand-in's queue: client-go semantics, checked by examples and properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkQueue

W, R, S = Trigger.WATCH_EVENT, Trigger.REQUEUE_TIMER, Trigger.STARTUP


def test_duplicates_collapse_and_triggers_merge() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a", S, 0.0)
    q.add("a", W, 1.0)
    q.add("b", W, 2.0)
    item = q.get()
    assert item is not None and item.key == "a"
    assert item.triggers == {S, W} and item.queued_at == 0.0
    assert len(q) == 1


def test_key_added_while_processing_is_processed_again_afterwards() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a", S, 0.0)
    assert q.get() is not None
    q.add("a", W, 1.0)
    assert q.get() is None  # never twice at once
    q.done("a")
    again = q.get()
    assert again is not None and again.triggers == {W} and again.queued_at == 1.0


def test_delayed_add_keeps_earliest_time() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", R, 300.0)
    q.add_after("a", R, 310.0)
    q.add_after("a", R, 30.0)
    assert q.next_wakeup() == 30.0
    q.promote(29.0)
    assert q.get() is None
    q.promote(30.0)
    item = q.get()
    assert item is not None and item.triggers == {R}
    q.done("a")
    q.promote(10_000.0)
    assert q.get() is None and q.next_wakeup() is None


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "after", "get", "done", "promote"]),
        st.sampled_from("abc"),
        st.floats(0, 100),
    ),
    max_size=60,
)


@given(ops)
def test_never_processing_twice_and_nothing_lost(program: list[tuple[str, str, float]]) -> None:
    q: WorkQueue[str] = WorkQueue()
    wanted: set[str] = set()  # keys added since they were last taken
    now = 0.0
    for op, key, t in program:
        now += t / 100
        if op == "add":
            q.add(key, W, now)
            wanted.add(key)
        elif op == "after":
            q.add_after(key, R, now + t)
        elif op == "promote":
            q.promote(now + t)
        elif op == "get":
            item = q.get()
            if item is not None:
                assert item.key in q.processing
                wanted.discard(item.key)
        elif key in q.processing:
            q.done(key)
    # drain: every key that was added and not yet taken comes out exactly once per drain
    for key in list(q.processing):
        q.done(key)
    q.promote(float("inf"))
    seen = []
    while (item := q.get()) is not None:
        seen.append(item.key)
    assert len(seen) == len(set(seen))
    assert wanted <= set(seen)


def test_an_event_pulls_a_pending_requeue_forward_instead_of_adding_one() -> None:
    """controller-runtime's priority queue (KLM's): one entry per key, the earlier wins."""
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", R, 5.0)
    q.add("a", W, 1.0)
    item = q.get()
    assert item is not None and item.triggers == {W}
    q.add_after("a", R, 6.0)  # the reconcile's own requeue
    q.done("a")
    q.promote(5.5)
    assert q.get() is None  # the timer of 5.0 went with the event
    q.promote(6.0)
    timer = q.get()
    assert timer is not None and timer.triggers == {R}


def test_a_delayed_add_does_not_stack_on_a_key_ready_now_or_due_again() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a", W, 0.0)
    q.add_after("a", R, 1.0)
    assert q.next_wakeup() is None
    item = q.get()
    assert item is not None
    q.add("a", W, 0.5)  # while processing: due again once done
    q.add_after("a", R, 2.0)
    q.done("a")
    assert q.next_wakeup() is None and len(q) == 1
