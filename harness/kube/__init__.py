"""Small Kubernetes helpers on a ``kubernetes_asyncio`` ApiClient, for any resource by path.

One job: talk to an API server about arbitrary objects as plain dicts — get, list, create,
server-side apply, create-or-replace, merge patch, delete — with a :class:`KubeError`
subclass per failure worth telling apart, and the resources the harness addresses. Applying
CRDs is :mod:`harness.kube.crds`; list+watch as an async iterator is
:mod:`harness.kube.watch`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from harness.errors import HarnessError

FIELD_MANAGER = "watcher-harness"
Obj = dict[str, Any]


class KubeError(HarnessError, RuntimeError):
    """An API request failed; ``status`` is the HTTP status (0 when none was received)."""

    def __init__(
        self, message: str, *, status: int = 0, reason: str = "", reached: bool = True
    ) -> None:
        """``reached``: the request may have reached the server (False only when the
        connection was never made: refused, unresolvable, TLS handshake failed)."""
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.reached = reached


class NotFound(KubeError, LookupError):
    """404: the object (or its resource type) does not exist."""


class Conflict(KubeError):
    """409: already exists, or the resourceVersion sent is stale."""


class Gone(KubeError):
    """410: the resourceVersion is too old to watch from; list again."""


class NotEstablished(KubeError, TimeoutError):
    """A CRD did not become Established before the deadline."""


_BY_STATUS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 410: Gone}


def error_for_status(status: int, method: str, path: str, body: str | bytes | None) -> KubeError:
    """The :class:`KubeError` (subclass by status) for an answer with ``body``."""
    reason, message = "", (body.decode(errors="replace") if isinstance(body, bytes) else body)
    try:
        status_obj = json.loads(message or "")
        reason = str(status_obj.get("reason", ""))
        message = str(status_obj.get("message", message))
    except (ValueError, AttributeError):
        pass
    cls = _BY_STATUS.get(status, KubeError)
    return cls(
        f"{method} {path} failed ({status} {reason}): {message}", status=status, reason=reason
    )


@dataclass(frozen=True)
class Resource:
    """An API resource: where its objects live (``/apis/<group>/<version>/.../<plural>``)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        out = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            out += f"/namespaces/{quote(namespace, safe='')}"
        out += f"/{self.plural}"
        if name:
            out += f"/{quote(name, safe='')}"
        if subresource:
            out += f"/{subresource}"
        return out

    def typed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with this resource's apiVersion and kind where it has none (list items
        and watch events carry none)."""
        obj.setdefault("apiVersion", self.api_version)
        obj.setdefault("kind", self.kind)
        return obj


CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
WATCHERS = Resource("operator.kyma-project.io", "v1beta2", "watchers", "Watcher")
KYMAS = Resource("operator.kyma-project.io", "v1beta2", "kymas", "Kyma")
GATEWAYS = Resource("networking.istio.io", "v1beta1", "gateways", "Gateway")
VIRTUAL_SERVICES = Resource("networking.istio.io", "v1beta1", "virtualservices", "VirtualService")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SERVICES = Resource("", "v1", "services", "Service")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
MODULE_TEMPLATES = Resource(
    "operator.kyma-project.io", "v1beta2", "moduletemplates", "ModuleTemplate"
)
MODULE_RELEASE_METAS = Resource(
    "operator.kyma-project.io", "v1beta2", "modulereleasemetas", "ModuleReleaseMeta"
)
MANIFESTS = Resource("operator.kyma-project.io", "v1beta2", "manifests", "Manifest")
PODS = Resource("", "v1", "pods", "Pod")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
CERTIFICATES = Resource("cert-manager.io", "v1", "certificates", "Certificate")
ISSUERS = Resource("cert-manager.io", "v1", "issuers", "Issuer")
"""The one catalog of the kinds the harness reads and writes (Kubernetes', Kyma's, Istio's,
cert-manager's)."""


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _namespace_of(obj: Mapping[str, Any]) -> str | None:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return str(namespace) if namespace else None


def name_of(obj: Mapping[str, Any]) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not name:
        raise ValueError(f"object has no metadata.name: {dict(obj)!r:.200}")
    return str(name)


async def request(
    api: ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = "application/json",
) -> Obj:
    """One API call; the decoded JSON answer, or a ``KubeError`` subclass by status."""
    try:
        result = await api.call_api(
            path,
            method,
            query_params=list(query),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            response_types_map={200: "object", 201: "object", 202: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as exc:
        raise error_for_status(exc.status or 0, method, path, exc.body) from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        reached = not isinstance(exc, aiohttp.ClientConnectorError)
        raise KubeError(f"{method} {path} failed: {exc!r}", reached=reached) from exc
    return cast(Obj, result or {})


async def discover(api: ApiClient, api_version: str, kind: str) -> Resource:
    """The resource serving ``kind`` in ``api_version``, from the API server's discovery
    document (plural and scope as the server says, not guessed)."""
    group, _, version = api_version.rpartition("/")
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    answer = await request(api, "GET", path)
    for entry in answer.get("resources") or []:
        if entry.get("kind") == kind and "/" not in str(entry.get("name", "")):
            return Resource(group, version, str(entry["name"]), kind, bool(entry.get("namespaced")))
    served = sorted({str(e.get("kind")) for e in answer.get("resources") or []})
    raise NotFound(f"{api_version} has no kind {kind!r}; it serves: {', '.join(served)}")


async def get(
    api: ApiClient, resource: Resource, name: str, namespace: str | None = None
) -> Obj | None:
    """The object, or ``None`` if it does not exist."""
    try:
        return await request(api, "GET", resource.path(namespace, name))
    except NotFound:
        return None


async def list_objects(
    api: ApiClient,
    resource: Resource,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
) -> tuple[list[Obj], str]:
    """The objects (all namespaces when ``namespace`` is None) and the list's resourceVersion."""
    query = [("labelSelector", label_selector)] if label_selector else []
    answer = await request(api, "GET", resource.path(namespace), query=query)
    items = [resource.typed(dict(item)) for item in answer.get("items") or []]
    return items, str((answer.get("metadata") or {}).get("resourceVersion") or "")


async def create(api: ApiClient, resource: Resource, obj: Mapping[str, Any]) -> Obj:
    return await request(api, "POST", resource.path(_namespace_of(obj)), body=dict(obj))


async def apply(
    api: ApiClient,
    resource: Resource,
    obj: Mapping[str, Any],
    *,
    field_manager: str = FIELD_MANAGER,
    force: bool = True,
) -> Obj:
    """Server-side apply ``obj`` (which must carry apiVersion, kind and metadata.name)."""
    query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
    path = resource.path(_namespace_of(obj), name_of(obj))
    return await request(
        api, "PATCH", path, query=query, body=dict(obj), content_type="application/apply-patch+yaml"
    )


async def create_or_replace(
    api: ApiClient, resource: Resource, obj: Mapping[str, Any], *, attempts: int = 5
) -> Obj:
    """Create ``obj``, or replace the existing object with it (retrying stale versions)."""
    namespace, name = _namespace_of(obj), name_of(obj)
    for _ in range(attempts):
        current = await get(api, resource, name, namespace)
        if current is None:
            try:
                return await create(api, resource, obj)
            except Conflict:
                continue  # created meanwhile; replace it
        body = json.loads(json.dumps(dict(obj)))
        body.setdefault("metadata", {})["resourceVersion"] = resource_version(current)
        try:
            return await request(api, "PUT", resource.path(namespace, name), body=body)
        except (Conflict, NotFound):
            continue
    raise KubeError(f"create-or-replace {resource.plural} {namespace}/{name}: gave up after "
                    f"{attempts} conflicting attempts")  # fmt: skip


async def merge_patch(
    api: ApiClient,
    resource: Resource,
    name: str,
    namespace: str | None,
    patch: Mapping[str, Any],
    *,
    subresource: str = "",
) -> Obj:
    """JSON merge patch; put ``metadata.resourceVersion`` in the patch for a guarded update."""
    path = resource.path(namespace, name, subresource)
    return await request(
        api, "PATCH", path, body=dict(patch), content_type="application/merge-patch+json"
    )


async def delete(
    api: ApiClient, resource: Resource, name: str, namespace: str | None = None
) -> bool:
    """Delete the object; ``False`` if it did not exist."""
    try:
        await request(api, "DELETE", resource.path(namespace, name))
    except NotFound:
        return False
    return True


async def ensure_namespace(api: ApiClient, name: str) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    with contextlib.suppress(Conflict):
        await create(api, NAMESPACES, namespace)
