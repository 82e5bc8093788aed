"""``fault``: stop/start/kill/restart a part, Envoy fault injection on KCP routes, or a
certificate rotation; each becomes a timeline entry. Before an SKR API server stops, the
running churns on it note its webhook call counters (the next incarnation counts from 0)."""

from __future__ import annotations

from harness.faults import Fault
from harness.report.model import TimelineKind
from harness.runner.context import ChurnRecord, RunContext
from harness.scenario import BreakFault, KcpFault, ProcessFault, RotateFault


async def run(ctx: RunContext, op: ProcessFault | KcpFault | RotateFault | BreakFault) -> None:
    at = ctx.clock()
    target: str
    action: str
    if isinstance(op, ProcessFault | RotateFault | BreakFault):
        churns = _churns_on(ctx, op.fault)
        if churns and op.fault.action in ("stop", "kill", "restart"):
            reading = await ctx.session.admission_counts(op.fault.name)
            for churn in churns:
                churn.admission_gaps.setdefault(op.fault.name, []).append(reading)
        record = await ctx.session.fault(op.fault)
        target, action, detail = record.target, record.action, record.detail
    else:
        target = "kcp"
        if op.kcp is None:
            await ctx.session.clear_kcp_fault()
            action, detail = "clear", "no fault"
        else:
            spec = op.kcp
            await ctx.session.set_kcp_fault(
                delay=spec.delay or 0.0,
                abort_percent=spec.abort_percent,
                abort_status=spec.abort_status,
            )
            action = "inject"
            detail = f"delay {spec.delay or 0:g} s, abort {spec.abort_percent:g}% with " + str(
                spec.abort_status
            )
    ctx.report.event(TimelineKind.FAULT, target, action, detail, at=at)


def _churns_on(ctx: RunContext, fault: Fault) -> list[ChurnRecord]:
    """Running churns on the cluster whose API server ``fault`` stops or starts: its
    webhook call counters restart from zero, so the churn notes them before the stop
    (``harness.churn.admissions.admissions_made``)."""
    if fault.kind != "apiserver":
        return []
    return [c for c in ctx.churns if not c.finished and fault.name in c.spec.clusters]
