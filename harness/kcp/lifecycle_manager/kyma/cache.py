"""What the KCP knows about Kymas, kept current by the shared Kyma informer.

Each SKR event (naming a runtime id) resolves to its KCP Kyma, and SAN pinning needs that
Kyma's annotations: both read this index instead of asking the API server per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import object_key
from watcher.domain import KCP_NAMESPACE, RUNTIME_ID_LABEL, SKIP_RECONCILIATION_LABEL
from watcher.model import ObjectKey

DEFAULT_NAMESPACE = KCP_NAMESPACE


@dataclass(frozen=True)
class KymaInfo:
    """The parts of a KCP Kyma the manager uses."""

    namespace: str
    name: str
    runtime_id: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    generation: int = 0
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set (the finalizer's work is due)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def skip_reconciliation(self) -> bool:
        """KLM's ``operator.kyma-project.io/skip-reconciliation: "true"``."""
        return self.labels.get(SKIP_RECONCILIATION_LABEL) == "true"

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> KymaInfo:
        meta = obj.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            runtime_id=labels.get(RUNTIME_ID_LABEL, ""),
            labels=labels,
            annotations=dict(meta.get("annotations") or {}),
            generation=int(meta.get("generation") or 0),
            deleting=bool(meta.get("deletionTimestamp")),
        )


def change_trigger(previous: KymaInfo | None, current: KymaInfo) -> Trigger | None:
    """Why a watched Kyma needs a reconcile, as KLM's predicate says (creation,
    ``GenerationChanged OR LabelChanged``); the start of a deletion counts too, without
    relying on the API server bumping the generation then."""
    if previous is None:
        return Trigger.KYMA_CREATED
    if (previous.generation, previous.labels, previous.deleting) != (
        current.generation,
        current.labels,
        current.deleting,
    ):
        return Trigger.KYMA_CHANGED
    return None


class KymaCache:
    """The Kyma controller's index over the shared Kyma informer (fed through :meth:`apply`)."""

    def __init__(self, namespace: str | None = DEFAULT_NAMESPACE) -> None:
        self.namespace = namespace
        self._kymas: dict[str, KymaInfo] = {}
        self._by_runtime_id: dict[str, set[str]] = {}
        """runtime id → keys of the Kymas labelled with it (kept with ``_kymas``)."""
        self.synced = False
        """The first list has been taken in."""
        self._changed = asyncio.Event()
        self.on_change: Callable[[str, Trigger], None] | None = None
        """Told ``(key, trigger)`` when a Kyma appears or changes after the first list."""

    def get(self, key: str) -> KymaInfo | None:
        return self._kymas.get(key)

    def all(self) -> list[KymaInfo]:
        return [self._kymas[k] for k in sorted(self._kymas)]

    def by_runtime_id(self, runtime_id: str, namespace: str | None = None) -> list[KymaInfo]:
        """From the index: one dict lookup per event, whatever the fleet's size."""
        keys = self._by_runtime_id.get(runtime_id, ())
        found = [self._kymas[k] for k in sorted(keys)]
        return [k for k in found if namespace is None or k.namespace == namespace]

    async def lookup(self, runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None:
        """The annotations of the event's Kyma (``owner``, else by runtime id), or None
        when there is not exactly one: ``watcher.listener.san_pinning``'s lookup."""
        if owner is not None:
            kyma = self._kymas.get(str(owner))
            return dict(kyma.annotations) if kyma is not None else None
        matches = self.by_runtime_id(runtime_id, self.namespace)
        return dict(matches[0].annotations) if len(matches) == 1 else None

    async def wait_for(self, key: str, *, present: bool = True, within: float = 10.0) -> None:
        """Until the cache has (or no longer has) ``key``; ``TimeoutError`` otherwise."""
        async with asyncio.timeout(within):
            while (key in self._kymas) != present:
                self._changed.clear()
                await self._changed.wait()

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event; after the first list (the manager's startup) a Kyma that
        appears or changes is reported to ``on_change``."""
        if kind == "SYNCED":
            self.synced = True
        elif kind == "DELETED":
            self._forget(object_key(obj))
        else:
            info = KymaInfo.from_object(obj)
            previous = self._forget(info.key)
            self._kymas[info.key] = info
            self._by_runtime_id.setdefault(info.runtime_id, set()).add(info.key)
            trigger = change_trigger(previous, info) if self.synced else None
            if trigger is not None and self.on_change is not None:
                self.on_change(info.key, trigger)
        self._changed.set()

    def _forget(self, key: str) -> KymaInfo | None:
        """Take ``key`` out of the cache and the index; what it held."""
        info = self._kymas.pop(key, None)
        if info is not None:
            keys = self._by_runtime_id.get(info.runtime_id, set())
            keys.discard(key)
            if not keys:
                self._by_runtime_id.pop(info.runtime_id, None)
        return info
