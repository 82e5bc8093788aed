"""``expect: {timeline: [...]}``: the order and distance of two things that happened.

Each entry names two occurrences, ``first`` and ``then``, each selected by exactly one of
``object``, ``write``, ``event``, ``reconcile``, ``step`` or ``fault``; shapes and semantics
are in docs/scenarios.md (*Timeline: order and distance*). ``object`` selectors need a
list+watch from before the first step (:func:`object_watches`).

Pure: the model, its validation and the list of object watches a scenario needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from harness.matching.syntax import is_expression_key
from harness.scenario.objects import ObjectType, match_problem
from harness.scenario.reconciles import Outcomes, ReconcileTrigger
from harness.scenario.values import DnsLabel, Model, PositiveDuration, ResourceRef, Text

Change = Literal["added", "modified", "deleted"]
CHANGES: tuple[Change, ...] = ("added", "modified", "deleted")
TIMELINE_FAULT_TARGET_PATTERN = (
    r"^(gateway|kcp|certificates|(listener|webhook|apiserver)/[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
)
SELECTOR_KEYS = ("object", "write", "event", "reconcile", "step", "fault")


def _one_or_more(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset((value,) if isinstance(value, str) else value)


@dataclass(frozen=True)
class ObjectWatch:
    """One list+watch the runner keeps while the scenario runs: every object of one type
    on one cluster (in ``namespace``; empty: all namespaces or cluster-scoped)."""

    cluster: str
    resource: ResourceRef | None = None
    api_version: str | None = None
    kind: str | None = None
    namespace: str = ""

    @property
    def type_name(self) -> str:
        """``group/version/plural`` or ``apiVersion/Kind``."""
        if self.resource is not None:
            r = self.resource
            return f"{r.group}/{r.version}/{r.resource}".lstrip("/")
        return f"{self.api_version}/{self.kind}"

    @property
    def key(self) -> str:
        """``cluster:type[:namespace]``: what a recorded change is filed under."""
        return f"{self.cluster}:{self.type_name}" + (f":{self.namespace}" if self.namespace else "")


class ObjectSelector(ObjectType):
    """Changes of objects on one ``cluster`` (``kcp`` or an SKR) of ``resource`` (a
    shorthand or ``{group, version, resource}``) or ``apiVersion`` + ``kind``, in
    ``namespace`` (empty: every namespace, or a cluster-scoped kind), by ``name`` and/or
    label ``selector``; only ``change`` (one or a list; none: any) and only when the
    object as changed matches ``match`` (a partial tree, as ``assert``'s)."""

    cluster: DnsLabel
    change: Change | tuple[Change, ...] | None = None
    match: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _valid(self) -> ObjectSelector:
        if (problem := self.type_problem(required=True)) is not None:
            raise ValueError(problem)
        if isinstance(self.change, tuple) and not self.change:
            raise ValueError("change: give one change or a non-empty list of them")
        if (problem := match_problem(self.match)) is not None:
            raise ValueError(problem)
        return self

    @property
    def changes(self) -> frozenset[str] | None:
        """The changes selected (``None``: any)."""
        return _one_or_more(self.change)

    @property
    def watch(self) -> ObjectWatch:
        return ObjectWatch(self.cluster, self.resource, self.api_version, self.kind, self.namespace)

    def kept_keys(self) -> frozenset[str] | None:
        """Top-level keys of the object ``match`` reads besides ``metadata`` (``None``: it
        may read anything — a top-level expression)."""
        if not self.match:
            return frozenset()
        if any(is_expression_key(k) for k in self.match):
            return None
        return frozenset(str(k) for k in self.match)

    def describe(self) -> str:
        changes = self.changes
        change = "|".join(c for c in CHANGES if c in changes) if changes else "changed"
        matching = " (matching)" if self.match else ""
        return f"{self.describe_objects()} {change} on {self.cluster}{matching}"


class WriteSelector(Model):
    """The scenario's own ``apply``/``patch``/``delete`` writes (``None``: any)."""

    cluster: DnsLabel | None = None
    namespace: str | None = None
    name: str | None = None

    def describe(self) -> str:
        obj = f"{self.namespace or '*'}/{self.name or '*'}"
        return f"write of {obj}" + (f" on {self.cluster}" if self.cluster else "")


class EventObject(Model):
    """The watched object an event names (``kind`` optional), as in ``events``."""

    namespace: str = ""
    name: Text
    kind: str | None = None


class EventSelector(Model):
    """A WatchEvent a listener received: by ``manager``, sender (``cluster``, an SKR, or
    its ``runtimeId``) and ``object``."""

    manager: DnsLabel | None = None
    runtime_id: str | None = None
    cluster: DnsLabel | None = None
    object: EventObject | None = None

    def describe(self) -> str:
        parts = ["event"]
        if self.manager:
            parts.append(f"at {self.manager}")
        if self.cluster or self.runtime_id:
            parts.append(f"from {self.cluster or self.runtime_id}")
        if self.object is not None:
            obj = f"{self.object.namespace}/{self.object.name}".lstrip("/")
            parts.append(f"about {self.object.kind + ' ' if self.object.kind else ''}{obj}")
        return " ".join(parts)


class ReconcileSelector(Model):
    """A Lifecycle-Manager reconcile of a KCP Kyma (``name`` or ``namespace/name``), by
    ``trigger`` and ``outcome`` (one or a list of alternatives)."""

    kyma: Text
    trigger: ReconcileTrigger | None = None
    outcome: Outcomes | None = None

    @property
    def outcomes(self) -> frozenset[str] | None:
        return None if self.outcome is None else frozenset(self.outcome)

    def describe(self) -> str:
        text = f"reconcile of {self.kyma}"
        if self.trigger:
            text += f" by {self.trigger}"
        if self.outcomes:
            text += f" ({'|'.join(sorted(self.outcomes))})"
        return text


class StepSelector(Model):
    """A step of this scenario began (``start``) or ended (``end``)."""

    name: Text
    phase: Literal["start", "end"] = "start"

    def describe(self) -> str:
        return f"step {self.name} {'began' if self.phase == 'start' else 'ended'}"


class FaultSelector(Model):
    """A ``fault`` operation (``target`` as the operation gives it; ``action``: ``stop``,
    ``start``, ``kill``, ``restart``, ``inject``, ``clear``, ...; ``None``: any)."""

    target: str | None = Field(default=None, pattern=TIMELINE_FAULT_TARGET_PATTERN)
    action: str | None = None

    def describe(self) -> str:
        return f"fault {self.target or '*'} {self.action or ''}".rstrip()


Selector = (
    ObjectSelector
    | WriteSelector
    | EventSelector
    | ReconcileSelector
    | StepSelector
    | FaultSelector
)


class Occurrence(Model):
    """What happened: exactly one of ``object``, ``write``, ``event``, ``reconcile``,
    ``step``, ``fault``."""

    object: ObjectSelector | None = None
    write: WriteSelector | None = None
    event: EventSelector | None = None
    reconcile: ReconcileSelector | None = None
    step: StepSelector | None = None
    fault: FaultSelector | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Occurrence:
        given = [k for k in SELECTOR_KEYS if getattr(self, k) is not None]
        if len(given) != 1:
            got = f"got {', '.join(given)}" if given else "got none"
            raise ValueError(f"give exactly one of {', '.join(SELECTOR_KEYS)} ({got})")
        return self

    @property
    def selector(self) -> Selector:
        selector: Selector = getattr(self, self.key)
        return selector

    @property
    def key(self) -> str:
        """Which kind of occurrence: ``object``, ``write``, ..."""
        return next(k for k in SELECTOR_KEYS if getattr(self, k) is not None)

    def describe(self) -> str:
        return self.selector.describe()


class TimelineExpectation(Model):
    """``first`` happened, and ``then`` at or after it — at most ``within`` after it, if
    given. Occurrences count from the window (``since: window``) or the scenario's start
    (``since: run``); see the module doc."""

    first: Occurrence
    then: Occurrence
    within: PositiveDuration | None = None
    since: Literal["window", "run"] = "window"

    def describe(self) -> str:
        text = f"{self.first.describe()}, then {self.then.describe()}"
        if self.within is not None:
            text += f" within {self.within:g} s"
        return text + (" (since the run began)" if self.since == "run" else "")


def object_watches(entries: Iterable[TimelineExpectation]) -> tuple[ObjectWatch, ...]:
    """The distinct list+watches ``entries`` need, in order."""
    out: dict[ObjectWatch, None] = {}
    for entry in entries:
        for occurrence in (entry.first, entry.then):
            if occurrence.object is not None:
                out.setdefault(occurrence.object.watch, None)
    return tuple(out)


def kept_keys(entries: Iterable[TimelineExpectation], watch: ObjectWatch) -> frozenset[str] | None:
    """What of each changed object ``watch`` records must be kept for matching: its
    ``apiVersion``, ``kind`` and ``metadata`` always, plus these top-level keys
    (``None``: all of it)."""
    keys: set[str] = set()
    for entry in entries:
        for occurrence in (entry.first, entry.then):
            sel = occurrence.object
            if sel is None or sel.watch != watch:
                continue
            more = sel.kept_keys()
            if more is None:
                return None
            keys |= more
    return frozenset(keys)
