"""The KCP side of watcher health: send heartbeats, take echoes, judge every runtime.

``async with HealthMonitor(writer, policy=...) as monitor:`` — then ``monitor.add(rid)``
for each runtime and feed it what the ``watcher-health`` listener sees: ``echo(rid)`` for
each heartbeat event, and ``refused`` as the listener's rejection observer. The monitor:

* writes each runtime's heartbeat through ``writer`` (the operator's SKR client) at the
  runtime's phase, then every probe interval (halved while the runtime is not well) with
  jitter, at most ``max_in_flight`` writes at a time, each bounded by the policy's
  ``write_timeout`` (longer than the SKR's admission webhook timeout: a webhook that
  delivers inside the admission call holds the write while the KCP path is broken, and
  that is a written heartbeat without an echo, not a failed write);
* folds sent / written / echoed / refused / failed-write evidence and the passing of
  deadlines into each runtime's :class:`~watcher.health.state.RuntimeHealth` (pure rules,
  ``state``); a write that returned after the heartbeat's echo deadline leaves its time
  as ``NoEvent``'s detail (``write took 6.1 s``);
* calls ``on_transition(runtime_id, before, after)`` when a runtime's state or reason
  changes — ``after.recovered`` marks the way back to Healthy, when the operator should
  reconcile that runtime once to act on what its watcher missed;
* exposes metrics (:class:`~watcher.health.metrics.HealthMetrics`) and ``snapshot()``.

One task runs the schedule: it sleeps until the next send or deadline, so an idle fleet
costs nothing between heartbeats. Writes run as their own tasks: a slow SKR delays only
itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from watcher.health.heartbeat import next_delay, phase
from watcher.health.metrics import HealthMetrics, RuntimeStatus
from watcher.health.state import (
    Observation,
    Policy,
    RuntimeHealth,
    State,
    next_deadline,
    observe,
    tick,
)
from watcher.listener.verify import Rejection

logger = logging.getLogger("watcher.health")

HeartbeatWriter = Callable[[str, int], Awaitable[None]]
"""``(runtime_id, seq)`` → the heartbeat is in that runtime's SKR. Raise
:class:`HeartbeatWriteError` with a short reason (it becomes a metric label) when not;
:class:`HeartbeatNotAdmitted` when the SKR's API server took the write but calling an
admission webhook failed; any other exception counts as a failed write too, described by
its type."""

Transition = Callable[[str, RuntimeHealth, RuntimeHealth], None]


class HeartbeatWriteError(Exception):
    """The SKR did not take the heartbeat; ``str()`` is a short, bounded reason
    (``unreachable``, ``401 Unauthorized``, ``timeout``, ...)."""


class HeartbeatNotAdmitted(Exception):
    """The SKR's API server took the heartbeat into its admission chain, but calling an
    admission webhook failed there (``failurePolicy: Fail``: the webhook timed out, was
    unreachable, ...). The SKR is reachable and writable; the heartbeat got as far as
    the watcher's side of the path, which did not work: it is judged like a written
    heartbeat whose echo does not come (``NoEvent``), not as a failed write. ``str()``
    is a short, bounded detail."""


@dataclass
class _Runtime:
    health: RuntimeHealth
    added_at: float
    since: float
    """Wall time of the last state change."""
    seq: int = 0
    next_send: float = 0.0


class HealthMonitor:
    """See the module doc."""

    def __init__(
        self,
        writer: HeartbeatWriter,
        *,
        policy: Policy | None = None,
        jitter: float = 0.1,
        max_in_flight: int = 64,
        metrics: HealthMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.policy = policy or Policy()
        next_delay(self.policy.interval, jitter, 0.0)  # refuses a jitter out of range now
        self._writer = writer
        self._jitter = jitter
        self._slots = asyncio.Semaphore(max_in_flight)
        self.metrics = metrics or HealthMetrics()
        self.metrics.track(self.snapshot)
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._runtimes: dict[str, _Runtime] = {}
        self._sends: list[tuple[float, str]] = []
        self._deadlines: list[tuple[float, str]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self.on_transition: list[Transition] = []
        self.unmatched_echoes = 0
        """Echoes for a runtime not monitored, or with no heartbeat out: ignored."""

    # the fleet ---------------------------------------------------------------------------

    def add(self, runtime_id: str) -> None:
        """Monitor ``runtime_id`` (again: a no-op); its first heartbeat at its phase."""
        if runtime_id in self._runtimes:
            return
        now = self._clock()
        first = now + phase(runtime_id, self.policy.interval)
        self._runtimes[runtime_id] = _Runtime(RuntimeHealth(), now, self._wall(), next_send=first)
        self._schedule_send(runtime_id, first)

    def remove(self, runtime_id: str) -> None:
        """Stop monitoring ``runtime_id`` (its queued timers are skipped when due)."""
        self._runtimes.pop(runtime_id, None)

    def __contains__(self, runtime_id: object) -> bool:
        return runtime_id in self._runtimes

    def health(self, runtime_id: str) -> RuntimeHealth | None:
        runtime = self._runtimes.get(runtime_id)
        return runtime.health if runtime is not None else None

    def status(self, runtime_id: str) -> RuntimeStatus | None:
        runtime = self._runtimes.get(runtime_id)
        return self._status(runtime_id, runtime, self._clock()) if runtime else None

    def snapshot(self) -> list[RuntimeStatus]:
        """Every monitored runtime, sorted by id."""
        now = self._clock()
        return [self._status(rid, self._runtimes[rid], now) for rid in sorted(self._runtimes)]

    @staticmethod
    def _status(runtime_id: str, runtime: _Runtime, now: float) -> RuntimeStatus:
        h = runtime.health
        last = h.last_received_at if h.last_received_at is not None else runtime.added_at
        return RuntimeStatus(runtime_id, h, max(0.0, now - last), runtime.since)

    # evidence from the listener ----------------------------------------------------------

    def echo(self, runtime_id: str) -> bool:
        """A heartbeat event of ``runtime_id`` arrived: it answers the newest heartbeat.
        False when there is none out (not monitored, or nothing sent yet)."""
        runtime = self._runtimes.get(runtime_id)
        if runtime is None or runtime.seq == 0:
            self.unmatched_echoes += 1
            return False
        self.metrics.echoes.inc()
        before = runtime.health
        self._apply(runtime_id, Observation("received", runtime.seq, self._clock()))
        after = runtime.health
        if after.last_received != before.last_received and after.round_trip is not None:
            self.metrics.round_trip.observe(after.round_trip)
        return True

    def refused(self, rejection: Rejection) -> None:
        """The listener refused an event of a runtime (use as its rejection observer)."""
        runtime = self._runtimes.get(rejection.runtime_id)
        if runtime is None or runtime.seq == 0:
            return
        self.metrics.refusals.labels(rejection.category).inc()
        seen = Observation("refused", runtime.seq, self._clock(), rejection.category)
        self._apply(rejection.runtime_id, seen)

    # the rules -------------------------------------------------------------------------

    def _apply(self, runtime_id: str, observation: Observation | None) -> None:
        """Fold an observation (None: the passing of time) into the runtime's health."""
        runtime = self._runtimes.get(runtime_id)
        if runtime is None:
            return
        before = runtime.health
        if observation is None:
            after = tick(before, self._clock(), self.policy)
        else:
            after = observe(before, observation, self.policy)
        runtime.health = after
        deadline = next_deadline(after, self.policy)
        if deadline is not None and deadline != next_deadline(before, self.policy):
            heapq.heappush(self._deadlines, (deadline, runtime_id))
            self._wake.set()
        if (after.state, after.reason) == (before.state, before.reason) and not after.recovered:
            return
        if after.state is not before.state:
            runtime.since = self._wall()
            self._probe_sooner(runtime_id, runtime)
        log = logger.warning if after.state is State.BROKEN else logger.info
        log(
            "watcher health of %s: %s (%s%s)",
            runtime_id,
            after.state.value,
            after.reason.value,
            f": {after.detail}" if after.detail else "",
        )
        for notify in list(self.on_transition):
            try:
                notify(runtime_id, before, after)
            except Exception:
                logger.exception("watcher health transition callback failed")

    def _probe_sooner(self, runtime_id: str, runtime: _Runtime) -> None:
        """A runtime that just fell ill is probed at the shorter interval from now on."""
        h = runtime.health
        if h.last_sent_at is None:
            return
        sooner = h.last_sent_at + self.policy.probe_interval(h.state)
        if sooner < runtime.next_send:
            runtime.next_send = max(sooner, self._clock())
            self._schedule_send(runtime_id, runtime.next_send)

    # the schedule ------------------------------------------------------------------------

    def _schedule_send(self, runtime_id: str, at: float) -> None:
        heapq.heappush(self._sends, (at, runtime_id))
        self._wake.set()

    def _send(self, runtime_id: str, runtime: _Runtime, now: float) -> None:
        runtime.seq += 1
        seq = runtime.seq
        self.metrics.sent.inc()
        self._apply(runtime_id, Observation("sent", seq, now))
        probe = self.policy.probe_interval(runtime.health.state)
        runtime.next_send = now + next_delay(probe, self._jitter, self._rng.random())
        self._schedule_send(runtime_id, runtime.next_send)
        task = asyncio.create_task(self._write(runtime_id, seq), name=f"heartbeat-{runtime_id}")
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, runtime_id: str, seq: int) -> None:
        took = 0.0
        try:
            async with self._slots, asyncio.timeout(self.policy.write_timeout):
                started = self._clock()
                await self._writer(runtime_id, seq)
                took = self._clock() - started
        except TimeoutError:
            self._write_failed(runtime_id, seq, "timeout")
        except HeartbeatNotAdmitted as exc:
            self._written(runtime_id, seq, str(exc) or "not admitted")
        except HeartbeatWriteError as exc:
            self._write_failed(runtime_id, seq, str(exc) or "failed")
        except Exception as exc:  # the writer's bug or an unexpected client error
            logger.debug("heartbeat write to %s failed", runtime_id, exc_info=True)
            self._write_failed(runtime_id, seq, type(exc).__name__)
        else:
            # past the echo deadline: what held the write (the admission chain) is worth
            # naming; a quick write says nothing
            note = f"write took {took:.1f} s" if took > self.policy.timeout else ""
            self._written(runtime_id, seq, note)

    def _written(self, runtime_id: str, seq: int, note: str) -> None:
        self._apply(runtime_id, Observation("written", seq, self._clock(), note))

    def _write_failed(self, runtime_id: str, seq: int, reason: str) -> None:
        self.metrics.write_failures.inc()
        self._apply(runtime_id, Observation("write-failed", seq, self._clock(), reason))

    def _due(self, now: float) -> None:
        """Send every heartbeat that is due; judge every deadline that passed."""
        while self._sends and self._sends[0][0] <= now:
            at, runtime_id = heapq.heappop(self._sends)
            runtime = self._runtimes.get(runtime_id)
            if runtime is not None and runtime.next_send == at:  # else superseded
                self._send(runtime_id, runtime, now)
        while self._deadlines and self._deadlines[0][0] <= now:
            at, runtime_id = heapq.heappop(self._deadlines)
            runtime = self._runtimes.get(runtime_id)
            if runtime is not None and next_deadline(runtime.health, self.policy) == at:
                self._apply(runtime_id, None)  # else answered (or superseded) meanwhile

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = self._clock()
            self._due(now)
            upcoming = [h[0][0] for h in (self._sends, self._deadlines) if h]
            delay = max(0.0, min(upcoming) - self._clock()) if upcoming else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    # lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="watcher-health")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._writes) if t is not None]
        self._task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


__all__ = [
    "HealthMonitor",
    "HeartbeatNotAdmitted",
    "HeartbeatWriteError",
    "HeartbeatWriter",
    "Transition",
]
