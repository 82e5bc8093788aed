"""Count, latency and metric evaluators and their texts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.expect.checks import (
    CountBound,
    EventFilter,
    LatencyBounds,
    check_count,
    check_latency,
    check_metric,
    count_verdict,
)
from harness.expect.match import ReceivedEvent
from harness.report.stats import percentile
from watcher.model import GroupVersionKind

KYMA = GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma")
EVENTS = [
    ReceivedEvent("lifecycle-manager", "rt-a", "kyma-system", "default", KYMA, 1.0),
    ReceivedEvent("lifecycle-manager", "rt-b", "kyma-system", "default", KYMA, 2.0),
    ReceivedEvent("other", "rt-a", "kyma-system", "default", KYMA, 3.0),
]
LM_DEFAULT = EventFilter(manager="lifecycle-manager", namespace="kyma-system", name="default")


def test_count_texts() -> None:
    v = check_count(EVENTS, CountBound(1, 1), LM_DEFAULT)
    assert not v.ok
    assert v.text == (
        "expected exactly 1 event for manager=lifecycle-manager object=kyma-system/default, got 2"
    )
    v = check_count(
        EVENTS, CountBound(1, 1), EventFilter(manager="lifecycle-manager", runtime_id="rt-a")
    )
    assert v.ok and v.text == "exactly 1 event for manager=lifecycle-manager runtime=rt-a, got 1"
    v = check_count(EVENTS, CountBound(0, 0), EventFilter(manager="other"))
    assert v.text == "expected no events for manager=other, got 1"
    assert check_count(EVENTS, CountBound(3), EventFilter()).ok
    v = check_count(EVENTS, CountBound(0, 1), EventFilter(since=1.5))
    assert v.text == "expected at most 1 event for any manager and object, got 2"
    v = count_verdict(0, CountBound(1, 3), "Kyma kcp-system/k1", noun="reconcile")
    assert v.text == "expected between 1 and 3 reconciles for Kyma kcp-system/k1, got 0"
    assert (v.expected, v.actual) == ("between 1 and 3 reconciles", "0")


def test_count_bound_validation() -> None:
    with pytest.raises(ValueError):
        CountBound(3, 1)


def test_nearest_rank_percentile() -> None:
    samples = [15, 20, 35, 40, 50]
    assert percentile(samples, 5) == 15
    assert percentile(samples, 30) == 20
    assert percentile(samples, 40) == 20
    assert percentile(samples, 50) == 35
    assert percentile(samples, 100) == 50
    with pytest.raises(ValueError):
        percentile([], 50)


@given(st.lists(st.floats(0, 1e6), min_size=1), st.floats(0.01, 100))
def test_percentile_is_a_sample_and_monotonic(samples: list[float], p: float) -> None:
    value = percentile(samples, p)
    assert value in samples
    assert percentile(samples, min(100.0, p + 1)) >= value


def test_latency_texts() -> None:
    samples = [0.1] * 98 + [0.3, 2.0]
    verdicts = check_latency(samples, LatencyBounds(p50=0.2, p99=0.25, max=5))
    assert [v.ok for v in verdicts] == [True, False, True]
    assert verdicts[0].text == "p50 latency 0.100 s <= 0.200 s (n=100)"
    assert verdicts[1].text == "expected p99 latency <= 0.250 s, got 0.300 s (n=100)"
    (empty,) = check_latency([], LatencyBounds(max=1))
    assert not empty.ok and empty.text == "expected max latency <= 1.000 s, got no samples"


def test_metric_texts() -> None:
    labels = {"error_reason": "failed-request"}
    v = check_metric("watcher_failed_kcp_total", 3, "==", 0, labels=labels)
    assert not v.ok
    assert v.text == 'expected watcher_failed_kcp_total{error_reason="failed-request"} == 0, got 3'
    v = check_metric("watcher_failed_kcp_total", None, "==", 0, labels=labels)
    assert v.ok and v.actual == "0 (series absent)"
    assert check_metric("x", 2.5, ">", 1).text == "x > 1: got 2.5"
    assert not check_metric("x", 1, "<", 1).ok
