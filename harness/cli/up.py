"""``watcher-harness up``: bring the whole watcher environment up for manual exploration.

Starts a KCP and SKRs (real kube-apiserver + etcd), the Envoy gateway, the Watcher
controller, the Lifecycle-Manager stand-in and one Python webhook per SKR, prints where
everything is, and tears it all down on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from watcher.errors import WatcherError

if TYPE_CHECKING:
    from harness.environment import EnvironmentSpec


# The environment (processes, aiohttp, kubernetes clients) is imported when ``up`` runs, so
# ``validate`` and ``list`` stay fast and work without it.


def _spec(count: int) -> EnvironmentSpec:
    from harness.environment import EnvironmentSpec, SkrSpec

    letters = "abcdefghij"
    return EnvironmentSpec(
        skrs=tuple(
            SkrSpec(f"skr-{c}", f"runtime-{c}", f"skr-{c}.kyma.example.com")
            for c in letters[:count]
        )
    )


async def up(count: int) -> None:
    from harness.environment import watcher_environment

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with watcher_environment(_spec(count)) as env:
        print(f"ready in {env.clusters.startup_seconds:.1f} s (clusters); kubeconfigs:")
        for name, cluster in env.clusters.clusters.items():
            print(f"  {name:8} {cluster.kubeconfig}")
        print(f"gateway   https://127.0.0.1:{env.gateway.port} (admin {env.gateway.admin_url})")
        if env.klm.listener is not None:
            print(
                f"KLM listener http://127.0.0.1:{env.klm.listener.port}/v2/lifecycle-manager/event"
            )
        for skr in env.fleet:
            print(f"webhook {skr.cluster.name}: {skr.webhook_url} metrics {skr.metrics_url}")
        print("Ctrl-C stops everything.", flush=True)
        await stop.wait()
    print("stopped; nothing left running.")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_up = sub.add_parser("up", help="start KCP + SKRs + gateway + watcher; stop on Ctrl-C")
    p_up.add_argument("--skrs", type=int, default=2, choices=range(1, 11), metavar="N")
    p_up.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(up(args.skrs))
    except (HarnessError, WatcherError) as exc:
        print(f"watcher-harness: {exc}", file=sys.stderr)
        return 1
    return 0
