"""A scenario session around a KLM process: what the library can observe of any KLM.

With ``--klm-command`` the scenario runs in :func:`harness.environment.any_klm
.klm_environment`, and :class:`KlmSession` answers the runner only from what such a KLM
shows anyone (the wire seen by its sidecar, its log, its metrics endpoint), so upstream's
Go KLM and ours as a process are observed alike; docs/any-klm.md says what each channel
gives and which faults a KLM process's environment has.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from harness.environment.any_klm import KlmEnvironment
from harness.environment.events import FaultRecord
from harness.environment.inject import (
    act,
    apiserver_fault,
    gateway_fault,
    inject,
    listener_fault,
    named,
)
from harness.expect.observations import ReconcileSeen
from harness.faults import Fault, FaultError, Lifecycle, Part, PartFault
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.routes import wait_route
from harness.kcp.tls_secret import tls_data
from harness.kube import SECRETS, WATCHERS, create_or_replace, delete, ensure_namespace, get
from harness.report.model import ProcessRecordLike
from harness.runner.cluster_session import ClusterSession
from harness.runner.session import FaultPort, WatcherPort, reconciles_seen
from harness.skr.metrics import parse_metrics, value
from watcher import pki
from watcher.domain import GATEWAY_SECRET_NAME, ISTIO_NAMESPACE, SKR_NAMESPACE
from watcher.render.skr_bundle import METRICS_PORT, NAME, TLS_SECRET

KLM_LISTENER = "lifecycle-manager"
CA_SECRET = "klm-watcher"


class KlmSession(ClusterSession):
    """:class:`~harness.runner.session.Session` over a :class:`KlmEnvironment`; its own
    fault and Watcher port (what they do differs from the harness's environment)."""

    def __init__(self, env: KlmEnvironment) -> None:
        super().__init__(env)
        self.env = env
        self.faults: FaultPort = self
        self.watchers: WatcherPort = self

    # -- observation --------------------------------------------------------------------

    def reconciles(
        self, kyma: str | None, trigger: str | None, since: float
    ) -> Sequence[ReconcileSeen]:
        return reconciles_seen(self.env.klm.reconciles(kyma, trigger, since))

    async def _pod_metrics(self, skr: str) -> dict[str, float]:
        pod = self.env.kubelets[skr].pods.get(f"{SKR_NAMESPACE}/{NAME}")
        port = pod.host_ports.get(METRICS_PORT) if pod is not None else None
        if port is None or pod is None or not pod.ready:
            return {}
        timeout = aiohttp.ClientTimeout(total=5)
        async with (
            aiohttp.ClientSession(timeout=timeout) as client,
            client.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            return parse_metrics(await response.text())

    async def metric(self, target: str, name: str, labels: Mapping[str, str]) -> float:
        kind, _, which = target.partition("/")
        if kind == "gateway" and not which:
            stats = await self.env.gateway.stats()
            return float(stats.get(self.gateway_stat(name), 0))
        if kind == "klm" or target == f"listener/{KLM_LISTENER}":
            return await self.env.klm.read_metric(name, labels)
        if kind == "listener" and which in self.env.listeners:
            return await self.env.listeners[which].read_metric(name, labels)
        if kind == "webhook" and which in self.env.kubelets:
            return value(await self._pod_metrics(which), name, **dict(labels))
        raise FaultError(
            f"metric target {target!r}: a KLM process's environment has webhook/<skr>, "
            f"listener/{KLM_LISTENER}, gateway and klm"
        )

    async def metrics_snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for skr in self.env.kubelets:
            for sample, number in (await self._pod_metrics(skr)).items():
                out[f"webhook/{skr}:{sample}"] = number
        return out

    def processes(self) -> list[ProcessRecordLike]:
        records: list[ProcessRecordLike] = self.cluster_processes()
        records.extend(self.env.klm.records)
        for kubelet in self.env.kubelets.values():
            records.extend(kubelet.records)
        return records

    def builtins(self) -> dict[str, Any]:
        """Also the KLM's own listener, part of its process."""
        out = super().builtins()
        port = self.env.klm.listener_port
        url = f"http://127.0.0.1:{port}" if self.env.klm.running else ""
        out["listeners"][KLM_LISTENER] = {"port": port, "url": url}
        return out

    # -- faults -------------------------------------------------------------------------

    async def inject(self, fault: Fault) -> FaultRecord:
        at = time.time()
        detail = await inject(self, fault)
        record = FaultRecord(at, fault.target, fault.action, time.time(), detail)
        self.env.log.timeline.append(record)
        return record

    @property
    def gateway(self) -> EnvoyGateway:
        return self.env.gateway

    certificates = None
    """The KLM process issues the certificates: no certificate faults here."""

    async def lifecycle(self, fault: PartFault) -> str:
        """A :class:`~harness.environment.inject.FaultPorts` port: the KLM's listener is
        the KLM process; a webhook is a pod the kubelet runs (``kill`` only)."""
        env = self.env
        match fault.part:
            case Part.GATEWAY:
                return await gateway_fault(env.gateway, fault.action)
            case Part.LISTENER if fault.name == KLM_LISTENER:
                await act(env.klm, fault.action)
                return f"KLM pid {env.klm.pid}" if env.klm.running else "KLM down"
            case Part.LISTENER:
                return await listener_fault(named(env.listeners, fault), fault.action)
            case Part.WEBHOOK if fault.action is Lifecycle.KILL:
                pid = await named(env.kubelets, fault).kill_pod(SKR_NAMESPACE, NAME)
                return f"container pid {pid} killed; the kubelet restarts it"
            case Part.APISERVER:
                return await apiserver_fault(env.clusters, fault)
        raise FaultError(
            f"{fault.target} {fault.action}: not on a KLM process's cluster (the KLM owns "
            "the webhook Deployment; webhooks can be killed)"
        )

    # -- Watchers -----------------------------------------------------------------------

    async def apply_watcher(self, obj: Mapping[str, Any]) -> None:
        """Create or replace a Watcher; return once the gateway routes it (the SKRs get
        it at each Kyma's next reconcile, as the KLM rolls it out)."""
        meta = obj["metadata"]
        await ensure_namespace(self.env.kcp_api, meta["namespace"])
        await create_or_replace(self.env.kcp_api, WATCHERS, dict(obj))
        await wait_route(
            self.env.kcp_api, self.env.gateway, meta["name"], meta["namespace"], present=True
        )

    async def delete_watcher(self, name: str, namespace: str) -> None:
        await delete(self.env.kcp_api, WATCHERS, name, namespace)
        await wait_route(self.env.kcp_api, self.env.gateway, name, namespace, present=False)

    # -- requests -----------------------------------------------------------------------

    async def _secret(self, cluster: str, name: str, namespace: str) -> dict[str, bytes]:
        api = self._api(cluster)
        secret = await get(api, SECRETS, name, namespace)
        if secret is None:
            raise FaultError(f"request: no Secret {namespace}/{name} in {cluster}")
        return tls_data(secret)

    async def target(self, to: str, path: str) -> tuple[str, bytes]:
        """Listeners in plain HTTP, as behind their sidecars; the KLM's is its process's."""
        trusted = (await self._secret("kcp", GATEWAY_SECRET_NAME, ISTIO_NAMESPACE))["ca.crt"]
        if to == "gateway":
            return f"{self.env.gateway.url}{path}", trusted
        kind, _, component = to.partition("/")
        host = self.env.listeners.get(component) if kind == "listener" else None
        if kind == "listener" and component == KLM_LISTENER and self.env.klm.running:
            return f"http://127.0.0.1:{self.env.klm.listener_port}{path}", trusted
        if host is not None and host.running:
            return f"{host.url}{path}", trusted
        raise FaultError(f"request target {to!r}: no running listener {component!r}")

    async def client_pair(self, cluster: str) -> tuple[bytes, bytes]:
        data = await self._secret(cluster, TLS_SECRET, SKR_NAMESPACE)
        return data["tls.crt"], data["tls.key"]

    async def client_ca(self) -> pki.CertificateAuthority:
        ca_data = await self._secret("kcp", CA_SECRET, ISTIO_NAMESPACE)
        ca = pki.load_issued(ca_data["tls.crt"], ca_data["tls.key"], CA_SECRET)
        return pki.CertificateAuthority(ca.certificate, ca.key)


__all__ = ["KlmSession"]
