"""What each operation verb of the YAML model does: :func:`run_operation` looks the
operation's type up in :data:`EXECUTORS`, one row per verb. The verbs that only change
something and note it (``apply``, ``patch``, ``delete``, ``wait``, ``set``, ``watcher``,
``fault``, ``request``) are here; those that check or run longer have a module each
(``expect``, ``assertion`` for ``assert``/``error``, ``churn``, ``script``, ``collect``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.faults import Fault, Part, PartFault
from harness.kube.crds import load_yaml_documents
from harness.report.model import TimelineKind
from harness.runner.actions import assertion, churn, collect, expect, script
from harness.runner.context import ChurnRecord, RunContext
from harness.runner.errors import ExpectationFailed, OperationFailed
from harness.scenario import (
    Apply,
    ApplyOp,
    AssertOp,
    BreakFault,
    ChurnOp,
    CollectOp,
    Delete,
    DeleteOp,
    ErrorOp,
    ExpectOp,
    FaultOp,
    KcpFault,
    Patch,
    PatchOp,
    ProcessFault,
    Request,
    RequestOp,
    RotateFault,
    ScriptOp,
    SetOp,
    WaitOp,
    WatcherChange,
    WatcherOp,
)
from harness.scenario.operations import operation_key
from watcher.render.watcher_cr import parse_watcher

Executor = Callable[[RunContext, Any], Awaitable[None]]
OpT = TypeVar("OpT")


async def apply(ctx: RunContext, op: Apply) -> None:
    """Create or replace an inline object or the objects of a file on a cluster."""
    if op.object is not None:
        objects = [dict(op.object)]
    else:
        assert op.file is not None  # the model allows exactly one of object or file
        objects = load_yaml_documents(ctx.base_dir / op.file)
    for obj in objects:
        meta = obj.get("metadata") or {}
        at = ctx.clock()
        await ctx.session.apply(op.cluster, obj)
        ctx.wrote(
            op.cluster, str(obj["kind"]), meta.get("namespace") or "", meta["name"], "apply", at
        )


async def patch(ctx: RunContext, op: Patch) -> None:
    """A JSON merge patch of one object (or of its status subresource)."""
    at = ctx.clock()
    await ctx.session.patch(op)
    detail = "patch" + (f" {op.subresource}" if op.subresource else "")
    ctx.wrote(op.cluster, op.resource.resource, op.namespace, op.name, detail, at)


async def delete(ctx: RunContext, op: Delete) -> None:
    """Remove one object (an object that does not exist is not an error)."""
    at = ctx.clock()
    existed = await ctx.session.delete(op.cluster, op.resource, op.namespace, op.name)
    detail = "delete" if existed else "delete (did not exist)"
    ctx.wrote(op.cluster, op.resource.resource, op.namespace, op.name, detail, at)


async def set_values(ctx: RunContext, values: dict[str, Any]) -> None:
    """Give names values for the rest of the run (bindings and captured values in them
    are already filled in by the step runner)."""
    ctx.capture(dict(values), "set")


async def watcher(ctx: RunContext, op: WatcherChange) -> None:
    """Add, replace or remove a Watcher; returns once the change is live everywhere, and
    records when it happened for the ground truth."""
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


async def fault(ctx: RunContext, op: ProcessFault | KcpFault | RotateFault | BreakFault) -> None:
    """Stop/start/kill/restart a part, Envoy fault injection on KCP routes, or a
    certificate rotation; each becomes a timeline entry. Before an SKR API server stops,
    the running churns on it note its webhook call counters (the next incarnation counts
    from 0)."""
    at = ctx.clock()
    churns = _churns_stopped_by(ctx, op.fault)
    if churns:
        assert isinstance(op.fault, PartFault)
        reading = await ctx.session.admission_counts(op.fault.name)
        for record in churns:
            record.admission_gaps.setdefault(op.fault.name, []).append(reading)
    done = await ctx.session.faults.inject(op.fault)
    ctx.report.event(TimelineKind.FAULT, done.target, done.action, done.detail, at=at)


def _churns_stopped_by(ctx: RunContext, fault: Fault) -> list[ChurnRecord]:
    """Running churns on the cluster whose API server ``fault`` stops (see
    ``harness.churn.admissions.admissions_made``)."""
    if not (isinstance(fault, PartFault) and fault.part is Part.APISERVER):
        return []
    if not fault.stops_or_restarts:
        return []
    return [c for c in ctx.churns if not c.finished and fault.name in c.spec.clusters]


async def request(ctx: RunContext, op: Request) -> None:
    """One HTTPS request with an SKR's client certificate (or a broken one) and the
    outcome it must get; recorded in the timeline and as one expectation."""
    at = ctx.clock()
    started = time.monotonic()
    outcome = await ctx.session.request(op)
    duration = time.monotonic() - started
    passed = op.expect.holds(outcome.status, outcome.refused)
    actual = outcome.describe()
    ctx.report.event(
        TimelineKind.MUTATION, op.identity, f"{op.method} {op.path}", f"request: {actual}", at=at
    )
    expected = op.expect.describe()
    via = "" if op.to == "gateway" else f" directly to {op.to}"
    verdict = Verdict(passed, f"expected {expected}; got {actual}", expected, actual)
    check = Check("request", f"request {op.method} {op.path}{via} as {op.identity}", verdict)
    failure = expect.record(ctx, check, duration)
    if failure is not None:
        raise ExpectationFailed([failure])


def _entry(
    kind: type[OpT], run: Callable[[RunContext, OpT], Awaitable[None]]
) -> tuple[type, Executor]:
    """One row of :data:`EXECUTORS`; typed, so each executor gets the operation it expects."""
    return kind, run


EXECUTORS: Mapping[type, Executor] = dict(
    [
        _entry(ApplyOp, lambda ctx, op: apply(ctx, op.apply)),
        _entry(PatchOp, lambda ctx, op: patch(ctx, op.patch)),
        _entry(DeleteOp, lambda ctx, op: delete(ctx, op.delete)),
        _entry(ChurnOp, lambda ctx, op: churn.run(ctx, op.churn)),
        _entry(FaultOp, lambda ctx, op: fault(ctx, op.fault)),
        _entry(WaitOp, lambda ctx, op: asyncio.sleep(op.wait)),
        _entry(ExpectOp, lambda ctx, op: expect.run(ctx, op.expect)),
        _entry(WatcherOp, lambda ctx, op: watcher(ctx, op.watcher)),
        _entry(RequestOp, lambda ctx, op: request(ctx, op.request)),
        _entry(AssertOp, lambda ctx, op: assertion.run(ctx, op.assert_)),
        _entry(ErrorOp, lambda ctx, op: assertion.run(ctx, op.error, negate=True)),
        _entry(ScriptOp, lambda ctx, op: script.run(ctx, op.script)),
        _entry(CollectOp, lambda ctx, op: collect.run(ctx, op.collect)),
        _entry(SetOp, lambda ctx, op: set_values(ctx, op.set_)),
    ]
)
"""Operation type → its executor."""


async def run_operation(ctx: RunContext, op: object) -> None:
    executor = EXECUTORS.get(type(op))
    if executor is None:
        raise TypeError(f"not an operation: {op!r}")
    await executor(ctx, op)


def describe(op: object) -> str:
    """``try[2] patch`` style name of an operation, for error messages."""
    return operation_key(op) or type(op).__name__


__all__ = ["EXECUTORS", "describe", "run_operation"]
