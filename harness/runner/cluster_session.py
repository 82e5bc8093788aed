"""The clusters of a running environment as a scenario session reaches them, whoever
the Lifecycle Manager is.

:class:`ClusterSession` is the half of a :class:`~harness.runner.session.Session` that is
the same for the harness's own environment and one around a KLM process: writes through
the SKR and KCP API clients (:mod:`harness.kube`), selections and object watches, the API
servers' metrics, a kubeconfig per cluster, the gateway's stat names and the built-in
bindings of clusters, gateway and listeners, the events the environment's listeners
accepted and the rejections the listeners it runs counted.
:class:`~harness.runner.session.LiveSession` and
:class:`~harness.runner.klm_session.KlmSession` add what each environment observes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio.client import ApiClient

from harness.churn.admissions import AdmissionCounts, webhook_calls
from harness.churn.model import Mutation, WriteFailed, write_failure
from harness.clusters.plane import Environment as Clusters
from harness.environment.events import ObservedEvent
from harness.environment.spec import EnvironmentSpec
from harness.expect.observations import ObjectsSeen, ReconcileSeen
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
from harness.scenario import KCP, ObjectWatch, Patch, ResourceRef, Selection
from harness.scenario.expectations import gateway_stat_name
from watcher.render.envoy_settings import GatewayListener

logger = logging.getLogger(__name__)

# Kinds whose plural is not "<kind>s" in lower case, or which are cluster-scoped.
_PLURALS = {"ConfigMap": "configmaps", "Secret": "secrets", "Namespace": "namespaces"}
_CLUSTER_SCOPED = frozenset({"Namespace", "CustomResourceDefinition", "ClusterRole"})
_KINDS = {"configmaps": "ConfigMap", "secrets": "Secret", "namespaces": "Namespace",
          "kymas": "Kyma", "watchers": "Watcher", "manifests": "Manifest",
          "moduletemplates": "ModuleTemplate",
          "modulereleasemetas": "ModuleReleaseMeta"}  # fmt: skip
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
    """The API resource of a manifest, from its ``apiVersion`` and ``kind``."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    lower = kind.lower()
    plural = _PLURALS.get(kind) or (lower[:-1] + "ies" if lower.endswith("y") else lower + "s")
    if kind == "Kyma":
        plural = "kymas"
    return Resource(group, version, plural, kind, namespaced=kind not in _CLUSTER_SCOPED)


def resource_of_ref(ref: ResourceRef) -> Resource:
    kind = _KINDS.get(ref.resource, "")
    return Resource(ref.group, ref.version, ref.resource, kind, namespaced=kind != "Namespace")


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

    async def resource(self, cluster: str, selection: Selection) -> Resource:
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
        selection = Selection(
            cluster=target.cluster,
            resource=target.resource,
            api_version=target.api_version,
            kind=target.kind,
            namespace=target.namespace,
        )
        delay = 0.1
        while True:
            try:
                resource = await self.resource(target.cluster, selection)
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


__all__ = ["ClusterPorts", "ClusterSession", "resource_of_object", "resource_of_ref"]
