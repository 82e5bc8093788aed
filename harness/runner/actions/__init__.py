"""One module per operation verb (the YAML model's ``apply``, ``patch``, ``delete``,
``churn``, ``fault``, ``wait``, ``expect``, ``watcher``, ``request``, ``assert``/``error``,
``script``, ``collect``, ``set``); :func:`run_operation` dispatches."""

from __future__ import annotations

from harness.runner.actions import (
    apply,
    assertion,
    churn,
    collect,
    delete,
    expect,
    fault,
    patch,
    request,
    script,
    set_values,
    wait,
    watcher,
)
from harness.runner.context import RunContext
from harness.scenario import (
    ApplyOp,
    AssertOp,
    ChurnOp,
    CollectOp,
    DeleteOp,
    ErrorOp,
    ExpectOp,
    FaultOp,
    PatchOp,
    RequestOp,
    ScriptOp,
    SetOp,
    WaitOp,
    WatcherOp,
)
from harness.scenario.operations import operation_key


async def run_operation(ctx: RunContext, op: object) -> None:
    match op:
        case ApplyOp():
            await apply.run(ctx, op.apply)
        case PatchOp():
            await patch.run(ctx, op.patch)
        case DeleteOp():
            await delete.run(ctx, op.delete)
        case ChurnOp():
            await churn.run(ctx, op.churn)
        case FaultOp():
            await fault.run(ctx, op.fault)
        case WaitOp():
            await wait.run(ctx, op.wait)
        case ExpectOp():
            await expect.run(ctx, op.expect)
        case WatcherOp():
            await watcher.run(ctx, op.watcher)
        case RequestOp():
            await request.run(ctx, op.request)
        case AssertOp():
            await assertion.run(ctx, op.assert_)
        case ErrorOp():
            await assertion.run(ctx, op.error, negate=True)
        case ScriptOp():
            await script.run(ctx, op.script)
        case CollectOp():
            await collect.run(ctx, op.collect)
        case SetOp():
            await set_values.run(ctx, op.set_)
        case _:
            raise TypeError(f"not an operation: {op!r}")


def describe(op: object) -> str:
    """``try[2] patch`` style name of an operation, for error messages."""
    return operation_key(op) or type(op).__name__


__all__ = ["describe", "run_operation"]
