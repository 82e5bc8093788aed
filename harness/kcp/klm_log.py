"""What a Lifecycle Manager says in its log, read as observations — for any KLM build.

A KLM the harness did not write shows which Kyma it reconciles and why only in its log
(zap JSON lines at ``--log-level=2``: ``Kyma reconciliation started``, ``event received
from SKR, adding <key> to queue``, ``Reconciler error``). :class:`ReconcileHistory` folds
the observations into reconciles: one is ``watch-event`` when an event queued its Kyma
since the previous reconcile started (the queue merges what arrived meanwhile); ours also
declares ``context.trigger`` and ``context.waited``. Pure, so hypothesis can drive it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

RECONCILE_STARTED = "Kyma reconciliation started"
RECONCILE_FINISHED = "Kyma reconciliation finished"
"""Ours only: the reconcile's outcome in ``context.outcome`` (a declared capability)."""
RECONCILER_ERROR = "Reconciler error"
KYMA_CONTROLLER = "kyma"
EVENT_QUEUED = re.compile(r"^event received from SKR, adding (?P<key>[^\s/]+/[^\s/]+) to queue$")
WATCH_EVENT = "watch-event"


R = TypeVar("R")


def matching(
    records: Iterable[R], kyma: str | None, trigger: str | None, since: float | None
) -> list[R]:
    """The reconciles (ours or a log's) of ``kyma`` ("namespace/name") with ``trigger``,
    started at or after ``since`` (None: any), in order."""

    def wanted(r: Any) -> bool:
        return (
            (kyma is None or r.kyma == kyma)
            and (trigger is None or trigger in r.triggers)
            and (since is None or r.at >= since)
        )

    return [r for r in records if wanted(r)]


@dataclass(frozen=True)
class LogRecord:
    """One structured log line: ``at`` in epoch seconds."""

    at: float
    level: str
    message: str
    logger: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)


def _epoch(text: str) -> float | None:
    """RFC 3339 with up to nanoseconds (Go's), ``Z`` or an offset → epoch seconds."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if match is None:
        return None
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    try:
        stamp = dt.datetime.fromisoformat(base + zone)
    except ValueError:
        return None
    return stamp.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def parse_record(line: str) -> LogRecord | None:
    """A KLM log line (one JSON object with ``date`` or ``ts``, ``level``, ``msg``), or
    None for anything else (a panic's text, a plain line)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("msg"), str):
        return None
    stamp = data.get("date", data.get("ts"))
    at = _epoch(stamp) if isinstance(stamp, str) else None
    if at is None:
        return None
    context = data.get("context")
    return LogRecord(
        at=at,
        level=str(data.get("level", "")),
        message=data["msg"],
        logger=str(data.get("logger", "")),
        context=context if isinstance(context, dict) else {},
    )


@dataclass(frozen=True)
class ReconcileStarted:
    at: float
    kyma: str  # "namespace/name"
    reconcile_id: str
    trigger: str | None = None  # what the KLM says itself, if it does (comma-separated)
    waited: float | None = None  # seconds since its first trigger, if the KLM says (ours)


@dataclass(frozen=True)
class EventQueued:
    at: float
    kyma: str


@dataclass(frozen=True)
class ReconcileFailed:
    at: float
    kyma: str
    reconcile_id: str
    error: str


@dataclass(frozen=True)
class ReconcileFinished:
    at: float
    kyma: str
    reconcile_id: str
    outcome: str


Observation = ReconcileStarted | EventQueued | ReconcileFailed | ReconcileFinished


def _kyma_key(context: Mapping[str, Any]) -> str | None:
    name, namespace = context.get("name"), context.get("namespace")
    if isinstance(name, str) and isinstance(namespace, str) and name and namespace:
        return f"{namespace}/{name}"
    return None


def observe(record: LogRecord) -> Observation | None:
    """What ``record`` says about the Kyma controller (None: nothing)."""
    queued = EVENT_QUEUED.match(record.message)
    if queued is not None:
        return EventQueued(record.at, queued["key"])
    context = record.context
    if context.get("controller") != KYMA_CONTROLLER:
        return None
    key = _kyma_key(context)
    if key is None:
        return None
    reconcile_id = str(context.get("reconcileID", ""))
    if record.message == RECONCILE_STARTED:
        trigger, waited = context.get("trigger"), context.get("waited")
        return ReconcileStarted(
            record.at,
            key,
            reconcile_id,
            trigger if isinstance(trigger, str) else None,
            float(waited) if isinstance(waited, int | float) and waited >= 0 else None,
        )
    if record.message == RECONCILER_ERROR:
        return ReconcileFailed(record.at, key, reconcile_id, str(context.get("error", "")))
    if record.message == RECONCILE_FINISHED and isinstance(context.get("outcome"), str):
        return ReconcileFinished(record.at, key, reconcile_id, context["outcome"])
    return None


@dataclass(frozen=True)
class ObservedReconcile:
    """One reconcile as the log shows it. ``queued_at``: the first event that queued it
    (else the start); ``failed``: a ``Reconciler error`` came for this reconcile id."""

    at: float
    kyma: str
    triggers: frozenset[str]
    queued_at: float
    reconcile_id: str = ""
    failed: bool = False
    error: str = ""
    outcome: str | None = None
    """What the KLM says the reconcile came to (ours does); ``error`` when it failed."""

    @property
    def latency(self) -> float:
        return self.at - self.queued_at


class ReconcileHistory:
    """Observations in log order → reconciles (append-only, like the log)."""

    def __init__(self) -> None:
        self.reconciles: list[ObservedReconcile] = []
        self.events_queued: list[EventQueued] = []
        self._pending_events: dict[str, float] = {}
        self._by_id: dict[str, int] = {}

    def add(self, observation: Observation) -> ObservedReconcile | None:
        """Take one observation; return the reconcile it started or completed, if any."""
        match observation:
            case EventQueued(at=at, kyma=kyma):
                self.events_queued.append(observation)
                self._pending_events.setdefault(kyma, at)
                return None
            case ReconcileStarted(
                at=at, kyma=kyma, reconcile_id=rid, trigger=trigger, waited=waited
            ):
                queued = self._pending_events.pop(kyma, None)
                triggers = set(trigger.split(",")) if trigger else set()
                if queued is not None:
                    triggers.add(WATCH_EVENT)
                if waited is not None:  # the KLM's own figure beats the log's event lines
                    queued = at - waited
                reconcile = ObservedReconcile(
                    at=at,
                    kyma=kyma,
                    triggers=frozenset(triggers),
                    queued_at=queued if queued is not None else at,
                    reconcile_id=rid,
                )
                if rid:
                    self._by_id[rid] = len(self.reconciles)
                self.reconciles.append(reconcile)
                return reconcile
        index = self._by_id.get(observation.reconcile_id)
        if index is None:
            return None
        done = self.reconciles[index]
        if isinstance(observation, ReconcileFailed):
            done = dataclasses.replace(done, failed=True, error=observation.error, outcome="error")
        else:
            done = dataclasses.replace(
                done, outcome="error" if done.failed else observation.outcome
            )
        self.reconciles[index] = done
        return done

    def extend(self, observations: Iterable[Observation | None]) -> None:
        for observation in observations:
            if observation is not None:
                self.add(observation)

    def of(
        self, kyma: str | None = None, trigger: str | None = None, since: float | None = None
    ) -> list[ObservedReconcile]:
        return matching(self.reconciles, kyma, trigger, since)
