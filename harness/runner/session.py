"""What the runner needs from a running environment: :class:`Session`, and its ports.

Actions talk to a :class:`Session` only, so they can be unit-tested against an in-memory
stand-in. What changes the environment beyond cluster writes goes through two typed ports
the session hands out: :class:`FaultPort` (inject a :data:`~harness.faults.Fault`) and
:class:`WatcherPort` (apply or delete a Watcher, returning once it is live). Over the
harness's own environment both ports *are* the
:class:`~harness.environment.WatcherEnvironment`; :class:`LiveSession` adds only what the
environment does not answer itself.

:class:`ClusterSession` is what a session is whoever the Lifecycle Manager is (the
harness's own, or a KLM process: :class:`~harness.runner.klm_session.KlmSession`): writes
through the API clients (:mod:`harness.kube`), selections and object watches, the API
servers' metrics, a kubeconfig per cluster, the built-in bindings and HTTPS requests; the
subclasses add what their environment observes and where a request's certificates are.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.churn.admissions import AdmissionCounts, webhook_calls
from harness.churn.model import Mutation, WriteFailed, write_failure
from harness.clusters.plane import Environment as Clusters
from harness.environment import FaultRecord, ObservedEvent, WatcherEnvironment
from harness.environment.spec import EnvironmentSpec
from harness.expect.observations import ObjectsSeen, ReconcileSeen
from harness.faults import Fault
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.klm_log import ObservedReconcile
from harness.kcp.listeners import ManagerListener
from harness.kube import (
    KubeError,
    NotFound,
    Resource,
    create,
    create_or_replace,
    delete,
    discover,
    get,
    list_objects,
    merge_patch,
    request,
)
from harness.kube.watch import watch_objects
from harness.report.model import ProcessRecordLike
from harness.scenario import KCP, ObjectWatch, Patch, Request, ResourceRef, Selection
from harness.scenario.expectations import gateway_stat_name
from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from watcher import pki
from watcher.render.envoy_settings import GatewayListener

logger = logging.getLogger(__name__)

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


CATALOG = tuple(r for r in vars(kube).values() if isinstance(r, Resource))
"""Every kind the harness declares (:mod:`harness.kube`): plural, kind and scope."""
WATCH_RETRY_MAX = 5.0
"""Seconds between attempts, at most, to find the type an object watch needs."""
REJECTION_METRICS = (
    "watcher_listener_verification_failed_total",
    "watcher_listener_events_rejected_total",
)


def reconciles_seen(found: Iterable[ObservedReconcile]) -> list[ReconcileSeen]:
    """Reconciles as a KLM's log shows them (in process or not), as expectations see
    them; one still running has no outcome yet (``unknown``)."""
    return [
        ReconcileSeen(r.kyma, r.triggers, r.outcome or "unknown", r.at, r.latency) for r in found
    ]


def resource_of_object(obj: Mapping[str, Any]) -> Resource:
    """The API resource of a manifest, from its ``apiVersion`` and ``kind`` (a kind the
    catalog does not know: namespaced, plural by English rule)."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    for known in CATALOG:
        if (known.group, known.kind) == (group, kind):
            return replace(known, version=version)
    lower = kind.lower()
    plural = lower[:-1] + "ies" if lower.endswith("y") else lower + "s"
    return Resource(group, version, plural, kind)


def resource_of_ref(ref: ResourceRef) -> Resource:
    for known in CATALOG:
        if (known.group, known.plural) == (ref.group, ref.resource):
            return replace(known, version=ref.version)
    return Resource(ref.group, ref.version, ref.resource, "")


class ClusterPorts(Protocol):
    """What of an environment :class:`ClusterSession` uses."""

    spec: EnvironmentSpec
    clusters: Clusters
    kcp_api: ApiClient
    skr_apis: dict[str, ApiClient]
    gateway: EnvoyGateway
    workdir: Path
    listeners: dict[str, ManagerListener]

    @property
    def events(self) -> Sequence[ObservedEvent]: ...


class ClusterSession:
    """Cluster operations of a session over ``env`` (see the module doc)."""

    def __init__(self, env: ClusterPorts) -> None:
        self.ports = env
        self._discovered: dict[tuple[str, str, str], Resource] = {}

    @property
    def events(self) -> Sequence[ObservedEvent]:
        return self.ports.events

    def rejections(self, listener: str, reason: str) -> float:
        """From ``listener``'s own counters; a listener the environment does not run in
        this process (a KLM process's own: a step counting its refusals needs
        ``rejection-reasons`` and is skipped) counts 0, as a window's baseline."""
        host = self.ports.listeners.get(listener)
        if host is None:
            return 0.0
        return sum(
            value
            for name in REJECTION_METRICS
            for labels, value in host.samples(name).items()
            if dict(labels).get("reason") == reason
        )

    def gateway_stat(self, name: str) -> str:
        """``name`` as a full Envoy stat name of this environment's gateway."""
        gateway = self.ports.gateway
        return gateway_stat_name(
            name,
            listener_prefix=f"listener.{gateway.listen_address}_{gateway.port}",
            http_prefix=f"http.{GatewayListener.stat_prefix}",
        )

    def _api(self, cluster: str) -> Any:
        return self.ports.kcp_api if cluster == KCP else self.ports.skr_apis[cluster]

    async def apply(self, cluster: str, obj: Mapping[str, Any]) -> Any:
        return await create_or_replace(self._api(cluster), resource_of_object(obj), obj)

    async def patch(self, op: Patch) -> Any:
        api, resource = self._api(op.cluster), resource_of_ref(op.resource)
        subresource = op.subresource or ""
        return await merge_patch(
            api, resource, op.name, op.namespace or None, op.patch, subresource=subresource
        )

    async def delete(self, cluster: str, ref: ResourceRef, namespace: str, name: str) -> bool:
        return await delete(self._api(cluster), resource_of_ref(ref), name, namespace or None)

    async def write(self, mutation: Mutation) -> Any:
        try:
            return await self._write(mutation)
        except KubeError as exc:
            failure = write_failure(mutation.operation, exc.status, exc.reached)
            raise WriteFailed(f"{type(exc).__name__}: {exc}", failure) from exc

    async def _write(self, mutation: Mutation) -> Any:
        kind = mutation.kind
        resource = Resource(kind.group, kind.version, kind.resource, kind.kind)
        api = self._api(mutation.cluster)
        if mutation.operation == "create":
            return await create(api, resource, mutation.payload() or {})
        if mutation.operation == "delete":
            # Not ``delete()``: it takes 404 as done, but a churn delete of an object that
            # was never created (its create failed) is a failed write — no admission, no event.
            return await request(api, "DELETE", resource.path(mutation.namespace, mutation.name))
        return await merge_patch(
            api,
            resource,
            mutation.name,
            mutation.namespace,
            mutation.payload() or {},
            subresource=mutation.subresource,
        )

    async def admission_counts(self, cluster: str) -> AdmissionCounts | None:
        text = await self.apiserver_metrics(cluster)
        return None if text is None else await asyncio.to_thread(webhook_calls, text)

    async def apiserver_metrics(self, cluster: str) -> str | None:
        target = self.ports.clusters.clusters.get(cluster)
        if target is None:
            return None
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client,
                client.get(f"{target.server}/metrics", ssl=target.ssl_context()) as response,
            ):
                if response.status != 200:
                    return None
                return await response.text()
        except (aiohttp.ClientError, OSError, TimeoutError):
            return None

    async def resource(self, cluster: str, selection: Selection | ObjectWatch) -> Resource:
        """The API resource ``selection`` names (discovery for ``apiVersion`` + ``kind``,
        remembered per cluster)."""
        if selection.resource is not None:
            return resource_of_ref(selection.resource)
        assert selection.api_version is not None and selection.kind is not None
        key = (cluster, selection.api_version, selection.kind)
        if key not in self._discovered:
            self._discovered[key] = await discover(
                self._api(cluster), selection.api_version, selection.kind
            )
        return self._discovered[key]

    async def select(self, selection: Selection, cluster: str) -> ObjectsSeen:
        try:
            resource = await self.resource(cluster, selection)
            namespace = selection.namespace or None
            if selection.name:
                found = await get(self._api(cluster), resource, selection.name, namespace)
                objects = [found] if found is not None else []
                if found is not None and selection.selector:
                    labels = (found.get("metadata") or {}).get("labels") or {}
                    if any(labels.get(k) != v for k, v in selection.selector.items()):
                        objects = []
            else:
                selector = ",".join(f"{k}={v}" for k, v in (selection.selector or {}).items())
                try:
                    objects, _ = await list_objects(
                        self._api(cluster), resource, namespace, label_selector=selector or None
                    )
                except NotFound:  # a type not served (yet): a CRD KLM installs on first
                    objects = []  # contact — so there is no such object either
        except KubeError as exc:
            return ObjectsSeen(cluster, error=str(exc))
        return ObjectsSeen(cluster, tuple(objects))

    async def watch(self, target: ObjectWatch) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        delay = 0.1
        while True:
            try:
                resource = await self.resource(target.cluster, target)
                break
            except (KubeError, OSError) as exc:
                logger.warning("object watch %s: %s; retrying in %.1f s", target.key, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, WATCH_RETRY_MAX)
        namespace = target.namespace or None
        async for kind, obj in watch_objects(
            self._api(target.cluster), resource, namespace=namespace
        ):
            yield kind, obj

    def kubeconfig(self, cluster: str) -> Path:
        path = self.ports.workdir / "kubeconfigs" / f"{cluster}.yaml"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.ports.clusters.clusters[cluster].kubeconfig_embedded)
            path.chmod(0o600)
        return path

    def builtins(self) -> dict[str, Any]:
        """The ``clusters``, ``gateway`` and ``listeners`` built-in bindings."""
        env = self.ports
        clusters = {
            name: {
                "name": name,
                "server": cluster.server,
                "kubeconfig": str(self.kubeconfig(name)),
                "runtimeId": next((s.runtime_id for s in env.spec.skrs if s.name == name), ""),
            }
            for name, cluster in env.clusters.clusters.items()
        }
        listeners = {
            component: {"port": host.port, "url": host.url if host.running else ""}
            for component, host in env.listeners.items()
        }
        gateway = {"url": env.gateway.url, "port": env.gateway.port}
        return {"clusters": clusters, "gateway": gateway, "listeners": listeners}

    async def request(self, op: Request) -> HttpOutcome:
        url, trusted = await self.target(op.to, op.path)
        if op.cluster is not None:
            cert_pem, key_pem = await self.client_pair(op.cluster)
        else:
            leaf = probe_certificate(await self.client_ca(), op.certificate or "foreign")
            cert_pem, key_pem = leaf.cert_pem, leaf.key_pem
        context = client_context(trusted, cert_pem, key_pem)
        return await send_request(url, context, op.method, op.headers, op.body)

    async def target(self, to: str, path: str) -> tuple[str, bytes]:
        """The URL of ``to`` (``gateway`` or ``listener/<component>``) and the CA bundle
        its serving certificate chains to."""
        raise NotImplementedError

    async def client_pair(self, cluster: str) -> tuple[bytes, bytes]:
        """SKR ``cluster``'s client certificate and key (PEM)."""
        raise NotImplementedError

    async def client_ca(self) -> pki.CertificateAuthority:
        """The KCP's current CA, which issues the broken probe certificates."""
        raise NotImplementedError

    def cluster_processes(self) -> list[Any]:
        """Every API server and etcd incarnation, and the gateway's."""
        env = self.ports
        records = list(env.clusters.processes)
        for name in env.clusters.clusters:
            control = env.clusters.clusters[name].control
            if control is not None:
                records.extend(r for r in control.records if r not in records)
        records.extend(env.gateway.records)
        return records


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
