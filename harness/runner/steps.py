"""Running one step like chainsaw: ``try`` in order until the first failure, then ``catch``
if it failed, then ``finally`` always.

``try`` is bounded by the step's ``timeout``; ``catch`` and ``finally`` each get a fresh
budget of the same length, so clean-up still runs when ``try`` ran out of time. Each block
that ran becomes a step report (branch try/catch/finally); the step fails if ``try`` or
any later block failed.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError
from harness.report.model import Branch, Status, TimelineKind
from harness.runner.actions import describe, run_operation
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.scenario import Step
from harness.scenario.bindings import bind_operation, has_references, references
from harness.scenario.values import format_duration
from watcher.errors import WatcherError

OPERATION_ERRORS = (HarnessError, WatcherError, TimeoutError, OSError)
"""What an operation may raise to fail its step; anything else is a harness bug."""


class BindingFailed(HarnessError):
    """An operation was invalid once its run-time bindings were filled in."""


GET_MODULE = "harness.cli.get"
"""The built-in object reader ``${{ harness.get }}`` runs (``python -m harness.cli.get``)."""


def harness_builtins() -> dict[str, str]:
    """``harness.python`` and ``harness.get``: commands for ``script``, quoted for a shell."""
    return {
        "python": shlex.quote(sys.executable),
        "get": f"{shlex.quote(sys.executable)} -m {GET_MODULE}",
    }


def bound(ctx: RunContext, op: object) -> object:
    """``op`` with the run's built-in bindings (``${{ clusters.kcp.server }}``, ...) and the
    values captured so far filled in; the built-ins are asked of the session only when the
    operation uses one. A reference still unfilled names a value not captured yet."""
    if not isinstance(op, BaseModel) or not has_references(op):
        return op
    try:
        values = {**ctx.session.builtins(), "runId": ctx.run_id, "harness": harness_builtins()}
        result = bind_operation(op, values, ctx.captured)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise BindingFailed(f"invalid once its bindings were filled in: {problems}") from None
    missing = references(result)
    if missing:
        names = ", ".join(repr(n) for n in missing)
        raise BindingFailed(
            f"no value yet for {names}: the capture or set that gives it has not run "
            "(an earlier step failed, was skipped, or comes later)"
        )
    return result


@dataclass(frozen=True)
class BlockResult:
    branch: Branch
    ok: bool
    error: str | None = None


async def run_block(
    ctx: RunContext, branch: Branch, ops: Sequence[object], budget: float
) -> BlockResult:
    """Run ``ops`` in order until one fails; the outcome with a located error line."""
    index = -1
    try:
        async with asyncio.timeout(budget) as scope:
            for index, op in enumerate(ops):  # noqa: B007 - read after the loop
                await run_operation(ctx, bound(ctx, op))
    except OPERATION_ERRORS as exc:
        where = f"{branch.value}[{index}] {describe(ops[index])}" if index >= 0 else branch.value
        if isinstance(exc, TimeoutError) and scope.expired():
            message = f"step timed out after {format_duration(budget)}"
        elif isinstance(exc, ExpectationFailed):
            message = "expectation failed: " + "; ".join(exc.failures)
        else:
            message = f"{type(exc).__name__}: {exc}"
        return BlockResult(branch, False, f"{where}: {message}")
    return BlockResult(branch, True)


async def run_step(ctx: RunContext, step: Step) -> bool:
    """Run ``step``; True if it passed. Results go to ``ctx.report``."""
    ctx.step = step.name
    ctx.open_window()
    ctx.report.event(TimelineKind.STEP, "runner", step.name, "start")
    results: list[BlockResult] = []
    blocks = ((Branch.TRY, step.try_), (Branch.CATCH, step.catch), (Branch.FINALLY, step.finally_))
    for branch, ops in blocks:
        try_passed = branch is Branch.CATCH and results[0].ok
        if branch is not Branch.TRY and (try_passed or not ops):
            continue
        started = time.monotonic()
        result = await run_block(ctx, branch, ops, step.timeout)
        status = Status.PASSED if result.ok else Status.FAILED
        duration = time.monotonic() - started
        ctx.report.step(step.name, status, duration, branch=branch, error=result.error)
        results.append(result)
    ok = results[0].ok and all(r.ok for r in results)
    ctx.report.event(TimelineKind.STEP, "runner", step.name, "passed" if ok else "failed")
    return ok
