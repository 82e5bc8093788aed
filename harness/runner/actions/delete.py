"""``delete``: remove one object (an object that does not exist is not an error)."""

from __future__ import annotations

from harness.runner.context import RunContext
from harness.scenario import Delete


async def run(ctx: RunContext, op: Delete) -> None:
    at = ctx.clock()
    existed = await ctx.session.delete(op.cluster, op.resource, op.namespace, op.name)
    detail = "delete" if existed else "delete (did not exist)"
    ctx.wrote(op.cluster, op.resource.resource, op.namespace, op.name, detail, at)
