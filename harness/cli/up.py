"""``watcher-harness up`` / ``down``: keep a whole watcher environment running to explore it.

``up`` starts a KCP and SKRs (real kube-apiserver + etcd), the Envoy gateway, the Watcher
controller, the Lifecycle-Manager stand-in and one Python webhook per SKR, prints where
everything is, and tears it all down on Ctrl-C or SIGTERM. ``up --detach`` runs the same
in the background and returns once it is ready; ``down`` stops it again.

A running environment is described by a state file (``<cache>/envs/<name>.json``: owner
PID, kubeconfigs, ports) that the owning process writes when ready and removes when it has
stopped everything. ``down`` signals that PID — never a process found by name — after
checking it still is our ``up`` process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from watcher.errors import WatcherError

if TYPE_CHECKING:
    from harness.environment import EnvironmentSpec, WatcherEnvironment

# The environment (processes, aiohttp, kubernetes clients) is imported when ``up`` runs, so
# ``validate``, ``list`` and ``down`` stay fast and work without it.

DETACH_READY_TIMEOUT = 180.0
DOWN_TIMEOUT = 60.0


def state_dir() -> Path:
    from harness.clusters.binaries import cache_root

    return cache_root() / "envs"


def state_file(name: str) -> Path:
    return state_dir() / f"{name}.json"


def _spec(count: int, health_interval: float) -> EnvironmentSpec:
    """Local clusters; the webhook is ours unless ``WATCHER_HARNESS_WEBHOOK_COMMAND`` (or
    ``--webhook-command``, which sets it for a detached run too) names another."""
    from harness.clusters.selection import BackendOverride, choose_backend
    from harness.environment import EnvironmentSpec, SkrSpec
    from watcher.health.state import Policy

    letters = "abcdefghij"
    health = (
        Policy(interval=health_interval, timeout=min(5.0, health_interval / 2))
        if health_interval > 0
        else None
    )
    return EnvironmentSpec(
        skrs=tuple(
            SkrSpec(f"skr-{c}", f"runtime-{c}", f"skr-{c}.kyma.example.com")
            for c in letters[:count]
        ),
        health=health,
        backend=choose_backend("local", override=BackendOverride(name="local")),
    )


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


def describe(env: WatcherEnvironment, name: str, klm_metrics: str | None = None) -> dict[str, Any]:
    """What a user needs to reach the environment (also the state file's content)."""
    klm = env.klm.listener
    return {
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


async def up(count: int, name: str, *, live: bool = True, health_interval: float = 10.0) -> None:
    from harness.environment import watcher_environment

    path = state_file(name)
    if path.exists() and _owner_alive(json.loads(path.read_text())):
        raise HarnessError(
            f"environment {name!r} is already up (see {path}); "
            f"`watcher-harness down {name}` stops it"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with (
        watcher_environment(_spec(count, health_interval)) as env,
        metrics_server(env) as klm_metrics,
    ):
        state = describe(env, name, klm_metrics)
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


def _owner_alive(state: dict[str, Any]) -> bool:
    """Is the state's PID still our ``up`` process (not a reused PID)?"""
    try:
        cmdline = Path(f"/proc/{int(state['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, KeyError, ValueError):
        return False
    return b"harness.cli" in cmdline and b"up" in cmdline


def detach(count: int, name: str, health_interval: float) -> int:
    """Start ``up`` in its own session; return once it is ready (or say why not)."""
    path = state_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    argv = [
        *(sys.executable, "-m", "harness.cli", "up", "--skrs", str(count), "--name", name),
        *("--health-interval", f"{health_interval:g}"),
    ]
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
    if not _owner_alive(state):
        path.unlink(missing_ok=True)
        print(f"environment {name!r} was not running any more; removed its state file")
        return 0
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)  # its handler stops every process it owns, in order
    deadline = time.monotonic() + DOWN_TIMEOUT
    while time.monotonic() < deadline:
        if not _owner_alive(state):
            print(f"environment {name!r} stopped; nothing left running.")
            return 0
        time.sleep(0.2)
    print(
        f"watcher-harness: environment {name!r} (pid {pid}) did not stop within "
        f"{DOWN_TIMEOUT:.0f} s; see {path.with_suffix('.log')}",
        file=sys.stderr,
    )
    return 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_up = sub.add_parser("up", help="start KCP + SKRs + gateway + watcher; stop on Ctrl-C")
    p_up.add_argument("--skrs", type=int, default=2, choices=range(1, 11), metavar="N")
    p_up.add_argument("--name", default="default", help="name of this environment")
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
        default=10.0,
        metavar="SECONDS",
        help="watcher-health heartbeat interval (default 10; 0: off; docs/health.md)",
    )
    p_up.add_argument(
        "--webhook-command",
        metavar="COMMAND",
        help="bring your own webhook: run this command (upstream's environment contract) as "
        "every SKR's webhook (default: WATCHER_HARNESS_WEBHOOK_COMMAND, else ours)",
    )
    p_up.set_defaults(func=run)
    p_down = sub.add_parser("down", help="stop an environment started with `up --detach`")
    p_down.add_argument("name", nargs="?", default="default")
    p_down.set_defaults(func=run_down)


def run(args: argparse.Namespace) -> int:
    from harness.scenario.values import dns_label

    try:
        dns_label(args.name)
    except ValueError as exc:
        print(f"watcher-harness: --name: {exc}", file=sys.stderr)
        return 2
    if args.webhook_command:  # the detached child inherits it with the environment
        from harness.clusters.selection import ENV_WEBHOOK_COMMAND

        os.environ[ENV_WEBHOOK_COMMAND] = args.webhook_command
    if args.detach:
        return detach(args.skrs, args.name, args.health_interval)
    try:
        asyncio.run(
            up(args.skrs, args.name, live=not args.quiet, health_interval=args.health_interval)
        )
    except (HarnessError, WatcherError) as exc:
        print(f"watcher-harness: {exc}", file=sys.stderr)
        return 1
    return 0


def run_down(args: argparse.Namespace) -> int:
    return down(args.name)
