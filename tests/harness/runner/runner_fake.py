"""An in-memory stand-in for the runner's Session: just what the actions use.

Writes land in ``objects`` and ``calls``; ``on_write`` lets a test play the webhook (append
events); counters and metrics are plain dicts. The real environment is covered by e2e.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.churn.model import Mutation
from harness.environment import EnvironmentSpec, FaultRecord, ObservedEvent
from harness.expect.observations import ObjectsSeen, ReconcileSeen
from harness.faults import Fault
from harness.kcp.lifecycle_manager.queue.reconciler import Outcome, Reconcile
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import KubeError
from harness.scenario import ObjectWatch, Patch, ResourceRef, Selection

FAIL_NAME = "fail"
"""Writing an object with this name raises, as a refused API call would."""


@dataclass
class FakeRecord:
    name: str
    pid: int | None
    argv: tuple[str, ...]
    exit_code: int | None
    log_path: Path


@dataclass
class FakeSession:
    spec: EnvironmentSpec | None = None
    events: list[ObservedEvent] = field(default_factory=list)
    reconcile_log: list[Reconcile] = field(default_factory=list)
    rejected: dict[tuple[str, str], float] = field(default_factory=dict)
    metrics: dict[tuple[str, str], float] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    objects: dict[tuple[str, str, str, str], Mapping[str, Any]] = field(default_factory=dict)
    on_write: Callable[[str, str, str, float], None] | None = None
    mutations: list[Mutation] = field(default_factory=list)
    admission_counter: Callable[[str], Mapping[str, float] | None] | None = None
    """Plays an SKR API server's webhook call counters (default: unreadable)."""
    apiserver_text: dict[str, str] = field(default_factory=dict)
    """Per cluster: the kube-apiserver's /metrics text."""
    unreachable: set[str] = field(default_factory=set)
    """Clusters whose API server cannot be asked (``select`` reports an error)."""
    workdir: Path = field(default_factory=lambda: Path("/tmp"))
    watched: list[ObjectWatch] = field(default_factory=list)
    """Object watches started (``timeline``); ``apply``/``delete`` feed them."""
    feeds: dict[str, asyncio.Queue[tuple[str, Mapping[str, Any]]]] = field(default_factory=dict)

    # -- object watches ----------------------------------------------------------------
    @staticmethod
    def _watches(target: ObjectWatch, cluster: str, obj: Mapping[str, Any]) -> bool:
        kind = str(obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        plural = target.resource.resource if target.resource is not None else None
        same_type = kind == target.kind or plural == kind.lower() + "s"
        same_namespace = not target.namespace or meta.get("namespace", "") == target.namespace
        return cluster == target.cluster and same_type and same_namespace

    def _feed(self, change: str, cluster: str, obj: Mapping[str, Any]) -> None:
        for target in self.watched:
            if target.cluster == cluster and self._watches(target, cluster, obj):
                self.feeds[target.key].put_nowait((change, obj))

    async def watch(self, target: ObjectWatch) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        queue = self.feeds.setdefault(target.key, asyncio.Queue())
        self.watched.append(target)
        for (cluster, _, _, _), obj in sorted(self.objects.items()):
            if self._watches(target, cluster, obj):
                yield "ADDED", obj
        yield "SYNCED", {"metadata": {"resourceVersion": "1"}}
        while True:
            yield await queue.get()

    # -- objects, metrics text, kubeconfigs, bindings -------------------------------
    async def apiserver_metrics(self, cluster: str) -> str | None:
        return self.apiserver_text.get(cluster)

    async def select(self, selection: Selection, cluster: str) -> ObjectsSeen:
        if cluster in self.unreachable:
            return ObjectsSeen(cluster, error=f"{cluster}: connection refused")
        kind = selection.kind or (selection.resource.resource if selection.resource else "")
        found = [
            obj
            for (c, k, ns, name), obj in sorted(self.objects.items())
            if c == cluster
            and kind in (k, k.lower() + "s")
            and (not selection.namespace or ns == selection.namespace)
            and (selection.name is None or name == selection.name)
            and all(
                (obj.get("metadata") or {}).get("labels", {}).get(key) == value
                for key, value in (selection.selector or {}).items()
            )
        ]
        return ObjectsSeen(cluster, tuple(found))

    def kubeconfig(self, cluster: str) -> Path:
        return self.workdir / f"{cluster}.kubeconfig"

    def builtins(self) -> dict[str, Any]:
        return {
            "clusters": {
                "kcp": {"name": "kcp", "server": "https://127.0.0.1:6443", "runtimeId": ""},
                "skr-a": {"name": "skr-a", "server": "https://127.0.0.1:7443"},
            },
            "gateway": {"url": "https://127.0.0.1:8443", "port": 8443},
        }

    # -- observation ---------------------------------------------------------------
    def reconciles(
        self, kyma: str | None, trigger: str | None, since: float
    ) -> Sequence[ReconcileSeen]:
        return [
            ReconcileSeen(
                r.kyma, frozenset(t.value for t in r.triggers), r.outcome.value, r.at, r.latency
            )
            for r in self.reconcile_log
            if (kyma is None or r.kyma == kyma)
            and (trigger is None or Trigger(trigger) in r.triggers)
            and r.at >= since
        ]

    def rejections(self, listener: str, reason: str) -> float:
        return self.rejected.get((listener, reason), 0.0)

    async def metric(self, target: str, name: str, labels: Mapping[str, str]) -> float:
        return self.metrics.get((target, name), 0.0)

    async def metrics_snapshot(self) -> dict[str, float]:
        return {f"{t}:{n}": v for (t, n), v in self.metrics.items()}

    async def admission_counts(self, cluster: str) -> Mapping[str, float] | None:
        return None if self.admission_counter is None else self.admission_counter(cluster)

    def processes(self) -> list[FakeRecord]:
        return [FakeRecord("fake-apiserver", 1, ("fake",), 0, Path("/nonexistent/fake.log"))]

    # -- changes -------------------------------------------------------------------
    @property
    def faults(self) -> FakeSession:
        return self

    @property
    def watchers(self) -> FakeSession:
        return self

    async def inject(self, fault: Fault) -> FaultRecord:
        self.calls.append(f"fault {fault!r}")
        now = time.time()
        return FaultRecord(now, fault.target, fault.action, now, "done")

    async def apply_watcher(self, obj: Mapping[str, Any]) -> None:
        self.calls.append(f"watcher apply {obj['metadata']['name']}")

    async def delete_watcher(self, name: str, namespace: str) -> None:
        self.calls.append(f"watcher delete {namespace}/{name}")

    def _wrote(self, op: str, cluster: str, namespace: str, name: str) -> None:
        self.calls.append(f"{op} {cluster} {namespace}/{name}")
        if name == FAIL_NAME:
            raise KubeError(f"{op} {namespace}/{name} refused", status=422)
        if self.on_write is not None:
            self.on_write(cluster, namespace, name, time.time())

    async def apply(self, cluster: str, obj: Mapping[str, Any]) -> Any:
        meta = obj["metadata"]
        self._wrote("apply", cluster, meta.get("namespace", ""), meta["name"])
        key = (cluster, obj["kind"], meta.get("namespace", ""), meta["name"])
        self._feed("MODIFIED" if key in self.objects else "ADDED", cluster, obj)
        self.objects[key] = obj
        return obj

    async def patch(self, op: Patch) -> Any:
        self._wrote("patch", op.cluster, op.namespace, op.name)
        return {}

    async def delete(self, cluster: str, ref: ResourceRef, namespace: str, name: str) -> bool:
        self._wrote("delete", cluster, namespace, name)
        return True

    async def write(self, mutation: Mutation) -> Any:
        self.mutations.append(mutation)
        return None


def event(
    manager: str, runtime_id: str, namespace: str, name: str, kind: str = "Kyma", at: float = 0.0
) -> ObservedEvent:
    group = "operator.kyma-project.io" if kind == "Kyma" else ""
    version = "v1beta2" if kind == "Kyma" else "v1"
    return ObservedEvent(
        manager, runtime_id, namespace, name, group, version, kind, at or time.time()
    )


def reconcile(kyma: str, trigger: Trigger, at: float | None = None) -> Reconcile:
    at = time.time() if at is None else at
    return Reconcile(at, kyma, frozenset({trigger}), at, 0.0, Outcome.SUCCESS)


def opener(session: FakeSession) -> Callable[[EnvironmentSpec], Any]:
    @asynccontextmanager
    async def open_session(spec: EnvironmentSpec) -> AsyncIterator[FakeSession]:
        session.spec = spec
        yield session

    return open_session
