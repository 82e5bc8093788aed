"""``watcher-harness up`` / ``down``: keep a whole watcher environment running to explore it.

``up`` starts a KCP and SKRs (real kube-apiserver + etcd), the Envoy gateway, the Watcher
controller, the Lifecycle-Manager stand-in and one Python webhook per SKR, prints where
everything is, and tears it all down on Ctrl-C or SIGTERM. ``up --detach`` runs the same
in the background and returns once it is ready; ``down`` stops it again. Its KCP has a
small demo module catalog; ``up --scenario FILE`` brings up what a scenario file declares
instead, without running its steps (:mod:`harness.cli.up_plan`).

A running environment is described by a state file (:mod:`harness.cli.up_state`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli.up_state import claim, detach, down, print_state
from harness.errors import HarnessError
from watcher.errors import WatcherError

if TYPE_CHECKING:
    from harness.cli.up_plan import Plan
    from harness.environment import WatcherEnvironment

# The environment (processes, aiohttp, kubernetes clients) is imported when ``up`` runs, so
# ``validate``, ``list`` and ``down`` stay fast and work without it.


@asynccontextmanager
async def metrics_server(env: WatcherEnvironment) -> AsyncIterator[str]:
    """KLM's metrics (``lifecycle_mgr_*``, ``watcher_health_*``) over HTTP on a free
    loopback port, for ``watcher-harness health`` or any scraper; the URL."""
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    async def serve(request: web.Request) -> web.Response:
        body = generate_latest(env.klm.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await runner.cleanup()


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
        "name": name,
        "pid": os.getpid(),
        "startup_seconds": round(env.clusters.startup_seconds, 2),
        "kubeconfigs": {n: str(c.kubeconfig) for n, c in env.clusters.clusters.items()},
        "gateway": f"https://127.0.0.1:{env.gateway.port}",
        "gateway_admin": env.gateway.admin_url,
        # https when the gateway reaches it over mTLS (only the gateway's cert is accepted).
        "klm_listener": klm.event_url if klm else None,
        "webhooks": {
            skr.cluster.name: {"url": skr.webhook_url, "metrics": skr.metrics_url}
            for skr in env.fleet
        },
    }


def live_view(env: WatcherEnvironment, write: Callable[[str], None]) -> None:
    """One line per event the Lifecycle Manager receives and per reconcile it runs, so a
    user who changes an SKR Kyma with kubectl sees the flow they caused."""
    from harness.kcp.lifecycle_manager.queue.reconciler import Reconcile
    from watcher.health.state import RuntimeHealth
    from watcher.listener import ListenerEvent

    def clock(at: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"

    def event(e: ListenerEvent) -> None:
        w, kind = e.event.watched, e.event.watched_gvk.kind
        write(f"{clock(e.received_at)} event      {e.runtime_id}: {kind} {w.namespace}/{w.name}")

    def reconcile(r: Reconcile) -> None:
        triggers = ",".join(sorted(t.value for t in r.triggers))
        took = f"{r.duration * 1000:.0f} ms"
        write(f"{clock(r.at)} reconcile  {r.kyma} ({triggers}) → {r.outcome.value}, {took}")

    def health(runtime_id: str, before: RuntimeHealth, after: RuntimeHealth) -> None:
        detail = f": {after.detail}" if after.detail else ""
        write(
            f"{clock(time.time())} health     {runtime_id}: {before.state.value} → "
            f"{after.state.value} ({after.reason.value}{detail})"
        )

    env.klm.observers.append(event)
    env.klm.reconciler.observers.append(reconcile)
    if env.health is not None:
        env.health.monitor.on_transition.append(health)


async def up(plan: Plan, name: str, *, live: bool = True) -> None:
    """Bring up what ``plan`` says, apply its scenario's Kymas, record the state file,
    and keep it all running until SIGINT/SIGTERM."""
    from harness.environment import watcher_environment
    from harness.runner.scenario import setup_kymas
    from harness.runner.session import LiveSession

    path, stop = claim(name)
    async with (
        watcher_environment(plan.spec) as env,
        metrics_server(env) as klm_metrics,
    ):
        if plan.scenario is not None:
            await setup_kymas(LiveSession(env), plan.scenario)
        state = describe(env, name, klm_metrics, plan)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2) + "\n")
        try:
            print_state(state)
            print("Ctrl-C (or `watcher-harness down`) stops everything.", flush=True)
            if live:
                print("live: events received and reconciles (--quiet hides them)", flush=True)
                live_view(env, lambda line: print(line, flush=True))
            await stop.wait()
        finally:
            path.unlink(missing_ok=True)
    print("stopped; nothing left running.", flush=True)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_up = sub.add_parser(
        "up",
        help="start KCP + SKRs + gateway + watcher (or what a scenario file declares); "
        "stop on Ctrl-C",
    )
    p_up.add_argument(
        "--skrs",
        type=int,
        choices=range(1, 11),
        metavar="N",
        help="number of SKRs, skr-a, skr-b, ... (1-10; default 2)",
    )
    p_up.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE",
        help="bring up what this scenario file declares (clusters, modules, Watchers, "
        "listeners, Kymas, settings) and run none of its steps",
    )
    p_up.add_argument(
        "--matrix",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --scenario: the matrix instance to bring up (default: the first); "
        "repeat for several keys",
    )
    p_up.add_argument(
        "--name",
        default="default",
        help="name of this environment, for `down NAME`, `health NAME` and `get --env NAME` "
        "(default: default)",
    )
    p_up.add_argument(
        "--detach",
        action="store_true",
        help="run in the background; return when ready (stop with `down`)",
    )
    p_up.add_argument(
        "--quiet", action="store_true", help="no live lines for events and reconciles"
    )
    p_up.add_argument(
        "--health-interval",
        type=float,
        metavar="SECONDS",
        help="watcher-health heartbeat interval (default 10; 0: off; docs/health.md); with "
        "--scenario, its settings.klm.health decides",
    )
    p_up.add_argument(
        "--webhook-command",
        metavar="COMMAND",
        help="bring your own webhook: run this command (upstream's environment contract) as "
        "every SKR's webhook (default: WATCHER_HARNESS_WEBHOOK_COMMAND, else ours)",
    )
    p_up.add_argument(
        "--klm-command",
        metavar="COMMAND",
        help="bring your own Lifecycle Manager: run this command (given KLM's flags) as the "
        "KCP's KLM, the harness playing cert-manager, kubelet and ingress (default: "
        "WATCHER_HARNESS_KLM_COMMAND, else ours in process)",
    )
    p_up.add_argument(
        "--klm-crds",
        metavar="DIR",
        help="that KLM's CRDs (default: WATCHER_HARNESS_KLM_CRDS, else the harness's own)",
    )
    p_up.set_defaults(func=run)
    p_down = sub.add_parser("down", help="stop an environment started with `up --detach`")
    p_down.add_argument("name", nargs="?", default="default", help="the environment's --name")
    p_down.set_defaults(func=run_down)


def _usage(problem: str) -> int:
    print(f"watcher-harness up: {problem}", file=sys.stderr)
    return 2


def plan_of(args: argparse.Namespace) -> Plan | int:
    """What the arguments ask ``up`` to bring up, or the exit code after saying why not
    (2: wrong arguments, an invalid scenario file — the loader's located lines)."""
    from harness.cli.up_plan import PlanError, demo_plan, scenario_plan
    from harness.scenario import InvalidScenario

    if args.scenario is None:
        if args.matrix:
            return _usage("--matrix selects an instance of a --scenario file")
        interval = 10.0 if args.health_interval is None else args.health_interval
        return demo_plan(args.skrs or 2, interval)
    options = (("--skrs", args.skrs), ("--health-interval", args.health_interval))
    given = [option for option, value in options if value is not None]
    if given:
        return _usage(f"{', '.join(given)}: the scenario file declares its clusters and settings")
    try:
        plan = scenario_plan(args.scenario, args.matrix)
    except InvalidScenario as exc:
        for error in exc.errors:
            print(error.line(), file=sys.stderr)
        return 2
    except PlanError as exc:
        return _usage(str(exc))
    for note in plan.notes:
        print(note, flush=True)
    return plan


def _child_args(args: argparse.Namespace) -> list[str]:
    """``up``'s arguments for the detached process (it loads the scenario again)."""
    if args.scenario is not None:
        matrix = [a for m in args.matrix for a in ("--matrix", m)]
        return ["--scenario", str(args.scenario.resolve()), *matrix]
    interval = 10.0 if args.health_interval is None else args.health_interval
    return ["--skrs", str(args.skrs or 2), "--health-interval", f"{interval:g}"]


def run(args: argparse.Namespace) -> int:
    from harness.scenario.values import dns_label

    try:
        dns_label(args.name)
    except ValueError as exc:
        return _usage(f"--name: {exc}")
    if args.webhook_command:  # the detached child inherits it with the environment
        from harness.clusters.selection import ENV_WEBHOOK_COMMAND

        os.environ[ENV_WEBHOOK_COMMAND] = args.webhook_command
    if args.klm_command:
        from harness.clusters.selection import ENV_KLM_COMMAND

        os.environ[ENV_KLM_COMMAND] = args.klm_command
    if args.klm_crds:
        from harness.clusters.selection import ENV_KLM_CRDS

        os.environ[ENV_KLM_CRDS] = args.klm_crds
    plan = plan_of(args)
    if isinstance(plan, int):
        return plan
    if args.detach:
        return detach(args.name, _child_args(args))
    if plan.spec.backend.klm_command and plan.scenario is not None:
        return _usage("--klm-command with --scenario is not supported yet: use the demo set-up")
    try:
        if plan.spec.backend.klm_command:
            from harness.cli.up_klm import up_klm

            asyncio.run(up_klm(plan, args.name, live=not args.quiet))
        else:
            asyncio.run(up(plan, args.name, live=not args.quiet))
    except (HarnessError, WatcherError) as exc:
        print(f"watcher-harness: {exc}", file=sys.stderr)
        return 1
    return 0


def run_down(args: argparse.Namespace) -> int:
    return down(args.name)
