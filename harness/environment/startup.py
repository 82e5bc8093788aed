"""The start-up steps :func:`~harness.environment.compose.watcher_environment` composes:
the CRDs each cluster serves and the wait until their objects can be created, KLM's CA
and the certificates it issues, Istio's controllers, KLM's flags and the setups of its
SKR webhook and watcher health, the listeners, the Watchers applied and wired, the Kymas
provisioned."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.aio import spawn, stop_tasks
from harness.clusters.plane import Environment as Clusters
from harness.environment.core import WatcherEnvironment
from harness.environment.hosting import in_cluster, skr_installation
from harness.environment.parts import behind_gateway
from harness.environment.provisioning import provision, wait_kymas_ready
from harness.environment.reconcile_log import capture_reconciles
from harness.environment.spec import KLM_COMPONENT, KLM_SERVICE, EnvironmentSpec
from harness.errors import HarnessError
from harness.kcp.gateway.credential import GatewayCredentialSync, setup_credential_sync
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.gateway.routes import ServiceRegistry, VirtualServiceSync, setup_route_sync
from harness.kcp.klm_log import ReconcileHistory
from harness.kcp.lifecycle_manager.certificates.client import KymaCertificates
from harness.kcp.lifecycle_manager.certificates.gateway_secret import GatewaySecretManager
from harness.kcp.lifecycle_manager.kyma.reconcile import SKR_CRDS
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.queue.reconciler import logger as reconciler_logger
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from harness.kcp.lifecycle_manager.skr_webhook import SkrWebhook, SkrWebhookManager
from harness.kcp.lifecycle_manager.watcher_controller import WatcherController, valid_watcher
from harness.kcp.lifecycle_manager.watcher_health import SERVICE as HEALTH_SERVICE
from harness.kcp.lifecycle_manager.watcher_health import WatcherHealth, setup_watcher_health
from harness.kube import GATEWAYS, WATCHERS, create_or_replace, ensure_namespace
from harness.kube.crds import apply_crds, wait_creatable
from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from harness.skr.fleet import SkrFleet
from watcher import pki
from watcher.domain import KCP_NAMESPACE
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER
from watcher.health.metrics import HealthMetrics
from watcher.listener import san_pinning
from watcher.render.virtualservice import gateway_dict
from watcher.render.watcher_cr import Watcher

logger = logging.getLogger("harness.environment")

CRD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "crds"


KCP_CRDS = [CRD_DIR / f"{n}.yaml" for n in ("watcher", "kyma", "istio", "catalog", "manifest")]
"""The custom resources the KCP serves (KLM's, Istio's); the SKRs get SKR_CRDS."""


def routed_watchers(gateway: EnvoyGateway, watchers: list[Watcher]) -> list[Watcher]:
    """The ``watchers`` the gateway routes already (an SKR wired for a Watcher before its
    route is live would send events into Envoy's catch-all 404)."""
    config = gateway.config
    if config is None:
        return []
    rds = json.dumps(config.rds())
    return [w for w in watchers if f'"{w.namespace}/{w.name}"' in rds]


def wire_after_routes(
    gateway: EnvoyGateway, fleet: SkrFleet, within: float = 10.0
) -> Callable[[list[Watcher]], Awaitable[None]]:
    """Make before break: rewire the SKRs only once the gateway routes every Watcher.

    The controller creates a VirtualService and the gateway sync swaps it into Envoy a
    moment later; an SKR wired earlier would send events that meet Envoy's catch-all 404,
    which the webhook rightly treats as final. Removal goes the other way round (the
    controller deletes the route only after this callback ran without the Watcher).
    """

    def all_routed(watchers: list[Watcher]) -> bool:
        return len(routed_watchers(gateway, watchers)) == len(watchers)

    async def wire(watchers: list[Watcher]) -> None:
        try:
            async with asyncio.timeout(within):
                while not all_routed(watchers):  # noqa: ASYNC110 - set by the sync task
                    await asyncio.sleep(0.01)  # the route arrives by file swap, ms later
        except TimeoutError:
            logger.warning(
                "routes for %d Watcher(s) not all live after %g s; wiring anyway",
                len(watchers),
                within,
            )
        await fleet.apply_watchers(watchers)

    return wire


async def apply_watchers(env: WatcherEnvironment) -> None:
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


async def start_preparing(
    stack: AsyncExitStack, kcp_api: ApiClient, skr_apis: Mapping[str, ApiClient]
) -> asyncio.Task[None]:
    """The CRDs applied in every cluster, and the task that waits until their objects can
    be created (:func:`~harness.kube.crds.wait_creatable`: up to 2 s after the CRDs became
    Established) and creates KLM's Gateway (awaited before the Watchers go in).

    The SKRs get the Kyma and catalog CRDs now, as KLM's first contact would:
    kube-apiserver holds creates of a new CRD's objects for 2 s, which pass while the rest
    starts instead of in each SKR's first reconcile (one after another)."""
    applied = await asyncio.gather(
        apply_crds(kcp_api, KCP_CRDS), *(apply_crds(api, SKR_CRDS) for api in skr_apis.values())
    )

    async def prepare() -> None:  # then KLM's Gateway ``kcp-system/klm-watcher``
        await ensure_namespace(kcp_api, KCP_NAMESPACE)
        apis = zip([kcp_api, *skr_apis.values()], applied, strict=True)
        await asyncio.gather(*(wait_creatable(api, crds) for api, crds in apis))
        await create_or_replace(kcp_api, GATEWAYS, gateway_dict())

    prepared = spawn(prepare(), "prepare-api-servers")
    stack.push_async_callback(stop_tasks, [prepared])
    return prepared


def istio_control_plane(
    kcp_api: ApiClient, gateway: EnvoyGateway, served: Mapping[str, bytes]
) -> tuple[ControllerRuntime, GatewayCredentialSync, VirtualServiceSync, ServiceRegistry]:
    """Istio's side of the gateway on a controller runtime of its own: the credential
    follows the gateway Secret (``served`` is what the gateway started with), the routes
    follow the VirtualServices and the service registry (cluster DNS)."""
    istio = ControllerRuntime(kcp_api)
    credential = setup_credential_sync(istio, gateway, applied=served)
    registry = ServiceRegistry()
    return istio, credential, setup_route_sync(istio, gateway, registry), registry


async def skr_fleet(
    spec: EnvironmentSpec,
    clusters: Clusters,
    kcp_api: ApiClient,
    cas: GatewaySecretManager,
    metrics: KlmMetrics,
    gateway_port: int,
    host_address: str,
) -> tuple[SkrFleet, KymaCertificates, dict[str, CertificateOverride]]:
    """The SKR fleet, built (it starts after KLM's listener), KLM's certificates per Kyma
    and the spec's broken-certificate overrides (shared with the rotation faults).

    KLM issues each runtime's certificate (KCP Secret ``<kyma>-webhook-tls``) before the
    webhook starts with it, as provisioning precedes the first reconcile: KLM's SANs plus
    what this host's API servers dial (a host-run webhook serves it), with the Kyma's
    override (from the spec, or a ``break-leaf`` fault since) applied."""
    overrides = {s.kyma_name: s.certificate for s in spec.skrs if not s.certificate.is_default}
    address = None if in_cluster(spec) else host_address

    def issue(ca: pki.CertificateAuthority, kyma: str, runtime_id: str, domain: str) -> pki.Issued:
        override = overrides.get(kyma, CertificateOverride())
        return issue_webhook_certificate(ca, runtime_id, domain, override, host_address=address)

    certs = KymaCertificates(kcp_api, cas, issue=issue, pinned=list(overrides), metrics=metrics)
    issued = await asyncio.gather(
        *(certs.ensure(s.kyma_name, s.runtime_id, s.skr_domain) for s in spec.skrs)
    )
    fleet = SkrFleet(
        skr_installation(
            spec,
            s,
            clusters[s.name],
            ca=cas.issuing_ca,
            leaf=cert.issued,
            ca_bundle_pem=cert.ca_bundle_pem,
            gateway_port=gateway_port,
            host_address=host_address,
        )
        for s, cert in zip(spec.skrs, issued, strict=True)
    )
    return fleet, certs, overrides


def klm_options(
    spec: EnvironmentSpec,
    metrics: KlmMetrics,
    mesh: GatewayMesh | None,
    history: ReconcileHistory,
    stack: AsyncExitStack,
) -> dict[str, Any]:
    """KLM's flags from the spec: workers, intervals, its listener (behind the mesh), SAN
    pinning, and its reconcile lines read into ``history`` (as a KLM process's log)."""
    reconcile_log, release = capture_reconciles(history, reconciler_logger.name)
    stack.callback(release)
    return {
        "metrics": metrics,
        "workers": spec.klm_workers,
        "listener_config": behind_gateway(mesh, KLM_COMPONENT, KLM_SERVICE[:2]),
        "pin_san": spec.pin_san,
        "intervals": spec.intervals,
        "reconcile_log": reconcile_log,
    }


def setup_skr_webhooks(
    spec: EnvironmentSpec,
    certificates: KymaCertificates,
    gateway: EnvoyGateway,
    controller: WatcherController,
    fleet: SkrFleet,
) -> SkrWebhookManager:
    """The Kyma reconcile's watcher step: each SKR's webhook wired for the Watchers the
    gateway routes already."""
    clusters = {s.runtime_id: s.name for s in spec.skrs}

    def target(runtime_id: str) -> SkrWebhook | None:  # None: no SKR of this environment
        cluster = clusters.get(runtime_id)
        return fleet[cluster] if cluster is not None else None

    watchers = lambda: routed_watchers(gateway, controller.watchers())  # noqa: E731
    return SkrWebhookManager(certificates, watchers=watchers, target=target)


def setup_health(
    spec: EnvironmentSpec,
    klm: LifecycleManager,
    skr_clients: SkrClients,
    mesh: GatewayMesh | None,
) -> WatcherHealth | None:
    """With ``spec.health``: KLM's watcher health — its listener behind the gateway as
    ``watcher-health-events.kcp-system:8083`` (SAN pinning as KLM's own listener), its
    metrics in KLM's registry (scenario target ``klm``). The ``watcher-health`` Watcher
    is applied with the spec's (:attr:`EnvironmentSpec.all_watchers`)."""
    if spec.health is None:
        return None
    name, namespace, _ = HEALTH_SERVICE
    config = behind_gateway(mesh, HEALTH_MANAGER, (name, namespace))
    if spec.pin_san:
        hooks = (*config.verify_hooks, san_pinning(klm.cache.lookup))
        config = dataclasses.replace(config, verify_hooks=hooks)
    return setup_watcher_health(
        klm,
        skr_clients,
        klm.reconciler,
        policy=spec.health,
        listener_config=config,
        metrics=HealthMetrics(klm.metrics.registry),
    )


async def start_listeners(env: WatcherEnvironment) -> None:
    """KLM's and the health listener in the environment's table and event log, then the
    spec's extra listeners."""
    host = env.klm.host
    if host is None:
        raise HarnessError("the KLM stand-in started without its listener")
    env.registry.register(*KLM_SERVICE, ("127.0.0.1", host.port))
    env.listeners[KLM_COMPONENT] = host
    if env.health is not None:
        env.registry.register(*HEALTH_SERVICE, ("127.0.0.1", env.health.host.port))
        env.listeners[HEALTH_MANAGER] = env.health.host
    env.klm.observers.append(env.log.recorder(KLM_COMPONENT))
    for listener in env.spec.listeners:
        await env.add_listener(listener.component, listener.service, listener.implementation)


async def roll_out(env: WatcherEnvironment) -> None:
    """The Kymas and the spec's Watchers, in the order ``spec.watcher_rollout`` says:
    ``reconcile`` — Watchers first, the Kymas' first reconciles wire them; ``immediate`` —
    Kymas first, the Watchers wired into every SKR at once when they change."""
    if env.spec.watcher_rollout == "reconcile":
        await apply_watchers(env)
    else:
        env.controller.on_change.append(wire_after_routes(env.gateway, env.fleet))
    kymas = await provision(env.kcp_api, env.spec, env.clusters)  # KLM takes it from there
    await wait_kymas_ready(env.kcp_api, kymas, 30)  # a scenario starts from reconciled Kymas
    await (
        env.wait_wired(within=30)
        if env.spec.watcher_rollout == "reconcile"
        else apply_watchers(env)
    )
