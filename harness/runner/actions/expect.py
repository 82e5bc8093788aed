"""``expect``: poll every entry until all hold or ``within`` has passed; record each entry
as one expectation (expected vs the last observed state) and fail the step if any did not
hold.

Polling ends early when every entry holds — after a short grace period if an entry has an
upper bound (``exactly``, ``atMost``, ``none``, ``truth``), so an event arriving just after
the first match is still counted — or when every failing entry can no longer change (a
count already above its upper bound). ``truth``, ``latency`` and ``writes`` first wait for
background churns to end. The window is then closed: the next ``expect`` of the step counts
from now.
"""

from __future__ import annotations

import asyncio
import time

from harness.expect.check import Check
from harness.expect.judge import judge
from harness.expect.truth import churns_for_truth
from harness.report.model import Attachment
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.runner.observe import observe
from harness.scenario import Expect

POLL_INTERVAL = 0.1
GRACE = 0.5


async def evaluate_all(ctx: RunContext, expect: Expect, since: float) -> list[Check]:
    """One snapshot, every entry judged."""
    return judge(expect, await observe(ctx, expect, since))


async def wait_for_churns(ctx: RunContext) -> None:
    tasks = [c.task for c in ctx.churns if c.task is not None and not c.task.done()]
    if tasks:
        await asyncio.wait(tasks)


async def poll(ctx: RunContext, expect: Expect, since: float) -> list[Check]:
    """Evaluate until the expectation settles (see the module doc); the last evaluation."""
    deadline = time.monotonic() + expect.within
    held_since: float | None = None
    while True:
        checks = await evaluate_all(ctx, expect, since)
        now = time.monotonic()
        if now >= deadline:
            return checks
        if all(c.ok for c in checks):
            if not any(c.bounded for c in checks):
                return checks
            held_since = now if held_since is None else held_since
            if now - held_since >= GRACE:
                return checks
        else:
            held_since = None
            if all(c.ok or c.final for c in checks):
                return checks
        await asyncio.sleep(min(POLL_INTERVAL, max(0.0, deadline - now)))


def record(ctx: RunContext, check: Check, duration: float) -> str | None:
    """Put ``check`` into the report as one expectation; its failure line, if it failed."""
    result = ctx.report.expectation(
        step=ctx.step,
        kind=check.kind,
        description=check.description,
        expected=check.verdict.expected,
        actual=check.verdict.actual,
        passed=check.ok,
        duration=duration,
        details=check.details,
        attachments=[Attachment(name, text) for name, text in check.attachments],
    )
    return None if check.ok else f"{result.id}: {check.verdict.text}"


async def run(ctx: RunContext, expect: Expect) -> None:
    if expect.truth is not None or expect.latency is not None or expect.writes is not None:
        await wait_for_churns(ctx)
    since = ctx.window_start
    started = time.monotonic()
    checks = await poll(ctx, expect, since)
    duration = time.monotonic() - started
    failures = [f for check in checks if (f := record(ctx, check, duration)) is not None]
    samples = next((c.latencies for c in checks if c.kind == "truth"), None)
    if samples is None:
        samples = next((c.latencies for c in checks if c.kind == "latency"), ())
    ctx.report.latencies(s * 1000 for s in samples)
    if expect.truth is not None:
        for churn in churns_for_truth(ctx.churns):
            churn.verified = True
    ctx.open_window()
    if failures:
        raise ExpectationFailed(failures)
