"""Observations: one typed snapshot of what a running scenario saw, for the judges.

Pure data. The runner gathers a snapshot (:mod:`harness.runner.observe`) each time it
polls an ``expect`` or an ``assert``: received events, reconciles, listener rejections,
metric samples, selected objects, churn writes, the scenario's own writes, script results
and the facts the ground truth needs (Watcher rules over time, runtime ids). Every module
in :mod:`harness.expect` judges one expectation kind against such a snapshot, with no I/O,
so each can be tested with plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.churn.admissions import AdmissionCounts, Gap
from harness.churn.model import ExecutedMutation
from harness.churn.plan import ChurnSpec
from harness.churn.truth import Rule
from harness.expect.match import ReceivedEvent

MetricKey = tuple[str, str, tuple[tuple[str, str], ...], float | None]
"""(target, sample name, sorted labels, quantile): one value an expectation reads."""


def metric_key(
    target: str, name: str, labels: Mapping[str, str], quantile: float | None = None
) -> MetricKey:
    return (target, name, tuple(sorted(labels.items())), quantile)


@dataclass(frozen=True)
class ReconcileSeen:
    """One Lifecycle-Manager reconcile of a KCP Kyma (``namespace/name``)."""

    kyma: str
    triggers: frozenset[str]
    outcome: str  # success, busy, warning, error, gone
    at: float
    latency: float = 0.0
    """Seconds from its first trigger to its start (the queue's wait)."""


@dataclass(frozen=True)
class WriteSeen:
    """A write by an ``apply``/``patch``/``delete`` operation."""

    cluster: str
    namespace: str
    name: str
    sent_at: float


@dataclass(frozen=True)
class ChurnSeen:
    """One churn operation as far as it got: what it planned, what it executed."""

    spec: ChurnSpec
    started_at: float
    executed: tuple[ExecutedMutation, ...] = ()
    ended_at: float | None = None
    verified: bool = False  # an earlier ``truth`` already covered it
    admissions_before: Mapping[str, AdmissionCounts | None] = field(default_factory=dict)
    admissions_after: Mapping[str, AdmissionCounts | None] = field(default_factory=dict)
    admission_gaps: Mapping[str, tuple[Gap, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectsSeen:
    """The objects one selection found on one cluster right now (``error``: the cluster
    could not be asked, e.g. its API server is down or the resource is unknown)."""

    cluster: str
    objects: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class ObjectChange:
    """One change an object watch saw (``watch``: its
    :attr:`~harness.scenario.timeline.ObjectWatch.key`): ``added``, ``modified`` or
    ``deleted``, at its arrival (``time.time()``). ``object`` keeps only what matching
    needs: ``apiVersion``, ``kind``, ``metadata`` (no ``managedFields``) and the top-level
    keys a ``match`` reads."""

    watch: str
    change: str
    at: float
    object: Mapping[str, Any]


@dataclass(frozen=True)
class Mark:
    """A step boundary or a fault as the report's timeline has it (``kind``: ``step`` or
    ``fault``; for a step, ``object`` is its name and ``detail`` ``start``, ``passed`` or
    ``failed``; for a fault, ``source`` is its target and ``object`` its action)."""

    kind: str
    source: str
    object: str
    detail: str
    at: float


@dataclass(frozen=True)
class Observations:
    """Everything the judges may look at, as of one moment (``now``) of one window
    (``since``: the window's start)."""

    since: float
    now: float
    events: tuple[ReceivedEvent, ...] = ()
    reconciles: tuple[ReconcileSeen, ...] = ()
    rejections: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(listener, reason) → refusals since the window opened."""
    metrics: Mapping[MetricKey, float] = field(default_factory=dict)
    """Every sample the expectation names (absent series read 0)."""
    objects: Mapping[int, tuple[ObjectsSeen, ...]] = field(default_factory=dict)
    """Per ``assert``/``error`` selection (by position): what each selected cluster holds."""
    churns: tuple[ChurnSeen, ...] = ()
    writes: tuple[WriteSeen, ...] = ()
    rules: tuple[Rule, ...] = ()
    runtime_ids: Mapping[str, str] = field(default_factory=dict)
    """SKR name → runtime id."""
    webhook_managers: Mapping[str, str] = field(default_factory=dict)
    """Webhook name → manager, for every Watcher the scenario had at any time."""
    settle: float = 0.0
    """Seconds a Watcher change took to go live, plus a margin (ground-truth uncertainty)."""
    run_start: float = 0.0
    """When the scenario began (``timeline`` entries with ``since: run``)."""
    object_changes: tuple[ObjectChange, ...] = ()
    """What the scenario's object watches recorded (only when a ``timeline`` names objects)."""
    marks: tuple[Mark, ...] = ()
    """Step boundaries and faults so far (only when a ``timeline`` names them)."""


@dataclass(frozen=True)
class ScriptResult:
    """How one ``script`` command ended: its exit code (``None``: killed at its timeout or
    could not start, ``error`` says which), output and duration."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    error: str | None = None
