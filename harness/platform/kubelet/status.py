"""What the controllers make of the pods, decided without I/O: the Deployment's ``status``
(deployment controller), a Service's EndpointSlice (endpoint-slice controller) and where
connections to a ClusterIP port go (kube-proxy)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.platform.kubelet.pods import Obj, PodIdentity, short_hash, template_hash

MANAGED_BY = "kubelet-emulation.watcher-harness.kyma-project.io"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
AVAILABLE = ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
UNAVAILABLE = ("False", "MinimumReplicasUnavailable", "Deployment lacks minimum availability.")


@dataclass(frozen=True)
class PodView:
    """One pod as the controllers see it."""

    pod: PodIdentity
    ports: tuple[tuple[str, int], ...]  # (name, containerPort)
    template_hash: str
    ready: bool
    terminating: bool = False


def _condition(
    old: Sequence[Mapping[str, Any]], now: str, kind: str, status: str, reason: str, message: str
) -> dict[str, Any]:
    """A condition: the previous one if unchanged; its transition time if the status is."""
    previous = next((c for c in old if c.get("type") == kind), {})
    if [previous.get(k) for k in ("status", "reason", "message")] == [status, reason, message]:
        return dict(previous)
    since = previous.get("lastTransitionTime", now) if previous.get("status") == status else now
    return {"type": kind, "status": status, "lastUpdateTime": now,
            "lastTransitionTime": since, "reason": reason, "message": message}  # fmt: skip


def deployment_status(
    deployment: Mapping[str, Any], pods: Sequence[PodView], *, now: dt.datetime, failure: str = ""
) -> Obj:
    """``status`` for the Deployment's pods (terminating ones included); ``failure``: why
    a pod cannot be created or run, shown as ``ReplicaFailure`` where a ReplicaSet's
    FailedCreate would be. One pod at most runs, so "available" is "ready"."""
    meta, spec = deployment.get("metadata") or {}, deployment.get("spec") or {}
    desired = min(int(spec.get("replicas", 1)), 1)
    current = template_hash(deployment)
    active = [p for p in pods if not p.terminating]
    updated = [p for p in active if p.template_hash == current]
    ready = [p for p in active if p.ready]
    old = (deployment.get("status") or {}).get("conditions") or []
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    replica_set = f'ReplicaSet "{meta.get("name", "")}-{current}"'
    progress = (
        ("NewReplicaSetAvailable", f"{replica_set} has successfully progressed.")
        if len(updated) == len(active) == len(ready) == desired
        else ("ReplicaSetUpdated", f"{replica_set} is progressing.")
    )
    conditions = [
        _condition(old, stamp, "Available", *(AVAILABLE if len(ready) >= desired else UNAVAILABLE)),
        _condition(old, stamp, "Progressing", "True", *progress),
    ]
    if failure:
        conditions.append(_condition(old, stamp, "ReplicaFailure", "True", "FailedCreate", failure))
    return {
        "observedGeneration": int(meta.get("generation") or 0),
        "replicas": len(active),
        "updatedReplicas": len(updated),
        "readyReplicas": len(ready),
        "availableReplicas": len(ready),
        "unavailableReplicas": max(0, desired - len(ready)),
        "conditions": conditions,
    }


def status_differs(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` changes ``current`` (the API server drops zero counts)."""
    kept = [{k: v for k, v in s.items() if v not in (0, None, [])} for s in (current or {}, new)]
    return kept[0] != kept[1]


def endpoint_slice(service: Mapping[str, Any], pods: Iterable[PodView]) -> Obj | None:
    """The Service's one EndpointSlice listing the pods it selects (pod IP; the container
    port each Service port targets, by name or number); None when it selects none."""
    meta = service.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    selector = (service.get("spec") or {}).get("selector") or {}

    def selected(v: PodView) -> bool:
        return v.pod.namespace == namespace and selector.items() <= v.pod.labels.items()

    members = sorted(filter(selected, pods), key=lambda v: v.pod.name)
    if not members or not selector:
        return None
    ports = []
    for port in (service.get("spec") or {}).get("ports") or []:
        target = str(port.get("targetPort", port.get("port")))
        named = (number for v in members for n, number in v.ports if n and n == target)
        number = int(target) if target.isdigit() else next(named, None)
        if number is not None:
            port_name, protocol = str(port.get("name") or ""), str(port.get("protocol") or "TCP")
            ports.append({"name": port_name, "port": number, "protocol": protocol})
    endpoints = [
        {
            "addresses": [v.pod.ip],
            "conditions": {
                "ready": v.ready and not v.terminating,
                "serving": v.ready,
                "terminating": v.terminating,
            },
            "targetRef": {"kind": "Pod", "namespace": namespace, "name": v.pod.name},
        }
        for v in members
    ]
    owner = {"apiVersion": "v1", "kind": "Service", "name": name, "uid": meta.get("uid")}
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-{short_hash(name)[:5]}",
            "namespace": namespace,
            "labels": {SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [{**owner, "controller": True}] if meta.get("uid") else [],
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }


def managed(slice_: Mapping[str, Any]) -> bool:
    labels = (slice_.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


@dataclass(frozen=True)
class Route:
    """One ClusterIP port of a Service and the endpoints its connections go to."""

    namespace: str
    service: str
    cluster_ip: str
    port: int
    endpoints: tuple[tuple[str, int], ...]  # (pod IP, container port); (): refused

    @property
    def key(self) -> tuple[str, int]:
        return (self.cluster_ip, self.port)


def service_routes(service: Mapping[str, Any], slices: Iterable[Mapping[str, Any]]) -> list[Route]:
    """kube-proxy's view of a Service: per TCP port of its ClusterIP, the endpoints of its
    slices under that port's name that are ready — or, when none is, the serving
    terminating ones (ProxyTerminatingEndpoints)."""
    meta, spec = service.get("metadata") or {}, service.get("spec") or {}
    cluster_ip = str(spec.get("clusterIP") or "None")
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    mine = [
        s
        for s in slices
        if (s.get("metadata") or {}).get("namespace", namespace) == namespace
        and ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) == name
    ]
    routes = []
    for port in spec.get("ports") or [] if cluster_ip != "None" else []:
        ready: list[tuple[str, int]] = []
        draining: list[tuple[str, int]] = []
        for slice_ in mine:
            for slice_port in slice_.get("ports") or []:
                if slice_port.get("name", "") != str(port.get("name") or ""):
                    continue
                for endpoint in slice_.get("endpoints") or []:
                    target = (str(endpoint["addresses"][0]), int(slice_port["port"]))
                    conditions = endpoint.get("conditions") or {}
                    if conditions.get("ready", True):
                        ready.append(target)
                    elif conditions.get("serving") and conditions.get("terminating"):
                        draining.append(target)
        endpoints = tuple(dict.fromkeys(ready or draining))
        if str(port.get("protocol") or "TCP") == "TCP":
            routes.append(Route(namespace, name, cluster_ip, int(port.get("port") or 0), endpoints))
    return routes
