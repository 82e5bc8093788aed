"""Bringing the whole flow up on one machine, and down again in reverse.

Start order follows the data flow backwards, so every part finds its target running:
clusters and CRDs → the KCP and mesh CAs → gateway and Istio's controllers → KLM, set up
as upstream's ``cmd/main.go`` → the listeners → the SKR fleet → the Kymas and the spec's
Watchers in the order of ``spec.watcher_rollout``. ``AsyncExitStack`` unwinds in reverse,
also when a step fails.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from harness.clusters.backends import open_backend
from harness.clusters.plane import ClusterBackend
from harness.clusters.plane import Environment as Clusters
from harness.environment.core import WatcherEnvironment
from harness.environment.hosting import extra_san, gateway_listen_address, resolve_host_address
from harness.environment.rotation import CertificateRotation, issue_gateway_certificate
from harness.environment.spec import EnvironmentSpec
from harness.environment.startup import (
    KCP_CRDS,
    istio_control_plane,
    klm_options,
    roll_out,
    setup_health,
    setup_skr_webhooks,
    skr_fleet,
    start_listeners,
    start_preparing,
)
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.klm_log import ReconcileHistory
from harness.kcp.lifecycle_manager.certificates.gateway_secret import GatewaySecretManager
from harness.kcp.lifecycle_manager.kyma.reconcile import SKR_CRDS, KymaReconcile
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.manifest_controller import setup_manifest_controller
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.watcher_controller import setup_watcher_controller
from watcher import pki
from watcher.domain import ISTIO_NAMESPACE, KCP_NAMESPACE, SKR_NAMESPACE
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


async def start_gateway(
    stack: AsyncExitStack, spec: EnvironmentSpec, workdir: Path, kcp_api: ApiClient, host: str
) -> tuple[GatewaySecretManager, EnvoyGateway, dict[str, bytes], GatewayMesh | None]:
    """KLM's CA and gateway Secret (the serving certificate adds ``host``); Envoy serving
    them, as KLM's Gateway; what it was started with; the gateway → listener mesh
    (``spec.upstream_mtls``)."""
    san = extra_san(host)
    serving = lambda ca: issue_gateway_certificate(ca, san)  # noqa: E731
    cas = await stack.enter_async_context(
        GatewaySecretManager(kcp_api, server_certificate=serving, timings=spec.certificates)
    )
    served = pki.secret_data(cas.server_certificate, cas.bundle_pem)
    (workdir / "gateway").mkdir()
    files = pki.write_secret_files(workdir / "gateway", served)
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
    return cas, gateway, served, mesh


@asynccontextmanager
async def watcher_environment(
    spec: EnvironmentSpec | None = None,
) -> AsyncIterator[WatcherEnvironment]:
    """Bring everything up; yield handles; tear everything down (also on failure)."""
    spec = spec or EnvironmentSpec()
    async with AsyncExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="watcher-env-")))
        backend, clusters, kcp_api, skr_apis = await open_clusters(stack, spec)
        prepared = await start_preparing(stack, kcp_api, skr_apis)
        host_address = await resolve_host_address(spec, backend)
        cas, gateway, served, mesh = await start_gateway(
            stack, spec, workdir, kcp_api, host_address
        )
        istio, credential, sync, registry = istio_control_plane(kcp_api, gateway, served)
        await stack.enter_async_context(istio)
        cas.confirm = credential.wait_trusted
        skrs = SkrClients(kcp_api)
        stack.push_async_callback(skrs.aclose)
        metrics, history = KlmMetrics(), ReconcileHistory()
        fleet, certs, overrides = await skr_fleet(
            spec, clusters, kcp_api, cas, metrics, gateway.port, host_address
        )

        # As KLM's cmd/main.go: the manager with its Kyma controller, the others one line each.
        klm = LifecycleManager(kcp_api, **klm_options(spec, metrics, mesh, history, stack))
        controller = setup_watcher_controller(klm)
        webhooks = setup_skr_webhooks(spec, certs, gateway, controller, fleet)
        klm.reconcile = kyma = KymaReconcile(kcp_api, skrs, watcher=webhooks)
        setup_manifest_controller(klm, klm.reconciler, ready_after=spec.manifest_ready_after)
        kyma.health = health = setup_health(spec, klm, skrs, mesh)
        await stack.enter_async_context(klm)

        kymas = {s.name: s.kyma_name for s in spec.skrs}
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
            rotation=CertificateRotation(cas, certs, klm, fleet, kymas, overrides=overrides),
            workdir=workdir,
            stack=stack,
            mesh=mesh,
            health=health,
            reconciles=history,
        )
        await start_listeners(env)
        await stack.enter_async_context(fleet)
        await prepared
        await roll_out(env)
        yield env


__all__ = ["watcher_environment"]
