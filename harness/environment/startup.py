"""The start-up steps :func:`~harness.environment.compose.watcher_environment` composes:
the CRDs each cluster serves and the wait until their objects can be created, the
certificates KLM issues, the Watchers applied and wired, the Kymas provisioned, the
watcher-health manager."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from harness.environment.core import WatcherEnvironment
from harness.environment.hosting import (
    in_cluster,
)
from harness.environment.provisioning import provision, wait_kymas_ready
from harness.environment.spec import EnvironmentSpec
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.gateway.routes import ServiceRegistry
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.skr_webhook import SkrWebhook
from harness.kcp.lifecycle_manager.watcher_controller import valid_watcher
from harness.kcp.lifecycle_manager.watcher_health import SERVICE as HEALTH_SERVICE
from harness.kcp.lifecycle_manager.watcher_health import WatcherHealth
from harness.kube import (
    GATEWAYS,
    WATCHERS,
    create_or_replace,
    ensure_namespace,
)
from harness.kube.crds import wait_creatable
from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from harness.skr.fleet import SkrFleet
from watcher import pki
from watcher.domain import (
    KCP_NAMESPACE,
)
from watcher.health.heartbeat import MANAGER as HEALTH_MANAGER
from watcher.health.metrics import HealthMetrics
from watcher.listener import ListenerConfig, san_pinning
from watcher.render.virtualservice import gateway_dict
from watcher.render.watcher_cr import Watcher

logger = logging.getLogger("harness.environment")

CRD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "crds"


async def provision_kymas(env: WatcherEnvironment, within: float = 30.0) -> None:
    """What provisioning writes (the catalog; per SKR the kubeconfig Secret, then the KCP
    Kyma). The Lifecycle Manager takes it from there (SKR CRDs, SKR Kyma, status); wait
    until every Kyma is Ready, so a scenario starts from reconciled Kymas."""
    kymas = await provision(env.kcp_api, env.spec, env.clusters)
    await wait_kymas_ready(env.kcp_api, kymas, within)


KCP_CRDS = [CRD_DIR / f"{n}.yaml" for n in ("watcher", "kyma", "istio", "catalog", "manifest")]
"""The custom resources the KCP serves (KLM's, Istio's); the SKRs get SKR_CRDS."""


async def prepare_api_servers(kcp_api: ApiClient, crds: Mapping[ApiClient, Sequence[str]]) -> None:
    """Until creating custom resources no longer sleeps in any cluster
    (:func:`~harness.kube.crds.wait_creatable`: up to 2 s after the CRDs became
    Established), then KLM's Istio Gateway ``kcp-system/klm-watcher`` (what Watchers'
    routes attach to)."""
    await ensure_namespace(kcp_api, KCP_NAMESPACE)
    await asyncio.gather(*(wait_creatable(api, names) for api, names in crds.items()))
    await create_or_replace(kcp_api, GATEWAYS, gateway_dict())


def certificate_issuer(
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


def skr_webhook_target(
    spec: EnvironmentSpec, fleet: SkrFleet
) -> Callable[[str], SkrWebhook | None]:
    """Runtime id → the installation of its SKR (None: no SKR of this environment)."""
    clusters = {s.runtime_id: s.name for s in spec.skrs}

    def target(runtime_id: str) -> SkrWebhook | None:
        cluster = clusters.get(runtime_id)
        return fleet[cluster] if cluster is not None else None

    return target


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


async def start_health(
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
