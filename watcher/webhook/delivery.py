"""Getting events to the KCP: a background queue (async mode) or inline (sync mode).

Async mode is why this module exists. Upstream POSTs inside the admission call, so a slow
or unreachable KCP holds every watched write in the SKR for up to the 15 s webhook timeout.
Here the admission handler only ``submit``s; a pool of worker tasks sends, retrying
transient failures until the event is older than ``max_event_age``.

Retry rules (both modes): connection errors, timeouts, 5xx and 429 are retried with
exponential backoff and full jitter (``uniform(0, min(max, base * 2**n))``); a
``Retry-After`` header replaces the jittered delay (capped at ``retry_max``). Any other
non-2xx answer is final: the KCP understood and refused, repeating will not help; it counts
``watcher_failed_kcp_total{error_reason="failed-request"}`` as do events given up after
retrying.

With a spool (``WATCHER_SPOOL_DIR``, :mod:`watcher.webhook.spool`) every queued event is
journaled before the admission answers and acknowledged when it is delivered or given up
(final answer, expiry, overflow); :meth:`Delivery.start` replays what an earlier process
left, oldest first, through the same queue (so coalescing and the overflow policy apply).
A coalesced admission adds nothing to the journal: the pending event it joined covers it.
Shutdown keeps undelivered events in the spool instead of dropping them. Delivery is at
least once: an event whose POST succeeded but whose acknowledgement did not reach the
journal before a kill is sent again by the next process.

Sync mode keeps upstream's behaviour for side-by-side comparison: ``sync_attempts``
attempts of ``sync_timeout`` each, and upstream's messages.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import aiohttp

from watcher.decide import KCP_REQUEST_FAILED, KCP_REQUEST_SUCCEEDED
from watcher.webhook.coalesce import Offer, Pending, PendingQueue
from watcher.webhook.kcpclient import KcpRequestSetupError, KcpResponse
from watcher.webhook.metrics import DropReason, FailReason, WebhookMetrics
from watcher.webhook.settings import DeliverySettings
from watcher.webhook.spool import GroupSync, Spool, SpoolError, SpoolRecord

log = logging.getLogger("watcher.webhook.delivery")

EventKey = tuple[str, bytes]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class Sender(Protocol):
    async def post(self, path: str, body: bytes, *, time_limit: float) -> KcpResponse: ...


class Verdict(StrEnum):
    OK = "ok"
    RETRY = "retry"
    FINAL = "final"


@dataclass(frozen=True)
class AttemptResult:
    """One POST classified; ``message`` is upstream's admission text for this outcome."""

    verdict: Verdict
    message: str
    retry_after: float | None = None
    setup_error: bool = False


def classify(response: KcpResponse) -> AttemptResult:
    """Map a KCP answer onto the retry rules (pure)."""
    if 200 <= response.status < 300:
        return AttemptResult(Verdict.OK, KCP_REQUEST_SUCCEEDED)
    message = (
        f"{KCP_REQUEST_FAILED}: responseBody: {response.body} with StatusCode: {response.status}"
    )
    if response.status == 429 or response.status >= 500:
        return AttemptResult(Verdict.RETRY, message, response.retry_after)
    return AttemptResult(Verdict.FINAL, message)


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random) -> float:
    """Full jitter: uniformly random below the exponential ceiling of attempt ``attempt``."""
    ceiling = min(cap, base * (2 ** min(attempt, 62)))
    return rng.uniform(0.0, ceiling)


@dataclass(frozen=True)
class DrainReport:
    """What shutdown achieved: events sent during the drain and events not delivered.

    ``kept`` of the ``left`` ones stay in the spool for the next process (all of them when
    a spool is used, so nothing is dropped).
    """

    delivered: int
    left: int
    timed_out: bool
    kept: int = 0


class Delivery:
    """Owns the pending queue and the worker tasks; see the module docstring for rules."""

    def __init__(
        self,
        sender: Sender,
        *,
        settings: DeliverySettings,
        metrics: WebhookMetrics,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
        spool: Spool | None = None,
        wall: Clock = time.time,
    ) -> None:
        self.settings = settings
        self.spool = spool
        self._wall = wall
        self._group_sync = (
            GroupSync(spool, self._spool_failed) if spool is not None and spool.fsync else None
        )
        self._sender = sender
        self._metrics = metrics
        self._clock = clock
        self._rng = rng or random.Random()
        self._sleep = sleep
        self.queue: PendingQueue[EventKey] = PendingQueue(
            settings.queue_size, settings.overflow_policy
        )
        self._wakeup = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self._holding: set[int] = set()
        self._nudges: dict[int, asyncio.Event] = {}
        """id(parked item) → set when an admission asks for it again (attempt at once)."""
        self._closing = False

    # ---------------------------------------------------------------- lifecycle

    def start(self, replay: Sequence[SpoolRecord] = ()) -> None:
        """Queue ``replay`` (the spool's leftovers), then spawn the workers (async mode only)."""
        if self.settings.mode != "async" or self._workers:
            return
        self._replay(replay)
        self._spool_gauges()
        self._workers = [
            asyncio.create_task(self._work(), name=f"delivery-worker-{i}")
            for i in range(self.settings.workers)
        ]

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def busy(self) -> int:
        """Events held by workers (being sent or waiting for a retry)."""
        return len(self._holding)

    async def drain(self, within: float | None = None) -> DrainReport:
        """Stop taking events, send what is queued ``within`` seconds, drop the rest."""
        timeout = self.settings.drain_timeout if within is None else within
        self._closing = True
        self._wakeup.set()
        before = self._metrics.value("watcher_events_delivered_total")
        workers, self._workers = self._workers, []
        timed_out, held = False, 0
        if workers:
            _, still_running = await asyncio.wait(workers, timeout=timeout)
            if still_running:
                timed_out, held = True, len(self._holding)
                for task in still_running:
                    task.cancel()
                await asyncio.wait(still_running)
        left = len(self.queue.clear()) + held
        self._holding.clear()
        self._metrics.queue_depth.set(0)
        kept = left if self.spool is not None else 0
        if kept:
            log.warning("delivery drained; %d event(s) kept in the spool for the next start", kept)
        elif left:
            self._metrics.drop(DropReason.SHUTDOWN, left)
            log.warning("delivery drained with %d event(s) not delivered", left)
        delivered = int(self._metrics.value("watcher_events_delivered_total") - before)
        return DrainReport(delivered=delivered, left=left, timed_out=timed_out, kept=kept)

    # ---------------------------------------------------------------- spool

    def _replay(self, records: Sequence[SpoolRecord]) -> None:
        """Queue an earlier process's events, keeping their ids and their age."""
        if not records:
            return
        now, wall = self._clock(), self._wall()
        for record in records:
            age = max(0.0, wall - record.written_at)
            result = self.queue.offer((record.path, record.body), now - age)
            if result.item is not None:
                result.item.ticket = record.id
            else:
                self._ack(record.id)  # a duplicate of a replayed event, or no room
                if result.outcome is Offer.COALESCED:
                    self._metrics.coalesced.inc()
                else:
                    self._metrics.drop(DropReason.OVERFLOW)
            if result.dropped is not None:
                self._metrics.drop(DropReason.OVERFLOW)
                self._forget(result.dropped)
        self._metrics.spool_replayed.inc(len(records))
        self._metrics.queue_depth.set(len(self.queue))
        log.info("replayed %d event(s) from the spool (%d queued)", len(records), len(self.queue))

    def _journal(self, item: Pending[EventKey]) -> None:
        if self.spool is None:
            return
        try:
            item.ticket = self.spool.append(*item.key)
        except (OSError, SpoolError) as exc:
            self._spool_failed(exc)
        self._spool_gauges()

    def _forget(self, item: Pending[EventKey]) -> None:
        """``item`` is done (delivered or given up): acknowledge it in the spool."""
        if item.ticket is not None:
            self._ack(item.ticket)
            item.ticket = None

    def _ack(self, ticket: int) -> None:
        if self.spool is None:
            return
        try:
            self.spool.ack(ticket)
        except (OSError, SpoolError) as exc:
            self._spool_failed(exc)
        self._spool_gauges()

    def _spool_gauges(self) -> None:
        if self.spool is not None:
            self._metrics.spool_events.set(self.spool.live)
            self._metrics.spool_bytes.set(self.spool.size_bytes)

    def _spool_failed(self, exc: Exception) -> None:
        self._metrics.spool_errors.inc()
        log.error("spool write failed (the event is kept in memory only): %s", exc)

    async def durable(self) -> None:
        """With ``WATCHER_SPOOL_FSYNC``: wait until every journaled event is on disk."""
        if self._group_sync is not None:
            await self._group_sync.wait()

    # ---------------------------------------------------------------- async mode

    def submit(self, path: str, body: bytes) -> Offer:
        """Queue an event for the workers; never blocks the admission handler."""
        if self._closing:
            return Offer.REJECTED
        result = self.queue.offer((path, body), self._clock())
        if result.item is not None:
            self._journal(result.item)
        if result.outcome is Offer.COALESCED:
            self._metrics.coalesced.inc()
            if result.nudged is not None and (nudge := self._nudges.get(id(result.nudged))):
                nudge.set()
        elif result.outcome is Offer.REJECTED:
            self._metrics.drop(DropReason.OVERFLOW)
            log.warning("delivery queue full (%d); rejected event for %s", len(self.queue), path)
        if result.dropped is not None:
            self._metrics.drop(DropReason.OVERFLOW)
            self._forget(result.dropped)
            log.warning(
                "delivery queue full; dropped the oldest event for %s", result.dropped.key[0]
            )
        self._metrics.queue_depth.set(len(self.queue))
        self._wakeup.set()
        return result.outcome

    async def _next(self) -> Pending[EventKey] | None:
        while True:
            item = self.queue.take()
            if item is not None:
                self._metrics.queue_depth.set(len(self.queue))
                return item
            if self._closing:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _work(self) -> None:
        while (item := await self._next()) is not None:
            self._holding.add(id(item))
            try:
                await self._deliver(item)
                self._forget(item)  # not reached when cancelled: the spool keeps it
            finally:
                self._holding.discard(id(item))

    async def _deliver(self, item: Pending[EventKey]) -> None:
        path, body = item.key
        timeout = self.settings.request_timeout
        while True:
            age = self._clock() - item.enqueued_at
            if age > self.settings.max_event_age:
                self._metrics.drop(DropReason.EXPIRED)
                if item.attempts:
                    self._metrics.fail(FailReason.FAILED_REQUEST)
                log.warning(
                    "event for %s dropped: %.1f s old after %d attempt(s)",
                    path,
                    age,
                    item.attempts,
                )
                return
            result = await self.attempt(path, body, time_limit=timeout)
            item.attempts += 1
            if result.verdict is Verdict.OK:
                self._metrics.delivered.inc()
                self._metrics.delivery_latency.observe(self._clock() - item.enqueued_at)
                log.debug("event for %s delivered after %d attempt(s)", path, item.attempts)
                return
            if result.verdict is Verdict.FINAL:
                reason = (
                    FailReason.REQUEST_SETUP if result.setup_error else FailReason.FAILED_REQUEST
                )
                self._metrics.fail(reason)
                log.warning("event for %s not delivered: %s", path, result.message)
                return
            self._metrics.retries.inc()
            delay = self._retry_delay(item.attempts - 1, result.retry_after)
            log.debug("event for %s: %s; retrying in %.2f s", path, result.message, delay)
            self.queue.park(item)
            nudge = self._nudges[id(item)] = asyncio.Event()
            try:
                await self._backoff(delay, nudge)
            finally:
                del self._nudges[id(item)]
                self.queue.unpark(item)

    async def _backoff(self, delay: float, nudge: asyncio.Event) -> None:
        """Wait ``delay``, or less when a new admission asks for the event again."""
        waits = {
            asyncio.ensure_future(self._sleep(delay)),
            asyncio.ensure_future(nudge.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        if retry_after is not None:
            return min(retry_after, s.retry_max)
        return backoff_delay(attempt, base=s.retry_base, cap=s.retry_max, rng=self._rng)

    # ---------------------------------------------------------------- both modes

    async def attempt(self, path: str, body: bytes, *, time_limit: float) -> AttemptResult:
        """One POST, classified; transport errors become ``RETRY``, never exceptions."""
        try:
            response = await self._sender.post(path, body, time_limit=time_limit)
        except KcpRequestSetupError as exc:
            return AttemptResult(Verdict.FINAL, f"{KCP_REQUEST_FAILED}\n{exc}", setup_error=True)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = str(exc) or type(exc).__name__
            return AttemptResult(Verdict.RETRY, f"{KCP_REQUEST_FAILED}\n{detail}")
        return classify(response)

    # ---------------------------------------------------------------- sync mode

    async def deliver_now(self, path: str, body: bytes) -> tuple[bool, str]:
        """Upstream's inline delivery: returns (delivered, admission message)."""
        s = self.settings
        start = self._clock()
        result = AttemptResult(Verdict.RETRY, KCP_REQUEST_FAILED)
        for attempt in range(s.sync_attempts):
            result = await self.attempt(path, body, time_limit=s.sync_timeout)
            if result.verdict is not Verdict.RETRY:
                break
            if attempt + 1 < s.sync_attempts:
                self._metrics.retries.inc()
                await self._sleep(self._retry_delay(attempt, result.retry_after))
        if result.verdict is Verdict.OK:
            self._metrics.delivered.inc()
            self._metrics.delivery_latency.observe(self._clock() - start)
            return True, result.message
        self._metrics.fail(
            FailReason.REQUEST_SETUP if result.setup_error else FailReason.FAILED_REQUEST
        )
        log.warning("event for %s not delivered: %s", path, result.message)
        return False, result.message
