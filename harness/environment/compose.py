"""Bringing the whole flow up on one machine, and down again in reverse.

Start order follows the data flow backwards, so every part finds its target running:
clusters → CRDs → KCP CA and mesh CA (gateway → listener mTLS, ``harness.kcp.gateway.mesh``) →
gateway (Envoy) and its VirtualService sync → KLM stand-in
(its listener registered as ``klm-controller-manager-events.kcp-system:8082``) and the
spec's extra listeners → SKR fleet (certificates, webhook processes — or in-cluster
Deployments, ``harness.environment.hosting`` —, webhook configurations) → Watcher
controller, whose Watcher changes re-render every SKR's configuration at once → Kymas
(kubeconfig Secret and KCP Kyma per SKR, as provisioning writes them; the Lifecycle
Manager creates the SKR Kymas; Ready awaited) → the spec's Watchers (routes and wiring
awaited).
``AsyncExitStack`` unwinds in reverse, also when a step fails.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from harness.aio import spawn, stop_tasks
from harness.clusters.backends import open_backend
from harness.clusters.plane import ClusterBackend
from harness.clusters.plane import Environment as Clusters
from harness.environment.core import WatcherEnvironment
from harness.environment.hosting import (
    extra_san,
    gateway_listen_address,
    resolve_host_address,
    skr_installation,
)
from harness.environment.reconcile_log import capture_reconciles
from harness.environment.rotation import CertificateRotation, issue_gateway_certificate
from harness.environment.spec import KLM_COMPONENT, KLM_SERVICE, EnvironmentSpec
from harness.environment.startup import (
    KCP_CRDS,
    apply_watchers,
    certificate_issuer,
    prepare_api_servers,
    provision_kymas,
    routed_watchers,
    skr_webhook_target,
    start_health,
    wire_after_routes,
)
from harness.errors import HarnessError
from harness.kcp.gateway.credential import GatewayCredentialSync
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.gateway.routes import ServiceRegistry, VirtualServiceSync
from harness.kcp.klm_log import ReconcileHistory
from harness.kcp.lifecycle_manager.certificates.client import KymaCertificates
from harness.kcp.lifecycle_manager.certificates.gateway_secret import GatewaySecretManager
from harness.kcp.lifecycle_manager.kyma.reconcile import SKR_CRDS, KymaReconcile
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.manifest_controller import ManifestController
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.queue.reconciler import logger as reconciler_logger
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kcp.lifecycle_manager.skr_webhook import SkrWebhookManager
from harness.kcp.lifecycle_manager.watcher_controller import WatcherController
from harness.kube.crds import apply_crds
from harness.skr.fleet import SkrFleet
from watcher import pki
from watcher.domain import (
    ISTIO_NAMESPACE,
    KCP_NAMESPACE,
    SKR_NAMESPACE,
)
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER
from watcher.listener import ListenerConfig
from watcher.render.envoy import ClusterSettings, TlsFiles

logger = logging.getLogger("harness.environment")


async def open_clusters(
    stack: AsyncExitStack, spec: EnvironmentSpec
) -> tuple[ClusterBackend, Clusters, ApiClient, dict[str, ApiClient]]:
    """The spec's backend started with the KCP and one cluster per SKR (closed by
    ``stack``), and an API client for each."""
    backend = open_backend(
        spec.backend,
        log_dir=spec.log_dir,
        namespaces={
            "kcp": [KCP_NAMESPACE, ISTIO_NAMESPACE],
            **{s.name: [SKR_NAMESPACE] for s in spec.skrs},
        },
        crds={"kcp": KCP_CRDS, **{s.name: SKR_CRDS for s in spec.skrs}},
    )
    clusters = await stack.enter_async_context(backend.start(["kcp", *(s.name for s in spec.skrs)]))
    kcp_api = await stack.enter_async_context(clusters["kcp"].api_client())
    skr_apis = {
        s.name: await stack.enter_async_context(clusters[s.name].api_client()) for s in spec.skrs
    }
    return backend, clusters, kcp_api, skr_apis


@asynccontextmanager
async def watcher_environment(
    spec: EnvironmentSpec | None = None,
) -> AsyncIterator[WatcherEnvironment]:
    """Bring everything up; yield handles; tear everything down (also on failure)."""
    spec = spec or EnvironmentSpec()
    async with AsyncExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="watcher-env-")))
        backend, clusters, kcp_api, skr_apis = await open_clusters(stack, spec)
        # The SKRs get the Kyma and catalog CRDs now, as KLM's first contact would:
        # kube-apiserver holds creates of a new CRD's objects for 2 s, which pass while
        # the rest starts instead of in each SKR's first reconcile (one after another).
        applied = await asyncio.gather(
            apply_crds(kcp_api, KCP_CRDS),
            *(apply_crds(api, SKR_CRDS) for api in skr_apis.values()),
        )
        crds = dict(zip([kcp_api, *skr_apis.values()], applied, strict=True))
        # While the rest starts: the new types' first-write wait, then KLM's Gateway (the
        # Kymas and the Watcher controller need both; awaited below).
        prepared = spawn(prepare_api_servers(kcp_api, crds), "prepare-api-servers")
        stack.push_async_callback(stop_tasks, [prepared])

        host_address = await resolve_host_address(spec, backend)
        gateway_san = extra_san(host_address)
        cas = await stack.enter_async_context(
            GatewaySecretManager(
                kcp_api,
                server_certificate=lambda ca: issue_gateway_certificate(ca, gateway_san),
                timings=spec.certificates,
            )
        )
        gw_dir = workdir / "gateway"
        gw_dir.mkdir()
        served = pki.secret_data(cas.server_certificate, cas.bundle_pem)
        files = pki.write_secret_files(gw_dir, served)
        mesh = GatewayMesh.create(workdir / "mesh") if spec.upstream_mtls else None
        gateway = await stack.enter_async_context(
            EnvoyGateway(
                TlsFiles(str(files["tls.crt"]), str(files["tls.key"]), str(files["ca.crt"])),
                log_dir=spec.log_dir,
                cluster_settings=ClusterSettings(
                    upstream_tls=mesh.upstream_tls() if mesh is not None else None
                ),
                listen_address=gateway_listen_address(spec),
            )
        )
        credential = await stack.enter_async_context(
            GatewayCredentialSync(kcp_api, gateway, applied=served)
        )
        cas.confirm = credential.wait_trusted
        registry = ServiceRegistry()
        sync = await stack.enter_async_context(VirtualServiceSync(kcp_api, gateway, registry))

        skr_clients = SkrClients(kcp_api)
        stack.push_async_callback(skr_clients.aclose)
        metrics = KlmMetrics()
        overrides = {s.kyma_name: s.certificate for s in spec.skrs if not s.certificate.is_default}
        certificates = KymaCertificates(
            kcp_api,
            cas,
            issue=certificate_issuer(spec, host_address, overrides),
            pinned=[s.kyma_name for s in spec.skrs if not s.certificate.is_default],
            metrics=metrics,
        )
        # KLM issues each runtime's certificate (KCP Secret <kyma>-webhook-tls) before the
        # webhook starts with it, as provisioning precedes the first reconcile. The fleet
        # is built now, for KLM to reach it; it starts after KLM (its listener first).
        issued = await asyncio.gather(
            *(certificates.ensure(s.kyma_name, s.runtime_id, s.skr_domain) for s in spec.skrs)
        )
        fleet = SkrFleet(
            skr_installation(
                spec,
                s,
                clusters[s.name],
                ca=cas.issuing_ca,
                leaf=cert.issued,
                ca_bundle_pem=cert.ca_bundle_pem,
                gateway_port=gateway.port,
                host_address=host_address,
            )
            for s, cert in zip(spec.skrs, issued, strict=True)
        )
        controller = WatcherController(kcp_api)
        skr_webhooks = SkrWebhookManager(
            certificates,
            watchers=lambda: routed_watchers(gateway, controller.watchers()),
            target=skr_webhook_target(spec, fleet),
        )
        reconcile = KymaReconcile(kcp_api, skr_clients, watcher=skr_webhooks)
        reconcile_history = ReconcileHistory()
        reconcile_log, release = capture_reconciles(reconcile_history, reconciler_logger.name)
        stack.callback(release)
        klm = await stack.enter_async_context(
            LifecycleManager(
                kcp_api,
                reconcile=reconcile,
                metrics=metrics,
                workers=spec.klm_workers,
                listener_config=(
                    mesh.listener_config(KLM_COMPONENT, KLM_SERVICE[:2])
                    if mesh is not None
                    else ListenerConfig(component=KLM_COMPONENT, identity="xfcc")
                ),
                pin_san=spec.pin_san,
                intervals=spec.intervals,
                reconcile_log=reconcile_log,
            )
        )
        if klm.host is None:
            raise HarnessError("the KLM stand-in started without its listener")
        await stack.enter_async_context(
            ManifestController(
                kcp_api,
                ready_after=spec.manifest_ready_after,
                on_change=lambda key: klm.reconciler.enqueue(key, Trigger.MANIFEST_CHANGED),
            )
        )
        registry.register(*KLM_SERVICE, ("127.0.0.1", klm.host.port))
        health = await start_health(spec, stack, klm, skr_clients, registry, mesh, metrics)
        reconcile.health = health

        await stack.enter_async_context(fleet)
        if spec.watcher_rollout == "immediate":
            controller.on_change.append(wire_after_routes(gateway, fleet))
        env = WatcherEnvironment(
            spec=spec,
            clusters=clusters,
            kcp_api=kcp_api,
            skr_apis=skr_apis,
            gateway=gateway,
            registry=registry,
            sync=sync,
            klm=klm,
            fleet=fleet,
            controller=controller,
            rotation=CertificateRotation(
                cas,
                certificates,
                klm,
                fleet,
                {s.name: s.kyma_name for s in spec.skrs},
                overrides=overrides,
            ),
            workdir=workdir,
            stack=stack,
            mesh=mesh,
            health=health,
            reconciles=reconcile_history,
        )
        env.listeners[KLM_COMPONENT] = klm.host
        if health is not None:
            env.listeners[HEALTH_MANAGER] = health.host
        klm.observers.append(env.log.recorder(KLM_COMPONENT))
        for listener in spec.listeners:
            await env.add_listener(listener.component, listener.service, listener.implementation)

        await prepared

        async def start_watchers() -> None:
            await stack.enter_async_context(controller)
            await apply_watchers(env)

        if spec.watcher_rollout == "reconcile":  # the Kymas' first reconciles wire them
            await start_watchers()
            await provision_kymas(env)
            await env.wait_wired(within=30)
        else:
            await provision_kymas(env)
            await start_watchers()
        yield env


__all__ = ["watcher_environment"]
