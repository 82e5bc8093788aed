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

A running environment is described by a state file (``<cache>/envs/<name>.json``: owner
PID, kubeconfigs, ports) that the owning process writes when ready and removes when it has
stopped everything. ``down`` signals that PID — never a process found by name — after
checking it still is our ``up`` process.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from watcher.errors import WatcherError

if TYPE_CHECKING:
    from harness.cli.up_plan import Plan
    from harness.clusters.plane import Environment as Clusters
    from harness.environment import WatcherEnvironment
    from harness.environment.any_klm import KlmEnvironment
    from harness.kcp.gateway.envoy import EnvoyGateway

LIVE_POLL = 0.2
DETACH_READY_TIMEOUT = 180.0
DOWN_TIMEOUT = 60.0


def state_dir() -> Path:
    from harness.clusters.go_build import cache_root

    return cache_root() / "envs"


def state_file(name: str) -> Path:
    return state_dir() / f"{name}.json"


def print_state(state: dict[str, Any]) -> None:
    print(
        f"environment {state['name']} (pid {state['pid']}), clusters ready in "
        f"{state['startup_seconds']:.1f} s; kubeconfigs:"
    )
    for cluster, path in state["kubeconfigs"].items():
        print(f"  {cluster:8} {path}")
    print(f"gateway   {state['gateway']} (admin {state['gateway_admin']})")
    if state["klm_listener"]:
        print(f"KLM listener {state['klm_listener']}")
    if state.get("klm_metrics"):
        print(f"KLM metrics  {state['klm_metrics']}")
    if state.get("watcher_health"):
        print(f"watcher health: `watcher-harness health {state['name']}` prints the table")
    for skr, hook in state["webhooks"].items():
        print(f"webhook {skr}: {hook['url']} metrics {hook['metrics']}")
    if state.get("scenario"):
        scenario = state["scenario"]
        print(f"scenario {scenario['name']} ({scenario['file']}): set up; no steps run")
    if state.get("modules"):
        print(state["modules"])


def claim(name: str) -> asyncio.Event:
    """The event SIGINT/SIGTERM set; an error if another ``up`` holds environment
    ``name``'s state file."""
    if running(name) is not None:
        raise HarnessError(
            f"environment {name!r} is already up (see {state_file(name)}); "
            f"`watcher-harness down {name}` stops it"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def running(name: str) -> dict[str, Any] | None:
    """The state of environment ``name`` while its ``up`` process runs, else None."""
    try:
        state = json.loads(state_file(name).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and owner_alive(state) else None


def owner_alive(state: dict[str, Any]) -> bool:
    """Is the state's PID still our ``up`` process (not a reused PID)?"""
    try:
        cmdline = Path(f"/proc/{int(state['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, KeyError, ValueError):
        return False
    launched = any(part.endswith((b"harness.cli", b"watcher-harness")) for part in cmdline)
    return launched and b"up" in cmdline


def detach(name: str, up_args: list[str]) -> int:
    """Start ``up --name NAME UP_ARGS`` in its own session; return once it is ready (or
    say why not)."""
    path = state_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    argv = [sys.executable, "-m", "harness.cli", "up", "--name", name, *up_args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + DETACH_READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            print(
                f"watcher-harness: up exited with {proc.returncode}; last lines of {log}:\n{tail}",
                file=sys.stderr,
            )
            return 1
        if path.exists():
            state = json.loads(path.read_text())
            if state.get("pid") == proc.pid:
                print_state(state)
                print(
                    f"running in the background (log {log}); "
                    f"`watcher-harness down {name}` stops it."
                )
                return 0
        time.sleep(0.2)
    print(
        f"watcher-harness: not ready after {DETACH_READY_TIMEOUT:.0f} s; stopping it (log {log})",
        file=sys.stderr,
    )
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(DOWN_TIMEOUT)
    return 1


def down(name: str) -> int:
    path = state_file(name)
    if not path.exists():
        print(f"watcher-harness: no environment {name!r} is up (no {path})", file=sys.stderr)
        return 1
    state = json.loads(path.read_text())
    if not owner_alive(state):
        path.unlink(missing_ok=True)
        print(f"environment {name!r} was not running any more; removed its state file")
        return 0
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)  # its handler stops every process it owns, in order
    deadline = time.monotonic() + DOWN_TIMEOUT
    while time.monotonic() < deadline:
        if not owner_alive(state):
            print(f"environment {name!r} stopped; nothing left running.")
            return 0
        time.sleep(0.2)
    print(
        f"watcher-harness: environment {name!r} (pid {pid}) did not stop within "
        f"{DOWN_TIMEOUT:.0f} s; see {path.with_suffix('.log')}",
        file=sys.stderr,
    )
    return 1


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
