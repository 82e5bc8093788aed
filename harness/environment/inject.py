"""Carrying out a :data:`~harness.faults.Fault` on a running environment: one ``match`` arm
per variant, through the ports of :class:`FaultPorts`.

Every action returns once its target is really down (process reaped, port closed) or up
(ready probe passed, or Envoy confirmed the configuration); each part keeps its ports, so
routes, kubeconfigs and webhook configurations stay valid. Returns a short detail string
for the timeline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from harness.clusters.plane import Environment as Clusters
from harness.environment.rotation import CertificateRotation, RotationError
from harness.faults import (
    BreakLeaves,
    DropOldCa,
    Fault,
    FaultError,
    KcpFault,
    Lifecycle,
    PartFault,
    RotateCa,
    RotateLeaves,
    describe_injection,
)
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.listeners import ManagerListener
from harness.skr.certs import CertificateOverride

T = TypeVar("T")


class Restartable(Protocol):
    """A part that stops, starts and restarts in place (a listener)."""

    async def stop(self) -> object: ...

    async def start(self) -> object: ...

    async def restart(self) -> object: ...


class FaultPorts(Protocol):
    """What a fault reaches: the environment's parts (by :meth:`lifecycle`), the gateway's
    fault filter and the KCP's certificates (None where the KLM owns them)."""

    @property
    def gateway(self) -> EnvoyGateway: ...

    @property
    def certificates(self) -> CertificateRotation | None: ...

    async def lifecycle(self, fault: PartFault) -> str:
        """Carry out ``fault`` on the part it names; the timeline's detail."""
        ...


async def inject(ports: FaultPorts, fault: Fault) -> str:
    """Carry out ``fault``; the timeline's detail."""
    match fault:
        case PartFault():
            return await ports.lifecycle(fault)
        case KcpFault(injection=injection):
            await ports.gateway.set_fault(injection)
            return describe_injection(injection)
        case _:
            return await _certificates(_rotation(ports), fault)


def _rotation(ports: FaultPorts) -> CertificateRotation:
    if ports.certificates is None:
        raise FaultError(
            "certificate faults need the harness's own KLM (it issues the certificates)"
        )
    return ports.certificates


async def _certificates(
    rotation: CertificateRotation, fault: RotateLeaves | RotateCa | DropOldCa | BreakLeaves
) -> str:
    match fault:
        case RotateLeaves(skrs=skrs):
            await rotation.rotate_leaves(list(skrs) or None)
            return f"leaves of {', '.join(skrs) if skrs else 'every SKR'}"
        case RotateCa():
            await rotation.cas.rotate()  # the rest follows KLM's timing
            return (
                f"new CA {rotation.ca.common_name} in the gateway's bundle; certificates "
                "follow in each Kyma's next reconcile"
            )
        case DropOldCa():
            try:
                await rotation.cas.drop_old()  # refused while the gateway serves an older CA
            except RotationError as exc:
                raise FaultError(str(exc)) from None
            return f"trusting only {rotation.ca.common_name}"
        case BreakLeaves(skrs=skrs, certificate="keep"):
            rotation.keep_leaves(skrs)
            return f"certificates of {', '.join(skrs)} kept as they are (not renewed)"
        case BreakLeaves(skrs=skrs, certificate=kind):
            try:
                override = CertificateOverride.named(kind)
            except ValueError as exc:
                raise FaultError(str(exc)) from None
            await rotation.break_leaves(skrs, override)
            return f"{kind} certificate for {', '.join(skrs)}"


def named(parts: Mapping[str, T], fault: PartFault) -> T:
    """The part ``fault`` names, or a :class:`FaultError` listing those that run here."""
    try:
        return parts[fault.name]
    except KeyError:
        listed = ", ".join(sorted(parts)) or "none"
        raise FaultError(
            f"no {fault.part} named {fault.name!r} in this environment (have: {listed})"
        ) from None


def act(part: Restartable, action: Lifecycle) -> Awaitable[object]:
    """``part``'s method for ``action`` (``kill`` only where the part has a process)."""
    actions: dict[Lifecycle, Callable[[], Awaitable[object]]] = {
        Lifecycle.STOP: part.stop,
        Lifecycle.START: part.start,
        Lifecycle.RESTART: part.restart,
    }
    kill = getattr(part, "kill", None)
    if kill is not None:
        actions[Lifecycle.KILL] = kill
    if action not in actions:
        raise FaultError(f"{type(part).__name__} cannot {action}")
    return actions[action]()


async def gateway_fault(gateway: EnvoyGateway, action: Lifecycle) -> str:
    await act(gateway, action)
    return f"pid {gateway.pid}" if gateway.running else "down"


async def listener_fault(host: ManagerListener, action: Lifecycle) -> str:
    """A listener stops, starts or restarts on the same port."""
    await act(host, action)
    return f"port {host.port}" + ("" if host.running else " closed")


async def apiserver_fault(clusters: Clusters, fault: PartFault) -> str:
    named(clusters.clusters, fault)
    ctl = clusters.control(fault.name)
    await act(ctl, fault.action)
    return f"pid {ctl.records[-1].pid}" if ctl.running else "down"
