"""``apply``: create or replace an inline object or the objects of a file on a cluster."""

from __future__ import annotations

from typing import Any

from harness.kube.crds import load_yaml_documents
from harness.runner.context import RunContext
from harness.scenario import Apply


def objects(ctx: RunContext, op: Apply) -> list[dict[str, Any]]:
    if op.object is not None:
        return [dict(op.object)]
    assert op.file is not None  # the model allows exactly one of object or file
    return load_yaml_documents(ctx.base_dir / op.file)


async def run(ctx: RunContext, op: Apply) -> None:
    for obj in objects(ctx, op):
        meta = obj.get("metadata") or {}
        at = ctx.clock()
        await ctx.session.apply(op.cluster, obj)
        ctx.wrote(
            op.cluster, str(obj["kind"]), meta.get("namespace") or "", meta["name"], "apply", at
        )
