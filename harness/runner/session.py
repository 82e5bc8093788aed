"""What the runner needs from a running environment: :class:`Session`, and its ports.

Actions talk to a :class:`Session` only, so they can be unit-tested against an in-memory
stand-in. What changes the environment beyond cluster writes goes through two typed ports
the session hands out: :class:`FaultPort` (inject a :data:`~harness.faults.Fault`) and
:class:`WatcherPort` (apply or delete a Watcher, returning once it is live). Over the
harness's own environment both ports *are* the
:class:`~harness.environment.WatcherEnvironment`; :class:`LiveSession` adds only what the
environment does not answer itself.

:class:`~harness.runner.cluster_session.ClusterSession` is what a session is whoever the
Lifecycle Manager is (the harness's own, or a KLM process:
:class:`~harness.runner.klm_session.KlmSession`); HTTPS requests are sent by
:mod:`harness.runner.https_requests`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.churn.admissions import AdmissionCounts
from harness.churn.model import Mutation
from harness.environment import FaultRecord, ObservedEvent, WatcherEnvironment
from harness.expect.observations import ObjectsSeen, ReconcileSeen
from harness.faults import Fault
from harness.kcp.klm_log import ObservedReconcile
from harness.report.model import ProcessRecordLike
from harness.runner.cluster_session import ClusterSession
from harness.runner.https_requests import HttpOutcome
from harness.scenario import ObjectWatch, Patch, Request, ResourceRef, Selection
from watcher import pki


class FaultPort(Protocol):
    """Where a ``fault`` operation's typed fault goes."""

    async def inject(self, fault: Fault) -> FaultRecord:
        """Carry out ``fault``; returns once the target is really down/up."""
        ...


class WatcherPort(Protocol):
    """Where a ``watcher`` operation's change goes; each returns once the change is live."""

    async def apply_watcher(self, obj: Mapping[str, Any]) -> None: ...

    async def delete_watcher(self, name: str, namespace: str) -> None: ...


class Session(Protocol):
    """The environment as the actions see it."""

    @property
    def faults(self) -> FaultPort: ...

    @property
    def watchers(self) -> WatcherPort: ...

    @property
    def events(self) -> Sequence[ObservedEvent]: ...

    def reconciles(
        self, kyma: str | None, trigger: str | None, since: float
    ) -> Sequence[ReconcileSeen]:
        """The Lifecycle Manager's reconciles started at or after ``since``, oldest first
        (of ``kyma``, with ``trigger`` among their triggers, when given)."""
        ...

    def rejections(self, listener: str, reason: str) -> float:
        """Requests ``listener`` refused with ``reason`` so far (counters: only grow)."""
        ...

    async def metric(self, target: str, name: str, labels: Mapping[str, str]) -> float: ...

    async def apply(self, cluster: str, obj: Mapping[str, Any]) -> Any: ...

    async def patch(self, op: Patch) -> Any:
        """``op``'s JSON merge patch (of the object's ``status`` when it says so)."""
        ...

    async def delete(self, cluster: str, ref: ResourceRef, namespace: str, name: str) -> bool: ...

    async def write(self, mutation: Mutation) -> Any:
        """Send one churn mutation to its SKR."""
        ...

    def processes(self) -> list[ProcessRecordLike]:
        """Every process run so far (records keep filling in until the process exits)."""
        ...

    async def metrics_snapshot(self) -> dict[str, float]: ...

    async def admission_counts(self, cluster: str) -> AdmissionCounts | None:
        """SKR ``cluster``'s API server: validating webhook calls by webhook name
        (``None`` if unreadable, e.g. the API server is down)."""
        ...

    async def apiserver_metrics(self, cluster: str) -> str | None:
        """``cluster``'s kube-apiserver /metrics text (``None`` if unreadable)."""
        ...

    async def select(self, selection: Selection, cluster: str) -> ObjectsSeen:
        """The objects ``selection`` picks on ``cluster`` right now (an unreachable cluster
        or unknown kind is an ``error``, not an exception: an ``assert`` keeps polling)."""
        ...

    def kubeconfig(self, cluster: str) -> Path:
        """A kubeconfig file whose current context is ``cluster`` (for ``script``)."""
        ...

    def watch(self, target: ObjectWatch) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        """List, then watch every object of ``target`` until the caller stops iterating:
        ``ADDED``/``MODIFIED``/``DELETED`` with the object, and ``SYNCED`` each time a
        (re-)list has been reported — the first one means every object that existed has
        been. Errors (an unreachable API server, a type not yet served) are retried, not
        raised (:func:`harness.kube.watch.watch_objects`)."""
        ...

    def builtins(self) -> dict[str, Any]:
        """The run's built-in binding values (``clusters.<name>.server``, ``gateway.url``,
        ...; see :mod:`harness.scenario.bindings`)."""
        ...

    async def request(self, op: Request) -> HttpOutcome:
        """``op``: one HTTPS request to the KCP gateway (or, ``to="listener/<component>"``,
        straight to that listener's port) with SKR ``op.cluster``'s client certificate, or
        (``None``) a fresh broken one of kind ``op.certificate`` (see
        :func:`~harness.runner.https_requests.probe_certificate`)."""
        ...


def reconciles_seen(found: Iterable[ObservedReconcile]) -> list[ReconcileSeen]:
    """Reconciles as a KLM's log shows them (in process or not), as expectations see
    them; one still running has no outcome yet (``unknown``)."""
    return [
        ReconcileSeen(r.kyma, r.triggers, r.outcome or "unknown", r.at, r.latency) for r in found
    ]


class LiveSession(ClusterSession):
    """:class:`Session` over a running :class:`WatcherEnvironment` (the harness's KLM),
    which is its own fault and Watcher port."""

    def __init__(self, env: WatcherEnvironment) -> None:
        super().__init__(env)
        self.env = env
        self.faults: FaultPort = env
        self.watchers: WatcherPort = env

    def reconciles(
        self, kyma: str | None, trigger: str | None, since: float
    ) -> Sequence[ReconcileSeen]:
        """From the in-process KLM's log lines, read as a KLM process's are."""
        return reconciles_seen(self.env.reconciles.of(kyma, trigger, since))

    async def metric(self, target: str, name: str, labels: Mapping[str, str]) -> float:
        if target == "gateway":
            name = self.gateway_stat(name)
        return await self.env.metric(target, name, labels)

    async def target(self, to: str, path: str) -> tuple[str, bytes]:
        """The gateway trusting the rotation's bundle, or a listener's own port and the CA
        its serving certificate chains to (the mesh CA; with the plain-HTTP opt-out the URL
        is ``http://``)."""
        if to == "gateway":
            return f"{self.env.gateway.url}{path}", self.env.rotation.bundle_pem
        kind, _, component = to.partition("/")
        host = self.env.listeners.get(component) if kind == "listener" else None
        if host is None or not host.running:
            raise ValueError(f"request target {to!r}: no running listener {component!r}")
        mesh = self.env.mesh
        trusted = mesh.ca.cert_pem if mesh is not None else self.env.rotation.bundle_pem
        return f"{host.url}{path}", trusted

    async def client_pair(self, cluster: str) -> tuple[bytes, bytes]:
        tls = self.env.fleet[cluster].tls
        return tls.tls_cert.read_bytes(), tls.tls_key.read_bytes()

    async def client_ca(self) -> pki.CertificateAuthority:
        return self.env.rotation.ca

    def processes(self) -> list[ProcessRecordLike]:
        """Every process the environment ran (every incarnation), with its log."""
        records: list[ProcessRecordLike] = self.cluster_processes()
        for inst in self.env.fleet:
            records.extend(inst.process_records)
        return records

    async def metrics_snapshot(self) -> dict[str, float]:
        """Every SKR webhook's metrics, prefixed ``webhook/<skr>:``."""
        out: dict[str, float] = {}
        for inst in self.env.fleet:
            if not inst.running:
                continue
            for sample, value in (await inst.metrics()).items():
                out[f"webhook/{inst.cluster.name}:{sample}"] = value
        return out
