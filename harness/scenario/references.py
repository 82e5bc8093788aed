"""Cross-references: every name an operation or expectation uses must be declared, once.

Pure. :class:`KnownNames` holds what a scenario declares, with one check per kind of name;
:func:`check_references` walks the scenario and hands it every name used. A name that is
not declared becomes a :class:`~harness.scenario.errors.Problem` with the path (YAML keys
and list indexes) of the value at fault and a "did you mean" hint rather than an
exception, so one load reports every problem and the loader can point at its line and
column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from harness.scenario.clusters import KCP
from harness.scenario.errors import Loc, Problem, suggest
from harness.scenario.expectations import Expect
from harness.scenario.fault_ops import AnyFault, BreakFault, ProcessFault, RotateFault
from harness.scenario.operations import (
    Apply,
    ApplyOp,
    Churn,
    ChurnOp,
    Delete,
    Patch,
    Script,
    WatcherChange,
    WatcherOp,
    operation_key,
)
from harness.scenario.requests import Request
from harness.scenario.selections import EVERY_SKR, Assert, Collect
from harness.scenario.steps import Step
from harness.scenario.timeline import Occurrence, TimelineExpectation
from harness.scenario.watchers import KLM_COMPONENT, KLM_SERVICE
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER

if TYPE_CHECKING:  # the model runs these checks when it is built: no import at run time
    from harness.scenario.model import Scenario


class ReferenceProblems(ValueError):
    """Raised by :class:`Scenario`'s validator; carries every :class:`Problem`."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


def unknown(loc: Loc, what: str, name: str, known: Iterable[str], plural: str) -> Problem:
    return Problem(loc, f"unknown {what} {name!r}", suggest(name, known, plural))


class KnownNames:
    """The declared names of each kind; every check adds what it finds to ``problems``."""

    def __init__(self, s: Scenario) -> None:
        self.problems: list[Problem] = []
        self.skrs = {skr.name: skr for skr in s.clusters.skrs}
        self.clusters = {KCP, *self.skrs}
        health = {HEALTH_MANAGER} if s.settings.klm.health is not None else set()
        self.components = {KLM_COMPONENT, *health, *(lst.component for lst in s.listeners)}
        self.services = {KLM_SERVICE.key, *(lst.service.key for lst in s.listeners)}
        applied = [
            op.watcher.apply
            for step in s.steps
            for op in step.operations()
            if isinstance(op, WatcherOp) and op.watcher.apply is not None
        ]
        self.watchers = {w.name for w in s.watchers} | {w.name for w in applied}
        self.managers = {w.manager_name for w in s.watchers} | {w.manager_name for w in applied}
        self.managers |= self.components
        kcp_kymas = [k for k in s.effective_kymas if k.cluster == KCP]
        self.kcp_kymas = {k.name for k in kcp_kymas} | {k.key for k in kcp_kymas}
        self.kcp_kymas |= set(_applied_kcp_kymas(s.steps))
        self.steps = {step.name for step in s.steps}

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def _known(self, loc: Loc, what: str, name: str, known: Iterable[str], plural: str) -> None:
        if name not in known:
            self.add(unknown(loc, what, name, known, plural))

    def cluster(self, loc: Loc, name: str, *, skr_only: bool = False) -> None:
        known = set(self.skrs) if skr_only else self.clusters
        if name in known:
            return
        what = "SKR" if skr_only else "cluster"
        if skr_only and name == KCP:
            self.add(Problem(loc, "'kcp' is not an SKR here", suggest(name, known, "SKRs")))
        else:
            self.add(unknown(loc, what, name, known, f"{what}s"))

    def manager(self, loc: Loc, name: str | None) -> None:
        if name is not None:
            self._known(loc, "manager", name, self.managers, "managers")

    def listener(self, loc: Loc, name: str) -> None:
        self._known(loc, "listener", name, self.components, "listeners")

    def watcher(self, loc: Loc, name: str) -> None:
        self._known(loc, "Watcher", name, self.watchers, "Watchers")

    def step(self, loc: Loc, name: str) -> None:
        self._known(loc, "step", name, self.steps, "steps")

    def event(
        self, loc: Loc, manager: str | None, cluster: str | None, runtime_id: str | None
    ) -> None:
        """An event selector: its manager, sender SKR and runtime id (both: consistent)."""
        self.manager((*loc, "manager"), manager)
        if cluster is not None:
            self.cluster((*loc, "cluster"), cluster, skr_only=True)
        if runtime_id is None:
            return
        here = (*loc, "runtimeId")
        self._known(here, "runtime id", runtime_id, self._runtime_ids(), "runtime ids")
        skr = self.skrs.get(cluster or "")
        if skr is not None and skr.runtime_id != runtime_id:
            self.add(
                Problem(
                    here,
                    f"SKR {skr.name!r} has runtime id {skr.runtime_id!r}, not {runtime_id!r}",
                    "give cluster or runtimeId, not both",
                )
            )

    def _runtime_ids(self) -> set[str]:
        return {s.runtime_id for s in self.skrs.values()}

    def kcp_kyma(self, loc: Loc, name: str) -> None:
        if name not in self.kcp_kymas:
            names = {n for n in self.kcp_kymas if "/" not in n}
            self.add(unknown(loc, "KCP Kyma", name, names, "KCP Kymas"))

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
        if kind == "apiserver" and not allow_apiserver:
            self.add(Problem(loc, f"metrics target {target!r} is not supported"))
        elif kind == "apiserver":
            self._known(loc, "cluster", name, self.clusters, "clusters")
        elif kind == "listener" and name == HEALTH_MANAGER and name not in self.components:
            hint = "turn it on: settings: {klm: {health: {interval: 10s, timeout: 2s}}}"
            self.add(Problem(loc, f"no listener {name!r}: watcher health is off", hint))
        elif kind == "listener":
            self.listener(loc, name)
        elif kind == "webhook":
            self._known(loc, "SKR", name, self.skrs, "SKRs")

    def bounded(self, loc: Loc, what: str, seconds: float, step_timeout: float) -> None:
        if seconds > step_timeout:
            self.add(
                Problem(
                    loc,
                    f"{what} {seconds:g}s exceeds the step timeout {step_timeout:g}s",
                    f"raise the step's timeout or shorten {what}",
                )
            )


def _applied_kcp_kymas(steps: Iterable[Step]) -> Iterable[str]:
    """Names (and ``namespace/name``) of the Kymas ``apply`` operations create in the KCP
    while the scenario runs: expectations may name them too."""
    for step in steps:
        for op in step.operations():
            if not isinstance(op, ApplyOp) or op.apply.cluster != KCP:
                continue
            obj = op.apply.object
            if not obj or obj.get("kind") != "Kyma":
                continue
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            yield name
            yield f"{meta.get('namespace') or 'kcp-system'}/{name}"


def check_references(scenario: Scenario) -> list[Problem]:
    """Every dangling or duplicate name in ``scenario``, in document order."""
    names = KnownNames(scenario)
    _check_declarations(names, scenario)
    churned = False
    for i, step in enumerate(scenario.steps):
        for block, ops in step.blocks():
            for j, op in enumerate(ops):
                churned |= isinstance(op, ChurnOp)
                _check_operation(names, ("steps", i, block, j), op, _Step(step.timeout, churned))
    return names.problems


# Declarations ------------------------------------------------------------------------------


def _duplicates(items: Iterable[tuple[Loc, str]], what: str) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for loc, key in items:
        if key in seen:
            out.append(Problem(loc, f"duplicate {what} {key!r}", f"{what} names must be unique"))
        seen.add(key)
    return out


def _check_declarations(names: KnownNames, s: Scenario) -> None:
    """Names declared twice, and declarations that name what is declared elsewhere."""
    skrs = list(enumerate(s.clusters.skrs))
    names.problems += _duplicates(
        ((("clusters", "skrs", i, "name"), k.name) for i, k in skrs), "SKR"
    )
    names.problems += [
        Problem(("clusters", "skrs", i, "name"), "'kcp' names the KCP", "rename the SKR")
        for i, skr in skrs
        if skr.name == KCP
    ]
    runtime_ids = ((("clusters", "skrs", i, "runtimeId"), k.runtime_id) for i, k in skrs)
    names.problems += _duplicates(runtime_ids, "runtime id")
    watchers = list(enumerate(s.watchers))
    names.problems += _duplicates(
        ((("watchers", i), f"{w.namespace}/{w.name}") for i, w in watchers), "Watcher"
    )
    for i, w in watchers:
        names.service(("watchers", i, "watcher", "service"), w.service.key)
    _check_listeners(names, s)
    if s.kymas is not None:
        for i, kyma in enumerate(s.kymas):
            names.cluster(("kymas", i, "cluster"), kyma.cluster)
        kymas = ((("kymas", i), f"{k.cluster}:{k.key}") for i, k in enumerate(s.kymas))
        names.problems += _duplicates(kymas, "Kyma")
    steps = ((("steps", i, "name"), step.name) for i, step in enumerate(s.steps))
    names.problems += _duplicates(steps, "step")


def _check_listeners(names: KnownNames, s: Scenario) -> None:
    listeners = list(enumerate(s.listeners))
    components = ((("listeners", i, "component"), lst.component) for i, lst in listeners)
    names.problems += _duplicates(components, "listener")
    for i, lst in listeners:
        if lst.component == KLM_COMPONENT:
            here: Loc = ("listeners", i, "component")
            names.add(
                Problem(here, f"the {KLM_COMPONENT} listener always exists", "remove this entry")
            )
        elif lst.service.key == KLM_SERVICE.key:
            names.add(Problem(("listeners", i, "service"), "this service is KLM's"))


# Operations --------------------------------------------------------------------------------


class _Step(NamedTuple):
    """What an operation's checks need of its step: its timeout, and whether a churn ran."""

    timeout: float
    churned: bool


def _check_operation(names: KnownNames, loc: Loc, op: Any, step: _Step) -> None:
    """Through :data:`_OPERATION_CHECKS`, with the operation's body at ``loc/key/key``."""
    key = operation_key(op) or ""
    check = _OPERATION_CHECKS.get(key)
    if check is not None:
        check(names, (*loc, key, key), getattr(op, next(iter(type(op).model_fields))), step)


def _object_write(names: KnownNames, loc: Loc, body: Apply | Patch | Delete, _: _Step) -> None:
    names.cluster((*loc, "cluster"), body.cluster)


def _churn(names: KnownNames, loc: Loc, body: Churn, _: _Step) -> None:
    for k, name in enumerate(body.clusters):
        names.cluster((*loc, "clusters", k), name, skr_only=True)


def _fault(names: KnownNames, loc: Loc, fault: AnyFault, _: _Step) -> None:
    if isinstance(fault, ProcessFault):
        names.target((*loc, "process", "target"), fault.target, allow_apiserver=True)
    elif isinstance(fault, RotateFault | BreakFault):
        tag = "rotate" if isinstance(fault, RotateFault) else "break"
        for k, name in enumerate(fault.clusters):
            names.cluster((*loc, tag, "clusters", k), name, skr_only=True)


def _watcher(names: KnownNames, loc: Loc, change: WatcherChange, _: _Step) -> None:
    if change.apply is not None:
        names.service((*loc, "apply", "service"), change.apply.service.key)
    elif change.delete is not None:
        names.watcher((*loc, "delete"), change.delete)


def _request(names: KnownNames, loc: Loc, request: Request, _: _Step) -> None:
    if request.cluster is not None:
        names.cluster((*loc, "cluster"), request.cluster, skr_only=True)
    if request.to != "gateway":
        names.target((*loc, "to"), request.to, allow_apiserver=False)


def _selection(names: KnownNames, loc: Loc, spec: Assert | Collect, step: _Step) -> None:
    """``assert``, ``error`` and ``collect``: the cluster they select in and, for the first
    two, how long they may wait."""
    if spec.cluster != EVERY_SKR:
        names.cluster((*loc, "cluster"), spec.cluster)
    if isinstance(spec, Assert):
        names.bounded((*loc, "within"), "within", spec.within, step.timeout)


def _script(names: KnownNames, loc: Loc, script: Script, step: _Step) -> None:
    names.bounded((*loc, "timeout"), "timeout", script.timeout, step.timeout)
    if script.within is not None:
        names.bounded((*loc, "within"), "within", script.within, step.timeout)


def _expect(names: KnownNames, loc: Loc, e: Expect, step: _Step) -> None:
    names.bounded((*loc, "within"), "within", e.within, step.timeout)
    for k, ev in enumerate(e.events):
        names.event((*loc, "events", k), ev.manager, ev.cluster, ev.runtime_id)
    if e.truth is not None:
        _truth(names, (*loc, "truth"), e.truth.manager, step.churned)
    for k, rc in enumerate(e.reconciles):
        names.kcp_kyma((*loc, "reconciles", k, "kyma"), rc.kyma)
    for k, rj in enumerate(e.rejections):
        names.listener((*loc, "rejections", k, "listener"), rj.listener)
    for k, m in enumerate(e.metrics):
        names.target((*loc, "metrics", k, "target"), m.target, allow_apiserver=True)
    if e.latency is not None:
        names.manager((*loc, "latency", "manager"), e.latency.manager)
    if e.writes is not None and e.writes.cluster is not None:
        names.cluster((*loc, "writes", "cluster"), e.writes.cluster, skr_only=True)
    for k, entry in enumerate(e.timeline):
        _timeline(names, (*loc, "timeline", k), entry)


def _truth(names: KnownNames, loc: Loc, manager: str | None, churned: bool) -> None:
    names.manager((*loc, "manager"), manager)
    if not churned:
        names.add(
            Problem(
                loc,
                "truth compares events with the churn's record, but no churn runs before it",
                "add a churn operation to this or an earlier step",
            )
        )


def _timeline(names: KnownNames, loc: Loc, entry: TimelineExpectation) -> None:
    """The clusters, managers, Kymas, steps and fault targets a ``timeline`` entry's
    ``first`` and ``then`` name."""
    for end in ("first", "then"):
        occurrence: Occurrence = getattr(entry, end)
        here: Loc = (*loc, end, occurrence.key)
        if occurrence.object is not None:
            names.cluster((*here, "cluster"), occurrence.object.cluster)
        elif occurrence.write is not None and occurrence.write.cluster is not None:
            names.cluster((*here, "cluster"), occurrence.write.cluster)
        elif occurrence.event is not None:
            ev = occurrence.event
            names.event(here, ev.manager, ev.cluster, ev.runtime_id)
        elif occurrence.reconcile is not None:
            names.kcp_kyma((*here, "kyma"), occurrence.reconcile.kyma)
        elif occurrence.step is not None:
            names.step((*here, "name"), occurrence.step.name)
        elif occurrence.fault is not None and occurrence.fault.target is not None:
            target = occurrence.fault.target
            if target not in ("gateway", "kcp", "certificates"):
                names.target((*here, "target"), target, allow_apiserver=True)


_OPERATION_CHECKS: dict[str, Callable[[KnownNames, Loc, Any, _Step], None]] = {
    "apply": _object_write,
    "patch": _object_write,
    "delete": _object_write,
    "churn": _churn,
    "fault": _fault,
    "watcher": _watcher,
    "request": _request,
    "expect": _expect,
    "assert": _selection,
    "error": _selection,
    "collect": _selection,
    "script": _script,
}
"""The operations that name something; ``wait`` and ``set`` name nothing."""
