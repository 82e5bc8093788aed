"""``watcher-harness up --klm-command CMD``: the environment around your Lifecycle Manager.

The same clusters, gateway and SKR webhooks as ``up``, but the KCP's Lifecycle Manager is
the given command (upstream's Go KLM, or any build taking KLM's flags), and the harness
plays what a landscape gives it: cert-manager, each SKR's kubelet, Istio's ingress
(:mod:`harness.environment.any_klm`). The live view shows what the KLM's log says: which
Kyma it reconciles, and which events from SKRs queued it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.cli.up_plan import Plan
    from harness.environment.any_klm import KlmEnvironment

LIVE_POLL = 0.2


def describe_klm(env: KlmEnvironment, name: str) -> dict[str, Any]:
    """What a user needs to reach the environment (also the state file's content)."""
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
        "name": name,
        "pid": os.getpid(),
        "startup_seconds": round(env.clusters.startup_seconds, 2),
        "startup_phases": env.timings,
        "kubeconfigs": {n: str(c.kubeconfig) for n, c in env.clusters.clusters.items()},
        "gateway": f"https://127.0.0.1:{env.gateway.port}",
        "gateway_admin": env.gateway.admin_url,
        "klm_listener": f"http://127.0.0.1:{env.klm.listener_port}",
        "webhooks": webhooks,
    }


async def live_klm(env: KlmEnvironment, write: Callable[[str], None]) -> None:
    """One line per event that queued a Kyma and per reconcile, as the KLM's log says."""

    def clock(at: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"

    seen_events = seen_reconciles = 0
    while True:
        history = env.klm.history
        env.klm.reconciles()  # reads what the log has so far
        for event in history.events_queued[seen_events:]:
            write(f"{clock(event.at)} event      queued {event.kyma}")
        for reconcile in history.reconciles[seen_reconciles:]:
            why = ",".join(sorted(reconcile.triggers)) or "timer, change or startup"
            write(f"{clock(reconcile.at)} reconcile  {reconcile.kyma} ({why})")
        seen_events, seen_reconciles = len(history.events_queued), len(history.reconciles)
        await asyncio.sleep(LIVE_POLL)


async def up_klm(plan: Plan, name: str, *, live: bool = True) -> None:
    """Bring up ``plan``'s clusters around the KLM command, record the state file, keep
    it running until SIGINT/SIGTERM."""
    from harness.aio import spawn, stop_tasks
    from harness.cli.up_state import claim, print_state
    from harness.environment.any_klm import klm_environment

    path, stop = claim(name)
    spec = plan.spec
    if spec.catalog:
        print(
            "note: the demo module catalog is left out: a KLM build resolves modules from an "
            "OCI registry with OCM descriptors, which this machine does not have",
            flush=True,
        )
        spec = dataclasses.replace(spec, catalog=())
    async with klm_environment(spec) as env:
        state = describe_klm(env, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2) + "\n")
        tasks = []
        try:
            print_state(state)
            print(f"KLM       {state['klm_command']} (log {state['klm_log']})")
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in env.timings.items())
            print(f"ready: {phases}")
            print("Ctrl-C (or `watcher-harness down`) stops everything.", flush=True)
            if live:
                print("live: what the KLM's log says (--quiet hides it)", flush=True)
                tasks.append(spawn(live_klm(env, lambda s: print(s, flush=True)), "live"))
            await stop.wait()
        finally:
            await stop_tasks(tasks)
            path.unlink(missing_ok=True)
    print("stopped; nothing left running.", flush=True)


__all__ = ["describe_klm", "live_klm", "up_klm"]
