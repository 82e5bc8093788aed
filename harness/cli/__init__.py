"""``watcher-harness``: the harness's command line.

``run`` runs scenarios and writes reports; ``up`` keeps an environment running for manual
exploration (``health`` prints its watcher-health table; ``get`` prints any object of
any cluster as JSON); ``validate`` checks scenario files; ``list`` shows the scenarios;
``render`` writes the installable SKR and KCP manifests; ``conformance`` checks a webhook or
listener implementation against upstream's wire behaviour. One module per command group.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def main(argv: list[str] | None = None) -> int:
    # Imported here, not at the top: `python -m harness.cli.get` (what a scenario script's
    # ${{ harness.get }} runs, often in a polling loop) imports this package first, and
    # should not pay for every other command's imports (the runner, the environment).
    from harness.cli import conformance, get, render, run, up

    args_given = sys.argv[1:] if argv is None else argv
    if args_given[:1] == ["get"]:  # options and positionals intermixed, as kubectl takes them
        return get.main(args_given[1:])
    parser = argparse.ArgumentParser(prog="watcher-harness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up.register(sub)
    get.register(sub)
    run.register(sub)
    render.register(sub)
    conformance.register(sub)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
