"""``assert`` / ``error``: poll the selected objects until the partial tree matches (or,
for ``error``, until nothing matches) or ``within`` ends; one expectation in the report,
with the diff of the closest object and the selected objects' YAML when it failed."""

from __future__ import annotations

import asyncio
import time

from harness.expect.assertion import captured, judge
from harness.runner.actions.expect import POLL_INTERVAL, record
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.scenario import EVERY_SKR, Assert


def selected_clusters(ctx: RunContext, cluster: str) -> list[str]:
    """``"*"``: every SKR of the scenario; else the one cluster."""
    if cluster == EVERY_SKR:
        return [s.name for s in ctx.scenario.clusters.skrs]
    return [cluster]


async def run(ctx: RunContext, spec: Assert, *, negate: bool = False) -> None:
    clusters = selected_clusters(ctx, spec.cluster)
    started = time.monotonic()
    deadline = started + spec.within
    while True:
        seen = [await ctx.session.select(spec, cluster) for cluster in clusters]
        check = judge(spec, seen, negate=negate)
        now = time.monotonic()
        if check.ok or now >= deadline:
            break
        await asyncio.sleep(min(POLL_INTERVAL * 2, max(0.0, deadline - now)))
    failure = record(ctx, check, time.monotonic() - started)
    if failure is not None:
        raise ExpectationFailed([failure])
    if spec.capture and not negate:
        values, problems = captured(spec, seen[0])
        if problems:
            raise ExpectationFailed(problems)
        ctx.capture(values, f"assert {spec.describe()}")
