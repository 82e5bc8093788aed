"""``fault``: stop/start/kill/restart a part, Envoy fault injection on KCP routes, or a
certificate rotation; each becomes a timeline entry. Before an SKR API server stops, the
running churns on it note its webhook call counters (the next incarnation counts from 0)."""

from __future__ import annotations

from harness.faults import Fault, Part, PartFault
from harness.report.model import TimelineKind
from harness.runner.context import ChurnRecord, RunContext
from harness.scenario import BreakFault, KcpFault, ProcessFault, RotateFault


async def run(ctx: RunContext, op: ProcessFault | KcpFault | RotateFault | BreakFault) -> None:
    at = ctx.clock()
    fault = op.fault
    churns = _churns_stopped_by(ctx, fault)
    if churns:
        assert isinstance(fault, PartFault)
        reading = await ctx.session.admission_counts(fault.name)
        for churn in churns:
            churn.admission_gaps.setdefault(fault.name, []).append(reading)
    record = await ctx.session.faults.inject(fault)
    ctx.report.event(TimelineKind.FAULT, record.target, record.action, record.detail, at=at)


def _churns_stopped_by(ctx: RunContext, fault: Fault) -> list[ChurnRecord]:
    """Running churns on the cluster whose API server ``fault`` stops: its webhook call
    counters restart from zero, so the churn notes them before the stop
    (``harness.churn.admissions.admissions_made``)."""
    if not (isinstance(fault, PartFault) and fault.part is Part.APISERVER):
        return []
    if not fault.stops_or_restarts:
        return []
    return [c for c in ctx.churns if not c.finished and fault.name in c.spec.clusters]
