"""``timeline`` is judged by a pure function: order and distance of two occurrences in plain
Observations (object changes, writes, events, reconciles, steps, faults)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.expect import timeline
from harness.expect.judge import judge as judge_all
from harness.expect.match import ReceivedEvent
from harness.expect.observations import (
    Mark,
    ObjectChange,
    Observations,
    ReconcileSeen,
    WriteSeen,
)
from harness.scenario import Expect, TimelineExpectation
from watcher.model import GroupVersionKind

KYMA = {"cluster": "skr-a", "resource": "kymas", "namespace": "kyma-system", "name": "default"}
VWC = {
    "cluster": "skr-a",
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "name": "skr-webhook",
}
KYMA_WATCH = "skr-a:operator.kyma-project.io/v1beta2/kymas:kyma-system"
VWC_WATCH = "skr-a:admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration"


def entry(first: dict[str, Any], then: dict[str, Any], **more: Any) -> TimelineExpectation:
    return TimelineExpectation.model_validate({"first": first, "then": then, **more})


def kyma(change: str, at: float, **spec: Any) -> ObjectChange:
    obj = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": "default", "namespace": "kyma-system", "labels": {"a": "b"}},
        "spec": spec or {"channel": "regular"},
    }
    return ObjectChange(KYMA_WATCH, change, at, obj)


def vwc(change: str, at: float) -> ObjectChange:
    obj = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "skr-webhook"}}
    return ObjectChange(VWC_WATCH, change, at, obj)


def obs(
    *changes: ObjectChange, since: float = 100.0, now: float = 120.0, **more: Any
) -> Observations:
    return Observations(since=since, now=now, object_changes=changes, **more)


KYMA_ADDED = {"object": {**KYMA, "change": "added"}}
VWC_ADDED = {"object": {**VWC, "change": "added"}}
KYMA_THEN_VWC = entry(KYMA_ADDED, VWC_ADDED)


def test_kyma_before_the_webhook_configuration_holds_and_names_both_times() -> None:
    check = timeline.judge(KYMA_THEN_VWC, obs(kyma("added", 101.0), vwc("added", 101.5)))
    assert check.ok and check.kind == "timeline"
    assert check.verdict.actual == (
        "Kyma kyma-system/default on skr-a added at +1.000 s, then "
        "ValidatingWebhookConfiguration skr-webhook on skr-a added at +1.500 s (0.500 s later)"
    )


def test_the_reverse_order_fails_at_once_with_the_gap() -> None:
    check = timeline.judge(KYMA_THEN_VWC, obs(vwc("added", 101.0), kyma("added", 103.5)))
    assert not check.ok and check.final
    assert check.verdict.actual.startswith("then happened 2.500 s before first: ")
    assert "skr-webhook on skr-a added at +1.000 s" in check.verdict.actual
    assert "first Kyma kyma-system/default on skr-a added at +3.500 s" in check.verdict.actual


def test_a_missing_first_names_closest_candidates_and_waits() -> None:
    changes = (kyma("added", 90.0), kyma("modified", 102.0), vwc("added", 103.0))
    check = timeline.judge(KYMA_THEN_VWC, obs(*changes))
    assert not check.ok and not check.final
    actual = check.verdict.actual
    assert actual.startswith("first never happened: kymas kyma-system/default added on skr-a")
    assert (
        "closest: Kyma kyma-system/default on skr-a added at -10.000 s (before the window)"
        in actual
    )
    assert "(then: ValidatingWebhookConfiguration skr-webhook on skr-a added at +3.000 s)" in actual
    assert "added at -10.000 s (before the window)" in check.details
    assert "modified at +2.000 s (modified, not added)" in check.details


def test_a_missing_then_waits() -> None:
    check = timeline.judge(KYMA_THEN_VWC, obs(kyma("added", 101.0)))
    assert not check.ok and not check.final
    assert check.verdict.actual.startswith("then never happened: ValidatingWebhookConfiguration")
    assert "(first: Kyma kyma-system/default on skr-a added at +1.000 s)" in check.verdict.actual


def test_within_bounds_the_distance() -> None:
    bounded = entry(KYMA_ADDED, VWC_ADDED, within="1s")
    assert timeline.judge(bounded, obs(kyma("added", 101.0), vwc("added", 102.0))).ok
    late = timeline.judge(bounded, obs(kyma("added", 101.0), vwc("added", 102.5)))
    assert not late.ok and late.final
    assert late.verdict.actual.endswith("(1.500 s later): more than 1 s")


def test_since_run_looks_before_the_window() -> None:
    changes = (kyma("added", 50.0), vwc("added", 60.0))
    assert not timeline.judge(KYMA_THEN_VWC, obs(*changes, run_start=10.0)).ok
    whole = entry(KYMA_ADDED, VWC_ADDED, since="run")
    assert timeline.judge(whole, obs(*changes, run_start=10.0)).ok


def test_match_and_labels_select_the_object_as_changed() -> None:
    channel = entry(
        {"object": {**KYMA, "change": "modified", "match": {"spec": {"channel": "fast"}}}},
        {"object": {**VWC}},
    )
    changes = (
        kyma("modified", 101.0, channel="regular"),
        vwc("modified", 102.0),
        kyma("modified", 103.0, channel="fast"),
        vwc("modified", 104.0),
    )
    check = timeline.judge(channel, obs(*changes))
    assert (
        check.ok and "+3.000 s, then" in check.verdict.actual and "+4.000 s" in check.verdict.actual
    )
    early = timeline.judge(channel, obs(*changes[:2]))
    assert "does not match: spec.channel: expected fast, got regular" in early.details
    labelled = entry({"object": {**KYMA, "selector": {"a": "c"}}}, {"object": VWC})
    assert "labels differ" in timeline.judge(labelled, obs(*changes)).details


LKM = "lifecycle-manager"


def test_writes_events_reconciles_steps_and_faults() -> None:
    gvk = GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma")
    seen = obs(
        writes=(WriteSeen("skr-a", "kyma-system", "default", 101.0),),
        events=(ReceivedEvent(LKM, "runtime-skr-a", "kyma-system", "default", gvk, 102.0),),
        reconciles=(
            ReconcileSeen("kcp-system/kyma-skr-a", frozenset({"watch-event"}), "error", 102.5),
            ReconcileSeen("kcp-system/kyma-skr-a", frozenset({"watch-event"}), "success", 103.0),
        ),
        marks=(
            Mark("step", "runner", "s", "start", 100.0),
            Mark("fault", "kcp", "kcp-system/Watcher/w", "apply", 103.5),
            Mark("fault", "gateway", "stop", "", 104.0),
            Mark("step", "runner", "s", "passed", 105.0),
        ),
        runtime_ids={"skr-a": "runtime-skr-a"},
    )
    about = {"namespace": "kyma-system", "name": "default", "kind": "Kyma"}
    ok = ["success", "warning"]
    chain: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"step": {"name": "s"}}, {"write": {"cluster": "skr-a", "name": "default"}}),
        ({"write": {}}, {"event": {"manager": LKM, "cluster": "skr-a", "object": about}}),
        (
            {"event": {"cluster": "skr-a"}},
            {"reconcile": {"kyma": "kyma-skr-a", "trigger": "watch-event", "outcome": ok}},
        ),
        (
            {"reconcile": {"kyma": "kcp-system/kyma-skr-a", "outcome": "success"}},
            {"fault": {"target": "gateway", "action": "stop"}},
        ),
        ({"fault": {}}, {"step": {"name": "s", "phase": "end"}}),
    ]
    for first, then in chain:
        check = timeline.judge(entry(first, then), seen)
        assert check.ok, (first, then, check.verdict.text)
    # The reconcile that succeeded came at +3.0 s: the fault at +4.0 s is one second later,
    # and a Watcher change is not a fault.
    fault = timeline.judge(entry(chain[3][0], {"fault": {}}), seen)
    assert fault.verdict.actual.endswith("(1.000 s later)")
    backwards = timeline.judge(entry({"step": {"name": "s", "phase": "end"}}, {"write": {}}), seen)
    assert backwards.final and "then happened 4.000 s before first" in backwards.verdict.actual


def test_the_same_occurrence_may_be_first_and_then() -> None:
    same = entry({"write": {}}, {"write": {"name": "default"}}, within="1ms")
    check = timeline.judge(same, obs(writes=(WriteSeen("skr-a", "", "default", 101.0),)))
    assert check.ok and check.verdict.actual.endswith("(0.000 s later)")


def test_expect_dispatches_every_timeline_entry_in_order() -> None:
    expect = Expect.model_validate(
        {"timeline": [KYMA_THEN_VWC.model_dump(by_alias=True, exclude_none=True)] * 2}
    )
    checks = judge_all(expect, obs(kyma("added", 101.0), vwc("added", 102.0)))
    assert [c.kind for c in checks] == ["timeline", "timeline"] and all(c.ok for c in checks)


occurrence_times = st.lists(st.floats(90.0, 130.0, allow_nan=False), max_size=5)


@given(firsts=occurrence_times, thens=occurrence_times, within=st.none() | st.floats(0.1, 20.0))
def test_verdict_agrees_with_a_reference_model(
    firsts: list[float], thens: list[float], within: float | None
) -> None:
    """Random orderings of Kyma and webhook-configuration changes: holds exactly when the
    earliest Kyma change in the window has a webhook change at or after it (within the
    bound), and a failure is final exactly when waiting cannot help."""
    since = 100.0
    changes = [kyma("added", t) for t in firsts] + [vwc("added", t) for t in thens]
    bound = {"within": within} if within is not None else {}
    spec = entry(KYMA_ADDED, {"object": VWC}, **bound)
    check = timeline.judge(spec, obs(*sorted(changes, key=lambda c: c.at), since=since))
    in_window_firsts = sorted(t for t in firsts if t >= since)
    in_window_thens = [t for t in thens if t >= since]
    if not in_window_firsts:
        assert not check.ok and not check.final
        return
    first = in_window_firsts[0]
    after = sorted(t for t in in_window_thens if t >= first)
    if not after:
        assert not check.ok
        assert check.final == any(t < first for t in in_window_thens)
        return
    holds = within is None or after[0] - first <= within
    assert check.ok == holds
    assert check.final == (not holds)
