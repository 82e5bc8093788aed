"""A runtime's watcher health from heartbeat evidence, as a pure state machine.

The KCP writes a heartbeat (a sequence number) into each SKR at an interval; the SKR's
admission chain → webhook → gateway → listener bring it back as a normal WatchEvent. What
the monitor learns about one runtime is a stream of :class:`Observation`\\ s — a heartbeat
sent, its SKR write returned (written), its echo received, refused at the listener, the SKR
write failed — and the passing of time. :func:`observe` and :func:`tick` fold them into a
:class:`RuntimeHealth`:

* a heartbeat counts as **missed** when no echo of it (or of a later one) arrived within
  ``timeout`` of sending it, and at once when its SKR write failed or the listener
  refused its echo; any echo resets the count, late or not. With the timeout short of
  the interval, a watcher that breaks right after an echo misses the next two
  heartbeats by ``2 * interval + timeout`` at the latest: Broken within two heartbeats;
* **Unknown** until the first echo, unless misses already make it Broken — never Healthy
  without a received heartbeat;
* **Healthy** with no miss, and also with one miss that has no other evidence — one late
  heartbeat alone does not flap the state;
* **Degraded** with one miss that has evidence (the SKR write failed, the listener
  refused it), or when the last round trip was slower than ``slow``;
* **Broken** from ``broken_after`` (2) consecutive misses;
* the **reason** names the evidence of the current streak: ``SkrWriteFailed`` (the SKR
  could not be written: unreachable, credentials, refused), ``EventRefused`` (the listener
  said why: SAN mismatch, untrusted proxy, ...), else ``NoEvent`` (written, but nothing
  came back: webhook, VWC, certificate, network, gateway or route). A write the SKR's
  admission chain held (a webhook delivering inside the admission call, retrying a broken
  KCP path) is *written*, not failed: the SKR took it, the watcher could not deliver it.
  What the newest write said (``write took 6.1 s``) is ``NoEvent``'s detail;
* ``recovered`` is true on the one transition from Degraded/Broken back to Healthy — the
  moment an operator reconciles the runtime's Kyma once to catch up what it missed.

No I/O and no clock: times are seconds passed in by the caller, so hypothesis can drive it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class State(StrEnum):
    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    DEGRADED = "Degraded"
    BROKEN = "Broken"


class Reason(StrEnum):
    NO_HEARTBEAT_YET = "NoHeartbeatYet"
    HEARTBEAT_RECEIVED = "HeartbeatReceived"
    SLOW_ROUND_TRIP = "SlowRoundTrip"
    NO_EVENT = "NoEvent"
    SKR_WRITE_FAILED = "SkrWriteFailed"
    EVENT_REFUSED = "EventRefused"


ObservationKind = Literal["sent", "written", "received", "refused", "write-failed"]


@dataclass(frozen=True)
class Observation:
    """One piece of evidence about a runtime's heartbeat ``seq`` at time ``at`` (seconds);
    ``detail`` says more (the listener's rejection reason, the SKR write's error, how a
    write that went through took long: ``written``)."""

    kind: ObservationKind
    seq: int
    at: float
    detail: str = ""


@dataclass(frozen=True)
class Policy:
    """``interval`` between heartbeats; a heartbeat not echoed within ``timeout`` is
    missed; ``broken_after`` consecutive misses make it Broken; a round trip above
    ``slow`` (None: never) makes it Degraded. A runtime that is not well is probed every
    ``interval * recovery_factor``, so it is back to Healthy within one interval of the
    fix (a whole interval plus the round trip would not be).

    ``write_timeout`` bounds one heartbeat write; only a write that did not return within
    it counts as failed (``timeout``). It must outlast the SKR's admission webhook
    timeout (``timeoutSeconds``, 15 s as KLM renders it): a webhook that delivers inside
    the admission call (upstream's; ours with ``WATCHER_DELIVERY_MODE=sync``) holds the
    write while it retries a broken KCP path, and the API server then admits it anyway
    (``failurePolicy: Ignore``). Such a write is written; its missing echo is judged by
    ``timeout`` like any other."""

    interval: float = 60.0
    timeout: float = 5.0
    broken_after: int = 2
    slow: float | None = None
    recovery_factor: float = 0.5
    write_timeout: float = 20.0

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.timeout <= 0 or self.write_timeout <= 0:
            raise ValueError("interval, timeout and write_timeout must be positive")
        if self.timeout >= self.interval:
            raise ValueError(
                f"timeout ({self.timeout:g} s) must be shorter than the interval "
                f"({self.interval:g} s): a heartbeat is judged before the next is sent"
            )
        if self.broken_after < 2:
            raise ValueError("broken_after must be at least 2 (one late heartbeat is no failure)")
        if not 0 < self.recovery_factor <= 1:
            raise ValueError("recovery_factor must be in (0, 1]")

    def deadline(self, sent_at: float) -> float:
        return sent_at + self.timeout

    def probe_interval(self, state: State) -> float:
        """Time from one heartbeat to the next for a runtime in ``state``."""
        if state in (State.DEGRADED, State.BROKEN):
            return self.interval * self.recovery_factor
        return self.interval


@dataclass(frozen=True)
class RuntimeHealth:
    """What the monitor knows about one runtime's watcher."""

    state: State = State.UNKNOWN
    reason: Reason = Reason.NO_HEARTBEAT_YET
    detail: str = ""
    last_sent: int | None = None
    last_sent_at: float | None = None
    last_received: int | None = None
    last_received_at: float | None = None
    round_trip: float | None = None
    misses: int = 0
    pending: tuple[tuple[int, float], ...] = ()
    """Heartbeats sent and not yet echoed nor counted as missed: (seq, sent at)."""
    evidence: tuple[Reason, str] | None = None
    """The newest explicit evidence since the last echo (write failed, refused); a miss
    without evidence of its own keeps it as the likeliest explanation."""
    written: tuple[int, str] | None = None
    """Since the last echo: the newest heartbeat whose SKR write returned, and what it said
    (``""``, or e.g. ``write took 6.1 s``): the detail of ``NoEvent``."""
    recovered: bool = False
    """True only right after the transition from Degraded/Broken to Healthy."""


def _judge(health: RuntimeHealth, policy: Policy, before: State) -> RuntimeHealth:
    """State and reason from the counters; ``recovered`` from the previous state."""
    no_event = (Reason.NO_EVENT, health.written[1] if health.written else "")
    evidence_reason, evidence_detail = health.evidence or no_event
    if health.misses >= policy.broken_after:
        state, reason, detail = State.BROKEN, evidence_reason, evidence_detail
    elif health.misses == 1 and health.evidence is not None:
        state, reason, detail = State.DEGRADED, evidence_reason, evidence_detail
    elif health.last_received is None:
        state, reason, detail = State.UNKNOWN, Reason.NO_HEARTBEAT_YET, ""
    elif policy.slow is not None and (health.round_trip or 0.0) > policy.slow:
        state, reason = State.DEGRADED, Reason.SLOW_ROUND_TRIP
        detail = f"round trip {health.round_trip:.3f} s > {policy.slow:g} s"
    else:
        state, reason, detail = State.HEALTHY, Reason.HEARTBEAT_RECEIVED, ""
    recovered = state is State.HEALTHY and before in (State.DEGRADED, State.BROKEN)
    return dataclasses.replace(
        health, state=state, reason=reason, detail=detail, recovered=recovered
    )


_STRENGTH = {Reason.SKR_WRITE_FAILED: 2, Reason.EVENT_REFUSED: 1}


def _stronger(current: tuple[Reason, str] | None, new: tuple[Reason, str]) -> tuple[Reason, str]:
    if current is None or _STRENGTH[new[0]] >= _STRENGTH[current[0]]:
        return new
    return current


def observe(health: RuntimeHealth, observation: Observation, policy: Policy) -> RuntimeHealth:
    """``health`` after one observation (call :func:`tick` for the passing of time)."""
    o = observation
    if o.kind == "sent":
        changed = dataclasses.replace(
            health,
            last_sent=o.seq,
            last_sent_at=o.at,
            pending=(*health.pending, (o.seq, o.at)),
        )
    elif o.kind == "written":  # in the SKR: its echo (or its absence) decides, not the write
        if health.written is not None and o.seq < health.written[0]:
            return dataclasses.replace(health, recovered=False)  # a newer write said more
        if health.last_received is not None and o.seq <= health.last_received:
            return dataclasses.replace(health, recovered=False)  # answered already
        changed = dataclasses.replace(health, written=(o.seq, o.detail))
    elif o.kind == "received":
        sent_at = dict(health.pending).get(o.seq)
        if sent_at is None and o.seq == health.last_sent and health.last_sent_at is not None:
            sent_at = health.last_sent_at  # already counted as missed: a late echo
        if health.last_received is not None and o.seq < health.last_received:
            return dataclasses.replace(health, recovered=False)  # an old echo: nothing new
        changed = dataclasses.replace(
            health,
            last_received=o.seq,
            last_received_at=o.at,
            round_trip=o.at - sent_at if sent_at is not None else health.round_trip,
            misses=0,
            pending=tuple(p for p in health.pending if p[0] > o.seq),
            evidence=None,
            written=None,
        )
    else:  # refused at the listener, or the SKR write failed: that heartbeat is lost
        reason = Reason.EVENT_REFUSED if o.kind == "refused" else Reason.SKR_WRITE_FAILED
        # lost now: it was pending, or a write failed before it counted as sent; a
        # failure reported after the deadline already counted it only adds the evidence
        never_sent = o.kind == "write-failed" and o.seq > (health.last_sent or 0)
        lost = never_sent or any(seq == o.seq for seq, _ in health.pending)
        changed = dataclasses.replace(
            health,
            evidence=(reason, o.detail),  # the newest evidence explains the streak
            misses=health.misses + 1 if lost else health.misses,
            pending=tuple(p for p in health.pending if p[0] != o.seq),
        )
    return _judge(changed, policy, health.state)


def tick(health: RuntimeHealth, now: float, policy: Policy) -> RuntimeHealth:
    """``health`` at ``now``: heartbeats past their deadline without an echo are missed."""
    overdue = [p for p in health.pending if policy.deadline(p[1]) <= now]
    if not overdue:
        return dataclasses.replace(health, recovered=False) if health.recovered else health
    changed = dataclasses.replace(
        health,
        misses=health.misses + len(overdue),
        pending=tuple(p for p in health.pending if policy.deadline(p[1]) > now),
    )
    return _judge(changed, policy, health.state)


def next_deadline(health: RuntimeHealth, policy: Policy) -> float | None:
    """When :func:`tick` next has something to do (None: nothing pending)."""
    return min((policy.deadline(at) for _, at in health.pending), default=None)


__all__ = [
    "Observation",
    "ObservationKind",
    "Policy",
    "Reason",
    "RuntimeHealth",
    "State",
    "next_deadline",
    "observe",
    "tick",
]
