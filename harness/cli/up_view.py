"""What ``up`` tells its user: the description of a running environment (the state file's
content) and the live lines of the events and reconciles it sees.

Apart from :mod:`harness.cli.up` so that module keeps to the command: arguments, bringing
the environment up, holding it until it is stopped.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.cli.up_plan import Plan
    from harness.clusters.plane import Environment as Clusters
    from harness.environment import WatcherEnvironment
    from harness.environment.any_klm import KlmEnvironment
    from harness.kcp.gateway.envoy import EnvoyGateway

LIVE_POLL = 0.2


def _reach(name: str, clusters: Clusters, gateway: EnvoyGateway) -> dict[str, Any]:
    """The state keys every environment has: owner, kubeconfigs, gateway."""
    return {
        "name": name,
        "pid": os.getpid(),
        "startup_seconds": round(clusters.startup_seconds, 2),
        "kubeconfigs": {n: str(c.kubeconfig) for n, c in clusters.clusters.items()},
        "gateway": f"https://127.0.0.1:{gateway.port}",
        "gateway_admin": gateway.admin_url,
    }


def describe(
    env: WatcherEnvironment,
    name: str,
    klm_metrics: str | None = None,
    plan: Plan | None = None,
) -> dict[str, Any]:
    """What a user needs to reach the environment (also the state file's content)."""
    from harness.cli.up_plan import modules_line

    klm = env.klm.listener
    scenario = plan.scenario if plan else None
    return {
        "scenario": {"name": scenario.name, "file": scenario.source} if scenario else None,
        "modules": modules_line(plan.modules) if plan else None,
        "klm_metrics": klm_metrics,
        "watcher_health": env.health is not None,
        **_reach(name, env.clusters, env.gateway),
        # https when the gateway reaches it over mTLS (only the gateway's cert is accepted).
        "klm_listener": klm.event_url if klm else None,
        "webhooks": {
            skr.cluster.name: {"url": skr.webhook_url, "metrics": skr.metrics_url}
            for skr in env.fleet
        },
    }


def describe_klm(env: KlmEnvironment, name: str) -> dict[str, Any]:
    """:func:`describe` of an environment around a KLM process."""
    webhooks = {}
    for skr, kubelet in env.kubelets.items():
        for pod in kubelet.all_pods():
            ports = ", ".join(f"{c}→127.0.0.1:{h}" for c, h in sorted(pod.host_ports.items()))
            webhooks[skr] = {"url": f"pod {pod.name} ({ports})", "metrics": str(pod.log_path)}
    return {
        "scenario": None,
        "modules": None,
        "klm_metrics": env.klm.metrics_url,
        "klm_log": str(env.klm.log_path),
        "klm_command": " ".join(env.klm.command),
        "watcher_health": False,
        **_reach(name, env.clusters, env.gateway),
        "startup_phases": env.timings,
        "klm_listener": f"http://127.0.0.1:{env.klm.listener_port}",
        "webhooks": webhooks,
    }


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def live_view(env: WatcherEnvironment, write: Callable[[str], None]) -> None:
    """One line per event the Lifecycle Manager receives and per reconcile it runs, so a
    user who changes an SKR Kyma with kubectl sees the flow they caused."""
    from harness.kcp.lifecycle_manager.queue.reconciler import Reconcile
    from watcher.health.state import RuntimeHealth
    from watcher.listener import ListenerEvent

    def event(e: ListenerEvent) -> None:
        w, kind = e.event.watched, e.event.watched_gvk.kind
        write(f"{_clock(e.received_at)} event      {e.runtime_id}: {kind} {w.namespace}/{w.name}")

    def reconcile(r: Reconcile) -> None:
        triggers = ",".join(sorted(t.value for t in r.triggers))
        took = f"{r.duration * 1000:.0f} ms"
        write(f"{_clock(r.at)} reconcile  {r.kyma} ({triggers}) → {r.outcome.value}, {took}")

    def health(runtime_id: str, before: RuntimeHealth, after: RuntimeHealth) -> None:
        detail = f": {after.detail}" if after.detail else ""
        write(
            f"{_clock(time.time())} health     {runtime_id}: {before.state.value} → "
            f"{after.state.value} ({after.reason.value}{detail})"
        )

    env.klm.observers.append(event)
    env.klm.reconciler.observers.append(reconcile)
    if env.health is not None:
        env.health.monitor.on_transition.append(health)


async def live_klm(env: KlmEnvironment, write: Callable[[str], None]) -> None:
    """One line per event that queued a Kyma and per reconcile, as the KLM's log says."""
    seen_events = seen_reconciles = 0
    while True:
        history = env.klm.history
        env.klm.reconciles()  # reads what the log has so far
        for event in history.events_queued[seen_events:]:
            write(f"{_clock(event.at)} event      queued {event.kyma}")
        for reconcile in history.reconciles[seen_reconciles:]:
            why = ",".join(sorted(reconcile.triggers)) or "timer, change or startup"
            write(f"{_clock(reconcile.at)} reconcile  {reconcile.kyma} ({why})")
        seen_events, seen_reconciles = len(history.events_queued), len(history.reconciles)
        await asyncio.sleep(LIVE_POLL)
