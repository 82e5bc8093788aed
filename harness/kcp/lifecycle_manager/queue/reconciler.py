"""A controller of the KCP: its reconcile loop, requeue by outcome, and its record.

Every controller here is one of these, set up on a :class:`~.runtime.ControllerRuntime`
(controller-runtime's ``Reconcile`` returning a requeue decision). After each reconcile the
key is requeued after the interval for its outcome, as KLM does, or after the seconds the
reconcile returned; every reconcile is recorded (when, why, how long after the first
trigger, outcome) so tests and reports can ask why and how fast a Kyma was reconciled."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Final, TypeVar

from harness.aio import Service
from harness.errors import HarnessError
from harness.kcp.klm_log import RECONCILE_FINISHED, RECONCILE_STARTED, RECONCILER_ERROR, matching
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkItem, WorkQueue

logger = logging.getLogger("harness.kcp.lifecycle_manager.queue.reconciler")


class Outcome(StrEnum):
    SUCCESS = "success"  # Kyma Ready
    BUSY = "busy"  # Processing
    ERROR = "error"  # requeued through the per-key exponential backoff
    WARNING = "warning"
    GONE = "gone"  # the Kyma no longer exists: not requeued
    SKIPPED = "skipped"  # labelled skip-reconciliation: not requeued until it changes


@dataclass(frozen=True)
class RequeueIntervals:
    """Seconds until the next reconcile per outcome; KLM's defaults."""

    success: float = 300.0
    busy: float = 5.0
    error: float = 5.0
    """The first retry after an error; each further consecutive error doubles it ..."""
    warning: float = 30.0
    error_max: float = 30.0
    """... up to this (KLM's per-key rate limiter: 5 s → 30 s, reset by a success)."""
    requeue: bool = True
    """False: only errors are requeued (a controller driven by its watches alone)."""

    def after(self, outcome: Outcome, failures: int = 1) -> float | None:
        """Seconds until the requeue; ``failures``: consecutive errors of the key so far,
        this one included. ``None``: not requeued (gone, skipped)."""
        if outcome is Outcome.ERROR:
            return float(
                min(self.error * 2 ** max(0, failures - 1), max(self.error, self.error_max))
            )
        if outcome in (Outcome.GONE, Outcome.SKIPPED) or not self.requeue:
            return None
        return float(getattr(self, outcome.value))


INTERVAL_FLAGS: Final = {
    "success": "--kyma-requeue-success-interval",
    "busy": "--kyma-requeue-busy-interval",
    "warning": "--kyma-requeue-warning-interval",
    "error": "--failure-base-delay",
    "error_max": "--failure-max-delay",
}
"""KLM's flag for each of its intervals."""

WATCH_DRIVEN = RequeueIntervals(error=1.0, error_max=1.0, requeue=False)
"""Requeue rules of a controller its watches drive: errors retried after 1 s, nothing else."""


@dataclass(frozen=True)
class Reconcile:
    """One reconcile. Times are wall-clock (``time.time()``) seconds."""

    at: float  # when the reconcile started
    kyma: str  # "namespace/name"
    triggers: frozenset[Trigger]
    queued_at: float  # when the first of the merged triggers arrived
    latency: float  # at - queued_at: how long the key waited
    outcome: Outcome
    duration: float = 0.0
    error: str = ""


class ReconcileTimeout(HarnessError, TimeoutError):
    """No matching reconcile before the deadline; the message lists what was seen."""


T = TypeVar("T")


async def first_of(query: Callable[[], list[T]], changed: asyncio.Event, within: float) -> T | None:
    """The first record ``query`` returns, asked again whenever ``changed`` is set; None when
    there is none within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                changed.clear()
                found = query()
                if found:
                    return found[0]
                await changed.wait()
    except TimeoutError:
        return None


ReconcileFn = Callable[[str], Awaitable[Outcome | float]]
"""Key → its outcome, or the seconds until it is due again (a success)."""


@dataclass(eq=False)
class Reconciler(Service):
    """``async with Reconciler(fn) as r: r.enqueue("kcp-system/a", Trigger.STARTUP)``."""

    reconcile: ReconcileFn
    _: KW_ONLY
    name: str = "kyma"
    workers: int = 1
    intervals: RequeueIntervals = RequeueIntervals()
    clock: Callable[[], float] | None = None
    wall_clock: Callable[[], float] = time.time
    log: logging.Logger | None = logger
    """Where the reconcile lines go (None: none, as for every controller but Kyma's)."""
    counters: collections.Counter[str] = field(default_factory=collections.Counter, init=False)
    observers: list[Callable[[Reconcile], None]] = field(default_factory=list, init=False)
    _queue: WorkQueue[str] = field(default_factory=WorkQueue, init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _records: list[Reconcile] = field(default_factory=list, init=False)
    _failures: collections.Counter[str] = field(default_factory=collections.Counter, init=False)
    """Consecutive errors per key (the backoff's exponent)."""
    _recorded: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")

    def now(self) -> float:
        return self.clock() if self.clock else asyncio.get_running_loop().time()

    def enqueue(self, kyma: str, trigger: Trigger) -> None:
        """Make ``kyma`` ready now (collapses with a pending entry)."""
        self._queue.add(kyma, trigger, self.now())
        self._wake.set()
        self.counters[f"enqueued:{trigger.value}"] += 1

    def enqueue_after(self, kyma: str, trigger: Trigger, delay: float) -> None:
        """``enqueue`` in ``delay`` seconds (an earlier pending time for the key wins)."""
        self._add_after(kyma, trigger, delay)
        self.counters[f"enqueued:{trigger.value}"] += 1

    def _add_after(self, kyma: str, trigger: Trigger, delay: float) -> None:
        self._queue.add_after(kyma, trigger, self.now() + max(0.0, delay))
        self._wake.set()

    def requeue_after(self, kyma: str, delay: float) -> None:
        """``kyma``'s next requeue-timer reconcile in ``delay`` s if that is earlier (KLM
        spreads requeues so after a ModuleReleaseMeta change)."""
        self._add_after(kyma, Trigger.REQUEUE_TIMER, delay)

    @property
    def depth(self) -> int:
        """Keys ready and waiting for a worker."""
        return len(self._queue)

    @property
    def in_progress(self) -> int:
        return len(self._queue.processing)

    async def _handle(self, item: WorkItem[str]) -> None:
        started_loop = self.now()
        at = self.wall_clock()
        latency = max(0.0, started_loop - item.queued_at)
        namespace, _, name = item.key.partition("/")
        context = {"controller": self.name, "namespace": namespace, "name": name}
        context["reconcileID"] = str(uuid.uuid4())
        triggers = ",".join(sorted(t.value for t in item.triggers))
        self._line(RECONCILE_STARTED, {**context, "trigger": triggers, "waited": round(latency, 6)})
        error, after = "", None
        try:
            result = await self.reconcile(item.key)
        except Exception as exc:
            logger.warning("reconcile of %s %s failed: %r", self.name, item.key, exc)
            result, error = Outcome.ERROR, repr(exc)
        outcome = result if isinstance(result, Outcome) else Outcome.SUCCESS
        if outcome is Outcome.ERROR:
            self._line(RECONCILER_ERROR, {**context, "error": error})
        self._line(RECONCILE_FINISHED, {**context, "outcome": outcome.value})
        self._record(
            Reconcile(
                at=at,
                kyma=item.key,
                triggers=item.triggers,
                queued_at=at - latency,
                latency=latency,
                outcome=outcome,
                duration=self.now() - started_loop,
                error=error,
            )
        )
        if outcome is Outcome.ERROR:
            self._failures[item.key] += 1
        else:
            self._failures.pop(item.key, None)
            after = None if isinstance(result, Outcome) else result
        delay = self.intervals.after(outcome, self._failures[item.key]) if after is None else after
        if delay is not None:
            self._add_after(item.key, Trigger.REQUEUE_TIMER, delay)

    def _line(self, message: str, context: dict[str, object]) -> None:
        if self.log is not None:
            self.log.info(message, extra={"context": context})

    def _record(self, record: Reconcile) -> None:
        self._records.append(record)
        for observe in list(self.observers):
            observe(record)
        self.counters["reconciles"] += 1
        self.counters[f"outcome:{record.outcome.value}"] += 1
        for trigger in record.triggers:
            self.counters[f"trigger:{trigger.value}"] += 1
        self._recorded.set()

    def reconciles(
        self,
        kyma: str | None = None,
        trigger: Trigger | None = None,
        since: float | None = None,
    ) -> list[Reconcile]:
        """Recorded reconciles, oldest first, filtered by Kyma, trigger and start time."""
        return matching(self._records, kyma, trigger, since)

    async def wait_for_reconcile(
        self,
        kyma: str,
        trigger: Trigger | None = None,
        since: float | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 - a deadline for the wait, as tests read it
    ) -> Reconcile:
        """The first matching reconcile (waiting for it); ``ReconcileTimeout`` otherwise."""
        found = await first_of(
            lambda: self.reconciles(kyma, trigger, since), self._recorded, timeout
        )
        if found is None:
            seen = self.reconciles(kyma)[-5:]
            described = "; ".join(
                f"at {r.at:.3f} triggers {sorted(t.value for t in r.triggers)} → {r.outcome}"
                for r in seen
            )
            wanted = trigger.value if trigger else "any trigger"
            raise ReconcileTimeout(
                f"no reconcile of {kyma} ({wanted}, since {since}) within {timeout:g} s; "
                f"seen for it: {described or 'none'}; all reconciles: {len(self._records)}; "
                f"queued {len(self._queue)}, processing {sorted(self._queue.processing)}"
            )
        return found

    async def _next(self) -> WorkItem[str]:
        while True:
            now = self.now()
            self._queue.promote(now)
            item = self._queue.get()
            if item is not None:
                if len(self._queue):
                    self._wake.set()  # more is ready: let another worker take it
                return item
            self._wake.clear()
            wakeup = self._queue.next_wakeup()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if wakeup is None else max(0.0, wakeup - now)):
                    await self._wake.wait()

    async def _work(self) -> None:
        """One worker: a key is reconciled by one worker at a time and waits in the queue
        at most once (the queue's guarantees); a failing reconcile is an ``error``."""
        while True:
            item = await self._next()
            try:
                await self._handle(item)
            except Exception:  # an observer failed: the worker goes on
                logger.exception("%s: handling %s failed", self.name, item.key)
            finally:
                self._queue.done(item.key)
                self._wake.set()

    async def start(self) -> None:
        for i in range(self.workers):
            self.spawn(self._work(), f"{self.name}-reconciler-{i}")
