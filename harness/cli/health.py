"""``watcher-harness health [NAME]``: the watcher-health table of an environment that
``watcher-harness up`` keeps running (``python -m watcher health`` against its KLM
metrics, found through the environment's state file)."""

from __future__ import annotations

import argparse
import sys

from harness.cli.up import running
from watcher.health import cli as health_cli


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("health", help="print the watcher health of an `up` environment")
    p.add_argument("name", nargs="?", default="default")
    p.add_argument("--fail-on", choices=("broken", "degraded", "never"), default="broken")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
