"""``request``: one HTTPS request through the KCP gateway with an SKR's client certificate
(or a broken one: foreign, expired, not yet valid, no CN) and the outcome it must get;
recorded in the timeline and as one expectation (expected vs actual outcome)."""

from __future__ import annotations

import time

from harness.report.model import TimelineKind
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.scenario import Request


def description(op: Request) -> str:
    via = "" if op.to == "gateway" else f" directly to {op.to}"
    return f"{op.method} {op.path}{via} as {op.identity}"


async def run(ctx: RunContext, op: Request) -> None:
    at = ctx.clock()
    started = time.monotonic()
    outcome = await ctx.session.request(op)
    duration = time.monotonic() - started
    passed = op.expect.holds(outcome.status, outcome.refused)
    actual = outcome.describe()
    ctx.report.event(
        TimelineKind.MUTATION, op.identity, f"{op.method} {op.path}", f"request: {actual}", at=at
    )
    expected = op.expect.describe()
    result = ctx.report.expectation(
        step=ctx.step,
        kind="request",
        description=f"request {description(op)}",
        expected=expected,
        actual=actual,
        passed=passed,
        duration=duration,
    )
    if not passed:
        raise ExpectationFailed([f"{result.id}: expected {expected}; got {actual}"])
