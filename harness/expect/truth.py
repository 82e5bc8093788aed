"""``truth``: the received events equal the churns' ground truth (nothing missing,
spurious, duplicated or misrouted), forgiving only the admissions the SKR API servers
really repeated."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, TypeVar

from harness.churn.admissions import admissions_made, admissions_routed, repeated_admissions
from harness.churn.truth import Truth as ChurnTruth
from harness.churn.truth import ground_truth
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.expect.match import MatchResult, match_events
from harness.expect.observations import ChurnSeen, Observations
from harness.scenario import Truth


class Verifiable(Protocol):
    @property
    def verified(self) -> bool: ...


V = TypeVar("V", bound=Verifiable)


def churns_for_truth(churns: Sequence[V]) -> list[V]:
    """The churns a ``truth`` expectation covers: those no truth has checked yet, or (none
    left) every churn of the scenario (snapshots when judging, the runner's records when
    marking them covered)."""
    pending = [c for c in churns if not c.verified]
    return pending or list(churns)


def window_churns(obs: Observations) -> list[ChurnSeen]:
    """The churns of this window: started in it, or not yet covered by a ``truth``."""
    return [c for c in obs.churns if c.started_at >= obs.since or not c.verified]


@dataclasses.dataclass(frozen=True)
class Repeats:
    """Admissions beyond one per routed write, and how they were counted (for the report)."""

    by_target: dict[tuple[str, str], int]
    notes: tuple[str, ...]


def repeats(obs: Observations, churns: Sequence[ChurnSeen], truth: ChurnTruth) -> Repeats:
    """(manager, runtime id) → admissions the SKR API servers made beyond one per routed
    write during ``churns`` (see :mod:`harness.churn.admissions`). A cluster whose churns
    overlap in time, or whose counters could not be read, gets none."""
    made: dict[str, dict[str, int] | None] = {}
    intervals: dict[str, list[tuple[float, float]]] = {}
    notes: list[str] = []
    for churn in churns:
        end = churn.ended_at
        for cluster in churn.spec.clusters:
            gaps = churn.admission_gaps.get(cluster, ())
            counted = admissions_made(
                churn.admissions_before.get(cluster),
                churn.admissions_after.get(cluster),
                obs.webhook_managers,
                gaps,
            )
            if end is None or counted is None or (cluster in made and made[cluster] is None):
                made[cluster] = None
                notes.append(f"{cluster}: webhook calls unknown (a counter was unreadable)")
                continue
            spans = intervals.setdefault(cluster, [])
            if any(s < end and churn.started_at < e for s, e in spans):
                made[cluster] = None  # overlapping churns would count each other's writes
                notes.append(f"{cluster}: webhook calls unknown (overlapping churns)")
                continue
            spans.append((churn.started_at, end))
            total = made.setdefault(cluster, {})
            assert total is not None
            for m, n in counted.items():
                total[m] = total.get(m, 0) + n
            if gaps:
                notes.append(f"{cluster}: webhook calls summed over {len(gaps) + 1} API servers")
    executed = [e for c in churns for e in c.executed]
    other_writes = {
        cluster: sum(
            1
            for w in obs.writes
            if w.cluster == cluster and any(s <= w.sent_at <= e for s, e in spans)
        )
        for cluster, spans in intervals.items()
    }
    routed = admissions_routed(truth, executed)
    for cluster, per_manager in sorted(made.items()):
        for manager, count in sorted((per_manager or {}).items()):
            notes.append(
                f"{cluster}: {count} webhook calls for {manager}, "
                f"{routed.get((cluster, manager), 0)} routed writes, "
                f"{other_writes.get(cluster, 0)} other writes"
            )
    found = repeated_admissions(routed, made, obs.runtime_ids, other_writes=other_writes)
    return Repeats(found, tuple(notes))


def match(
    obs: Observations, churns: Sequence[ChurnSeen], manager: str | None
) -> tuple[MatchResult, Repeats]:
    executed = [e for c in churns for e in c.executed]
    truth = ground_truth(executed, obs.rules, obs.runtime_ids, settle=obs.settle)
    repeated = repeats(obs, churns, truth)
    if manager is not None:
        truth = dataclasses.replace(truth, expected=truth.for_manager(manager))
    start = min(c.started_at for c in churns)
    got = [
        e
        for e in obs.events
        if e.received_at >= start and (manager is None or e.manager == manager)
    ]
    return match_events(truth, got, repeats=repeated.by_target), repeated


def judge(t: Truth, obs: Observations) -> Check:
    churns = churns_for_truth(obs.churns)
    subject = f"manager={t.manager}" if t.manager else "every manager"
    description = f"events equal the churn's ground truth for {subject}"
    if not churns:
        verdict = Verdict(False, "no churn ran before this expectation", "a churn", "none")
        return Check("truth", description, verdict, final=True)
    result, repeated = match(obs, churns, t.manager)
    expected_groups = result.matched + len(result.missing)
    expected = f"{expected_groups} objects with the events the truth requires, nothing else"
    actual = result.describe()
    text = actual if result.ok else f"expected {expected}; got {actual}"
    irrevocable = any(
        (result.spurious, result.duplicates, result.wrong_listener, result.wrong_runtime)
    )
    return Check(
        "truth",
        description,
        Verdict(result.ok, text, expected, actual),
        final=irrevocable,
        bounded=True,
        latencies=result.latency_values,
        details="\n".join(("repeated admissions (harness.churn.admissions):", *repeated.notes))
        if repeated.notes
        else "",
    )
