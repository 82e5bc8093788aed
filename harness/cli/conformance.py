"""``watcher-harness conformance``: wire-level checks of a webhook or listener release.

What a Kyma engineer runs in CI for a new webhook build::

    watcher-harness conformance --webhook-command ./bin/webhook
    watcher-harness conformance --listener upstream
    watcher-harness conformance --listener-command \
        "./bin/listener --component {component} --port {port}"

One table row per check (identical / documented choice / differs); exit 0 when nothing
differs, 1 when something does, 2 when the implementation could not be run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.clusters.selection import ENV_WEBHOOK_ISOLATION, webhook_isolation
from harness.conformance.verdicts import CheckResult, Verdict, counts, passed
from harness.errors import HarnessError

EXIT_DIFFERS = 1
EXIT_NOT_RUN = 2
OURS_LISTENER_ARGS = "--component {component} --host {host} --port {port} --insecure-trust-any-xfcc"
COLOURS = {Verdict.IDENTICAL: "green", Verdict.DOCUMENTED: "yellow", Verdict.DIFFERS: "red"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "conformance",
        help="check a webhook or listener implementation against upstream's wire behaviour",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    webhook = p.add_mutually_exclusive_group()
    webhook.add_argument(
        "--webhook-command",
        metavar="COMMAND",
        help="a webhook taking upstream's environment contract (run in a network namespace "
        f"of its own; {ENV_WEBHOOK_ISOLATION}=none opts out)",
    )
    webhook.add_argument("--webhook", choices=("ours",), help="our watcher-webhook")
    listener = p.add_mutually_exclusive_group()
    listener.add_argument(
        "--listener-command",
        metavar="TEMPLATE",
        help="a listener printing each event as a JSON line; {component}, {host}, {port} "
        "and {metrics_port} are filled in (without {metrics_port}: /metrics on {port})",
    )
    listener.add_argument(
        "--listener",
        choices=("ours", "upstream"),
        help="ours (watcher-listener) or upstream's Go listener (built with Go, cached)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    p.set_defaults(func=run)


async def _run(args: argparse.Namespace, workdir: Path) -> list[tuple[str, list[CheckResult]]]:
    sections: list[tuple[str, list[CheckResult]]] = []
    webhook = _webhook_command(args)
    if webhook is not None:
        from harness.conformance.webhook import check_webhook

        isolation = webhook_isolation(os.environ)
        results = await check_webhook(webhook, workdir / "webhook", isolation=isolation)
        sections.append((f"webhook: {shlex.join(webhook)}", results))
    if args.listener or args.listener_command:
        from harness.conformance.listener import check_listener
        from harness.kcp.listener_process import template_command, upstream_command

        directory = workdir / "listener"
        directory.mkdir()
        if args.listener == "upstream":
            from harness.clusters.go_tools import ensure_upstream_listener

            binary = await asyncio.to_thread(ensure_upstream_listener)
            results = await check_listener(upstream_command(binary), directory)
            sections.append((f"listener: upstream's Go listener ({binary.name})", results))
        else:
            template = args.listener_command or _ours_listener()
            words = shlex.split(template)
            results = await check_listener(
                template_command(words),
                directory,
                implementation="ours" if args.listener == "ours" else "upstream",
                metrics_on_own_port="{metrics_port}" in template,
            )
            sections.append((f"listener: {template}", results))
    return sections


def _webhook_command(args: argparse.Namespace) -> list[str] | None:
    if args.webhook_command:
        return shlex.split(args.webhook_command)
    if args.webhook == "ours":
        return [str(Path(sys.executable).parent / "watcher-webhook")]
    return None


def _ours_listener() -> str:
    """``watcher-listener`` next to this interpreter, as a template."""
    executable = shlex.quote(str(Path(sys.executable).parent / "watcher-listener"))
    return f"{executable} {OURS_LISTENER_ARGS}"


def _table(title: str, results: list[CheckResult]) -> Table:
    table = Table(title=escape(title), title_justify="left", show_lines=False, expand=True)
    table.add_column("area", no_wrap=True)
    for column, ratio in (("check", 3), ("upstream", 4), ("this implementation", 4)):
        table.add_column(column, ratio=ratio, overflow="fold")
    table.add_column("verdict", no_wrap=True)
    for r in results:
        colour = COLOURS[r.verdict]
        table.add_row(
            escape(r.area),
            escape(r.check),
            escape(r.upstream),
            escape(r.actual),
            f"[{colour}]{r.verdict}[/{colour}]",
        )
    return table


def run(args: argparse.Namespace) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=160)
    if not (args.webhook or args.webhook_command or args.listener or args.listener_command):
        print(
            "watcher-harness conformance: say what to check: --webhook-command COMMAND, "
            "--webhook ours, --listener-command TEMPLATE or --listener ours|upstream",
            file=sys.stderr,
        )
        return EXIT_NOT_RUN
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        try:
            sections = asyncio.run(_run(args, Path(tmp)))
        except (HarnessError, OSError) as exc:
            print(f"watcher-harness conformance: could not run it: {exc}", file=sys.stderr)
            return EXIT_NOT_RUN
    everything = [r for _, results in sections for r in results]
    for title, results in sections:
        console.print(_table(title, results))
    documented = [r for r in everything if r.verdict is Verdict.DOCUMENTED]
    if documented:
        console.print("[yellow]documented choices:[/yellow]")
        for r in documented:
            console.print(f"  {escape(r.check)}: {escape(r.why)}")
    total = counts(everything)
    console.print(
        f"{total[Verdict.IDENTICAL]} identical, {total[Verdict.DOCUMENTED]} documented "
        f"choices, {total[Verdict.DIFFERS]} differ"
    )
    if args.json is not None:
        data = [{"section": t, **asdict(r)} for t, results in sections for r in results]
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if passed(everything) else EXIT_DIFFERS
