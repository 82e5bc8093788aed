"""What the expectation tests share: a two-SKR scenario head, a patch of skr-a's Kyma,
running a scenario on a fake session, and playing the webhook after each write."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from runner_fake import FakeSession, opener

from harness.environment.events import ObservedEvent
from harness.report import ReportBuilder, ScenarioReport
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import loads_scenario

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
    return replace(e, received_at=time.time())
