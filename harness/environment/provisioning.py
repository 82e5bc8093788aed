"""What provisioning writes in the KCP before any Lifecycle Manager takes over, and the
wait for its result — shared by the in-process KLM's environment and a KLM command's.

Per SKR: the access Secret (labelled with the Kyma's name, key ``config``), then — unless
the SKR is provisioned without one — the KCP Kyma (runtime id label, ``skr-domain``
annotation); the module catalog before them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.clusters.plane import Environment as Clusters
from harness.environment.spec import EnvironmentSpec
from harness.errors import HarnessError
from harness.kcp.lifecycle_manager.kyma.skr_access import kubeconfig_secret
from harness.kube import (
    KYMAS,
    MODULE_RELEASE_METAS,
    MODULE_TEMPLATES,
    SECRETS,
    create_or_replace,
    ensure_namespace,
    get,
)
from watcher.domain import KCP_NAMESPACE, RUNTIME_ID_LABEL, SKR_DOMAIN_ANNOTATION


async def provision(
    api: ApiClient,
    spec: EnvironmentSpec,
    clusters: Clusters,
    *,
    extra_labels: Mapping[str, str] | None = None,
) -> list[str]:
    """The catalog, then per SKR its access Secret and KCP Kyma (``extra_labels`` added,
    values ``{runtime_id}``-formatted); the names of the Kymas written."""
    await ensure_namespace(api, KCP_NAMESPACE)
    for obj in spec.catalog:
        resource = MODULE_TEMPLATES if obj["kind"] == "ModuleTemplate" else MODULE_RELEASE_METAS
        await create_or_replace(api, resource, obj)
    written = []
    for skr in spec.skrs:
        kubeconfig = clusters[skr.name].kubeconfig_embedded
        await create_or_replace(api, SECRETS, kubeconfig_secret(skr.kyma_name, kubeconfig))
        if not skr.create_kyma:
            continue
        labels = {RUNTIME_ID_LABEL: skr.runtime_id}
        labels.update(
            {k: v.format(runtime_id=skr.runtime_id) for k, v in (extra_labels or {}).items()}
        )
        kyma: dict[str, Any] = {
            "apiVersion": "operator.kyma-project.io/v1beta2",
            "kind": "Kyma",
            "metadata": {
                "name": skr.kyma_name,
                "namespace": KCP_NAMESPACE,
                "labels": labels,
                "annotations": {SKR_DOMAIN_ANNOTATION: skr.skr_domain},
            },
            "spec": {"channel": "regular"},
        }
        await create_or_replace(api, KYMAS, kyma)
        written.append(skr.kyma_name)
    return written


async def wait_kyma_ready(api: ApiClient, name: str, within: float) -> None:
    """Until the KCP Kyma ``name`` is Ready; a timeout says where it stands."""
    state, operation = "", ""
    try:
        async with asyncio.timeout(within):
            while True:
                status = ((await get(api, KYMAS, name, KCP_NAMESPACE)) or {}).get("status") or {}
                state = status.get("state", "")
                operation = (status.get("lastOperation") or {}).get("operation", "")
                if state == "Ready":
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise HarnessError(
            f"Kyma {KCP_NAMESPACE}/{name} not Ready within {within:g} s "
            f"(state {state or 'none'}: {operation or 'never reconciled'})"
        ) from None


async def wait_kymas_ready(api: ApiClient, names: Sequence[str], within: float) -> None:
    await asyncio.gather(*(wait_kyma_ready(api, name, within) for name in names))
