"""The watcher-health state machine over any sequence of heartbeat evidence (hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.health.state import (
    Observation,
    Policy,
    Reason,
    RuntimeHealth,
    State,
    next_deadline,
    observe,
    tick,
)

POLICY = Policy(interval=10.0, timeout=2.0)


@dataclass(frozen=True)
class Beat:
    """One heartbeat round: what happened to heartbeat ``n`` sent at ``10 n``."""

    outcome: str  # echo | late | lost | held | refused | write-failed
    delay: float


OUTCOMES = ["echo", "late", "lost", "held", "refused", "write-failed"]
beats = st.lists(
    st.builds(Beat, st.sampled_from(OUTCOMES), st.floats(min_value=0.001, max_value=1.5)),
    min_size=1,
    max_size=25,
)
HELD = 6.0
"""How long a ``held`` heartbeat's write takes: past its deadline, before the next one."""


def run(rounds: list[Beat], policy: Policy = POLICY, *, writes: bool = True) -> list[RuntimeHealth]:
    """Every state the monitor passes through, heartbeat by heartbeat. Each heartbeat's
    write returns (``written``) right after it is sent, but a ``held`` one's only after
    ``HELD`` s, past its deadline, with no echo: a webhook that holds the admission while
    it retries a broken KCP path. ``writes=False`` leaves the ``written`` observations out."""
    health, seen = RuntimeHealth(), []
    for n, beat in enumerate(rounds, start=1):
        sent = n * policy.interval
        health = tick(health, sent, policy)
        seen.append(health)
        if beat.outcome == "write-failed":
            health = observe(health, Observation("write-failed", n, sent, "503"), policy)
        elif beat.outcome == "held":
            health = observe(health, Observation("sent", n, sent), policy)
            health = tick(health, policy.deadline(sent), policy)
            seen.append(health)
            if writes:
                note = f"write took {HELD:.1f} s"
                health = observe(health, Observation("written", n, sent + HELD, note), policy)
        else:
            health = observe(health, Observation("sent", n, sent), policy)
            if writes:
                health = observe(health, Observation("written", n, sent + 0.0005), policy)
            if beat.outcome == "echo":
                health = observe(health, Observation("received", n, sent + beat.delay), policy)
            elif beat.outcome == "refused":
                refused = Observation("refused", n, sent + beat.delay, "san-mismatch")
                health = observe(health, refused, policy)
            elif beat.outcome == "late":  # after its deadline, before the next heartbeat
                health = tick(health, policy.deadline(sent), policy)
                seen.append(health)
                late = Observation("received", n, policy.deadline(sent) + 0.001)
                health = observe(health, late, policy)
        seen.append(health)
    return seen


@given(beats)
def test_never_healthy_without_a_received_heartbeat(rounds: list[Beat]) -> None:
    for health in run(rounds):
        if health.last_received is None:
            assert health.state is not State.HEALTHY


@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=8))
def test_a_single_late_heartbeat_does_not_flap(before: int, after: int) -> None:
    rounds = [Beat("echo", 0.01)] * before + [Beat("late", 0.0)] + [Beat("echo", 0.01)] * after
    states = [h.state for h in run(rounds)]
    assert State.DEGRADED not in states and State.BROKEN not in states
    assert not any(h.recovered for h in run(rounds))


@given(beats, st.sampled_from(["lost", "held", "refused", "write-failed"]))
def test_two_missed_heartbeats_are_broken_with_the_evidence_as_reason(
    rounds: list[Beat], failure: str
) -> None:
    history = run([*rounds, Beat(failure, 0.01), Beat(failure, 0.01)])
    # the second failed heartbeat is missed by its deadline at the latest
    last = tick(history[-1], POLICY.deadline((len(rounds) + 2) * POLICY.interval), POLICY)
    assert last.state is State.BROKEN
    expected = {
        "lost": Reason.NO_EVENT,
        "held": Reason.NO_EVENT,  # written, slowly: not a failed write
        "refused": Reason.EVENT_REFUSED,
        "write-failed": Reason.SKR_WRITE_FAILED,
    }[failure]
    # a heartbeat lost without evidence keeps the streak's earlier evidence as its reason
    without_evidence = failure in ("lost", "held")
    assert last.reason is expected or (without_evidence and last.reason is not Reason.NO_EVENT)


@given(beats)
def test_a_written_heartbeat_changes_no_state_only_the_detail_of_no_event(
    rounds: list[Beat],
) -> None:
    """Whether and when writes return decides nothing: the echo (or its absence) does. A
    write held past the deadline is no failed write; its time explains ``NoEvent``."""
    with_writes, without = run(rounds), run(rounds, writes=False)
    assert len(with_writes) == len(without)
    for a, b in zip(with_writes, without, strict=True):
        assert (a.state, a.reason, a.misses, a.recovered) == (
            b.state,
            b.reason,
            b.misses,
            b.recovered,
        )
        if a.detail != b.detail:
            assert a.reason is Reason.NO_EVENT and a.detail == f"write took {HELD:.1f} s"


def test_a_held_write_is_no_event_with_its_time_and_an_echo_clears_it() -> None:
    history = run([Beat("echo", 0.01), Beat("held", 0.0), Beat("held", 0.0)])
    broken = history[-1]
    assert (broken.state, broken.reason, broken.detail) == (
        State.BROKEN,
        Reason.NO_EVENT,
        "write took 6.0 s",
    )
    # a quick write after it says nothing more: the newest write is what NoEvent tells
    sent = observe(broken, Observation("sent", 4, 40.0), POLICY)
    quick = observe(sent, Observation("written", 4, 40.01), POLICY)
    assert (quick.state, quick.reason, quick.detail) == (State.BROKEN, Reason.NO_EVENT, "")
    late = observe(quick, Observation("written", 3, 40.02, "write took 9.0 s"), POLICY)
    assert late.detail == ""  # an older write's answer arriving late changes nothing
    back = observe(quick, Observation("received", 4, 40.1), POLICY)
    assert (back.state, back.written, back.recovered) == (State.HEALTHY, None, True)
    # its write's answer after its echo (an async webhook answers before it delivers)
    after = observe(back, Observation("written", 4, 40.2, "write took 0.2 s"), POLICY)
    assert after == dataclasses.replace(back, recovered=False)


@given(beats)
def test_recovery_is_reported_once_per_way_back_to_healthy(rounds: list[Beat]) -> None:
    history = run([*rounds, Beat("lost", 0.01), Beat("lost", 0.01)])
    n = len(rounds) + 2  # the second lost heartbeat: Broken once its deadline passed
    broken = tick(history[-1], POLICY.deadline(n * POLICY.interval), POLICY)
    assert broken.state is State.BROKEN
    sent = observe(broken, Observation("sent", n + 1, (n + 1) * POLICY.interval), POLICY)
    back = observe(sent, Observation("received", n + 1, (n + 1) * POLICY.interval + 0.1), POLICY)
    assert (back.state, back.recovered) == (State.HEALTHY, True)
    again = observe(back, Observation("sent", n + 2, (n + 2) * POLICY.interval), POLICY)
    assert not again.recovered  # reported once, on the transition only
    path = [*history, broken, sent, back]
    for before, health in itertools.pairwise(path):
        if health.recovered:  # only ever on the way back from Degraded or Broken
            assert before.state in (State.DEGRADED, State.BROKEN)


def test_explicit_evidence_degrades_at_once_and_a_slow_round_trip_too() -> None:
    health = observe(RuntimeHealth(), Observation("sent", 1, 0.0), POLICY)
    health = observe(health, Observation("received", 1, 0.2), POLICY)
    assert health.state is State.HEALTHY
    assert health.round_trip == pytest.approx(0.2)
    assert next_deadline(health, POLICY) is None
    refused = observe(health, Observation("sent", 2, 10.0), POLICY)
    assert next_deadline(refused, POLICY) == 12.0
    refused = observe(refused, Observation("refused", 2, 10.1, "san-mismatch"), POLICY)
    assert (refused.state, refused.reason, refused.detail) == (
        State.DEGRADED,
        Reason.EVENT_REFUSED,
        "san-mismatch",
    )
    slow_policy = Policy(interval=10.0, timeout=2.0, slow=1.0)
    slow = observe(RuntimeHealth(), Observation("sent", 1, 0.0), slow_policy)
    slow = observe(slow, Observation("received", 1, 1.5), slow_policy)
    assert (slow.state, slow.reason) == (State.DEGRADED, Reason.SLOW_ROUND_TRIP)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"interval": 0}, "interval, timeout and write_timeout must be positive"),
        ({"write_timeout": 0}, "write_timeout must be positive"),
        ({"interval": 5, "timeout": 5}, "must be shorter than the interval"),
        ({"recovery_factor": 0}, "recovery_factor"),
        ({"broken_after": 1}, "at least 2"),
    ],
)
def test_a_policy_that_cannot_work_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Policy(**kwargs)  # type: ignore[arg-type]


def simulate(
    policy: Policy, phase: float, broken_at: float, fixed_at: float | None
) -> list[tuple[float, RuntimeHealth]]:
    """A monitor's view over time: heartbeats at ``phase`` then every probe interval, echoed
    after 50 ms except between ``broken_at`` and ``fixed_at``; ticks at every deadline."""
    health, seen, now, seq = RuntimeHealth(), [], phase, 0
    end = max(broken_at, fixed_at or 0.0) + 4 * policy.interval
    while now < end:
        seq += 1
        health = observe(health, Observation("sent", seq, now), policy)
        works = now < broken_at or (fixed_at is not None and now >= fixed_at)
        if works:
            health = observe(health, Observation("received", seq, now + 0.05), policy)
        else:
            deadline = next_deadline(health, policy)
            assert deadline is not None
            health = tick(health, deadline, policy)
        seen.append((now, health))
        now += policy.probe_interval(health.state)
    return seen


@given(
    st.floats(min_value=0.0, max_value=10.0),
    st.floats(min_value=20.0, max_value=40.0),
    st.floats(min_value=0.5, max_value=5.0),
)
def test_a_broken_watcher_is_noticed_within_two_intervals_plus_the_timeout(
    phase: float, broken_at: float, timeout: float
) -> None:
    policy = Policy(interval=10.0, timeout=timeout)
    seen = simulate(policy, phase, broken_at, None)
    first = next(at for at, h in seen if h.state is State.BROKEN)
    # the heartbeat that showed it was sent at ``first``; it was judged by its deadline
    assert policy.deadline(first) <= broken_at + 2 * policy.interval + policy.timeout
    assert next(h for _, h in seen if h.state is State.BROKEN).reason is Reason.NO_EVENT


@given(
    st.floats(min_value=0.0, max_value=10.0),
    st.floats(min_value=20.0, max_value=30.0),
    st.floats(min_value=30.0, max_value=60.0),
)
def test_back_to_healthy_within_one_interval_of_the_fix(
    phase: float, broken_at: float, repair_after: float
) -> None:
    fixed_at = broken_at + repair_after
    seen = simulate(POLICY, phase, broken_at, fixed_at)
    assert any(h.state is State.BROKEN for _, h in seen)
    back = [(at, h) for at, h in seen if h.recovered]
    assert len(back) == 1  # one catch-up reconcile
    at, health = back[0]
    assert at >= fixed_at
    assert at + (health.round_trip or 0.0) <= fixed_at + POLICY.interval
