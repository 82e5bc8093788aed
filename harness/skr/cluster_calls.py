"""The Kubernetes operations the in-cluster SKR installation makes, behind one protocol.

:class:`~harness.skr.in_cluster.InClusterSkrInstallation` calls only :class:`ClusterCalls`,
so its unit tests pass a fake API server; :class:`ApiCalls` makes the calls on a real one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.kube import PODS, KubeError, Obj, Resource, merge_patch, request
from harness.manifests.apply import apply_object


class ClusterCalls(Protocol):
    """The Kubernetes operations the in-cluster installation needs (faked in unit tests)."""

    async def apply(self, obj: Mapping[str, Any]) -> Obj: ...

    async def get(self, resource: Resource, name: str, namespace: str | None) -> Obj | None: ...

    async def delete(self, resource: Resource, name: str, namespace: str | None) -> None:
        """Delete; a missing object is no error."""
        ...

    async def patch(
        self, resource: Resource, name: str, namespace: str | None, body: Mapping[str, Any]
    ) -> Obj: ...

    async def delete_pods(self, namespace: str, selector: str) -> None:
        """Delete the matching pods at once (grace period 0)."""
        ...

    async def get_text(self, path: str) -> str: ...


class ApiCalls:
    """:class:`ClusterCalls` on a real API server."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def apply(self, obj: Mapping[str, Any]) -> Obj:
        return await apply_object(self.api, obj)

    async def get(self, resource: Resource, name: str, namespace: str | None) -> Obj | None:
        return await kube.get(self.api, resource, name, namespace)

    async def delete(self, resource: Resource, name: str, namespace: str | None) -> None:
        await kube.delete(self.api, resource, name, namespace)

    async def patch(
        self, resource: Resource, name: str, namespace: str | None, body: Mapping[str, Any]
    ) -> Obj:
        return await merge_patch(self.api, resource, name, namespace, body)

    async def delete_pods(self, namespace: str, selector: str) -> None:
        await request(
            self.api,
            "DELETE",
            PODS.path(namespace),
            query=[("labelSelector", selector), ("gracePeriodSeconds", "0")],
        )

    async def get_text(self, path: str) -> str:
        try:
            response = await self.api.call_api(
                path,
                "GET",
                header_params={"Accept": "text/plain"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
            )
            body = await response.read()
            status = int(response.status)
        except (OSError, TimeoutError) as exc:
            raise KubeError(f"GET {path} failed: {exc!r}") from exc
        text = bytes(body).decode("utf-8", "replace")
        if status != 200:
            raise KubeError(f"GET {path}: {status} {text[:200]!r}", status=status)
        return text
