"""The event stream: bounded, FIFO, backpressure with a deadline, rendezvous at size 0."""

from __future__ import annotations

import asyncio

import pytest
from listener_testing import until

from watcher.listener.errors import BackpressureTimeout, StreamClosed
from watcher.listener.stream import EventStream, ListenerEvent
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


def ev(name: str) -> ListenerEvent:
    event = WatchEvent(ObjectKey("ns", name), GroupVersionKind("g", "v", "K"))
    return ListenerEvent(runtime_id="r", event=event, received_at=0.0)


async def test_buffered_puts_return_at_once_and_come_out_in_order() -> None:
    stream = EventStream(2)
    await stream.put(ev("a"), max_wait=1)
    await stream.put(ev("b"), max_wait=1)
    assert stream.buffered() == 2
    assert [(await stream.get()).event.watched.name for _ in range(2)] == ["a", "b"]


async def test_full_buffer_blocks_until_a_consumer_makes_room() -> None:
    stream = EventStream(1)
    await stream.put(ev("a"), max_wait=1)
    blocked = asyncio.create_task(stream.put(ev("b"), max_wait=5))
    await until(lambda: stream.waiting() == 1)
    assert not blocked.done()
    assert (await stream.get()).event.watched.name == "a"
    await asyncio.wait_for(blocked, 2)
    assert stream.buffered() == 1 and stream.waiting() == 0


async def test_timeout_withdraws_the_event() -> None:
    stream = EventStream(1)
    await stream.put(ev("a"), max_wait=1)
    with pytest.raises(BackpressureTimeout, match=r"within 0\.05 s"):
        await stream.put(ev("late"), max_wait=0.05)
    assert stream.waiting() == 0
    stream.close()
    assert [e.event.watched.name async for e in stream] == ["a"]


async def test_size_zero_is_a_rendezvous() -> None:
    stream = EventStream(0)
    sender = asyncio.create_task(stream.put(ev("a"), max_wait=5))
    await until(lambda: stream.waiting() == 1)
    assert not sender.done()
    assert (await stream.get()).event.watched.name == "a"
    await asyncio.wait_for(sender, 2)
    with pytest.raises(BackpressureTimeout):
        await stream.put(ev("nobody"), max_wait=0.01)


async def test_cancelled_sender_withdraws_its_event() -> None:
    stream = EventStream(0)
    sender = asyncio.create_task(stream.put(ev("a"), max_wait=5))
    await until(lambda: stream.waiting() == 1)
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert stream.waiting() == 0


async def test_close_fails_waiting_senders_and_drains_accepted_events() -> None:
    stream = EventStream(1)
    await stream.put(ev("a"), max_wait=1)
    waiting = asyncio.create_task(stream.put(ev("b"), max_wait=5))
    await until(lambda: stream.waiting() == 1)
    consumer = asyncio.create_task(_collect(stream))
    stream.close()
    with pytest.raises(StreamClosed):
        await waiting
    assert await asyncio.wait_for(consumer, 2) == ["a"]
    with pytest.raises(StreamClosed):
        await stream.put(ev("c"), max_wait=1)


async def test_consumer_waiting_on_empty_stream_ends_on_close() -> None:
    stream = EventStream(4)
    consumer = asyncio.create_task(_collect(stream))
    await asyncio.sleep(0)
    await stream.put(ev("a"), max_wait=1)
    await until(lambda: stream.buffered() == 0)
    stream.close()
    assert await asyncio.wait_for(consumer, 2) == ["a"]


async def _collect(stream: EventStream) -> list[str]:
    return [e.event.watched.name async for e in stream]


def test_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        EventStream(-1)
