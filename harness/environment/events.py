"""What the environment observed: every accepted event, and the faults it injected.

Pure record keeping (no I/O): listeners call :meth:`EventLog.record`; scenario
expectations read :attr:`EventLog.events` (append-only, arrival order) and
:attr:`EventLog.timeline`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from watcher.listener import ListenerEvent


@dataclass(frozen=True)
class ObservedEvent:
    """One event a listener accepted; ``received_at`` is the listener's ``time.time()``."""

    manager: str
    runtime_id: str
    namespace: str
    name: str
    group: str
    version: str
    kind: str
    received_at: float


@dataclass(frozen=True)
class FaultRecord:
    """One fault action: when it started and ended (``time.time()``), on what, which."""

    at: float
    target: str
    action: str
    done_at: float
    detail: str = ""


class EventLog:
    """Append-only record of observed events and injected faults."""

    def __init__(self) -> None:
        self.events: list[ObservedEvent] = []
        self.timeline: list[FaultRecord] = []

    def record(self, manager: str, event: ListenerEvent) -> ObservedEvent:
        watched, gvk = event.event.watched, event.event.watched_gvk
        observed = ObservedEvent(
            manager=manager,
            runtime_id=event.runtime_id,
            namespace=watched.namespace,
            name=watched.name,
            group=gvk.group,
            version=gvk.version,
            kind=gvk.kind,
            received_at=event.received_at,
        )
        self.events.append(observed)
        return observed

    def recorder(self, manager: str) -> _Recorder:
        """A callback recording events for ``manager`` (sync and async flavours)."""
        return _Recorder(self, manager)

    def events_since(self, t: float, manager: str | None = None) -> list[ObservedEvent]:
        """Events received at or after ``t`` (optionally for one manager), in arrival order."""
        return [
            e
            for e in self.events
            if e.received_at >= t and (manager is None or e.manager == manager)
        ]

    def faults_between(self, start: float, end: float) -> list[FaultRecord]:
        """Fault actions that started within ``[start, end]``."""
        starts = [r.at for r in self.timeline]
        return self.timeline[bisect.bisect_left(starts, start) : bisect.bisect_right(starts, end)]


@dataclass(frozen=True)
class _Recorder:
    log: EventLog
    manager: str

    def __call__(self, event: ListenerEvent) -> None:
        self.log.record(self.manager, event)

    async def consume(self, event: ListenerEvent) -> None:
        self.log.record(self.manager, event)
