"""``timeline``: did ``first`` happen, and ``then`` at or after it (within a bound)?

Semantics and failure texts are in docs/scenarios.md (*Timeline: order and distance*). Two
failures are final, so polling stops: ``then`` happened only before ``first``, and
``then`` came more than ``within`` after ``first``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.expect.assertion import object_name
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.expect.observations import Observations
from harness.expect.reconciles import kyma_key
from harness.matching.mismatches import select_mismatch_summary
from harness.matching.objects import match_object
from harness.scenario.timeline import (
    EventSelector,
    FaultSelector,
    ObjectSelector,
    Occurrence,
    ReconcileSelector,
    StepSelector,
    TimelineExpectation,
    WriteSelector,
)

CANDIDATES = 3
"""Closest candidates named for an occurrence that never happened."""
WATCHER_CHANGE = "/Watcher/"
"""``watcher`` operations are on the report's timeline as faults; they are not ``fault``s."""


@dataclass(frozen=True)
class Seen:
    """One occurrence: when, and what (one line)."""

    at: float
    what: str


Near = tuple[Seen, str]
"""A candidate that does not match, and why."""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _objects(sel: ObjectSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    """Every recorded change on the selector's watch and its name; with the reason it does
    not match (``None``: it matches), for changes of the selected object(s)."""
    key = sel.watch.key
    changes = sel.changes
    for c in obs.object_changes:
        if c.watch != key:
            continue
        meta = c.object.get("metadata") or {}
        if sel.name is not None and meta.get("name") != sel.name:
            continue
        seen = Seen(c.at, f"{object_name(c.object)} on {sel.cluster} {c.change}")
        labels = _labels(c.object)
        if sel.selector and any(labels.get(k) != v for k, v in sel.selector.items()):
            yield seen, "labels differ"
        elif changes is not None and c.change not in changes:
            yield seen, f"{c.change}, not {'|'.join(sorted(changes))}"
        elif sel.match is not None and not (result := match_object(sel.match, c.object)).ok:
            yield seen, f"does not match: {select_mismatch_summary(result)}"
        else:
            yield seen, None


def _writes(sel: WriteSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    for w in obs.writes:
        if sel.cluster is not None and w.cluster != sel.cluster:
            continue
        obj = f"{w.namespace}/{w.name}".lstrip("/")
        seen = Seen(w.sent_at, f"write of {obj} on {w.cluster}")
        if sel.namespace is not None and w.namespace != sel.namespace:
            yield seen, "another namespace"
        elif sel.name is not None and w.name != sel.name:
            yield seen, "another name"
        else:
            yield seen, None


def _events(sel: EventSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    runtime = sel.runtime_id or (obs.runtime_ids.get(sel.cluster) if sel.cluster else None)
    for e in obs.events:
        if sel.manager is not None and e.manager != sel.manager:
            continue
        obj = f"{e.namespace}/{e.name}".lstrip("/")
        seen = Seen(e.received_at, f"event at {e.manager} from {e.runtime_id} about {obj}")
        o = sel.object
        if runtime is not None and e.runtime_id != runtime:
            yield seen, f"from {e.runtime_id}, not {runtime}"
        elif o is not None and (e.namespace != o.namespace or e.name != o.name):
            yield seen, "about another object"
        elif o is not None and o.kind is not None and e.gvk.kind != o.kind:
            yield seen, f"kind {e.gvk.kind}, not {o.kind}"
        else:
            yield seen, None


def _reconciles(sel: ReconcileSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    key = kyma_key(sel.kyma)
    outcomes = sel.outcomes
    for r in obs.reconciles:
        if r.kyma != key:
            continue
        triggers = ",".join(sorted(r.triggers))
        seen = Seen(r.at, f"reconcile of {key} by {triggers} ({r.outcome})")
        if sel.trigger is not None and sel.trigger not in r.triggers:
            yield seen, f"not by {sel.trigger}"
        elif outcomes is not None and r.outcome not in outcomes:
            yield seen, f"{r.outcome}, not {'|'.join(sorted(outcomes))}"
        else:
            yield seen, None


def _steps(sel: StepSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    for m in obs.marks:
        if m.kind != "step":
            continue
        phase = "start" if m.detail == "start" else "end"
        seen = Seen(m.at, f"step {m.object} {'began' if phase == 'start' else m.detail}")
        if m.object != sel.name:
            yield seen, "another step"
        elif phase != sel.phase:
            yield seen, f"{phase}, not {sel.phase}"
        else:
            yield seen, None


def _faults(sel: FaultSelector, obs: Observations) -> Iterator[tuple[Seen, str | None]]:
    for m in obs.marks:
        if m.kind != "fault" or WATCHER_CHANGE in m.object:
            continue
        seen = Seen(m.at, f"fault {m.source} {m.object}")
        if sel.target is not None and m.source != sel.target:
            yield seen, "another target"
        elif sel.action is not None and m.object != sel.action:
            yield seen, "another action"
        else:
            yield seen, None


_SOURCES: Mapping[type, Callable[[Any, Observations], Iterable[tuple[Seen, str | None]]]] = {
    ObjectSelector: _objects,
    WriteSelector: _writes,
    EventSelector: _events,
    ReconcileSelector: _reconciles,
    StepSelector: _steps,
    FaultSelector: _faults,
}


def scan(occurrence: Occurrence, obs: Observations) -> tuple[list[Seen], list[Near]]:
    """Every occurrence ``occurrence`` selects (any time, by time) and the near misses."""
    selector = occurrence.selector
    hits: list[Seen] = []
    near: list[Near] = []
    for seen, reason in _SOURCES[type(selector)](selector, obs):
        if reason is None:
            hits.append(seen)
        else:
            near.append((seen, reason))
    hits.sort(key=lambda s: s.at)
    near.sort(key=lambda n: n[0].at)
    return hits, near


def _at(seen: Seen, obs: Observations) -> str:
    return f"{seen.what} at {seen.at - obs.since:+.3f} s"


def _never(
    name: str,
    occurrence: Occurrence,
    hits: list[Seen],
    near: list[Near],
    start: float,
    obs: Observations,
) -> tuple[str, list[str]]:
    """``<name> never happened: <what>`` and lines naming the closest candidates."""
    lines: list[str] = []
    earlier = [h for h in hits if h.at < start]
    if earlier:
        lines.append(f"{_at(earlier[-1], obs)} (before the window)")
    within = [(s, why) for s, why in near if s.at >= start]
    lines += [f"{_at(s, obs)} ({why})" for s, why in within[:CANDIDATES]]
    if len(within) > CANDIDATES:
        lines.append(f"… {len(within) - CANDIDATES} more")
    text = f"{name} never happened: {occurrence.describe()}"
    if lines:
        text += f"; closest: {lines[0]}"
    return text, lines


def judge(t: TimelineExpectation, obs: Observations) -> Check:
    """``t`` against what happened so far (see the module doc)."""
    start = obs.since if t.since == "window" else min(obs.run_start, obs.since)
    description = f"timeline {t.describe()}"
    expected = f"{t.first.describe()}, then {t.then.describe()}"
    if t.within is not None:
        expected += f" within {t.within:g} s"
    first_hits, first_near = scan(t.first, obs)
    then_hits, then_near = scan(t.then, obs)
    firsts = [h for h in first_hits if h.at >= start]
    thens = [h for h in then_hits if h.at >= start]

    def check(ok: bool, actual: str, *, final: bool = False, details: str = "") -> Check:
        text = actual if ok else f"expected {expected}: {actual}"
        verdict = Verdict(ok, text, expected, actual)
        return Check("timeline", description, verdict, final=final, details=details)

    if not firsts:
        actual, lines = _never("first", t.first, first_hits, first_near, start, obs)
        if thens:
            actual += f" (then: {_at(thens[0], obs)})"
        return check(False, actual, details="\n".join(f"candidate: {x}" for x in lines))
    first = firsts[0]
    after = [h for h in thens if h.at >= first.at]
    if not after:
        before = [h for h in thens if h.at < first.at]
        if before:
            gap = first.at - before[-1].at
            actual = (
                f"then happened {gap:.3f} s before first: {_at(before[-1], obs)}, "
                f"first {_at(first, obs)}"
            )
            return check(False, actual, final=True)
        actual, lines = _never("then", t.then, then_hits, then_near, start, obs)
        actual += f" (first: {_at(first, obs)})"
        return check(False, actual, details="\n".join(f"candidate: {x}" for x in lines))
    then = after[0]
    gap = then.at - first.at
    actual = f"{_at(first, obs)}, then {_at(then, obs)} ({gap:.3f} s later)"
    if t.within is not None and gap > t.within:
        return check(False, f"{actual}: more than {t.within:g} s", final=True)
    return check(True, actual)
