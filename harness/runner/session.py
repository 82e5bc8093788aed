"""What the runner needs from a running environment: :class:`Session`, and its ports.

Actions talk to a :class:`Session` only, so they can be unit-tested against an in-memory
stand-in. What changes the environment beyond cluster writes goes through two typed ports
the session hands out: :class:`FaultPort` (inject a :data:`~harness.faults.Fault`) and
:class:`WatcherPort` (apply or delete a Watcher, returning once it is live). Over the
harness's own environment both ports *are* the
:class:`~harness.environment.WatcherEnvironment`; :class:`LiveSession` adds only what the
environment does not answer itself: the clusters (:class:`~harness.runner.cluster_session
.ClusterSession`), requests through the gateway, the process records, the built-in
bindings and metrics snapshots.
"""

from __future__ import annotations

import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from harness.churn.admissions import AdmissionCounts
from harness.churn.model import Mutation
from harness.environment import FaultRecord, ObservedEvent, WatcherEnvironment
from harness.expect.observations import ObjectsSeen, ReconcileSeen
from harness.faults import Fault
from harness.report.model import ProcessRecordLike
from harness.runner.cluster_session import ClusterSession, reconciles_seen
from harness.scenario import ObjectWatch, Patch, Request, ResourceRef, Selection
from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from watcher import pki

REQUEST_TIMEOUT = 10.0
FOREIGN_RUNTIME_ID = "foreign-runtime"
FOREIGN_SKR_DOMAIN = "foreign.kyma.example.com"


@dataclass(frozen=True)
class HttpOutcome:
    """What one ``request`` got: a response ``status``, or ``refused`` (the TLS handshake or
    connection was refused or reset), or neither (``detail`` says what went wrong)."""

    status: int | None = None
    refused: bool = False
    detail: str = ""

    def describe(self) -> str:
        if self.status is not None:
            return f"status {self.status}"
        if self.refused:
            return f"refused ({self.detail})" if self.detail else "refused"
        return f"no response ({self.detail})"


def request_body(body: Mapping[str, Any] | str | None) -> tuple[bytes | None, dict[str, str]]:
    """The bytes to send and the content type they imply (objects go as JSON)."""
    if body is None:
        return None, {}
    if isinstance(body, str):
        return body.encode(), {}
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


def client_context(ca_bundle_pem: bytes, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """TLS client context trusting ``ca_bundle_pem``, presenting ``cert_pem``/``key_pem``
    (through a private temporary directory: ``ssl`` loads a key only from a file)."""
    context = ssl.create_default_context(cadata=ca_bundle_pem.decode())
    with tempfile.TemporaryDirectory(prefix="client-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(str(cert), str(key))
    return context


async def send_request(
    url: str,
    context: ssl.SSLContext,
    method: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any] | str | None,
    *,
    total_seconds: float = REQUEST_TIMEOUT,
) -> HttpOutcome:
    """One HTTPS request; a refused or reset TLS handshake or connection is an outcome,
    not an error. A server certificate the client does not trust is not a refusal."""
    data, implied = request_body(body)
    sent = {**implied, **headers}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=total_seconds)) as client,
            client.request(method, url, data=data, headers=sent, ssl=context) as response,
        ):
            await response.read()
            return HttpOutcome(status=response.status)
    except aiohttp.ClientConnectorCertificateError as exc:
        return HttpOutcome(detail=f"gateway certificate not trusted: {exc}")
    except TimeoutError:
        return HttpOutcome(detail=f"timed out after {total_seconds:g} s")
    except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
        return HttpOutcome(refused=True, detail=f"{type(exc).__name__}: {exc}")


PROBE_OVERRIDES: Mapping[str, Callable[[], CertificateOverride]] = {
    "foreign": CertificateOverride.foreign_ca,
    "expired": CertificateOverride.expired,
    "not-yet-valid": CertificateOverride.not_yet_valid,
    "empty-cn": CertificateOverride.empty_cn,
}


def probe_certificate(ca: pki.CertificateAuthority, kind: str) -> pki.Issued:
    """A fresh client certificate of ``kind`` (``foreign``: from a CA nobody trusts;
    ``expired``, ``not-yet-valid``, ``empty-cn``: from ``ca``, the KCP's current CA)."""
    if kind not in PROBE_OVERRIDES:
        raise ValueError(
            f"unknown probe certificate {kind!r}; use one of {sorted(PROBE_OVERRIDES)}"
        )
    override = PROBE_OVERRIDES[kind]()
    return issue_webhook_certificate(ca, FOREIGN_RUNTIME_ID, FOREIGN_SKR_DOMAIN, override)


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
        :func:`probe_certificate`)."""
        ...


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

    async def request(self, op: Request) -> HttpOutcome:
        trusted = self.env.rotation.bundle_pem
        url = f"{self.env.gateway.url}{op.path}"
        if op.to != "gateway":
            url, trusted = self._listener_target(op.to, op.path)
        if op.cluster is not None:
            tls = self.env.fleet[op.cluster].tls
            cert_pem, key_pem = tls.tls_cert.read_bytes(), tls.tls_key.read_bytes()
        else:
            leaf = probe_certificate(self.env.rotation.ca, op.certificate or "foreign")
            cert_pem, key_pem = leaf.cert_pem, leaf.key_pem
        context = client_context(trusted, cert_pem, key_pem)
        return await send_request(url, context, op.method, op.headers, op.body)

    def _listener_target(self, to: str, path: str) -> tuple[str, bytes]:
        """URL of a listener's own port and the CA its serving certificate chains to
        (the mesh CA; with the plain-HTTP opt-out the URL is ``http://``)."""
        kind, _, component = to.partition("/")
        host = self.env.listeners.get(component) if kind == "listener" else None
        if host is None or not host.running:
            raise ValueError(f"request target {to!r}: no running listener {component!r}")
        mesh = self.env.mesh
        trusted = mesh.ca.cert_pem if mesh is not None else self.env.rotation.bundle_pem
        return f"{host.url}{path}", trusted

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
