"""Expectations: polled until they hold or ``within`` has passed, reported with expected vs
the last observed state, one result per entry with stable ids (those over a churn:
``test_expect_churn.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest
from expect_kit import PATCH_A, later, run
from runner_fake import FakeSession, event, reconcile

from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report import Status

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


async def test_events_polled_until_they_arrive_with_stable_ids() -> None:
    session = FakeSession()
    later(session, 0.3, event("lifecycle-manager", "runtime-skr-a", "kyma-system", "default"))
    started = time.monotonic()
    report = await run(
        f"""steps:
  - name: spec
    try:
      - {PATCH_A}
      - expect:
          within: 3s
          events:
            - manager: lifecycle-manager
              cluster: skr-a
              object: {{namespace: kyma-system, name: default, kind: Kyma}}
              count: {{exactly: 1}}
            - {{manager: lifecycle-manager, cluster: skr-b, none: true}}
""",
        session,
    )
    elapsed = time.monotonic() - started
    assert report.status is Status.PASSED, report
    assert 0.3 < elapsed < 2.0  # arrived, then the grace period for the upper bounds
    assert [e.id for e in report.expectations] == ["exp/spec/1-events", "exp/spec/2-events"]
    assert [(e.expected, e.actual) for e in report.expectations] == [
        ("exactly 1 event", "1"),
        ("no events", "0"),
    ]


async def test_a_failed_expectation_reports_the_last_observed_state() -> None:
    session = FakeSession()
    report = await run(
        f"""steps:
  - name: spec
    try:
      - {PATCH_A}
      - expect:
          within: 300ms
          events: [{{manager: lifecycle-manager, cluster: skr-a, count: {{atLeast: 2}}}}]
          reconciles: [{{kyma: kyma-skr-a, trigger: watch-event}}]
""",
        session,
    )
    assert report.status is Status.FAILED
    first, second = report.expectations
    assert (first.passed, first.expected, first.actual) == (False, "at least 2 events", "0")
    assert first.description == "events manager=lifecycle-manager runtime=runtime-skr-a"
    assert (second.kind, second.expected, second.actual) == (
        "reconciles",
        "at least 1 reconcile",
        "0",
    )
    step = report.steps[0]
    assert step.error is not None
    assert "exp/spec/1-events: expected at least 2 events" in step.error


async def test_an_exceeded_upper_bound_fails_without_waiting_for_the_deadline() -> None:
    session = FakeSession()
    e = event("lifecycle-manager", "runtime-skr-a", "kyma-system", "default")
    later(session, 0.0, e, e)
    started = time.monotonic()
    report = await run(
        f"""steps:
  - name: spec
    timeout: 30s
    try:
      - {PATCH_A}
      - expect:
          within: 20s
          events: [{{manager: lifecycle-manager, cluster: skr-a, count: {{exactly: 1}}}}]
""",
        session,
    )
    assert time.monotonic() - started < 2
    assert report.expectations[0].actual == "2"
    assert report.status is Status.FAILED


async def test_windows_count_only_what_happened_since_the_previous_expect() -> None:
    session = FakeSession()
    session.events.append(event("lifecycle-manager", "runtime-skr-a", "kyma-system", "old", at=1.0))
    session.reconcile_log.append(reconcile("kcp-system/kyma-skr-a", Trigger.WATCH_EVENT, at=1.0))
    session.rejected[("lifecycle-manager", "san-mismatch")] = 3.0

    async def bump() -> None:
        await asyncio.sleep(0.2)
        session.rejected[("lifecycle-manager", "san-mismatch")] = 4.0
        session.reconcile_log.append(reconcile("kcp-system/kyma-skr-a", Trigger.WATCH_EVENT))

    task = asyncio.create_task(bump())
    report = await run(
        """steps:
  - name: window
    try:
      - expect:
          within: 2s
          rejections: [{listener: lifecycle-manager, reason: san-mismatch, count: {exactly: 1}}]
          reconciles: [{kyma: kcp-system/kyma-skr-a, trigger: watch-event, count: {exactly: 1}}]
          events: [{manager: lifecycle-manager, none: true}]
      - expect:
          within: 100ms
          rejections: [{listener: lifecycle-manager, reason: san-mismatch, none: true}]
""",
        session,
    )
    await task
    assert report.status is Status.PASSED, [e.actual for e in report.expectations]
    assert [e.id for e in report.expectations] == [
        "exp/window/1-events",
        "exp/window/2-reconciles",
        "exp/window/3-rejections",
        "exp/window/4-rejections",
    ]


async def test_metrics_compare_one_sample() -> None:
    session = FakeSession()
    session.metrics[("webhook/skr-a", "watcher_failed_kcp_total")] = 2.0
    report = await run(
        """steps:
  - name: m
    try:
      - expect:
          within: 200ms
          metrics:
            - target: webhook/skr-a
              name: watcher_failed_kcp_total
              labels: {error_reason: failed-request}
              value: 0
""",
        session,
    )
    result = report.expectations[0]
    assert result.kind == "metrics" and not result.passed
    assert result.expected == 'watcher_failed_kcp_total{error_reason="failed-request"} == 0'
    assert result.actual == "2"
    assert report.metrics == {"webhook/skr-a:watcher_failed_kcp_total": 2.0}


async def test_latency_of_plain_writes() -> None:
    session = FakeSession()
    later(session, 0.1, event("lifecycle-manager", "runtime-skr-a", "kyma-system", "default"))
    report = await run(
        f"""steps:
  - name: lat
    try:
      - {PATCH_A}
      - wait: 300ms
      - expect:
          latency: {{manager: lifecycle-manager, max: 1s}}
""",
        session,
    )
    result = report.expectations[0]
    assert result.passed, result.actual
    assert result.actual.endswith("(n=1)")
    assert 0.09 <= float(result.actual.split()[0]) < 1.0
