"""Received WatchEvents against the ground truth. Pure.

``match_events(truth, received)`` groups events by (manager, runtime id, object) and
applies the coalescing rule of ``harness.churn.truth``: missing, duplicate, repeated
admission, wrong listener, wrong runtime and spurious are defined in docs/ground-truth.md.
Events about objects the churn never wrote are ignored (other steps' writes) unless
``scope_to_churn=False``. A latency sample is ``received_at`` minus the earliest
``sent_at`` of the causes sent since the previous event of its group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.churn.truth import Cause, EventKey, ExpectedEvent, Truth
from watcher.model import GroupVersionKind

Problem = Literal[
    "missing", "spurious", "duplicate", "wrong-listener", "wrong-runtime", "repeated-admission"
]


@dataclass(frozen=True)
class ReceivedEvent:
    """One event a listener received (``manager`` = the listener that got it)."""

    manager: str
    runtime_id: str
    namespace: str
    name: str
    gvk: GroupVersionKind
    received_at: float

    @property
    def key(self) -> EventKey:
        return EventKey(
            self.manager, self.runtime_id, self.namespace, self.name, self.gvk.group, self.gvk.kind
        )


@dataclass(frozen=True)
class Finding:
    """One thing that does not match; ``describe()`` is the line a report shows."""

    problem: Problem
    key: EventKey
    expected: str
    actual: str
    received_at: tuple[float, ...] = ()

    def describe(self) -> str:
        return f"{self.problem}: {self.key}: expected {self.expected}, got {self.actual}"


@dataclass(frozen=True)
class LatencySample:
    key: EventKey
    mutation_id: int
    sent_at: float
    received_at: float

    @property
    def value(self) -> float:
        return self.received_at - self.sent_at


@dataclass(frozen=True)
class MatchResult:
    missing: tuple[Finding, ...] = ()
    spurious: tuple[Finding, ...] = ()
    duplicates: tuple[Finding, ...] = ()
    wrong_listener: tuple[Finding, ...] = ()
    wrong_runtime: tuple[Finding, ...] = ()
    latencies: tuple[LatencySample, ...] = ()
    repeated: tuple[Finding, ...] = ()
    """Excess events explained by repeated admissions (not findings: the rule allows them)."""
    matched: int = 0
    """Expected groups whose events satisfy the rule."""
    ignored: int = 0
    """Received events about objects the churn did not write."""

    @property
    def findings(self) -> tuple[Finding, ...]:
        return (
            self.missing
            + self.spurious
            + self.duplicates
            + self.wrong_listener
            + self.wrong_runtime
        )

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def latency_values(self) -> tuple[float, ...]:
        return tuple(s.value for s in self.latencies)

    def describe(self) -> str:
        """A summary line and one line per finding."""
        counts = ", ".join(
            f"{len(v)} {name}"
            for name, v in (
                ("missing", self.missing),
                ("spurious", self.spurious),
                ("duplicate", self.duplicates),
                ("wrong listener", self.wrong_listener),
                ("wrong runtime", self.wrong_runtime),
            )
            if v
        )
        head = f"{self.matched} objects matched" + (f"; {counts}" if counts else "")
        if self.repeated:
            head += f" ({len(self.repeated)} with an extra event from a repeated admission)"
        lines = [f.describe() for f in self.findings + self.repeated]
        return "\n".join([head, *lines])


def _plural(n: int) -> str:
    return f"{n} event" if n == 1 else f"{n} events"


def _range(low: int, high: int) -> str:
    if low == high:
        return _plural(low)
    return f"{low}..{_plural(high)}"


def match_events(
    truth: Truth | Sequence[ExpectedEvent],
    received: Iterable[ReceivedEvent],
    *,
    scope_to_churn: bool = True,
    repeats: Mapping[tuple[str, str], int] | None = None,
) -> MatchResult:
    """Compare ``received`` with the expectation; see the module doc for the rule.

    ``repeats``: (manager, runtime id) → admissions the API server made beyond one per
    write; excess events up to that many (per pair, whole groups in key order) are
    reported as ``repeated``, not as duplicates."""
    allowance = dict(repeats or {})
    expected = truth.expected if isinstance(truth, Truth) else tuple(truth)
    objects = truth.objects if isinstance(truth, Truth) and scope_to_churn else None
    by_key = {e.key: e for e in expected}
    groups, ignored = _group(received, objects)
    out: dict[Problem, list[Finding]] = defaultdict(list)
    latencies: list[LatencySample] = []
    matched = 0
    for key, exp in sorted(by_key.items()):
        times = tuple(e.received_at for e in groups.get(key, []))
        findings = [_missing(key, exp, times), _excess(key, exp, times, allowance)]
        for finding in filter(None, findings):
            out[finding.problem].append(finding)
        ok = all(f is None or f.problem == "repeated-admission" for f in findings)
        matched += ok and exp.bounds[0] > 0
        latencies.extend(_latencies(key, exp.causes, times))
    expected_objects = {(k.runtime_id, k.object): k for k in by_key}
    expected_at_manager = {(k.manager, k.object): k for k in by_key}
    for key, events in sorted(groups.items()):
        if key in by_key:
            continue
        times = tuple(e.received_at for e in events)
        got = _plural(len(events))
        other = expected_objects.get((key.runtime_id, key.object))
        if other is not None:
            out["wrong-listener"].append(
                Finding("wrong-listener", key, f"events at manager {other.manager}", got, times)
            )
            continue
        other = expected_at_manager.get((key.manager, key.object))
        if other is not None:
            out["wrong-runtime"].append(
                Finding("wrong-runtime", key, f"events from runtime {other.runtime_id}", got, times)
            )
            continue
        out["spurious"].append(Finding("spurious", key, "no event", got, times))
    return MatchResult(
        missing=tuple(out["missing"]),
        spurious=tuple(out["spurious"]),
        duplicates=tuple(out["duplicate"]),
        wrong_listener=tuple(out["wrong-listener"]),
        wrong_runtime=tuple(out["wrong-runtime"]),
        latencies=tuple(latencies),
        repeated=tuple(out["repeated-admission"]),
        matched=matched,
        ignored=ignored,
    )


def _group(
    received: Iterable[ReceivedEvent], objects: frozenset[tuple[str, ...]] | None
) -> tuple[dict[EventKey, list[ReceivedEvent]], int]:
    """Received events by key, each group in the order received; and how many were about
    objects outside ``objects`` (None: every object counts)."""
    groups: dict[EventKey, list[ReceivedEvent]] = defaultdict(list)
    ignored = 0
    for event in received:
        k = event.key
        if objects is not None and (k.runtime_id, *k.object) not in objects:
            ignored += 1
        else:
            groups[k].append(event)
    for events in groups.values():
        events.sort(key=lambda e: e.received_at)
    return groups, ignored


def _missing(key: EventKey, exp: ExpectedEvent, times: tuple[float, ...]) -> Finding | None:
    """No event at all, or none after the last cause was sent."""
    last = exp.last_cause
    if last is None:
        return None
    if not times:
        return Finding("missing", key, _expected_text(exp), "0 events")
    if times[-1] >= last.sent_at:
        return None
    return Finding(
        "missing",
        key,
        f"an event after mutation #{last.mutation_id} was sent at {last.sent_at:.3f}",
        f"{_plural(len(times))}, the last at {times[-1]:.3f}",
        times,
    )


def _excess(
    key: EventKey,
    exp: ExpectedEvent,
    times: tuple[float, ...],
    allowance: dict[tuple[str, str], int],
) -> Finding | None:
    """More events than the truth allows: duplicates, or repeated admissions while
    ``allowance`` (which this uses up) has them for the key's manager and runtime."""
    high = exp.bounds[1]
    excess = len(times) - high
    if excess <= 0:
        return None
    pool = (key.manager, key.runtime_id)
    explained = excess <= allowance.get(pool, 0)
    if explained:
        allowance[pool] -= excess
    return Finding(
        "repeated-admission" if explained else "duplicate",
        key,
        f"at most {_plural(high)} ({_expected_text(exp)})",
        f"{_plural(len(times))} ({excess} too many)"
        + (", explained by repeated admissions" if explained else ""),
        times,
    )


def _expected_text(exp: ExpectedEvent) -> str:
    low, high = exp.bounds
    ids = ", ".join(f"#{i}" for i in exp.caused_by[:5]) + (", …" if len(exp.caused_by) > 5 else "")
    causes = f" caused by {ids}" if ids else ""
    return f"{_range(low, high)}{causes}"


def _latencies(
    key: EventKey, causes: Sequence[Cause], times: Sequence[float]
) -> list[LatencySample]:
    pending = sorted(causes, key=lambda c: (c.sent_at, c.mutation_id))
    samples: list[LatencySample] = []
    index = 0
    for received_at in times:
        if index < len(pending) and pending[index].sent_at <= received_at:
            first = pending[index]
            samples.append(LatencySample(key, first.mutation_id, first.sent_at, received_at))
            while index < len(pending) and pending[index].sent_at <= received_at:
                index += 1
    return samples
