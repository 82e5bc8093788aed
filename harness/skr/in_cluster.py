"""The SKR webhook in-cluster: the image behind a *service* clientConfig, for real clusters.

With ``WATCHER_HARNESS_WEBHOOK_MODE=in-cluster`` an SKR is installed from
:func:`watcher.render.skr_manifests.render_skr_manifests` instead of a process on this
host; faults become Kubernetes operations (there is no process to signal) and metrics are
read through the API server's service proxy (docs/manifests.md, "in-cluster webhook
mode"). Certificate rotation is refused: the mounted Secret reaches the pod only through
the kubelet's sync, which the harness does not control. All Kubernetes calls go through
:class:`~harness.skr.cluster_calls.ClusterCalls`; unit tests pass a fake.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from harness.clusters.plane import Cluster
from harness.clusters.process import ProcessRecord
from harness.kube import (
    DEPLOYMENTS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    KubeError,
    Obj,
)
from harness.manifests.apply import resource_for
from harness.skr.base import SkrRuntime
from harness.skr.cluster_calls import ApiCalls, ClusterCalls
from harness.skr.errors import SkrInstallError, as_install_error
from harness.skr.install import SkrInstallation
from harness.skr.metrics import parse_metrics
from watcher import pki
from watcher.model import Contract
from watcher.render.skr_bundle import METRICS_PORT, NAME, TLS_SECRET
from watcher.render.skr_manifests import (
    NetworkPolicyMode,
    SkrManifestParams,
    render_skr_manifests,
)
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import (
    CONFIGURATION_NAME,
    ServiceTarget,
    render_webhook_configuration,
)

VWCS = VALIDATING_WEBHOOK_CONFIGURATIONS
VWC_KIND = VWCS.kind
KEPT_KINDS = frozenset({"Namespace"})
"""Left to the backend's ownership cleanup (a local API server never finishes deleting a
namespace without a namespace controller)."""
RESTART_ANNOTATION = "operator.kyma-project.io/pod-restart-trigger"
"""On the webhook pods' template: the serial of the certificate they must load (a new
value rolls the pods, as KLM restarts the webhook when its certificate changes)."""
ROTATION_REFUSED = (
    "in-cluster webhook: certificate rotation is not supported (the pod sees a new Secret "
    "only after the kubelet's sync); run rotation scenarios with WATCHER_HARNESS_WEBHOOK_MODE=host"
)


def available(deployment: Mapping[str, Any] | None, replicas: int = 1) -> bool:
    """``Available`` condition True and at least ``replicas`` available replicas."""
    status = (deployment or {}).get("status") or {}
    conditions = status.get("conditions") or []
    condition = any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)
    return condition and int(status.get("availableReplicas") or 0) >= replicas


def metrics_proxy_path(namespace: str) -> str:
    """The metrics Service through the API server's service proxy."""
    return f"/api/v1/namespaces/{namespace}/services/{NAME}-metrics:{METRICS_PORT}/proxy/metrics"


class InClusterSkrInstallation(SkrInstallation):
    """The webhook Deployment in one SKR (see the module doc); same interface as the host
    mode's :class:`SkrInstallation`, so the fleet and the environment use either."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        kcp_addr: str,
        image: str,
        contract: Contract = "v2",
        network_policies: NetworkPolicyMode = "portable",
        available_timeout: float = 120.0,
        poll_seconds: float = 0.5,
        calls: ClusterCalls | None = None,
        **runtime: Unpack[SkrRuntime],
    ) -> None:
        """``kcp_addr``: ``<host address>:<gateway port>`` as the pods dial it; ``calls``:
        the Kubernetes operations (default: the cluster's API server); ``runtime``: see
        :class:`~harness.skr.base.SkrRuntime`."""
        if not image:
            raise SkrInstallError(
                f"SKR {cluster.name}: the in-cluster webhook needs an image; set "
                "WATCHER_HARNESS_IMAGE (built from the Dockerfile, loaded into the cluster)"
            )
        super().__init__(cluster, kcp_addr=kcp_addr, contract=contract, **runtime)
        self.image = image
        self.kcp_addr = kcp_addr
        self.contract: Contract = contract
        self.network_policies: NetworkPolicyMode = network_policies
        self.available_timeout = available_timeout
        self.poll_seconds = poll_seconds
        self._calls = calls
        self._applied: list[dict[str, Any]] = []
        self._replicas = 0
        self.namespace = "kyma-system"

    # -- facts ------------------------------------------------------------------------

    @property
    def calls(self) -> ClusterCalls:
        return self._installed_part(self._calls)

    @property
    def applied(self) -> tuple[dict[str, Any], ...]:
        """The objects applied at install (in order), the webhook configuration excluded."""
        return tuple(self._applied)

    @property
    def running(self) -> bool:
        return self._installed and self._replicas > 0

    @property
    def process_records(self) -> tuple[ProcessRecord, ...]:
        return ()  # the webhook runs in pods, not as a process of this host

    @property
    def state(self) -> str:
        return f"deployment {NAME}: {self._replicas} replica(s)"

    @property
    def webhook_url(self) -> str:
        return f"https://{NAME}.{self.namespace}.svc:443"

    @property
    def metrics_url(self) -> str:
        """The metrics through the API server's service proxy (needs the admin login)."""
        return self.cluster.server + metrics_proxy_path(self.namespace)

    def manifests(self) -> list[dict[str, Any]]:
        """The rendered SKR set for this installation (the configuration has no webhooks
        yet: :meth:`apply_watchers` renders it)."""
        params = SkrManifestParams(
            image=self.image,
            kcp_addr=self.kcp_addr,
            tls=self._secret_data(),
            namespace=self.namespace,
            contract=self.contract,
            network_policies=self.network_policies,
            failure_policy=self.failure_policy,
            webhook_timeout_seconds=self.timeout_seconds,
        )
        return [o for o in render_skr_manifests(params) if o.get("kind") != VWC_KIND]

    # -- install / uninstall ----------------------------------------------------------

    async def _install(self) -> None:
        """Certificate → manifests applied in order → Deployment Available."""
        await self._issue_leaf()
        if self._calls is None:
            api = await self.stack.enter_async_context(self.cluster.api_client())
            self._calls = ApiCalls(api)
            self.stack.callback(setattr, self, "_calls", None)
        self.stack.push_async_callback(self._delete_applied)
        for obj in self.manifests():
            with as_install_error(self.cluster.name):
                await self.calls.apply(obj)
            self._applied.append(obj)
        self._replicas = 1
        await self.wait_available()

    async def _delete_applied(self) -> None:
        """The webhook configuration first (no calls into a vanishing webhook), then the
        applied objects in reverse order."""
        await self.calls.delete(VWCS, CONFIGURATION_NAME, None)
        applied, self._applied = self._applied, []
        for obj in reversed(applied):
            if obj.get("kind") in KEPT_KINDS:
                continue
            meta = obj["metadata"]
            await self.calls.delete(resource_for(obj), meta["name"], meta.get("namespace"))

    async def wait_available(self, replicas: int = 1) -> float:
        """Poll the Deployment until Available (bounded); seconds it took."""
        started = time.monotonic()
        last: Obj | None = None
        while True:
            last = await self.calls.get(DEPLOYMENTS, NAME, self.namespace)
            if available(last, replicas):
                return time.monotonic() - started
            if time.monotonic() - started >= self.available_timeout:
                raise SkrInstallError(self._not_available(last))
            await asyncio.sleep(self.poll_seconds)

    def _not_available(self, deployment: Obj | None) -> str:
        status = (deployment or {}).get("status") or {}
        return (
            f"SKR {self.cluster.name}: Deployment {self.namespace}/{NAME} not Available "
            f"within {self.available_timeout:g} s (availableReplicas="
            f"{status.get('availableReplicas') or 0}); check that the nodes can pull image "
            f"{self.image} (kind: kind load docker-image), that a node is Ready and "
            f"schedulable, and `kubectl -n {self.namespace} describe pod -l app={NAME}`"
        )

    # -- webhook configuration --------------------------------------------------------

    def render(self, watchers: Sequence[Watcher]) -> dict[str, Any] | None:
        """``skr-webhook`` with the *service* clientConfig (None: no Watchers)."""
        if not watchers:
            return None
        return render_webhook_configuration(
            watchers,
            ca_bundle_pem=self.serving_ca_bundle_pem,
            target=ServiceTarget(name=NAME, namespace=self.namespace, port=443),
            failure_policy=self.failure_policy,
            timeout_seconds=self.timeout_seconds,
        )

    async def apply_watchers(self, watchers: Sequence[Watcher]) -> None:
        async with self._lock:
            self._watchers = tuple(watchers)  # first, as in the host mode
            body = self.render(watchers)
            if body is None:
                await self.calls.delete(VWCS, CONFIGURATION_NAME, None)
            else:
                with as_install_error(self.cluster.name):
                    await self.calls.apply(body)

    async def repair(
        self,
        watchers: Callable[[], Sequence[Watcher]] | None = None,
        certificate: tuple[pki.Issued, bytes] | None = None,
    ) -> tuple[str, ...]:
        """Apply the Secret and ``skr-webhook`` again (server-side apply: a no-op for the
        API server when nothing changed); what was missing is reported as restored. A new
        ``certificate`` goes into the Secret and restarts the pods through their template
        annotation (KLM's pod-restart), because a mounted Secret reaches a running pod
        only after the kubelet's sync."""
        async with self._lock:
            restored = []
            renewed = self._renewed_leaf(certificate)
            if renewed is not None:
                self._leaf = renewed
                secret = next(o for o in self.manifests() if o.get("kind") == "Secret")
                self._applied = [secret if o.get("kind") == "Secret" else o for o in self._applied]
                restored.append("certificate")
            if watchers is not None:  # read under the lock: the newest set wins
                self._watchers = tuple(watchers())
            restored += await self._apply_again()
            if renewed is not None:
                serial = format(self.leaf.certificate.serial_number, "x")
                template = {"metadata": {"annotations": {RESTART_ANNOTATION: serial}}}
                await self.calls.patch(
                    DEPLOYMENTS, NAME, self.namespace, {"spec": {"template": template}}
                )
            return tuple(restored)

    async def _apply_again(self) -> list[str]:
        """The Secret and ``skr-webhook`` (if any Watcher) applied; those that were missing."""
        wanted = [o for o in self._applied if o.get("kind") == "Secret"]
        body = self.render(self._watchers)
        if body is not None:
            wanted.append(body)
        missing = []
        for obj in wanted:
            meta = obj["metadata"]
            resource = VWCS if obj["kind"] == VWC_KIND else SECRETS
            if await self.calls.get(resource, meta["name"], meta.get("namespace")) is None:
                missing.append(f"{obj['kind']} {meta['name']}")
            with as_install_error(self.cluster.name):
                await self.calls.apply(obj)
        return missing

    async def remove(self) -> None:
        """Delete ``skr-webhook`` and the Secret from the SKR (the Kyma is gone)."""
        async with self._lock:
            await self.calls.delete(VWCS, CONFIGURATION_NAME, None)
            await self.calls.delete(SECRETS, TLS_SECRET, self.namespace)

    async def rotate(self, new_ca_bundle_pem: bytes, new_leaf: pki.Issued) -> None:
        raise SkrInstallError(ROTATION_REFUSED)

    # -- faults and metrics -----------------------------------------------------------

    async def _scale(self, replicas: int) -> None:
        await self.calls.patch(DEPLOYMENTS, NAME, self.namespace, {"spec": {"replicas": replicas}})
        self._replicas = replicas

    async def kill(self) -> int | None:
        """Delete the webhook pods at once (no drain); the Deployment makes a new one."""
        await self.calls.delete_pods(self.namespace, f"app={NAME}")
        return None

    async def stop(self) -> int | None:
        """Scale to 0: the pod gets SIGTERM and drains its queue."""
        await self._scale(0)
        return None

    async def _start_webhook(self) -> None:
        """Scale to 1 and wait until the Deployment is Available again."""
        await self._scale(1)
        await self.wait_available()

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def metrics(self) -> dict[str, float]:
        """The webhook's metrics through the API server's service proxy."""
        path = metrics_proxy_path(self.namespace)
        try:
            return parse_metrics(await self.calls.get_text(path))
        except KubeError as exc:
            raise SkrInstallError(
                f"SKR {self.cluster.name}: cannot read the webhook's metrics through the "
                f"service proxy: {exc}"
            ) from None
