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
import dataclasses
import json
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
    in_cluster,
    resolve_host_address,
    skr_installation,
)
from harness.environment.provisioning import provision, wait_kymas_ready
from harness.environment.reconcile_log import capture_reconciles
from harness.environment.rotation import CertificateRotation, issue_gateway_certificate
from harness.environment.spec import KLM_COMPONENT, KLM_SERVICE, EnvironmentSpec
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
from harness.kcp.lifecycle_manager.skr_webhook import SkrWebhook, SkrWebhookManager
from harness.kcp.lifecycle_manager.watcher_controller import WatcherController, valid_watcher
from harness.kcp.lifecycle_manager.watcher_health import SERVICE as HEALTH_SERVICE
from harness.kcp.lifecycle_manager.watcher_health import WatcherHealth
from harness.kube import (
    GATEWAYS,
    WATCHERS,
    create_or_replace,
    ensure_namespace,
)
from harness.kube.crds import apply_crds, wait_creatable
from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from harness.skr.fleet import SkrFleet
from watcher import pki
from watcher.domain import (
    ISTIO_NAMESPACE,
    KCP_NAMESPACE,
    SKR_NAMESPACE,
)
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER
from watcher.health.metrics import HealthMetrics
from watcher.listener import ListenerConfig, san_pinning
from watcher.render.envoy import ClusterSettings, TlsFiles
from watcher.render.virtualservice import gateway_dict
from watcher.render.watcher_cr import Watcher

logger = logging.getLogger("harness.environment")

CRD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "crds"


async def _provision_kymas(env: WatcherEnvironment, within: float = 30.0) -> None:
    """What provisioning writes (the catalog; per SKR the kubeconfig Secret, then the KCP
    Kyma). The Lifecycle Manager takes it from there (SKR CRDs, SKR Kyma, status); wait
    until every Kyma is Ready, so a scenario starts from reconciled Kymas."""
    kymas = await provision(env.kcp_api, env.spec, env.clusters)
    await wait_kymas_ready(env.kcp_api, kymas, within)


KCP_CRDS = [CRD_DIR / f"{n}.yaml" for n in ("watcher", "kyma", "istio", "catalog", "manifest")]
"""The custom resources the KCP serves (KLM's, Istio's); the SKRs get SKR_CRDS."""


async def _prepare_api_servers(kcp_api: ApiClient, crds: Mapping[ApiClient, Sequence[str]]) -> None:
    """Until creating custom resources no longer sleeps in any cluster
    (:func:`~harness.kube.crds.wait_creatable`: up to 2 s after the CRDs became
    Established), then KLM's Istio Gateway ``kcp-system/klm-watcher`` (what Watchers'
    routes attach to)."""
    await ensure_namespace(kcp_api, KCP_NAMESPACE)
    await asyncio.gather(*(wait_creatable(api, names) for api, names in crds.items()))
    await create_or_replace(kcp_api, GATEWAYS, gateway_dict())


def _certificate_issuer(
    spec: EnvironmentSpec, host_address: str, overrides: Mapping[str, CertificateOverride]
) -> Callable[[pki.CertificateAuthority, str, str, str], pki.Issued]:
    """How KLM issues each Kyma's certificate here: KLM's SANs plus what this host's API
    servers dial (a host-run webhook serves it), with the Kyma's fault override (from the
    spec, or a ``break-leaf`` fault since) applied."""
    address = None if in_cluster(spec) else host_address

    def issue(
        ca: pki.CertificateAuthority, kyma: str, runtime_id: str, skr_domain: str
    ) -> pki.Issued:
        override = overrides.get(kyma, CertificateOverride())
        return issue_webhook_certificate(ca, runtime_id, skr_domain, override, host_address=address)

    return issue


def _skr_webhooks(spec: EnvironmentSpec, fleet: SkrFleet) -> Callable[[str], SkrWebhook | None]:
    """Runtime id → the installation of its SKR (None: no SKR of this environment)."""
    clusters = {s.runtime_id: s.name for s in spec.skrs}

    def target(runtime_id: str) -> SkrWebhook | None:
        cluster = clusters.get(runtime_id)
        return fleet[cluster] if cluster is not None else None

    return target


def _routed(gateway: EnvoyGateway, watchers: list[Watcher]) -> list[Watcher]:
    """The ``watchers`` the gateway routes already (an SKR wired for a Watcher before its
    route is live would send events into Envoy's catch-all 404)."""
    config = gateway.config
    if config is None:
        return []
    rds = json.dumps(config.rds())
    return [w for w in watchers if f'"{w.namespace}/{w.name}"' in rds]


def _wire_after_routes(
    gateway: EnvoyGateway, fleet: SkrFleet, within: float = 10.0
) -> Callable[[list[Watcher]], Awaitable[None]]:
    """Make before break: rewire the SKRs only once the gateway routes every Watcher.

    The controller creates a VirtualService and the gateway sync swaps it into Envoy a
    moment later; an SKR wired earlier would send events that meet Envoy's catch-all 404,
    which the webhook rightly treats as final. Removal goes the other way round (the
    controller deletes the route only after this callback ran without the Watcher).
    """

    def routed(watchers: list[Watcher]) -> bool:
        return len(_routed(gateway, watchers)) == len(watchers)

    async def wire(watchers: list[Watcher]) -> None:
        try:
            async with asyncio.timeout(within):
                while not routed(watchers):  # noqa: ASYNC110 - set by the sync task
                    await asyncio.sleep(0.01)  # the route arrives by file swap, ms later
        except TimeoutError:
            logger.warning(
                "routes for %d Watcher(s) not all live after %g s; wiring anyway",
                len(watchers),
                within,
            )
        await fleet.apply_watchers(watchers)

    return wire


async def _apply_watchers(env: WatcherEnvironment) -> None:
    """Apply the spec's Watchers; wait until the valid ones are routed (and, rolled out
    immediately, wired)."""
    valid = []
    for obj in env.spec.all_watchers:
        await ensure_namespace(env.kcp_api, obj["metadata"]["namespace"])
        await create_or_replace(env.kcp_api, WATCHERS, dict(obj))
        if valid_watcher(obj) is not None:
            valid.append(obj["metadata"])
    await env.wait_watchers_applied([f"{m['namespace']}/{m['name']}" for m in valid], within=30)
    await asyncio.gather(
        *(env.wait_route(m["name"], m["namespace"], present=True, within=30) for m in valid)
    )
    await env.wait_wired(within=30)


async def _start_health(
    spec: EnvironmentSpec,
    stack: AsyncExitStack,
    klm: LifecycleManager,
    skr_clients: SkrClients,
    registry: ServiceRegistry,
    mesh: GatewayMesh | None,
    metrics: KlmMetrics,
) -> WatcherHealth | None:
    """With ``spec.health``: KLM's watcher health — its listener behind the gateway as
    ``watcher-health-events.kcp-system:8083`` (SAN pinning as KLM's own listener), its
    metrics in KLM's registry (scenario target ``klm``). The ``watcher-health`` Watcher
    is applied with the spec's (:attr:`EnvironmentSpec.all_watchers`)."""
    if spec.health is None:
        return None
    name, namespace, _ = HEALTH_SERVICE
    config = (
        mesh.listener_config(HEALTH_MANAGER, (name, namespace))
        if mesh is not None
        else ListenerConfig(component=HEALTH_MANAGER, identity="xfcc")
    )
    if spec.pin_san:
        hooks = (*config.verify_hooks, san_pinning(klm.cache.lookup))
        config = dataclasses.replace(config, verify_hooks=hooks)
    health = await stack.enter_async_context(
        WatcherHealth(
            skr_clients,
            klm.reconciler,
            policy=spec.health,
            listener_config=config,
            metrics=HealthMetrics(metrics.registry),
        )
    )
    registry.register(*HEALTH_SERVICE, ("127.0.0.1", health.host.port))
    return health


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
        prepared = spawn(_prepare_api_servers(kcp_api, crds), "prepare-api-servers")
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
            issue=_certificate_issuer(spec, host_address, overrides),
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
            watchers=lambda: _routed(gateway, controller.watchers()),
            target=_skr_webhooks(spec, fleet),
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
        health = await _start_health(spec, stack, klm, skr_clients, registry, mesh, metrics)
        reconcile.health = health

        await stack.enter_async_context(fleet)
        if spec.watcher_rollout == "immediate":
            controller.on_change.append(_wire_after_routes(gateway, fleet))
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
            await _apply_watchers(env)

        if spec.watcher_rollout == "reconcile":  # the Kymas' first reconciles wire them
            await start_watchers()
            await _provision_kymas(env)
            await env.wait_wired(within=30)
        else:
            await _provision_kymas(env)
            await start_watchers()
        yield env


__all__ = ["watcher_environment"]
