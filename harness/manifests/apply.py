"""Rendered manifests → an API server, in the order they were rendered.

Each object is server-side applied (``fieldManager=watcher-harness``, forced), or only
validated by the server with ``dryRun=All``: admission, defaulting, schema and CRD
validation run, nothing is stored. A real install waits for applied CRDs to be
Established before the first object that is not a CRD, so CRs never meet a missing type.
Every failure names the object (``<kind> <namespace>/<name>``) and keeps the HTTP status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.kube import (
    CONFIG_MAPS,
    CRDS,
    DEPLOYMENTS,
    FIELD_MANAGER,
    GATEWAYS,
    KYMAS,
    NAMESPACES,
    NETWORK_POLICIES,
    PRIORITY_CLASSES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    VIRTUAL_SERVICES,
    WATCHERS,
    KubeError,
    Obj,
    Resource,
    object_key,
    request,
)
from harness.kube.crds import wait_established

BUILTIN = (
    NAMESPACES,
    SERVICE_ACCOUNTS,
    SECRETS,
    SERVICES,
    CONFIG_MAPS,
    DEPLOYMENTS,
    NETWORK_POLICIES,
    PRIORITY_CLASSES,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    CRDS,
    WATCHERS,
    KYMAS,
    GATEWAYS,
    VIRTUAL_SERVICES,
)
"""Every kind ``watcher.render``'s manifest sets contain."""


def resource_for(obj: Mapping[str, Any], extra: Iterable[Resource] = ()) -> Resource:
    """The API resource of ``obj`` by apiVersion and kind; ``KubeError`` if unknown."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    for resource in (*BUILTIN, *extra):
        if resource.api_version == api_version and resource.kind == kind:
            return resource
    raise KubeError(f"{kind} {object_key(obj)}: no known API resource for {api_version}/{kind}")


async def apply_object(
    api: ApiClient,
    obj: Mapping[str, Any],
    *,
    dry_run: bool = False,
    extra: Iterable[Resource] = (),
    field_manager: str = FIELD_MANAGER,
) -> Obj:
    """Server-side apply one object (``dry_run``: validated by the server, not stored)."""
    resource = resource_for(obj, extra)
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") if resource.namespaced else None
    query = [("fieldManager", field_manager), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    path = resource.path(namespace, str(meta.get("name") or ""))
    try:
        return await request(
            api,
            "PATCH",
            path,
            query=query,
            body=dict(obj),
            content_type="application/apply-patch+yaml",
        )
    except KubeError as exc:
        what = "dry-run apply" if dry_run else "apply"
        raise type(exc)(
            f"{what} of {obj.get('kind')} {object_key(obj)} refused: {exc}",
            status=exc.status,
            reason=exc.reason,
        ) from None


async def apply_manifests(
    api: ApiClient,
    objects: Iterable[Mapping[str, Any]],
    *,
    dry_run: bool = False,
    extra: Iterable[Resource] = (),
    crd_timeout: float = 30.0,
) -> list[Obj]:
    """Apply ``objects`` in order; the API server's answers, in the same order."""
    extra = tuple(extra)
    answers: list[Obj] = []
    pending_crds: list[str] = []
    for obj in objects:
        is_crd = obj.get("kind") == CRDS.kind
        if pending_crds and not is_crd:
            await wait_established(api, pending_crds, within=crd_timeout)
            pending_crds = []
        answer = await apply_object(api, obj, dry_run=dry_run, extra=extra)
        answers.append(answer)
        if is_crd and not dry_run:
            pending_crds.append(str(answer["metadata"]["name"]))
    if pending_crds:
        await wait_established(api, pending_crds, within=crd_timeout)
    return answers
