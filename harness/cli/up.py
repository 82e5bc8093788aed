"""``watcher-harness up`` / ``down``: keep a whole watcher environment running to explore it.

``up`` starts a KCP and SKRs (real kube-apiserver + etcd), the Envoy gateway, the Watcher
controller, the Lifecycle-Manager stand-in and one Python webhook per SKR, prints where
everything is, and tears it all down on Ctrl-C or SIGTERM. ``up --detach`` runs the same
in the background and returns once it is ready; ``down`` stops it again; ``health`` prints
its watcher-health table. Its KCP has a
small demo module catalog; ``up --scenario FILE`` brings up what a scenario file declares
instead, without running its steps (:mod:`harness.cli.up_plan`). With ``--klm-command``
the KCP's Lifecycle Manager is that command, the harness playing cert-manager, kubelets
and ingress (:mod:`harness.environment.any_klm`); the live view then shows what its log says.

The state file that says an environment is up, and who owns it, is
:mod:`harness.cli.up_state`; what ``up`` prints about it, :mod:`harness.cli.up_view`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli.up_state import claim, detach, down, print_state, running, state_file
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


def _say(line: str) -> None:
    print(line, flush=True)


async def _hold(
    stop: asyncio.Event,
    state: dict[str, Any],
    lines: Sequence[str],
    live: Callable[[], list[asyncio.Task[None]]] | None,
) -> None:
    """Write the state file, say where everything is, show the ``live`` view (what it
    starts returns its tasks) until SIGINT/SIGTERM, then remove the state file."""
    from harness.aio import stop_tasks

    path = state_file(state["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2) + "\n")
    tasks: list[asyncio.Task[None]] = []
    try:
        print_state(state)
        for line in [*lines, "Ctrl-C (or `watcher-harness down`) stops everything."]:
            _say(line)
        if live is not None:
            tasks = live()
        await stop.wait()
    finally:
        await stop_tasks(tasks)
        path.unlink(missing_ok=True)


async def up(plan: Plan, name: str, *, live: bool = True) -> None:
    """Bring up what ``plan`` says, apply its scenario's Kymas, record the state file,
    and keep it all running until SIGINT/SIGTERM."""
    from harness.cli.up_view import describe, live_view
    from harness.environment import watcher_environment
    from harness.runner.scenario import setup_kymas
    from harness.runner.session import LiveSession

    stop = claim(name)
    async with (
        watcher_environment(plan.spec) as env,
        metrics_server(env) as klm_metrics,
    ):
        if plan.scenario is not None:
            await setup_kymas(LiveSession(env), plan.scenario)

        def view() -> list[asyncio.Task[None]]:
            _say("live: events received and reconciles (--quiet hides them)")
            live_view(env, _say)
            return []

        state = describe(env, name, klm_metrics, plan)
        await _hold(stop, state, (), view if live else None)
    _say("stopped; nothing left running.")


async def up_klm(plan: Plan, name: str, *, live: bool = True) -> None:
    """:func:`up` around ``plan.spec.backend.klm_command`` (no module catalog: a KLM
    build resolves modules from an OCI registry with OCM descriptors)."""
    from harness.aio import spawn
    from harness.cli.up_view import describe_klm, live_klm
    from harness.environment.any_klm import klm_environment

    stop = claim(name)
    spec = plan.spec
    if spec.catalog:
        _say(
            "note: the demo module catalog is left out: a KLM build resolves modules from an "
            "OCI registry with OCM descriptors, which this machine does not have"
        )
        spec = dataclasses.replace(spec, catalog=())
    async with klm_environment(spec) as env:

        def view() -> list[asyncio.Task[None]]:
            _say("live: what the KLM's log says (--quiet hides it)")
            return [spawn(live_klm(env, _say), "live")]

        state = describe_klm(env, name)
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in env.timings.items())
        lines = (f"KLM       {state['klm_command']} (log {state['klm_log']})", f"ready: {phases}")
        await _hold(stop, state, lines, view if live else None)
    _say("stopped; nothing left running.")


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
    p_health = sub.add_parser("health", help="print the watcher health of an `up` environment")
    p_health.add_argument("name", nargs="?", default="default")
    p_health.add_argument("--fail-on", choices=("broken", "degraded", "never"), default="broken")
    p_health.add_argument("--json", action="store_true", help="print the rows as JSON")
    p_health.set_defaults(func=run_health)


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
    from harness.clusters.selection import ENV_KLM_COMMAND, ENV_KLM_CRDS, ENV_WEBHOOK_COMMAND

    given = (
        (ENV_WEBHOOK_COMMAND, args.webhook_command),
        (ENV_KLM_COMMAND, args.klm_command),
        (ENV_KLM_CRDS, args.klm_crds),
    )
    for variable, value in given:
        if value:  # the detached child inherits it with the environment
            os.environ[variable] = value
    plan = plan_of(args)
    if isinstance(plan, int):
        return plan
    if args.detach:
        return detach(args.name, _child_args(args))
    if plan.spec.backend.klm_command and plan.scenario is not None:
        return _usage("--klm-command with --scenario is not supported yet: use the demo set-up")
    try:
        if plan.spec.backend.klm_command:
            asyncio.run(up_klm(plan, args.name, live=not args.quiet))
        else:
            asyncio.run(up(plan, args.name, live=not args.quiet))
    except (HarnessError, WatcherError) as exc:
        print(f"watcher-harness: {exc}", file=sys.stderr)
        return 1
    return 0


def run_down(args: argparse.Namespace) -> int:
    return down(args.name)


def run_health(args: argparse.Namespace) -> int:
    """The watcher-health table of environment ``args.name`` (``python -m watcher health``
    against its KLM metrics, found through its state file)."""
    from watcher.health import cli as health_cli

    state = running(args.name)
    if state is None:
        print(
            f"watcher-harness: no environment {args.name!r} is up; "
            "`watcher-harness up --detach` starts one",
            file=sys.stderr,
        )
        return 2
    if not state.get("watcher_health") or not state.get("klm_metrics"):
        print(
            f"watcher-harness: environment {args.name!r} runs without watcher health "
            "(started with --health-interval 0)",
            file=sys.stderr,
        )
        return 2
    delegated = argparse.Namespace(
        metrics=[state["klm_metrics"]], fail_on=args.fail_on, json=args.json, timeout=10.0
    )
    return health_cli.run(delegated, sys.stdout, sys.stderr)
