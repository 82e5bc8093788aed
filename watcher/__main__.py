"""``python -m watcher <command>``."""

from __future__ import annotations

import argparse
import sys

from watcher import certs_cli, convert
from watcher.health import cli as health_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m watcher", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    convert.add_parser(sub)
    certs_cli.add_parser(sub)
    health_cli.add_parser(sub)
    args = parser.parse_args(argv)
    command = {"convert": convert.run, "certs": certs_cli.run, "health": health_cli.run}[
        args.command
    ]
    return command(args, sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
