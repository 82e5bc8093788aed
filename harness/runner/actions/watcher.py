"""``watcher``: add, replace or remove a Watcher while the scenario runs; returns once the
change is live everywhere, and records when it happened for the ground truth."""

from __future__ import annotations

from harness.report.model import TimelineKind
from harness.runner.context import RunContext
from harness.runner.errors import OperationFailed
from harness.scenario import WatcherChange
from watcher.render.watcher_cr import parse_watcher


async def run(ctx: RunContext, op: WatcherChange) -> None:
    started = ctx.clock()
    if op.apply is not None:
        obj = op.apply.to_dict()
        await ctx.session.watchers.apply_watcher(obj)
        name, namespace = op.apply.name, op.apply.namespace
        ctx.watcher_changed(name, namespace, parse_watcher(obj), started, ctx.clock())
        action = "apply"
    else:
        assert op.delete is not None  # the model allows exactly one of apply or delete
        name = op.delete
        found = ctx.watcher_namespace(name)
        if found is None:
            raise OperationFailed(f"watcher delete: no Watcher {name!r} was declared or applied")
        namespace = found
        await ctx.session.watchers.delete_watcher(name, namespace)
        ctx.watcher_changed(name, namespace, None, started, ctx.clock())
        action = "delete"
    ctx.report.event(TimelineKind.FAULT, "kcp", f"{namespace}/Watcher/{name}", action, at=started)
