"""Expectations over a churn: the ground truth (missing events, duplicates forgiven only
for a repeated admission) and the churn writes' round trip and refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from expect_kit import run
from runner_fake import FakeSession, event

import harness.runner.scenario as scenario_module
from harness.churn.model import Mutation
from harness.churn.truth import ground_truth
from harness.report import ScenarioReport
from harness.runner.context import RunContext

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


async def run_playing(
    text: str,
    session: FakeSession,
    contexts: list[RunContext],
    webhook: Callable[[], Coroutine[Any, Any, None]],
) -> ScenarioReport:
    """Run ``text`` while ``webhook`` plays the webhook; the run's context goes to
    ``contexts`` as soon as it is made (for the ground truth of what the churn wrote)."""
    original = RunContext  # what harness.runner.scenario imported

    def capture(*args: object, **kwargs: object) -> RunContext:
        ctx = original(*args, **kwargs)  # type: ignore[arg-type]
        contexts.append(ctx)
        return ctx

    task = asyncio.create_task(webhook())
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(scenario_module, "RunContext", capture)
            return await run(text, session)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


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

    report = await run_playing(CHURN.replace("BACKGROUND", background), session, contexts, webhook)
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

    report = await run_playing(CHURN.replace("BACKGROUND", "false"), session, contexts, webhook)
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
