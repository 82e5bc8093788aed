"""The :class:`Kubelet`: on every change of its namespaces' Deployments, Services, Secrets
and EndpointSlices, one pass of kube-proxy (routes from the slices as read back), the
deployment controller (pods, ``status``) and the endpoint-slice controller."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
import secrets
import sys
import uuid
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.aio import Service, spawn, stop_tasks
from harness.clusters.process import ProcessRecord
from harness.errors import HarnessError
from harness.kube import DEPLOYMENTS, ENDPOINT_SLICES, SERVICES
from harness.kube.watch import watch_objects
from harness.platform.kubelet import pods as plans
from harness.platform.kubelet import status
from harness.platform.kubelet.container import Node, Pod, PodRecord
from harness.platform.kubelet.proxy import Proxy

logger = logging.getLogger("harness.platform.kubelet")
T = TypeVar("T")

WATCHED = (DEPLOYMENTS, SERVICES, kube.SECRETS, ENDPOINT_SLICES)


class KubeletError(HarnessError, TimeoutError):
    """A pod did not get where it was awaited in time (the message says why)."""


class Kubelet(Service):
    def __init__(
        self,
        api: ApiClient,
        *,
        cluster: str,
        workdir: Path,
        commands: plans.CommandFor,
        log_dir: Path | None = None,
        namespaces: Sequence[str] = ("kyma-system",),
        python: str = sys.executable,
    ) -> None:
        """``commands``: image → host argv (None: not runnable here); ``workdir``: one
        directory per pod; ``log_dir``: one log per pod."""
        self.api, self.cluster, self.workdir = api, cluster, workdir
        self.log_dir = log_dir or workdir / "logs"
        self.namespaces = tuple(namespaces)
        self.records: list[ProcessRecord] = []  # every container process started
        self._seen: dict[str, dict[str, kube.Obj]] = {r.plural: {} for r in WATCHED}
        self._node = Node(self._seen["secrets"], commands, self._pod_changed, self.records, python)
        self._pods: list[Pod] = []  # oldest first
        self._written: dict[str, kube.Obj] = {}  # EndpointSlices, by key
        self._proxy = Proxy(cluster, self._host_port)
        self._tasks: set[asyncio.Task[None]] = set()
        self._dirty, self._changed = asyncio.Event(), asyncio.Event()
        self._ips = itertools.count()

    @property
    def pods(self) -> dict[str, PodRecord]:
        """Per Deployment (``namespace/name``): its newest pod that is not terminating."""
        return {pod.key: pod.record() for pod in self._pods if not pod.terminating}

    def all_pods(self) -> list[PodRecord]:
        """Every pod, terminating ones included."""
        return [pod.record() for pod in self._pods]

    def routes(self) -> list[status.Route]:
        """What kube-proxy serves: ClusterIP ports with their endpoints."""
        return self._proxy.routes

    async def wait_ready(self, namespace: str, name: str, within: float) -> PodRecord:
        """The pod of the Deployment's current template once it is ready *and* kube-proxy
        routes every Service selecting it there, so that a call through the Service
        reaches it (readiness alone does not: the EndpointSlice's round trip follows)."""
        key = f"{namespace}/{name}"

        def serving() -> PodRecord | None:
            pod = self._current(key)
            return pod.record() if pod is not None and self._serving(pod) else None

        return await self._wait_for(serving, within, lambda: self._why(key, "serving"))

    async def wait_gone(self, namespace: str, name: str, within: float) -> None:
        """Until the Deployment has no pod left (scaled to 0 or deleted)."""
        key = f"{namespace}/{name}"
        gone: Callable[[], bool | None] = lambda: None if self._of(key) else True  # noqa: E731
        await self._wait_for(gone, within, lambda: self._why(key, "gone"))

    async def kill_pod(self, namespace: str, name: str) -> int:
        """SIGKILL the Deployment's running container, as a crash; the killed pid."""
        key = f"{namespace}/{name}"
        for pid in (pod.kill() for pod in self._of(key)):
            if pid is not None:
                return pid
        raise KubeletError(f"no running pod to kill: {self._why(key, 'running')}")

    async def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        synced = []
        for namespace, resource in itertools.product(self.namespaces, WATCHED):
            synced.append(asyncio.Event())
            self._spawn(self._watch(resource, namespace, synced[-1]), resource.plural)
        async with asyncio.timeout(30.0):
            await asyncio.gather(*(event.wait() for event in synced))
        self._spawn(self._loop(), "sync")

    async def stop(self) -> None:
        """Stop every task and pod, close kube-proxy, delete the slices written."""
        await stop_tasks(list(self._tasks))
        await asyncio.gather(*(pod.stop(within=40.0) for pod in self._pods))
        self._pods.clear()
        await self._proxy.close()
        with contextlib.suppress(TimeoutError, kube.KubeError, OSError):
            async with asyncio.timeout(5.0):
                for key in list(self._written):
                    await kube.delete(self.api, ENDPOINT_SLICES, *reversed(key.split("/")))
                    del self._written[key]

    def _spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        task = spawn(work, f"kubelet-{self.cluster}-{what}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, resource: kube.Resource, namespace: str, synced: asyncio.Event) -> None:
        seen = self._seen[resource.plural]
        async for kind, obj in watch_objects(self.api, resource, namespace=namespace):
            key = kube.object_key(obj)
            if kind == "SYNCED":
                synced.set()
            elif kind == "DELETED":
                seen.pop(key, None)
            else:
                seen[key] = obj
            if resource is kube.SECRETS and kind != "SYNCED":
                for pod in self._pods:
                    if key.startswith(f"{pod.identity.namespace}/"):
                        pod.secret_changed()
            self._dirty.set()

    async def _loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._pass()
            except Exception:  # the API server's or ours: the next pass may do better
                logger.exception("kubelet[%s]: pass failed; again in 0.5 s", self.cluster)
                await asyncio.sleep(0.5)
                self._dirty.set()
            self._notify()

    async def _pass(self) -> None:
        services = list(self._seen["services"].values())
        slices = list(self._seen["endpointslices"].values())
        await self._proxy.sync(r for s in services for r in status.service_routes(s, slices))
        for key in set(self._seen["deployments"]) | {pod.key for pod in self._pods}:
            self._reconcile(key)
        for key, deployment in list(self._seen["deployments"].items()):
            await self._write_status(key, deployment)
        views = [pod.view() for pod in self._pods]
        desired = {}
        for service in services:
            if (slice_ := status.endpoint_slice(service, views)) is not None:
                desired[kube.object_key(slice_)] = slice_
        for key, slice_ in desired.items():
            if self._written.get(key) != slice_:
                await kube.create_or_replace(self.api, ENDPOINT_SLICES, slice_)
                self._written[key] = slice_
        ours = {k for k, s in self._seen["endpointslices"].items() if status.managed(s)}
        for key in (set(self._written) | ours) - set(desired):
            await kube.delete(self.api, ENDPOINT_SLICES, *reversed(key.split("/")))
            self._written.pop(key, None)

    def _reconcile(self, key: str) -> None:
        """One pod of the current template; an old one goes once the new one serves (or
        at once if it is not ready): a rollout never leaves the Service without a pod."""
        deployment = self._seen["deployments"].get(key)
        live = [p for p in self._of(key) if not p.terminating]
        if deployment is None or int((deployment.get("spec") or {}).get("replicas", 1)) == 0:
            for pod in live:
                self._retire(pod)
            return
        current = self._current(key) or self._create(deployment)
        for old in live:
            if old is not current and (not old.ready or self._serving(current)):
                self._retire(old)

    def _of(self, key: str) -> list[Pod]:
        return [pod for pod in self._pods if pod.key == key]

    def _current(self, key: str) -> Pod | None:
        deployment = self._seen["deployments"].get(key) or {"metadata": {}}
        version = (plans.template_hash(deployment), deployment["metadata"].get("uid"))
        live = (p for p in self._of(key) if not p.terminating)
        return next((p for p in live if p.version == version), None)

    def _create(self, deployment: kube.Obj) -> Pod:
        suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        ip = plans.pod_ip(next(self._ips))
        identity = plans.pod_identity(deployment, str(uuid.uuid4()), ip, suffix)
        where = f"{identity.namespace}/{identity.name}"
        log_path = self.log_dir / f"{self.cluster}-{where.replace('/', '-')}.log"
        pod = Pod(deployment, identity, self._node, self.workdir / where, log_path)
        self._pods.append(pod)
        pod.task = spawn(pod.run(), f"kubelet-{self.cluster}-pod-{identity.name}")
        return pod

    def _retire(self, pod: Pod) -> None:
        pod.terminating = True
        self._pod_changed()
        self._spawn(self._remove(pod), f"remove-{pod.name}")

    async def _remove(self, pod: Pod) -> None:
        """Stop the pod once no route sends it calls another pod could take."""

        def out_of_service() -> bool | None:
            routes = [r for r in self._proxy.routes if pod.identity.ip in dict(r.endpoints)]
            return True if all(len(r.endpoints) == 1 for r in routes) else None

        with contextlib.suppress(KubeletError):
            await self._wait_for(out_of_service, 5.0, str)
        await pod.stop(within=(pod.plan.grace_seconds if pod.plan else 0.0) + 10.0)
        if pod in self._pods:
            self._pods.remove(pod)
        self._pod_changed()

    async def _write_status(self, key: str, deployment: kube.Obj) -> None:
        mine, replicas = self._of(key), int((deployment.get("spec") or {}).get("replicas", 1))
        failures = [f"pod {p.name}: {p.failure}" for p in mine if p.failure and not p.terminating]
        failures += [f"the kubelet emulation runs one pod, not {replicas}"] if replicas > 1 else []
        now, failure = dt.datetime.now(dt.UTC), "; ".join(failures)
        new = status.deployment_status(
            deployment, [p.view() for p in mine], now=now, failure=failure
        )
        if status.status_differs(deployment.get("status"), new):
            namespace, name = key.split("/")
            with contextlib.suppress(kube.NotFound):
                await kube.merge_patch(
                    self.api, DEPLOYMENTS, name, namespace, {"status": new}, subresource="status"
                )

    def _serving(self, pod: Pod) -> bool:
        """Ready, and every route of a Service selecting it lists it."""
        served = {r.key: set(r.endpoints) for r in self._proxy.routes}
        for service in list(self._seen["services"].values()):
            slice_ = status.endpoint_slice(service, [pod.view()])
            for route in status.service_routes(service, [slice_] if slice_ else []):
                if not set(route.endpoints) <= served.get(route.key, set()):
                    return False
        return pod.ready

    def _host_port(self, ip: str, port: int) -> int | None:
        running = (p for p in self._pods if p.process is not None and p.process.running)
        return next((p.host_ports.get(port) for p in running if p.identity.ip == ip), None)

    def _pod_changed(self) -> None:
        self._dirty.set()
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _wait_for(
        self, check: Callable[[], T | None], within: float, why: Callable[[], str]
    ) -> T:
        deadline = asyncio.get_running_loop().time() + within
        while (result := check()) is None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise KubeletError(why())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.5)):
                    await self._changed.wait()
        return result

    def _why(self, key: str, what: str) -> str:
        pods = [
            (p.name, p.reason if not p.ready else "ready", p.restart_count) for p in self._of(key)
        ]
        errors = "; ".join(self._proxy.errors.values())
        return f"{key} not {what} in kubelet[{self.cluster}]: {pods or 'no pod'} {errors}"
