"""``watcher-harness``: the harness's command line.

``run`` runs scenarios and writes reports; ``up`` keeps an environment running for manual
exploration (``health`` prints its watcher-health table); ``validate`` checks scenario
files; ``list`` shows the scenarios; ``render`` writes the installable SKR and KCP
manifests; ``conformance`` checks a webhook or listener implementation against upstream's
wire behaviour. One module per command group.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from harness.cli import conformance, health, render, run, scenarios, up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="watcher-harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up.register(sub)
    health.register(sub)
    scenarios.register(sub)
    run.register(sub)
    render.register(sub)
    conformance.register(sub)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
