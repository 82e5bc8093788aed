"""Other managers' listeners behind the gateway: the same for every environment.

A scenario's ``listeners`` are operators besides the Lifecycle Manager, each with a
listener a Watcher's ``serviceInfo`` routes to. Whoever the KLM is (the harness's own, or
a KLM process), the harness runs them and records what they accept: :func:`add_listener`.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from harness.clusters.go_tools import ensure_upstream_listener
from harness.environment.events import EventLog
from harness.environment.spec import Service
from harness.faults import FaultError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.gateway.routes import ServiceRegistry, service_key
from harness.kcp.lifecycle_manager.events import ListenerHost
from harness.kcp.listener_process import ListenerProcess, upstream_command
from harness.kcp.listeners import Implementation, ManagerListener
from watcher.listener import ListenerConfig


@dataclass
class ListenerParts:
    """What a listener is added to."""

    stack: AsyncExitStack
    log: EventLog
    registry: ServiceRegistry
    gateway: EnvoyGateway
    listeners: dict[str, ManagerListener]
    log_dir: Path
    mesh: GatewayMesh | None = None


def behind_gateway(
    mesh: GatewayMesh | None, component: str, service: tuple[str, str]
) -> ListenerConfig:
    """A listener's config behind the gateway: XFCC believed from the gateway over mTLS
    (``mesh``), or from anyone (the plain-HTTP opt-out)."""
    if mesh is None:
        return ListenerConfig(component=component, identity="xfcc")
    return mesh.listener_config(component, service)


async def add_listener(
    parts: ListenerParts,
    component: str,
    service: Service,
    implementation: Implementation = "ours",
) -> ManagerListener:
    """Another manager's listener behind the gateway, registered as ``service`` so a
    Watcher's ``serviceInfo`` routes to it; its events go to ``parts.log``. Stopped with
    ``parts.stack``.

    ``ours``: XFCC identity, believed only from the gateway over mTLS unless there is no
    mesh. ``upstream``: upstream's Go listener as a process (built once,
    ``tools/upstream-listener``), reached over plain HTTP as its sidecar would be; no SAN
    pinning, as upstream has none."""
    if component in parts.listeners:
        raise FaultError(f"a listener for {component!r} already exists")
    host: ManagerListener
    if implementation == "upstream":
        binary = await asyncio.to_thread(ensure_upstream_listener)
        host = await parts.stack.enter_async_context(
            ListenerProcess(
                component,
                parts.log.recorder(component).consume,
                command=upstream_command(binary),
                log_path=parts.log_dir / f"upstream-listener-{component}.log",
            )
        )
        await parts.gateway.reach_plaintext(service_key(*service))
    else:
        config = behind_gateway(parts.mesh, component, service[:2])
        host = await parts.stack.enter_async_context(
            ListenerHost(config, parts.log.recorder(component).consume)
        )
    parts.listeners[component] = host
    parts.registry.register(service[0], service[1], service[2], ("127.0.0.1", host.port))
    return host


__all__ = ["ListenerParts", "add_listener"]
