"""One module per operation verb (the YAML model's ``apply``, ``patch``, ``delete``,
``churn``, ``fault``, ``wait``, ``expect``, ``watcher``, ``request``, ``assert``/``error``,
``script``, ``collect``, ``set``); :func:`run_operation` looks the operation's type up in
:data:`EXECUTORS`, one row per verb."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

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

Executor = Callable[[RunContext, Any], Awaitable[None]]
OpT = TypeVar("OpT")


def _entry(
    kind: type[OpT], run: Callable[[RunContext, OpT], Awaitable[None]]
) -> tuple[type, Executor]:
    """One row of :data:`EXECUTORS`; typed, so each executor gets the operation it expects."""
    return kind, run


EXECUTORS: Mapping[type, Executor] = dict(
    [
        _entry(ApplyOp, lambda ctx, op: apply.run(ctx, op.apply)),
        _entry(PatchOp, lambda ctx, op: patch.run(ctx, op.patch)),
        _entry(DeleteOp, lambda ctx, op: delete.run(ctx, op.delete)),
        _entry(ChurnOp, lambda ctx, op: churn.run(ctx, op.churn)),
        _entry(FaultOp, lambda ctx, op: fault.run(ctx, op.fault)),
        _entry(WaitOp, lambda ctx, op: wait.run(ctx, op.wait)),
        _entry(ExpectOp, lambda ctx, op: expect.run(ctx, op.expect)),
        _entry(WatcherOp, lambda ctx, op: watcher.run(ctx, op.watcher)),
        _entry(RequestOp, lambda ctx, op: request.run(ctx, op.request)),
        _entry(AssertOp, lambda ctx, op: assertion.run(ctx, op.assert_)),
        _entry(ErrorOp, lambda ctx, op: assertion.run(ctx, op.error, negate=True)),
        _entry(ScriptOp, lambda ctx, op: script.run(ctx, op.script)),
        _entry(CollectOp, lambda ctx, op: collect.run(ctx, op.collect)),
        _entry(SetOp, lambda ctx, op: set_values.run(ctx, op.set_)),
    ]
)
"""Operation type → its executor (the action module of its verb)."""


async def run_operation(ctx: RunContext, op: object) -> None:
    executor = EXECUTORS.get(type(op))
    if executor is None:
        raise TypeError(f"not an operation: {op!r}")
    await executor(ctx, op)


def describe(op: object) -> str:
    """``try[2] patch`` style name of an operation, for error messages."""
    return operation_key(op) or type(op).__name__


__all__ = ["EXECUTORS", "describe", "run_operation"]
