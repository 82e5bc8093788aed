"""The whole flow on one machine: KCP + SKRs, Envoy gateway, Watcher controller, KLM stand-in.

Start order follows the data flow backwards, so every part finds its target running:
clusters → CRDs → KCP CA → gateway (Envoy) and its VirtualService sync → KLM stand-in
(its listener registered as ``klm-controller-manager-events.kcp-system:8082``) → SKR
fleet (certificates, webhook processes, webhook configurations) → Watcher controller,
whose Watcher changes re-render every SKR's configuration at once → Kymas → KLM's
default Watcher. ``AsyncExitStack`` unwinds in reverse, also when a step fails.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import ensure_binaries
from harness.clusters.plane import Environment as Clusters
from harness.clusters.plane import LocalBackend
from harness.errors import HarnessError
from harness.kcp.gateway import EnvoyGateway
from harness.kcp.gateway_sync import ServiceRegistry, VirtualServiceSync
from harness.kcp.lifecycle_manager import LifecycleManager, RequeueIntervals
from harness.kcp.watcher_controller import WatcherController
from harness.kube import (
    GATEWAYS,
    KYMAS,
    VIRTUAL_SERVICES,
    WATCHERS,
    apply_crds,
    create_or_replace,
    ensure_namespace,
    get,
    request,
)
from harness.skr.certs import CertificateOverride
from harness.skr.fleet import SkrFleet
from harness.skr.install import SkrInstallation
from watcher import pki
from watcher.listener import Listener, ListenerConfig
from watcher.render.envoy import TlsFiles
from watcher.render.virtualservice import gateway_dict
from watcher.render.watcher_cr import klm_watcher_dict

CRD_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
KCP_NAMESPACE = "kcp-system"
SKR_NAMESPACE = "kyma-system"
RUNTIME_ID_LABEL = "kyma-project.io/runtime-id"
WATCHED_BY_LABEL = "operator.kyma-project.io/watched-by"
MANAGED_BY_LABEL = "operator.kyma-project.io/managed-by"
SKR_DOMAIN_ANNOTATION = "skr-domain"
KLM_SERVICE = ("klm-controller-manager-events", KCP_NAMESPACE, 8082)


@dataclass(frozen=True)
class SkrSpec:
    """One SKR: its cluster name, identity and (for negative tests) certificate override."""

    name: str
    runtime_id: str
    skr_domain: str
    certificate: CertificateOverride = field(default_factory=CertificateOverride)

    @property
    def kyma_name(self) -> str:
        return f"kyma-{self.name}"


@dataclass(frozen=True)
class EnvironmentSpec:
    skrs: tuple[SkrSpec, ...] = (
        SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),
        SkrSpec("skr-b", "runtime-b", "skr-b.kyma.example.com"),
    )
    pin_san: bool = True
    delivery_mode: str = "async"
    intervals: RequeueIntervals = field(default_factory=RequeueIntervals)
    log_dir: Path | None = None


@dataclass
class WatcherEnvironment:
    """Handles to every running part, for flows and tests."""

    spec: EnvironmentSpec
    clusters: Clusters
    kcp_api: ApiClient
    skr_apis: dict[str, ApiClient]
    ca: pki.CertificateAuthority
    gateway: EnvoyGateway
    registry: ServiceRegistry
    sync: VirtualServiceSync
    klm: LifecycleManager
    fleet: SkrFleet
    controller: WatcherController
    workdir: Path
    stack: AsyncExitStack

    def skr(self, name: str) -> SkrSpec:
        return next(s for s in self.spec.skrs if s.name == name)

    async def add_listener(self, component: str, service: tuple[str, str, int]) -> Listener:
        """Another manager's listener behind the gateway (XFCC identity), registered as
        ``service`` so a Watcher's ``serviceInfo`` routes to it. Stopped with the env."""
        listener = Listener(ListenerConfig(component=component, identity="xfcc"))
        await self.stack.enter_async_context(listener)
        self.registry.register(service[0], service[1], service[2], ("127.0.0.1", listener.port))
        return listener

    async def apply_watcher(self, obj: dict[str, Any]) -> None:
        await create_or_replace(self.kcp_api, WATCHERS, obj)

    async def wait_watchers_applied(self, names: Sequence[str], within: float = 15.0) -> None:
        """Until the controller reports exactly ``names`` valid and every SKR is rewired."""
        wanted = sorted(names)
        async with asyncio.timeout(within):
            while True:
                fleet_names = sorted(f"{w.namespace}/{w.name}" for w in self.fleet.watchers)
                ctl_names = sorted(f"{w.namespace}/{w.name}" for w in self.controller.watchers())
                if fleet_names == wanted and ctl_names == wanted:
                    return
                await asyncio.sleep(0.02)

    async def wait_wired(self, within: float = 15.0) -> None:
        """Until every SKR API server calls its webhook for the SKR Kyma.

        A new ValidatingWebhookConfiguration reaches the API server's admission chain
        through an informer, a moment after the write; dry-run writes probe it without
        changing anything, and the webhook's admission counter proves it was called.
        """
        async with asyncio.timeout(within):
            for inst in self.fleet:
                api = self.skr_apis[inst.cluster.name]
                before = await inst.metric("watcher_admission_request_total")
                probe = 0
                while await inst.metric("watcher_admission_request_total") <= before:
                    probe += 1
                    await request(
                        api,
                        "PATCH",
                        KYMAS.path(SKR_NAMESPACE, "default"),
                        query=[("dryRun", "All")],
                        body={"metadata": {"annotations": {"harness/probe": str(probe)}}},
                        content_type="application/merge-patch+json",
                    )
                    await asyncio.sleep(0.05)

    async def wait_route(
        self, name: str, namespace: str, *, present: bool, within: float = 15.0
    ) -> None:
        """Until the VirtualService exists (or not) in KCP and Envoy confirmed that route."""
        route = f"{namespace}/{name}"
        async with asyncio.timeout(within):
            while True:
                vs = await get(self.kcp_api, VIRTUAL_SERVICES, name, namespace)
                config = self.gateway.config
                routed = config is not None and f'"{route}"' in json.dumps(config.rds())
                if (vs is not None) == present and routed == present:
                    return
                await asyncio.sleep(0.05)


async def _create_kymas(env: WatcherEnvironment) -> None:
    await ensure_namespace(env.kcp_api, KCP_NAMESPACE)
    for skr in env.spec.skrs:
        await create_or_replace(
            env.kcp_api,
            KYMAS,
            {
                "apiVersion": "operator.kyma-project.io/v1beta2",
                "kind": "Kyma",
                "metadata": {
                    "name": skr.kyma_name,
                    "namespace": KCP_NAMESPACE,
                    "labels": {RUNTIME_ID_LABEL: skr.runtime_id},
                    "annotations": {SKR_DOMAIN_ANNOTATION: skr.skr_domain},
                },
                "spec": {"channel": "regular"},
            },
        )
        skr_api = env.skr_apis[skr.name]
        await ensure_namespace(skr_api, SKR_NAMESPACE)
        await create_or_replace(
            skr_api,
            KYMAS,
            {
                "apiVersion": "operator.kyma-project.io/v1beta2",
                "kind": "Kyma",
                "metadata": {
                    "name": "default",
                    "namespace": SKR_NAMESPACE,
                    "labels": {
                        WATCHED_BY_LABEL: "kyma",
                        MANAGED_BY_LABEL: "kyma",
                        RUNTIME_ID_LABEL: skr.runtime_id,
                    },
                },
                "spec": {"channel": "regular"},
            },
        )


@asynccontextmanager
async def watcher_environment(
    spec: EnvironmentSpec | None = None,
) -> AsyncIterator[WatcherEnvironment]:
    """Bring everything up; yield handles; tear everything down (also on failure)."""
    spec = spec or EnvironmentSpec()
    async with AsyncExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="watcher-env-")))
        backend = LocalBackend(ensure_binaries(), log_dir=spec.log_dir)
        clusters = await stack.enter_async_context(
            backend.start(["kcp", *(s.name for s in spec.skrs)])
        )
        kcp_api = await stack.enter_async_context(clusters["kcp"].api_client())
        skr_apis = {
            s.name: await stack.enter_async_context(clusters[s.name].api_client())
            for s in spec.skrs
        }
        crd_files = [CRD_DIR / f"{n}.yaml" for n in ("watcher", "kyma", "istio")]
        await asyncio.gather(
            apply_crds(kcp_api, crd_files),
            *(apply_crds(api, [CRD_DIR / "kyma.yaml"]) for api in skr_apis.values()),
        )

        ca = pki.create_ca()
        gw_dir = workdir / "gateway"
        gw_dir.mkdir()
        gw_cert = pki.issue_server_certificate(ca, "kcp-gateway", dns_names=["localhost"])
        files = pki.write_secret_files(gw_dir, pki.secret_data(gw_cert, ca.cert_pem))
        gateway = await stack.enter_async_context(
            EnvoyGateway(
                TlsFiles(str(files["tls.crt"]), str(files["tls.key"]), str(files["ca.crt"])),
                log_dir=spec.log_dir,
            )
        )
        registry = ServiceRegistry()
        sync = await stack.enter_async_context(VirtualServiceSync(kcp_api, gateway, registry))
        await ensure_namespace(kcp_api, KCP_NAMESPACE)
        await create_or_replace(kcp_api, GATEWAYS, gateway_dict())

        klm_listener = ListenerConfig(component="lifecycle-manager", identity="xfcc")
        klm = await stack.enter_async_context(
            LifecycleManager(
                kcp_api,
                listener_config=klm_listener,
                pin_san=spec.pin_san,
                intervals=spec.intervals,
            )
        )
        if klm.listener is None:
            raise HarnessError("the KLM stand-in started without its listener")
        registry.register(*KLM_SERVICE, ("127.0.0.1", klm.listener.port))

        fleet = await stack.enter_async_context(
            SkrFleet(
                SkrInstallation(
                    clusters[s.name],
                    runtime_id=s.runtime_id,
                    skr_domain=s.skr_domain,
                    ca=ca,
                    ca_bundle_pem=ca.cert_pem,
                    kcp_addr=f"127.0.0.1:{gateway.port}",
                    delivery_mode=spec.delivery_mode,  # type: ignore[arg-type]
                    certificate=s.certificate,
                    log_level="WARNING",
                    log_dir=spec.log_dir,
                )
                for s in spec.skrs
            )
        )
        controller = WatcherController(kcp_api)
        controller.on_change.append(fleet.apply_watchers)
        await stack.enter_async_context(controller)
        env = WatcherEnvironment(
            spec,
            clusters,
            kcp_api,
            skr_apis,
            ca,
            gateway,
            registry,
            sync,
            klm,
            fleet,
            controller,
            workdir,
            stack,
        )
        await _create_kymas(env)
        await env.apply_watcher(klm_watcher_dict())
        await env.wait_watchers_applied([f"{KCP_NAMESPACE}/klm-watcher"])
        await env.wait_route("klm-watcher", KCP_NAMESPACE, present=True)
        await env.wait_wired()
        yield env
