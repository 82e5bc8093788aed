"""The coalescing rule as the assertion engine applies it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.churn.truth import Cause, EventKey, ExpectedEvent, Truth
from harness.expect.match import ReceivedEvent, match_events
from watcher.model import GroupVersionKind

GVK = GroupVersionKind("", "v1", "ConfigMap")
KEY = EventKey("cm-mgr", "rt-a", "default", "c1", "", "ConfigMap")
OBJECTS = frozenset(
    (runtime, "default", name, "", "ConfigMap")
    for runtime, name in (("rt-a", "c1"), ("rt-b", "c1"), ("rt-a", "quiet"))
)


def expected(*sent: float, optional: tuple[float, ...] = ()) -> ExpectedEvent:
    causes = tuple(Cause(i, "r", t, t + 0.01) for i, t in enumerate(sent))
    extra = tuple(Cause(100 + i, "r", t, t + 0.01) for i, t in enumerate(optional))
    return ExpectedEvent(KEY, "skr-a", GVK, causes, extra)


def truth(*events: ExpectedEvent) -> Truth:
    return Truth(events, (), OBJECTS)


def got(
    *times: float, manager: str = "cm-mgr", runtime: str = "rt-a", name: str = "c1"
) -> list[ReceivedEvent]:
    return [ReceivedEvent(manager, runtime, "default", name, GVK, t) for t in times]


causes_and_events = st.lists(st.floats(0, 10), min_size=1, max_size=8).flatmap(
    lambda sent: st.tuples(
        st.just(sorted(sent)),
        st.lists(st.floats(0, 20), min_size=0, max_size=len(sent) - 1),
        st.floats(0, 5),
    )
)


@settings(max_examples=200, deadline=None)
@given(causes_and_events)
def test_one_to_k_events_with_one_after_the_last_cause_pass(
    case: tuple[list[float], list[float], float],
) -> None:
    sent, others, after = case
    final = sent[-1] + after
    result = match_events(truth(expected(*sent)), got(*others, final))
    assert result.ok, result.describe()
    assert result.matched == 1
    assert result.latencies and all(s.value >= 0 for s in result.latencies)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=1, max_size=8))
def test_zero_events_are_missing(sent: list[float]) -> None:
    result = match_events(truth(expected(*sent)), [])
    assert [f.problem for f in result.findings] == ["missing"]
    k = len(sent)
    text = result.missing[0].describe()
    assert text.startswith("missing: manager=cm-mgr runtime=rt-a object=default/c1 (ConfigMap)")
    assert ("expected 1 event" if k == 1 else f"expected 1..{k} events") in text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=1, max_size=8))
def test_k_plus_one_events_are_a_duplicate(sent: list[float]) -> None:
    last = max(sent)
    events = got(*[last + 1 + i for i in range(len(sent) + 1)])
    result = match_events(truth(expected(*sent)), events)
    assert [f.problem for f in result.findings] == ["duplicate"]
    assert "(1 too many)" in result.duplicates[0].describe()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 10), min_size=1, max_size=5))
def test_an_event_for_an_object_without_causes_is_spurious(times: list[float]) -> None:
    result = match_events(truth(), got(*times, name="quiet"))
    assert [f.problem for f in result.findings] == ["spurious"]
    assert (
        result.spurious[0]
        .describe()
        .startswith(
            "spurious: manager=cm-mgr runtime=rt-a object=default/quiet (ConfigMap): "
            "expected no event"
        )
    )


def test_events_only_before_the_last_cause_are_missing_the_final_state() -> None:
    result = match_events(truth(expected(1.0, 5.0)), got(1.5, 2.0))
    (finding,) = result.findings
    assert finding.problem == "missing"
    assert "after mutation #1 was sent at 5.000" in finding.describe()


def test_event_before_the_ack_but_after_the_send_counts() -> None:
    exp = ExpectedEvent(KEY, "skr-a", GVK, (Cause(0, "r", 1.0, 1.5),))
    assert match_events(truth(exp), got(1.2)).ok


def test_wrong_listener_and_wrong_runtime() -> None:
    t = truth(expected(1.0))
    listener = match_events(t, got(2.0, manager="other-mgr"))
    assert [f.problem for f in listener.findings] == ["missing", "wrong-listener"]
    assert "expected events at manager cm-mgr" in listener.wrong_listener[0].describe()
    runtime = match_events(t, [*got(2.0), *got(2.0, runtime="rt-b")])
    assert [f.problem for f in runtime.findings] == ["wrong-runtime"]
    assert "expected events from runtime rt-a" in runtime.wrong_runtime[0].describe()


def test_optional_causes_allow_but_do_not_require_events() -> None:
    only_optional = expected(optional=(1.0,))
    assert match_events(truth(only_optional), []).ok
    assert match_events(truth(only_optional), got(2.0)).ok
    assert not match_events(truth(only_optional), got(2.0, 3.0)).ok
    mixed = expected(1.0, optional=(2.0,))
    assert match_events(truth(mixed), got(1.5, 2.5)).ok


def test_events_about_other_objects_are_ignored_unless_asked() -> None:
    t = truth(expected(1.0))
    stranger = got(2.0, name="not-churned")
    result = match_events(t, [*got(2.0), *stranger])
    assert result.ok and result.ignored == 1
    strict = match_events(t, [*got(2.0), *stranger], scope_to_churn=False)
    assert [f.problem for f in strict.findings] == ["spurious"]
    assert match_events([expected(1.0)], got(2.0)).ok


def test_latency_samples_start_at_the_first_new_cause() -> None:
    result = match_events(truth(expected(1.0, 1.2, 3.0)), got(1.5, 1.7, 3.4))
    samples = [(s.mutation_id, round(s.value, 6)) for s in result.latencies]
    assert samples == [(0, 0.5), (2, 0.4)]
    assert result.latency_values == tuple(s.value for s in result.latencies)


def test_describe_summarises() -> None:
    result = match_events(truth(expected(1.0)), [])
    assert result.describe().splitlines()[0] == "0 objects matched; 1 missing"


def test_a_repeated_admission_explains_one_extra_event_per_admission() -> None:
    exp = expected(1.0)
    two = got(2.0, 3.0)
    assert [f.problem for f in match_events(truth(exp), two).findings] == ["duplicate"]
    result = match_events(truth(exp), two, repeats={("cm-mgr", "rt-a"): 1})
    assert result.ok and result.matched == 1
    assert [f.problem for f in result.repeated] == ["repeated-admission"]
    assert "1 with an extra event from a repeated admission" in result.describe()
    # Another runtime's or manager's repeats explain nothing here.
    other = match_events(truth(exp), two, repeats={("cm-mgr", "rt-b"): 1, ("x", "rt-a"): 5})
    assert [f.problem for f in other.findings] == ["duplicate"]
    # Two extra events need two repeated admissions; one is not enough.
    three = got(2.0, 3.0, 4.0)
    short = match_events(truth(exp), three, repeats={("cm-mgr", "rt-a"): 1})
    assert [f.problem for f in short.findings] == ["duplicate"] and not short.repeated
    enough = match_events(truth(exp), three, repeats={("cm-mgr", "rt-a"): 2})
    assert enough.ok and "(2 too many), explained by repeated admissions" in enough.describe()
