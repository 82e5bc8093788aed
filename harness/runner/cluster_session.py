"""What a session is whoever the Lifecycle Manager is: :class:`ClusterSession`.

Writes through the API clients (:mod:`harness.kube`), selections and object watches, the
API servers' metrics, a kubeconfig per cluster, the built-in bindings and HTTPS requests,
over the :class:`ClusterPorts` every environment has. Its subclasses
(:class:`~harness.runner.session.LiveSession`,
:class:`~harness.runner.klm_session.KlmSession`) add what their environment observes and
where a request's certificates are; the :class:`~harness.runner.session.Session` protocol
they meet is in :mod:`harness.runner.session`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.churn.admissions import AdmissionCounts, webhook_calls
from harness.churn.model import Mutation, WriteFailed, write_failure
from harness.clusters.plane import Environment as Clusters
from harness.environment import ObservedEvent
from harness.environment.spec import EnvironmentSpec
from harness.expect.observations import ObjectsSeen
from harness.kcp.gateway.envoy import EnvoyGateway
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
from harness.runner.https_requests import (
    HttpOutcome,
    client_context,
    probe_certificate,
    send_request,
)
from harness.scenario import KCP, ObjectWatch, Patch, Request, ResourceRef, Selection
from harness.scenario.expectations import gateway_stat_name
from watcher import pki
from watcher.render.envoy_settings import GatewayListener

logger = logging.getLogger(__name__)

CATALOG = tuple(r for r in vars(kube).values() if isinstance(r, Resource))
"""Every kind the harness declares (:mod:`harness.kube`): plural, kind and scope."""
WATCH_RETRY_MAX = 5.0
"""Seconds between attempts, at most, to find the type an object watch needs."""
REJECTION_METRICS = (
    "watcher_listener_verification_failed_total",
    "watcher_listener_events_rejected_total",
)


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
