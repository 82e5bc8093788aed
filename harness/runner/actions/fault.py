"""``fault``: stop/start/kill/restart a part, Envoy fault injection on KCP routes, or a
certificate rotation; each becomes a timeline entry."""

from __future__ import annotations

from harness.report.model import TimelineKind
from harness.runner.context import RunContext
from harness.scenario import KcpFault, ProcessFault, RotateFault


async def run(ctx: RunContext, op: ProcessFault | KcpFault | RotateFault) -> None:
    at = ctx.clock()
    target: str
    action: str
    if isinstance(op, ProcessFault | RotateFault):
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
