"""The hand-over from HTTP handlers to the operator: a bounded stream with backpressure.

Upstream hands events over on an unbuffered Go channel, so a slow consumer slows the SKR
down instead of piling up memory. We keep that property with a bounded buffer (size 0 is
upstream's rendezvous: the handler returns only once the consumer took the event) and add
what upstream lacks: a deadline, after which the handler answers 503 and the SKR retries.
``asyncio.Queue`` cannot express the rendezvous case or a clean close, hence this class.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field

from cryptography import x509

from watcher.listener.errors import BackpressureTimeout, StreamClosed
from watcher.model import Contract, WatchEvent


@dataclass(frozen=True)
class ListenerEvent:
    """One accepted event, as the operator receives it."""

    runtime_id: str
    event: WatchEvent
    received_at: float
    contract: Contract = "v2"
    certificate: x509.Certificate | None = field(default=None, compare=False, repr=False)


@dataclass(eq=False)
class _Entry:
    event: ListenerEvent
    # Resolved with True once the event is accepted (inside the buffer, or taken by a
    # consumer), with False when the stream closed first.
    accepted: asyncio.Future[bool]


class EventStream:
    """Many producers (handlers), any number of consumers; FIFO; closable."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, got {maxsize}")
        self._maxsize = maxsize
        self._entries: collections.deque[_Entry] = collections.deque()
        self._readable = asyncio.Event()
        self._closed = False

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @property
    def closed(self) -> bool:
        return self._closed

    def buffered(self) -> int:
        """Events accepted but not yet taken by a consumer."""
        return min(len(self._entries), self._maxsize)

    def waiting(self) -> int:
        """Producers blocked because the buffer is full."""
        return len(self._entries) - self.buffered()

    async def put(self, event: ListenerEvent, *, max_wait: float) -> None:
        """Return once the event is accepted; raise after ``max_wait`` seconds or on close.

        On ``BackpressureTimeout`` or ``StreamClosed`` the event is withdrawn: the
        consumer never sees an event whose sender was told it failed.
        """
        if self._closed:
            raise StreamClosed("listener is shutting down")
        loop = asyncio.get_running_loop()
        entry = _Entry(event, loop.create_future())
        self._entries.append(entry)
        if len(self._entries) <= self._maxsize:
            entry.accepted.set_result(True)
        self._readable.set()
        if entry.accepted.done():
            return
        try:
            await asyncio.wait([entry.accepted], timeout=max_wait)
        finally:
            timed_out = not entry.accepted.done()
            if timed_out:
                self._withdraw(entry)
        if timed_out:
            raise BackpressureTimeout(
                f"consumer did not take the event within {max_wait:g} s "
                f"({self.buffered()} buffered, buffer size {self._maxsize})"
            )
        if not entry.accepted.result():
            raise StreamClosed("listener is shutting down")

    def _withdraw(self, entry: _Entry) -> None:
        self._entries.remove(entry)
        entry.accepted.cancel()
        self._refresh_readable()

    async def get(self) -> ListenerEvent:
        """The next event; ``StreamClosed`` once closed and drained."""
        while True:
            if self._entries:
                return self._take()
            if self._closed:
                raise StreamClosed("event stream is closed")
            await self._readable.wait()

    def _take(self) -> ListenerEvent:
        entry = self._entries.popleft()
        if not entry.accepted.done():  # rendezvous: the consumer accepts it
            entry.accepted.set_result(True)
        if self._maxsize and len(self._entries) >= self._maxsize:
            newcomer = self._entries[self._maxsize - 1]
            if not newcomer.accepted.done():
                newcomer.accepted.set_result(True)
        self._refresh_readable()
        return entry.event

    def _refresh_readable(self) -> None:
        if self._entries or self._closed:
            self._readable.set()
        else:
            self._readable.clear()

    def close(self) -> None:
        """Refuse new events, fail waiting producers, let consumers drain accepted ones."""
        if self._closed:
            return
        self._closed = True
        kept: collections.deque[_Entry] = collections.deque()
        for entry in self._entries:
            if entry.accepted.done():
                kept.append(entry)
            else:
                entry.accepted.set_result(False)
        self._entries = kept
        self._readable.set()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> ListenerEvent:
        try:
            return await self.get()
        except StreamClosed:
            raise StopAsyncIteration from None
