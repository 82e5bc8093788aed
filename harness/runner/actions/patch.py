"""``patch``: a JSON merge patch of one object (or of its status subresource)."""

from __future__ import annotations

from harness.runner.context import RunContext
from harness.scenario import Patch


async def run(ctx: RunContext, op: Patch) -> None:
    at = ctx.clock()
    await ctx.session.patch(op)
    detail = "patch" + (f" {op.subresource}" if op.subresource else "")
    ctx.wrote(op.cluster, op.resource.resource, op.namespace, op.name, detail, at)
