"""What every environment holds, whoever the KLM is (the harness's own, or a KLM process):
the clusters, the gateway with Istio's routing, and the managers' listeners with what they
accepted. A scenario's ``listeners`` are operators besides the Lifecycle Manager, each with a
listener a Watcher's ``serviceInfo`` routes to: :meth:`EnvironmentParts.add_listener`.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from harness.clusters.go_tools import ensure_upstream_listener
from harness.clusters.plane import Environment as Clusters
from harness.environment.events import EventLog, ObservedEvent
from harness.environment.spec import EnvironmentSpec, Service
from harness.faults import FaultError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.gateway.routes import ServiceRegistry, VirtualServiceSync, service_key
from harness.kcp.lifecycle_manager.events import ListenerHost
from harness.kcp.listener_process import ListenerProcess, upstream_command
from harness.kcp.listeners import Implementation, ManagerListener
from watcher.listener import ListenerConfig


def behind_gateway(
    mesh: GatewayMesh | None, component: str, service: tuple[str, str]
) -> ListenerConfig:
    """A listener's config behind the gateway: XFCC believed from the gateway over mTLS
    (``mesh``), or from anyone (the plain-HTTP opt-out)."""
    if mesh is None:
        return ListenerConfig(component=component, identity="xfcc")
    return mesh.listener_config(component, service)


@dataclass(kw_only=True)
class EnvironmentParts:
    """What an environment around our KLM and one around a KLM process both hold: the
    clusters, the gateway with Istio's routing, the listeners and what they accepted."""

    spec: EnvironmentSpec
    clusters: Clusters
    kcp_api: ApiClient
    skr_apis: dict[str, ApiClient]
    gateway: EnvoyGateway
    registry: ServiceRegistry
    sync: VirtualServiceSync
    workdir: Path
    stack: AsyncExitStack
    log: EventLog = field(default_factory=EventLog)
    listeners: dict[str, ManagerListener] = field(default_factory=dict)
    """Managers' listeners by component."""
    mesh: GatewayMesh | None = None
    """Gateway → listener mTLS (``None``: plain HTTP, ``upstream_mtls=False``)."""

    @property
    def events(self) -> list[ObservedEvent]:
        """Every event accepted by every listener, in arrival order (append-only)."""
        return self.log.events

    async def add_listener(
        self, component: str, service: Service, implementation: Implementation = "ours"
    ) -> ManagerListener:
        """Another manager's listener behind the gateway, registered as ``service`` so a
        Watcher's ``serviceInfo`` routes to it; its events go to :attr:`log`. Stopped with
        the environment.

        ``ours``: XFCC identity, believed only from the gateway over mTLS unless there is no
        mesh. ``upstream``: upstream's Go listener as a process (built once,
        ``tools/upstream-listener``), reached over plain HTTP as its sidecar would be; no SAN
        pinning, as upstream has none."""
        if component in self.listeners:
            raise FaultError(f"a listener for {component!r} already exists")
        host: ManagerListener
        if implementation == "upstream":
            binary = await asyncio.to_thread(ensure_upstream_listener)
            log_dir = self.spec.log_dir or self.workdir
            host = await self.stack.enter_async_context(
                ListenerProcess(
                    component,
                    self.log.recorder(component).consume,
                    command=upstream_command(binary),
                    log_path=log_dir / f"upstream-listener-{component}.log",
                )
            )
            await self.gateway.reach_plaintext(service_key(*service))
        else:
            config = behind_gateway(self.mesh, component, service[:2])
            host = await self.stack.enter_async_context(
                ListenerHost(config, self.log.recorder(component).consume)
            )
        self.listeners[component] = host
        self.registry.register(service[0], service[1], service[2], ("127.0.0.1", host.port))
        return host


__all__ = ["EnvironmentParts", "behind_gateway"]
