"""``churn``: a seeded plan of writes on SKRs, executed at its rate and recorded as ground
truth. In the foreground the operation ends with the churn; with ``background: true`` it
returns at once and later ``truth``/``latency`` expectations wait for it. The SKR API
servers' webhook call counters are read before and after, so the truth knows how many
admissions were repeated (``harness.churn.admissions``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.aio import spawn
from harness.churn.model import ExecutedMutation
from harness.churn.plan import ChurnMix, ChurnSpec, make_plan
from harness.churn.runner import run_churn
from harness.runner.context import ChurnRecord, RunContext
from harness.scenario import Churn


def churn_spec(op: Churn, index: int) -> ChurnSpec:
    """The plan's spec; each churn of a scenario writes objects with names of its own."""
    mix = op.mix
    return ChurnSpec(
        clusters=op.clusters,
        kinds=op.kinds,
        mix=ChurnMix(mix.create, mix.spec_update, mix.status_update, mix.label_flip, mix.delete),
        objects=op.objects,
        rate=op.rate,
        duration=op.duration,
        seed=op.seed,
        labels=op.labels,
        name_prefix="churn" if index == 0 else f"churn{index + 1}",
    )


async def admission_counts(ctx: RunContext, clusters: Sequence[str]) -> dict[str, Any]:
    """Each SKR API server's webhook call counters (``None`` where unreadable)."""
    return {c: await ctx.session.admission_counts(c) for c in clusters}


async def execute(ctx: RunContext, record: ChurnRecord) -> None:
    """Send the plan; the counters before were read by the caller (see :func:`run`)."""

    def executed(item: ExecutedMutation) -> None:
        record.executed.append(item)
        ctx.executed(item)

    clusters = record.spec.clusters
    record.result = await run_churn(
        record.plan,
        ctx.session.write,
        duration=record.spec.duration,
        clock=ctx.clock,
        on_executed=executed,
    )
    # Every accepted write was admitted before its answer: the counters are final.
    record.admissions_after = await admission_counts(ctx, clusters)
    record.ended_at = ctx.clock()


async def run(ctx: RunContext, op: Churn) -> None:
    spec = churn_spec(op, len(ctx.churns))
    # Read before the churn starts, and before a background churn returns: reading an API
    # server's /metrics may take a second on a loaded machine, and a scenario's next
    # operation (``wait: 2s``, then a fault) must count from the churn's first write.
    before = await admission_counts(ctx, spec.clusters)
    record = ChurnRecord(
        spec=spec, plan=make_plan(spec), started_at=ctx.clock(), admissions_before=before
    )
    ctx.churns.append(record)
    if op.background:
        record.task = spawn(execute(ctx, record), f"churn-{len(ctx.churns)}")
    else:
        await execute(ctx, record)
