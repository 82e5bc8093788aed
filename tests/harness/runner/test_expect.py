"""Expectations: polled until they hold or ``within`` has passed, reported with expected vs
the last observed state, one result per entry with stable ids."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from runner_fake import FakeSession, event, opener, reconcile

from harness.churn.model import Mutation
from harness.churn.truth import ground_truth
from harness.environment.events import ObservedEvent
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report import ReportBuilder, ScenarioReport, Status
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.runner.context import RunContext
from harness.scenario import loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: exp\nclusters: {skrs: [{name: skr-a}, {name: skr-b}]}\n"
PATCH_A = (
    "{patch: {cluster: skr-a, resource: kymas, namespace: kyma-system, name: default, "
    "patch: {spec: {channel: fast}}}}"
)


async def run(text: str, session: FakeSession) -> ScenarioReport:
    return await run_scenario(
        plan_scenario(loads_scenario(HEAD + text)),
        ReportBuilder("t").scenario("exp", "exp.yaml"),
        RunOptions(open_session=opener(session)),
    )


def later(session: FakeSession, delay: float, *events: ObservedEvent) -> None:
    """Play the webhook: deliver ``events`` ``delay`` seconds after each write."""

    def on_write(cluster: str, namespace: str, name: str, at: float) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(delay, lambda: session.events.extend(event_now(e) for e in events))

    session.on_write = on_write


def event_now(e: ObservedEvent) -> ObservedEvent:
    from dataclasses import replace

    return replace(e, received_at=time.time())


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


CHURN = """steps:
  - name: churn
    timeout: 30s
    try:
      - churn:
          clusters: [skr-a]
          kinds: [kymas]
          objects: 3
          rate: 20
          duration: 500ms
          seed: 3
          labels: {operator.kyma-project.io/watched-by: kyma}
          background: BACKGROUND
      - expect:
          within: 3s
          truth: {manager: lifecycle-manager}
          latency: {p50: 1s, max: 2s}
"""


@pytest.mark.parametrize("background", ["false", "true"])
async def test_truth_matches_events_against_the_churns_ground_truth(background: str) -> None:
    session = FakeSession()
    contexts: list[RunContext] = []

    async def webhook() -> None:
        """Deliver one event per new last cause of every group the ground truth expects."""
        delivered: dict[object, object] = {}
        while True:
            await asyncio.sleep(0.02)
            if not contexts or not contexts[0].churns:
                continue
            ctx = contexts[0]
            executed = [e for c in ctx.churns for e in c.executed]
            truth = ground_truth(executed, ctx.rules(), ctx.runtime_ids)
            for exp in truth.expected:
                if exp.last_cause is not None and delivered.get(exp.key) != exp.last_cause:
                    delivered[exp.key] = exp.last_cause
                    session.events.append(
                        event(exp.manager, exp.runtime_id, exp.key.namespace, exp.key.name)
                    )

    import harness.runner.scenario as scenario_module

    original = RunContext  # what harness.runner.scenario imported

    def capture(*args: object, **kwargs: object) -> RunContext:
        ctx = original(*args, **kwargs)  # type: ignore[arg-type]
        contexts.append(ctx)
        return ctx

    task = asyncio.create_task(webhook())
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(scenario_module, "RunContext", capture)
            report = await run(CHURN.replace("BACKGROUND", background), session)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert session.mutations, "the churn wrote nothing"
    truth, latency = report.expectations
    assert truth.passed, truth.actual
    assert truth.id == "exp/churn/1-truth" and "objects matched" in truth.actual
    assert latency.passed, latency.actual
    assert report.latencies_ms
    mutations = [t for t in report.timeline if t.kind.value == "mutation"]
    assert len(mutations) == len(session.mutations)


async def test_truth_reports_missing_events() -> None:
    session = FakeSession()
    report = await run(
        CHURN.replace("BACKGROUND", "false").replace("within: 3s", "within: 200ms"), session
    )
    truth = report.expectations[0]
    assert not truth.passed
    assert "missing: manager=lifecycle-manager runtime=runtime-skr-a" in truth.actual
    latency = report.expectations[1]
    assert not latency.passed and "no samples" not in latency.expected


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


@pytest.mark.parametrize("repeated", [0, 1])
async def test_a_duplicate_passes_only_with_a_repeated_admission(repeated: int) -> None:
    """One group gets one event too many. The fake API server's webhook counter shows
    ``repeated`` admissions beyond the routed writes: 1 explains the extra event, 0 does
    not (the oracle only forgives what the API server really did)."""
    session = FakeSession()
    contexts: list[RunContext] = []

    def routed() -> int:
        ctx = contexts[0]
        executed = [e for c in ctx.churns for e in c.executed]
        return len(ground_truth(executed, ctx.rules(), ctx.runtime_ids).deliveries)

    def counter(cluster: str) -> dict[str, float]:
        names = contexts[0].webhook_managers()
        done = bool(contexts[0].churns and contexts[0].churns[-1].executed)
        return {name: float(routed() + (repeated if done else 0)) for name in names}

    session.admission_counter = counter

    async def webhook() -> None:
        """One event per last cause, plus one extra for the first group."""
        delivered: dict[object, object] = {}
        while True:
            await asyncio.sleep(0.02)
            if not contexts or not contexts[0].churns or not contexts[0].churns[0].finished:
                continue
            ctx = contexts[0]
            executed = [e for c in ctx.churns for e in c.executed]
            truth = ground_truth(executed, ctx.rules(), ctx.runtime_ids)
            for i, exp in enumerate(truth.expected):
                if exp.last_cause is not None and exp.key not in delivered:
                    delivered[exp.key] = exp.last_cause
                    for _ in range(exp.required + (1 if i == 0 else 0)):
                        session.events.append(
                            event(exp.manager, exp.runtime_id, exp.key.namespace, exp.key.name)
                        )

    import harness.runner.scenario as scenario_module

    original = RunContext  # what harness.runner.scenario imported

    def capture(*args: object, **kwargs: object) -> RunContext:
        ctx = original(*args, **kwargs)  # type: ignore[arg-type]
        contexts.append(ctx)
        return ctx

    task = asyncio.create_task(webhook())
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(scenario_module, "RunContext", capture)
            report = await run(CHURN.replace("BACKGROUND", "false"), session)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    truth = report.expectations[0]
    if repeated:
        assert truth.passed, truth.actual
        assert "1 with an extra event from a repeated admission" in truth.actual
        assert "repeated-admission: manager=lifecycle-manager" in truth.actual
    else:
        assert not truth.passed
        assert "duplicate: manager=lifecycle-manager" in truth.actual


@pytest.mark.parametrize(("bound", "passed"), [("1s", True), ("1ms", False)])
async def test_writes_bound_the_churn_write_round_trip(bound: str, passed: bool) -> None:
    """The fake session answers at once, so the round trip is tiny; a bound below it fails."""

    class SlowWrites(FakeSession):
        async def write(self, mutation: Mutation) -> Any:
            await asyncio.sleep(0.005)
            return await super().write(mutation)

    session = SlowWrites()
    text = CHURN.replace("BACKGROUND", "false").replace(
        "          truth: {manager: lifecycle-manager}\n          latency: {p50: 1s, max: 2s}\n",
        f"          writes: {{cluster: skr-a, p99: {bound}, max: {bound}}}\n",
    )
    report = await run(text, session)
    (result,) = report.expectations
    assert result.kind == "writes"
    assert result.passed is passed, result.actual
    assert result.actual.endswith(f"(n={len(session.mutations)})")
    assert float(result.actual.split()[0]) >= 0.005


@pytest.mark.parametrize(("bound", "passed"), [("{atLeast: 1}", True), ("{exactly: 0}", False)])
async def test_writes_count_the_refused_churn_writes(bound: str, passed: bool) -> None:
    """Every third churn write is refused, as by an API server that is restarting."""

    class Refusing(FakeSession):
        async def write(self, mutation: Mutation) -> Any:
            await super().write(mutation)
            if len(self.mutations) % 3 == 0:
                raise ConnectionRefusedError("apiserver down")
            return None

    session = Refusing()
    text = CHURN.replace("BACKGROUND", "false").replace(
        "          truth: {manager: lifecycle-manager}\n          latency: {p50: 1s, max: 2s}\n",
        f"          writes: {{cluster: skr-a, failed: {bound}}}\n",
    )
    report = await run(text, session)
    (result,) = report.expectations
    refused = len(session.mutations) // 3
    assert refused >= 1
    assert result.passed is passed, result.actual
    assert result.actual.startswith(f"{refused} ")
