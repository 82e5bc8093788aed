"""The judges are pure: plain Observations in, a Check out (no session, no I/O)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.expect import assertion, reconciles
from harness.expect.judge import judge_events, judge_metric, judge_rejections
from harness.expect.match import ReceivedEvent
from harness.expect.observations import (
    ObjectsSeen,
    Observations,
    ReconcileSeen,
    metric_key,
)
from harness.scenario import (
    Assert,
    Count,
    EventExpectation,
    MetricExpectation,
    ReconcileExpectation,
    RejectionExpectation,
)
from watcher.model import GroupVersionKind

KYMA = GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma")


def received(at: float, runtime: str = "runtime-skr-a") -> ReceivedEvent:
    return ReceivedEvent("lifecycle-manager", runtime, "kyma-system", "default", KYMA, at)


@given(before=st.integers(0, 5), inside=st.integers(0, 5), wanted=st.integers(0, 5))
def test_an_exact_event_count_holds_iff_the_window_has_that_many(
    before: int, inside: int, wanted: int
) -> None:
    obs = Observations(
        since=10.0,
        now=20.0,
        events=tuple([received(5.0)] * before + [received(15.0)] * inside),
        runtime_ids={"skr-a": "runtime-skr-a"},
    )
    e = EventExpectation(manager="lifecycle-manager", cluster="skr-a", count=Count(exactly=wanted))
    check = judge_events(e, obs)
    assert check.ok == (inside == wanted)
    assert check.final == (inside > wanted)  # a count above its bound only grows


def test_reconciles_by_trigger_and_outcome_in_the_window() -> None:
    seen = (
        ReconcileSeen("kcp-system/kyma-skr-a", frozenset({"watch-event"}), "error", 11.0),
        ReconcileSeen("kcp-system/kyma-skr-a", frozenset({"requeue-timer"}), "success", 12.0),
        ReconcileSeen("kcp-system/kyma-skr-a", frozenset({"watch-event"}), "success", 1.0),
    )
    obs = Observations(since=10.0, now=20.0, reconciles=seen)
    error = ReconcileExpectation(kyma="kyma-skr-a", outcome="error", count=Count(exactly=1))
    retried = ReconcileExpectation(kyma="kyma-skr-a", trigger="requeue-timer", outcome="success")
    early = ReconcileExpectation(kyma="kyma-skr-a", trigger="watch-event", outcome="success")
    assert reconciles.judge(error, obs).ok
    assert reconciles.judge(retried, obs).ok
    assert not reconciles.judge(early, obs).ok  # before the window


def test_reconciles_started_within_bound_the_queue_wait_not_the_duration() -> None:
    seen = (
        ReconcileSeen("kcp-system/k", frozenset({"kyma-created"}), "success", 11.0, 0.2),
        ReconcileSeen("kcp-system/k", frozenset({"kyma-created"}), "success", 12.0, 1.5),
    )
    obs = Observations(since=10.0, now=20.0, reconciles=seen)
    prompt = ReconcileExpectation(kyma="k", trigger="kyma-created", started_within=1.0)
    check = reconciles.judge(prompt.model_copy(update={"count": Count(exactly=1)}), obs)
    assert check.ok and "started within 1 s of its trigger" in check.description
    late = ReconcileExpectation(kyma="k", started_within=0.1, count=Count(at_least=1))
    assert not reconciles.judge(late, obs).ok


def test_rejections_and_metrics_read_the_snapshot() -> None:
    m = MetricExpectation(target="apiserver/skr-a", name="x_total", op=">=", value=3)
    obs = Observations(
        since=0.0,
        now=1.0,
        rejections={("lifecycle-manager", "san-mismatch"): 2.0},
        metrics={metric_key("apiserver/skr-a", "x_total", {}): 4.0},
    )
    r = RejectionExpectation(listener="lifecycle-manager", reason="san-mismatch")
    assert judge_rejections(r, obs).ok
    assert judge_metric(m, obs).ok
    missing = MetricExpectation(target="apiserver/skr-b", name="x_total", value=0)
    assert judge_metric(missing, obs).ok  # an absent series reads 0


def test_assert_and_error_over_what_each_cluster_holds() -> None:
    spec = Assert(cluster="*", resource="configmaps", match={"data": {"a": "1"}})
    good = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}
    bad = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}}
    both = [ObjectsSeen("skr-a", (good,)), ObjectsSeen("skr-b", (bad,))]
    check = assertion.judge(spec, both)
    assert not check.ok and "skr-b: 1 selected, none matches" in check.verdict.actual
    assert "data.a" in check.details and check.attachments[0][0] == "skr-b: ConfigMap c"
    assert assertion.judge(spec, both[:1]).ok
    assert assertion.judge(spec, both[1:], negate=True).ok
    assert not assertion.judge(spec, [ObjectsSeen("skr-a", error="down")]).ok
