"""The pending-event queue: bounded, FIFO, and coalescing. Pure: no I/O, no clock.

An event tells the KCP "look at this object again"; two identical events waiting in the
queue carry no more information than one, so a second identical event (same path and body)
is not queued again while the first has not been sent yet. Once a worker has started an
attempt the event is no longer pending: a change admitted after that attempt began needs
its own event, so it is queued anew. Between two attempts (waiting for a backoff) an event
is *parked* and absorbs identical events again, because its next attempt happens after them;
the absorbed admission *nudges* it (``OfferResult.nudged``): the caller attempts it at once
instead of at the end of its backoff. A new admission is new information, so it gets a
prompt attempt as it would without coalescing, and a KCP that is back hears of it then,
not up to a backoff ceiling later; the load on a KCP that is still down stays at one
attempt per admission.

Capacity counts queued events only; parked events are bounded by the number of workers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from watcher.webhook.settings import OverflowPolicy

K = TypeVar("K", bound=Hashable)


class Offer(StrEnum):
    QUEUED = "queued"
    COALESCED = "coalesced"
    REJECTED = "rejected"


@dataclass
class Pending(Generic[K]):
    """One event on its way; ``enqueued_at`` is the first admission that asked for it.

    ``ticket`` is the event's id in the durable spool, if one is used (None otherwise).
    """

    key: K
    enqueued_at: float
    attempts: int = 0
    ticket: int | None = None


@dataclass(frozen=True)
class OfferResult(Generic[K]):
    outcome: Offer
    dropped: Pending[K] | None = None
    item: Pending[K] | None = None  # the event now queued (QUEUED only)
    nudged: Pending[K] | None = None  # the parked event that absorbed it (COALESCED only)


class PendingQueue(Generic[K]):
    """FIFO of distinct keys with an overflow policy.

    ``drop-oldest`` (default) makes room by discarding the oldest queued event: after an
    outage the newest changes matter most, and the KCP requeues every Kyma periodically
    anyway. ``reject-newest`` keeps the queue as it is and refuses the new event.
    """

    def __init__(self, capacity: int, policy: OverflowPolicy = "drop-oldest") -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.policy = policy
        self._queued: OrderedDict[K, Pending[K]] = OrderedDict()
        self._parked: dict[K, Pending[K]] = {}

    def __len__(self) -> int:
        return len(self._queued)

    def __iter__(self) -> Iterator[K]:
        return iter(self._queued)

    def __contains__(self, key: object) -> bool:
        return key in self._queued or key in self._parked

    @property
    def parked(self) -> int:
        return len(self._parked)

    def offer(self, key: K, now: float) -> OfferResult[K]:
        """Queue ``key`` unless an identical event is already waiting."""
        if key in self:
            return OfferResult(Offer.COALESCED, nudged=self._parked.get(key))
        dropped = None
        if len(self._queued) >= self.capacity:
            if self.policy == "reject-newest":
                return OfferResult(Offer.REJECTED)
            _, dropped = self._queued.popitem(last=False)
        item = Pending(key, now)
        self._queued[key] = item
        return OfferResult(Offer.QUEUED, dropped, item)

    def take(self) -> Pending[K] | None:
        """The oldest queued event, now owned by the caller; None when empty."""
        if not self._queued:
            return None
        _, item = self._queued.popitem(last=False)
        return item

    def park(self, item: Pending[K]) -> None:
        """``item`` waits for its next attempt and absorbs identical offers meanwhile."""
        self._parked[item.key] = item

    def unpark(self, item: Pending[K]) -> None:
        """``item`` is being attempted again (or given up); new offers queue anew."""
        if self._parked.get(item.key) is item:
            del self._parked[item.key]

    def clear(self) -> list[Pending[K]]:
        """Remove and return everything queued (shutdown)."""
        items = list(self._queued.values())
        self._queued.clear()
        return items
