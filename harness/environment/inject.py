"""Carrying out a checked :class:`~harness.faults.Fault` on a running environment.

Every action returns once its target is really down (process reaped, port closed) or up
(ready probe passed, or Envoy confirmed the configuration); each part keeps its ports, so
routes, kubeconfigs and webhook configurations stay valid. Returns a short detail string
for the timeline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from harness.clusters.plane import Environment as Clusters
from harness.environment.rotation import CertificateRotation, RotationError
from harness.faults import Fault, FaultError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.listeners import ManagerListener
from harness.skr.certs import CertificateOverride
from harness.skr.fleet import SkrFleet
from watcher.render.envoy import FaultInjection

Params = Mapping[str, Any]


def kcp_injection(
    *,
    delay: float = 0.0,
    delay_percent: float = 100.0,
    abort_percent: float = 0.0,
    abort_status: int = 503,
) -> FaultInjection:
    """Envoy's fault injection on every KCP route: delay (seconds) and/or abort."""
    return FaultInjection(
        abort_percent=abort_percent,
        abort_status=abort_status,
        delay_percent=delay_percent if delay > 0 else 0.0,
        delay_ms=round(delay * 1000),
    )


class Stoppable(Protocol):
    """A part with a process: stopped, started, killed, restarted."""

    async def stop(self) -> object: ...

    async def start(self) -> object: ...

    async def kill(self) -> object: ...

    async def restart(self) -> object: ...


async def process_fault(fault: Fault, part: Stoppable) -> None:
    """``stop``/``start``/``kill``/``restart`` of ``part`` as ``fault`` says."""
    no_params(fault, fault.parameters)
    actions = {"stop": part.stop, "start": part.start, "kill": part.kill, "restart": part.restart}
    await lifecycle(fault, actions)


class FaultTargets(Protocol):
    """The parts a fault can reach (a :class:`~harness.environment.WatcherEnvironment`
    is one); a protocol so that this module does not import the environment back."""

    clusters: Clusters
    gateway: EnvoyGateway
    fleet: SkrFleet
    rotation: CertificateRotation
    listeners: dict[str, ManagerListener]


def no_params(fault: Fault, params: Params, allowed: tuple[str, ...] = ()) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        raise FaultError(f"{fault.target} {fault.action} takes no parameter {unknown}{hint}")


def lifecycle(
    fault: Fault,
    actions: Mapping[str, Callable[[], Awaitable[object]]],
) -> Awaitable[object]:
    try:
        return actions[fault.action]()
    except KeyError:
        raise FaultError(f"{fault.target} cannot {fault.action}") from None


async def inject(env: FaultTargets, fault: Fault) -> str:
    params = fault.parameters
    if fault.kind == "gateway":
        await process_fault(fault, env.gateway)
        return f"pid {env.gateway.pid}" if env.gateway.running else "down"
    if fault.kind == "webhook":
        inst = env.fleet[fault.name]
        await process_fault(fault, inst)
        return inst.state
    if fault.kind == "listener":
        host = env.listeners[fault.name]
        await listener_fault(fault, host)
        return f"port {host.port}" + ("" if host.running else " closed")
    if fault.kind == "apiserver":
        return await apiserver_fault(env.clusters, fault)
    if fault.kind == "kcp":
        return await kcp_fault(env.gateway, fault, params)
    if fault.kind == "certificates":
        return await _certificates(env, fault, params)
    raise FaultError(f"no handler for fault target {fault.target!r}")  # parse_fault forbids


async def listener_fault(fault: Fault, host: ManagerListener) -> None:
    """A listener stops, starts or restarts on the same port (it has no process to kill)."""
    no_params(fault, fault.parameters)
    await lifecycle(fault, {"stop": host.stop, "start": host.start, "restart": host.restart})


async def apiserver_fault(clusters: Clusters, fault: Fault) -> str:
    ctl = clusters.control(fault.name)
    await process_fault(fault, ctl)
    return f"pid {ctl.records[-1].pid}" if ctl.running else "down"


async def kcp_fault(gateway: EnvoyGateway, fault: Fault, params: Params) -> str:
    if fault.action == "clear":
        no_params(fault, params)
        await gateway.set_fault(None)
        return "no fault"
    if fault.action == "delay":
        no_params(fault, params, ("delay_ms", "percent"))
        if "delay_ms" not in params:
            raise FaultError("kcp delay needs delay_ms (milliseconds)")
        delay_ms, percent = int(params["delay_ms"]), float(params.get("percent", 100.0))
        await gateway.set_fault(kcp_injection(delay=delay_ms / 1000, delay_percent=percent))
        return f"delay {delay_ms} ms on {percent:g}%"
    no_params(fault, params, ("percent", "status"))
    percent, status = float(params.get("percent", 100.0)), int(params.get("status", 503))
    await gateway.set_fault(kcp_injection(abort_percent=percent, abort_status=status))
    return f"abort {status} on {percent:g}%"


async def _certificates(env: FaultTargets, fault: Fault, params: Params) -> str:
    rotation = env.rotation
    if fault.action == "rotate-leaf":
        no_params(fault, params, ("skrs",))
        skrs = params.get("skrs")
        await rotation.rotate_leaves(skrs)
        return f"leaves of {', '.join(skrs) if skrs else 'every SKR'}"
    if fault.action == "rotate-ca":
        no_params(fault, params, ("skrs",))
        if params.get("skrs") is not None:
            raise FaultError("a CA rotation re-issues every SKR; do not pass skrs")
        await rotation.rotate_ca()
        return (
            f"new CA {rotation.ca.common_name} in the gateway's bundle; certificates follow "
            "in each Kyma's next reconcile"
        )
    if fault.action == "break-leaf":
        no_params(fault, params, ("skrs", "override"))
        skrs, kind = list(params.get("skrs") or []), str(params.get("override", ""))
        if not skrs:
            raise FaultError("break-leaf needs skrs: the SKRs whose certificate to break")
        if kind == "keep":
            rotation.keep_leaves(skrs)
            return f"certificates of {', '.join(skrs)} kept as they are (not renewed)"
        try:
            override = CertificateOverride.named(kind)
        except ValueError as exc:
            raise FaultError(str(exc)) from None
        await rotation.break_leaves(skrs, override)
        return f"{kind} certificate for {', '.join(skrs)}"
    no_params(fault, params)
    try:
        await rotation.drop_old_ca()
    except RotationError as exc:
        raise FaultError(str(exc)) from None
    return f"trusting only {rotation.ca.common_name}"
