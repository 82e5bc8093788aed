"""What a run created in a cluster it does not own, and removing exactly that afterwards.

The ``kubeconfig`` backend runs in clusters that existed before and stay after. Before
the run, :meth:`Ownership.begin` notes the uid of every object of the kinds the harness
writes (:data:`CLUSTER_SCOPED`, :data:`NAMESPACED`) and creates the namespaces the
harness installs into, labelled ``app.kubernetes.io/managed-by: watcher-harness`` and
``watcher-harness.kyma-project.io/run: <run id>``. :meth:`Ownership.end` (also after a
failure) deletes every object of those kinds whose uid is new — with a uid precondition,
so a same-named object somebody else made meanwhile survives —, releases the finalizers
the run's own controllers left on them (those controllers are gone by then), deletes the
CRDs and namespaces the run created and waits until they are gone. Pre-existing objects
the run changed are not restored (scenarios write their own objects).

A cluster without a namespace controller (the ``local`` backend's bare API servers, when
addressed through kubeconfig files) never finishes deleting a namespace: after
:attr:`Ownership.namespace_grace` seconds without any deletion condition, the harness
finalizes the (by then emptied) namespace itself, as the controller would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.errors import ClusterError
from harness.kube import Resource

logger = logging.getLogger("harness.clusters.ownership")

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "watcher-harness"
RUN_LABEL = "watcher-harness.kyma-project.io/run"
"""Same key as :data:`harness.scenario.names.RUN_LABEL`."""

CLUSTER_SCOPED: tuple[Resource, ...] = (
    kube.VALIDATING_WEBHOOK_CONFIGURATIONS,
    kube.MUTATING_WEBHOOK_CONFIGURATIONS,
    kube.CLUSTER_ROLE_BINDINGS,
    kube.CLUSTER_ROLES,
    kube.PRIORITY_CLASSES,  # the in-cluster webhook's skr-webhook-priority
)
"""Cluster-scoped kinds the harness or its manifests create (besides namespaces and CRDs)."""

NAMESPACED: tuple[Resource, ...] = (
    kube.WATCHERS,
    kube.KYMAS,
    kube.MANIFESTS,
    kube.MODULE_TEMPLATES,
    kube.MODULE_RELEASE_METAS,
    kube.VIRTUAL_SERVICES,
    kube.GATEWAYS,
    kube.DEPLOYMENTS,
    kube.SERVICES,
    kube.NETWORK_POLICIES,
    kube.ROLE_BINDINGS,
    kube.ROLES,
    kube.SERVICE_ACCOUNTS,
    kube.SECRETS,
    kube.CONFIG_MAPS,
)
"""Namespaced kinds the harness, its manifests and the scenario library write."""


@dataclass(frozen=True)
class Entry:
    namespace: str
    name: str
    ours: bool  # the harness (field manager ``watcher-harness``) wrote it


def written_by_harness(obj: Mapping[str, Any]) -> bool:
    """Whether ``watcher-harness`` is among the object's field managers (see
    :data:`harness.clusters.plane.USER_AGENT`) — or it has none at all: an object holding
    nothing but a name (an empty ConfigMap) records no manager, so a new one cannot be
    told apart and is taken as the run's."""
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return not fields or any(isinstance(f, Mapping) and f.get("manager") == MANAGER for f in fields)


def ownership_labels(run_id: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGER, RUN_LABEL: run_id}


@dataclass
class Inventory:
    """Objects by resource and uid."""

    objects: dict[Resource, dict[str, Entry]] = field(default_factory=dict)

    def new_since(
        self, before: Inventory, *, ours: bool = False
    ) -> dict[Resource, dict[str, Entry]]:
        """Objects whose uid ``before`` did not hold (``ours``: only the harness's)."""
        out: dict[Resource, dict[str, Entry]] = {}
        for resource, now in self.objects.items():
            old = before.objects.get(resource, {})
            out[resource] = {
                uid: e for uid, e in now.items() if uid not in old and (e.ours or not ours)
            }
        return out


async def inventory(api: ApiClient, resources: Iterable[Resource]) -> Inventory:
    """Every object of ``resources`` (kinds the cluster does not serve are skipped)."""
    out = Inventory()
    for resource in resources:
        try:
            items, _ = await kube.list_objects(api, resource)
        except kube.NotFound:
            continue  # e.g. no Kyma CRD (yet)
        out.objects[resource] = {
            str(i["metadata"]["uid"]): Entry(
                str(i["metadata"].get("namespace") or ""),
                str(i["metadata"]["name"]),
                written_by_harness(i),
            )
            for i in items
        }
    return out


ALL_KINDS = (kube.NAMESPACES, kube.CRDS, *CLUSTER_SCOPED, *NAMESPACED)


@dataclass
class Ownership:
    """Track and clean up one cluster for one run (see the module doc)."""

    api: ApiClient
    cluster: str
    run_id: str
    namespace_grace: float = 5.0
    timeout: float = 60.0
    before: Inventory | None = None
    deleted: list[str] = field(default_factory=list)
    """What :meth:`end` deleted, ``kind namespace/name``, for logs and tests."""

    async def begin(self) -> None:
        """Note what exists (without this, :meth:`end` deletes nothing)."""
        self.before = await inventory(self.api, ALL_KINDS)

    async def claim_namespaces(self, namespaces: Iterable[str]) -> None:
        """Create ``namespaces`` (labelled) where they are missing."""
        if self.before is None:
            raise ClusterError(f"cluster {self.cluster}: claim_namespaces before begin")
        for name in namespaces:
            body = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": ownership_labels(self.run_id)},
            }
            try:
                await kube.request(self.api, "POST", kube.NAMESPACES.path(), body=body)
            except kube.Conflict:
                logger.info(
                    "%s: namespace %s exists; the run leaves it in place", self.cluster, name
                )

    async def end(self) -> None:
        """Delete what the run created; raise one :class:`ClusterError` naming what stayed."""
        if self.before is None:
            return  # nothing noted, so nothing can be told apart: delete nothing
        created = (await inventory(self.api, ALL_KINDS)).new_since(self.before, ours=True)
        problems: list[str] = []
        for resource in (*NAMESPACED, *CLUSTER_SCOPED):
            for uid, entry in created.get(resource, {}).items():
                await self._delete(resource, uid, entry, problems)
        namespaces = created.get(kube.NAMESPACES, {})
        for uid, entry in namespaces.items():
            await self._label(entry.name)
            await self._delete(kube.NAMESPACES, uid, entry, problems)
        crds = created.get(kube.CRDS, {})
        for uid, entry in crds.items():
            await self._delete(kube.CRDS, uid, entry, problems)
        await self._wait_gone(kube.CRDS, [e.name for e in crds.values()], problems)
        await self._wait_gone(kube.NAMESPACES, [e.name for e in namespaces.values()], problems)
        if problems:
            raise ClusterError(
                f"cluster {self.cluster}: could not remove everything the run created: "
                + "; ".join(problems)
            )

    async def _label(self, namespace: str) -> None:
        """Mark a namespace the run created (for anyone finding it half-deleted)."""
        patch = {"metadata": {"labels": ownership_labels(self.run_id)}}
        try:
            await kube.merge_patch(self.api, kube.NAMESPACES, namespace, None, patch)
        except kube.KubeError as exc:
            logger.debug("cannot label namespace %s: %s", namespace, exc)

    async def _delete(
        self, resource: Resource, uid: str, entry: Entry, problems: list[str]
    ) -> None:
        namespace, name = entry.namespace, entry.name
        path = resource.path(namespace or None, name)
        what = f"{resource.kind} {namespace + '/' if namespace else ''}{name}"
        try:
            current = await kube.get(self.api, resource, name, namespace or None)
            if current is None or current["metadata"].get("uid") != uid:
                return
            if current["metadata"].get("finalizers") and resource not in (
                kube.NAMESPACES,
                kube.CRDS,
            ):
                # the run's controllers (which put them there) have stopped
                patch = {"metadata": {"finalizers": None, "uid": uid}}
                await kube.merge_patch(self.api, resource, name, namespace or None, patch)
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
            await kube.request(self.api, "DELETE", path, body=body)
            self.deleted.append(what)
        except kube.NotFound:
            return
        except kube.KubeError as exc:
            problems.append(f"{what}: {exc}")

    async def _wait_gone(self, resource: Resource, names: list[str], problems: list[str]) -> None:
        """Until ``names`` are gone. A namespace still without deletion conditions after
        :attr:`namespace_grace` has no namespace controller: the harness finalizes it."""
        started = time.monotonic()
        for name in names:
            while (obj := await kube.get(self.api, resource, name)) is not None:
                waited = time.monotonic() - started
                grace_over = waited > self.namespace_grace and resource is kube.NAMESPACES
                if grace_over and not _has_deletion_conditions(obj):
                    await self._finalize(obj)
                elif waited > self.timeout:
                    problems.append(f"{resource.kind} {name} still there after {self.timeout:g} s")
                    break
                await asyncio.sleep(0.1)

    async def _finalize(self, namespace: Mapping[str, object]) -> None:
        """No namespace controller in this cluster: do its last step after the contents."""
        meta = namespace.get("metadata")
        assert isinstance(meta, Mapping)
        name = str(meta["name"])
        logger.info("%s: no namespace controller; finalizing namespace %s", self.cluster, name)
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": dict(meta),
            "spec": {"finalizers": []},
        }
        with contextlib.suppress(kube.NotFound):
            await kube.request(
                self.api, "PUT", kube.NAMESPACES.path(None, name, "finalize"), body=body
            )


def _has_deletion_conditions(namespace: Mapping[str, object]) -> bool:
    """The namespace controller reports its progress as conditions; none = no controller."""
    status = namespace.get("status")
    return isinstance(status, Mapping) and bool(status.get("conditions"))
