"""The names a scenario declares, and one check for each kind of name a scenario uses.

Pure. :mod:`harness.scenario.references` walks the scenario and hands every name an
operation or expectation uses to a check here; a name that is not declared becomes a
:class:`~harness.scenario.errors.Problem` with a "did you mean" hint rather than an
exception, so one load reports every problem.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.scenario.clusters import KCP
from harness.scenario.errors import Loc, Problem, suggest
from harness.scenario.operations import ApplyOp, WatcherOp
from harness.scenario.steps import Step
from harness.scenario.watchers import KLM_COMPONENT, KLM_SERVICE
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER

if TYPE_CHECKING:  # the model runs these checks when it is built: no import at run time
    from harness.scenario.model import Scenario


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
