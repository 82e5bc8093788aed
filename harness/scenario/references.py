"""Cross-references: every name an operation or expectation uses must be declared.

Pure. :func:`check_references` returns every problem with the path (YAML keys and list
indexes) of the value at fault, so the loader can point at its line and column.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.scenario.clusters import KCP, Clusters
from harness.scenario.expectations import Expect
from harness.scenario.kymas import Kyma
from harness.scenario.operations import (
    EVERY_SKR,
    ApplyOp,
    Assert,
    AssertOp,
    BreakFault,
    ChurnOp,
    CollectOp,
    DeleteOp,
    ErrorOp,
    ExpectOp,
    FaultOp,
    PatchOp,
    ProcessFault,
    RequestOp,
    RotateFault,
    ScriptOp,
    WatcherOp,
)
from harness.scenario.settings import Settings
from harness.scenario.steps import Step
from harness.scenario.timeline import Occurrence, TimelineExpectation
from harness.scenario.watchers import KLM_COMPONENT, KLM_SERVICE, AnyWatcher, Listener
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER


class Declared(Protocol):
    """What a scenario declares (a :class:`~harness.scenario.model.Scenario` is one); a
    protocol so that the model can call this check without an import cycle."""

    @property
    def clusters(self) -> Clusters: ...
    @property
    def watchers(self) -> tuple[AnyWatcher, ...]: ...
    @property
    def listeners(self) -> tuple[Listener, ...]: ...
    @property
    def steps(self) -> tuple[Step, ...]: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def kymas(self) -> tuple[Kyma, ...] | None: ...
    @property
    def effective_kymas(self) -> tuple[Kyma, ...]: ...


Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    loc: Loc
    message: str
    hint: str = ""


class ReferenceProblems(ValueError):
    """Raised by :class:`Scenario`'s validator; carries every :class:`Problem`."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def suggest(name: str, known: Iterable[str], what: str) -> str:
    """``did you mean 'x'? (<what>: a, b, c)`` or just the list."""
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=1)
    listing = f"{what}: {', '.join(known)}" if known else f"no {what} declared"
    return f"did you mean {close[0]!r}? ({listing})" if close else listing


def _unknown(loc: Loc, what: str, name: str, known: Iterable[str], plural: str) -> Problem:
    return Problem(loc, f"unknown {what} {name!r}", suggest(name, known, plural))


def _duplicates(items: Iterable[tuple[Loc, str]], what: str) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for loc, key in items:
        if key in seen:
            out.append(Problem(loc, f"duplicate {what} {key!r}", f"{what} names must be unique"))
        seen.add(key)
    return out


class _Checker:
    def __init__(self, s: Declared) -> None:
        self.s = s
        self.problems: list[Problem] = []
        self.skrs = {skr.name: skr for skr in s.clusters.skrs}
        self.clusters = {KCP, *self.skrs}
        health = {HEALTH_MANAGER} if s.settings.klm.health is not None else set()
        self.components = {KLM_COMPONENT, *health, *(lst.component for lst in s.listeners)}
        self.services = {KLM_SERVICE.key, *(lst.service.key for lst in s.listeners)}
        applied = [
            op.watcher.apply
            for step in s.steps
            for _, ops in step.blocks()
            for op in ops
            if isinstance(op, WatcherOp) and op.watcher.apply is not None
        ]
        self.watcher_names = {w.name for w in s.watchers} | {w.name for w in applied}
        self.managers = {w.manager_name for w in s.watchers} | {w.manager_name for w in applied}
        self.managers |= self.components
        self.kcp_kymas = {k.name for k in s.effective_kymas if k.cluster == KCP} | {
            k.key for k in s.effective_kymas if k.cluster == KCP
        }
        self.kcp_kymas |= set(_applied_kcp_kymas(s.steps))

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def cluster(self, loc: Loc, name: str, *, skr_only: bool = False) -> None:
        known = set(self.skrs) if skr_only else self.clusters
        if name not in known:
            what = "SKR" if skr_only else "cluster"
            if skr_only and name == KCP:
                self.add(Problem(loc, "'kcp' is not an SKR here", suggest(name, known, "SKRs")))
            else:
                self.add(_unknown(loc, what, name, known, f"{what}s"))

    def manager(self, loc: Loc, name: str | None) -> None:
        if name is not None and name not in self.managers:
            self.add(_unknown(loc, "manager", name, self.managers, "managers"))

    def event(
        self, loc: Loc, manager: str | None, cluster: str | None, runtime_id: str | None
    ) -> None:
        """An event selector: its manager, sender SKR and runtime id (both: consistent)."""
        self.manager((*loc, "manager"), manager)
        if cluster is not None:
            self.cluster((*loc, "cluster"), cluster, skr_only=True)
        if runtime_id is None:
            return
        runtime_ids = {s.runtime_id for s in self.skrs.values()}
        here = (*loc, "runtimeId")
        if runtime_id not in runtime_ids:
            self.add(_unknown(here, "runtime id", runtime_id, runtime_ids, "runtime ids"))
        skr = self.skrs.get(cluster or "")
        if skr is not None and skr.runtime_id != runtime_id:
            self.add(
                Problem(
                    here,
                    f"SKR {skr.name!r} has runtime id {skr.runtime_id!r}, not {runtime_id!r}",
                    "give cluster or runtimeId, not both",
                )
            )

    def kcp_kyma(self, loc: Loc, name: str) -> None:
        if name not in self.kcp_kymas:
            names = {n for n in self.kcp_kymas if "/" not in n}
            self.add(_unknown(loc, "KCP Kyma", name, names, "KCP Kymas"))

    def service(self, loc: Loc, key: tuple[str, str, int]) -> None:
        if key not in self.services:
            served = [f"{n}.{ns}:{p}" for n, ns, p in self.services]
            self.add(
                Problem(
                    loc,
                    f"no listener serves {key[0]}.{key[1]}:{key[2]}",
                    f"add it under listeners, or use one of {', '.join(sorted(served))}",
                )
            )

    def target(self, loc: Loc, target: str, *, allow_apiserver: bool) -> None:
        kind, _, name = target.partition("/")
        if kind == "apiserver":
            if not allow_apiserver:
                self.add(Problem(loc, f"metrics target {target!r} is not supported"))
            elif name not in self.clusters:
                self.add(_unknown(loc, "cluster", name, self.clusters, "clusters"))
        elif kind == "listener" and name == HEALTH_MANAGER and name not in self.components:
            hint = "turn it on: settings: {klm: {health: {interval: 10s, timeout: 2s}}}"
            self.add(Problem(loc, f"no listener {name!r}: watcher health is off", hint))
        elif kind == "listener" and name not in self.components:
            self.add(_unknown(loc, "listener", name, self.components, "listeners"))
        elif kind == "webhook" and name not in self.skrs:
            self.add(_unknown(loc, "SKR", name, self.skrs, "SKRs"))

    def run(self) -> list[Problem]:
        s = self.s
        skr_locs = [
            (("clusters", "skrs", i, "name"), k.name) for i, k in enumerate(s.clusters.skrs)
        ]
        self.problems += _duplicates(skr_locs, "SKR")
        for i, skr in enumerate(s.clusters.skrs):
            if skr.name == KCP:
                self.add(
                    Problem(
                        ("clusters", "skrs", i, "name"), "'kcp' names the KCP", "rename the SKR"
                    )
                )
        self.problems += _duplicates(
            (
                (("clusters", "skrs", i, "runtimeId"), k.runtime_id)
                for i, k in enumerate(s.clusters.skrs)
            ),
            "runtime id",
        )
        self.problems += _duplicates(
            ((("watchers", i), f"{w.namespace}/{w.name}") for i, w in enumerate(s.watchers)),
            "Watcher",
        )
        for i, w in enumerate(s.watchers):
            self.service(("watchers", i, "watcher", "service"), w.service.key)
        self.problems += _duplicates(
            ((("listeners", i, "component"), lst.component) for i, lst in enumerate(s.listeners)),
            "listener",
        )
        for i, lst in enumerate(s.listeners):
            if lst.component == KLM_COMPONENT:
                self.add(
                    Problem(
                        ("listeners", i, "component"),
                        f"the {KLM_COMPONENT} listener always exists",
                        "remove this entry",
                    )
                )
            elif lst.service.key == KLM_SERVICE.key:
                self.add(Problem(("listeners", i, "service"), "this service is KLM's"))
        if s.kymas is not None:
            for i, kyma in enumerate(s.kymas):
                self.cluster(("kymas", i, "cluster"), kyma.cluster)
            self.problems += _duplicates(
                ((("kymas", i), f"{k.cluster}:{k.key}") for i, k in enumerate(s.kymas)), "Kyma"
            )
        self.problems += _duplicates(
            ((("steps", i, "name"), step.name) for i, step in enumerate(s.steps)), "step"
        )
        churned = False
        for i, step in enumerate(s.steps):
            for block, ops in step.blocks():
                for j, op in enumerate(ops):
                    loc: Loc = ("steps", i, block, j)
                    churned |= isinstance(op, ChurnOp)
                    self.operation(loc, op, step.timeout, churned)
        return self.problems

    def operation(self, loc: Loc, op: Any, step_timeout: float, churned: bool) -> None:
        if isinstance(op, ApplyOp | PatchOp | DeleteOp):
            key = next(iter(type(op).model_fields))
            self.cluster((*loc, key, key, "cluster"), getattr(op, key).cluster)
        elif isinstance(op, ChurnOp):
            for k, name in enumerate(op.churn.clusters):
                self.cluster((*loc, "churn", "churn", "clusters", k), name, skr_only=True)
        elif isinstance(op, FaultOp):
            fault = op.fault
            if isinstance(fault, ProcessFault):
                here = (*loc, "fault", "fault", "process", "target")
                self.target(here, fault.target, allow_apiserver=True)
            elif isinstance(fault, RotateFault | BreakFault):
                tag = "rotate" if isinstance(fault, RotateFault) else "break"
                for k, name in enumerate(fault.clusters):
                    here = (*loc, "fault", "fault", tag, "clusters", k)
                    self.cluster(here, name, skr_only=True)
        elif isinstance(op, WatcherOp):
            change = op.watcher
            if change.apply is not None:
                here = (*loc, "watcher", "watcher", "apply", "service")
                self.service(here, change.apply.service.key)
            elif change.delete is not None and change.delete not in self.watcher_names:
                self.add(
                    _unknown(
                        (*loc, "watcher", "watcher", "delete"),
                        "Watcher",
                        change.delete,
                        self.watcher_names,
                        "Watchers",
                    )
                )
        elif isinstance(op, RequestOp):
            if op.request.cluster is not None:
                here = (*loc, "request", "request", "cluster")
                self.cluster(here, op.request.cluster, skr_only=True)
            if op.request.to != "gateway":
                here = (*loc, "request", "request", "to")
                self.target(here, op.request.to, allow_apiserver=False)
        elif isinstance(op, ExpectOp):
            self.expect((*loc, "expect", "expect"), op.expect, step_timeout, churned)
        elif isinstance(op, AssertOp | ErrorOp | CollectOp):
            key = "assert" if isinstance(op, AssertOp) else next(iter(type(op).model_fields))
            spec = op.assert_ if isinstance(op, AssertOp) else getattr(op, key)
            if spec.cluster != EVERY_SKR:
                self.cluster((*loc, key, key, "cluster"), spec.cluster)
            if isinstance(spec, Assert):
                self.bounded((*loc, key, key, "within"), "within", spec.within, step_timeout)
        elif isinstance(op, ScriptOp):
            here = (*loc, "script", "script", "timeout")
            self.bounded(here, "timeout", op.script.timeout, step_timeout)
            if op.script.within is not None:
                here = (*loc, "script", "script", "within")
                self.bounded(here, "within", op.script.within, step_timeout)

    def bounded(self, loc: Loc, what: str, seconds: float, step_timeout: float) -> None:
        if seconds > step_timeout:
            self.add(
                Problem(
                    loc,
                    f"{what} {seconds:g}s exceeds the step timeout {step_timeout:g}s",
                    f"raise the step's timeout or shorten {what}",
                )
            )

    def expect(self, loc: Loc, e: Expect, step_timeout: float, churned: bool) -> None:
        if e.within > step_timeout:
            self.add(
                Problem(
                    (*loc, "within"),
                    f"within {e.within:g}s exceeds the step timeout {step_timeout:g}s",
                    "raise the step's timeout or shorten within",
                )
            )
        for k, ev in enumerate(e.events):
            self.event((*loc, "events", k), ev.manager, ev.cluster, ev.runtime_id)
        if e.truth is not None:
            self.manager((*loc, "truth", "manager"), e.truth.manager)
            if not churned:
                self.add(
                    Problem(
                        (*loc, "truth"),
                        "truth compares events with the churn's record, but no churn runs "
                        "before it",
                        "add a churn operation to this or an earlier step",
                    )
                )
        for k, rc in enumerate(e.reconciles):
            self.kcp_kyma((*loc, "reconciles", k, "kyma"), rc.kyma)
        for k, rj in enumerate(e.rejections):
            if rj.listener not in self.components:
                self.add(
                    _unknown(
                        (*loc, "rejections", k, "listener"),
                        "listener",
                        rj.listener,
                        self.components,
                        "listeners",
                    )
                )
        for k, m in enumerate(e.metrics):
            self.target((*loc, "metrics", k, "target"), m.target, allow_apiserver=True)
        if e.latency is not None:
            self.manager((*loc, "latency", "manager"), e.latency.manager)
        if e.writes is not None and e.writes.cluster is not None:
            self.cluster((*loc, "writes", "cluster"), e.writes.cluster, skr_only=True)
        for k, entry in enumerate(e.timeline):
            self.timeline((*loc, "timeline", k), entry)

    def timeline(self, loc: Loc, entry: TimelineExpectation) -> None:
        """The clusters, managers, Kymas, steps and fault targets a ``timeline`` entry's
        ``first`` and ``then`` name."""
        for end in ("first", "then"):
            occurrence: Occurrence = getattr(entry, end)
            here: Loc = (*loc, end, occurrence.key)
            if occurrence.object is not None:
                self.cluster((*here, "cluster"), occurrence.object.cluster)
            elif occurrence.write is not None and occurrence.write.cluster is not None:
                self.cluster((*here, "cluster"), occurrence.write.cluster)
            elif occurrence.event is not None:
                ev = occurrence.event
                self.event(here, ev.manager, ev.cluster, ev.runtime_id)
            elif occurrence.reconcile is not None:
                self.kcp_kyma((*here, "kyma"), occurrence.reconcile.kyma)
            elif occurrence.step is not None:
                steps = {step.name for step in self.s.steps}
                if occurrence.step.name not in steps:
                    self.add(
                        _unknown((*here, "name"), "step", occurrence.step.name, steps, "steps")
                    )
            elif occurrence.fault is not None and occurrence.fault.target is not None:
                target = occurrence.fault.target
                if target not in ("gateway", "kcp", "certificates"):
                    self.target((*here, "target"), target, allow_apiserver=True)


def _applied_kcp_kymas(steps: Iterable[Step]) -> Iterable[str]:
    """Names (and ``namespace/name``) of the Kymas ``apply`` operations create in the KCP
    while the scenario runs: expectations may name them too."""
    for step in steps:
        for _, ops in step.blocks():
            for op in ops:
                if not isinstance(op, ApplyOp) or op.apply.cluster != KCP:
                    continue
                obj = op.apply.object
                if not obj or obj.get("kind") != "Kyma":
                    continue
                meta = obj.get("metadata") or {}
                name = str(meta.get("name", ""))
                yield name
                yield f"{meta.get('namespace') or 'kcp-system'}/{name}"


def check_references(scenario: Declared) -> list[Problem]:
    """Every dangling or duplicate name in ``scenario``, in document order."""
    return _Checker(scenario).run()
