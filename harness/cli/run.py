"""``watcher-harness validate``, ``list`` and ``run``: scenario files read, listed, run.

``validate`` prints ``ok: <file>`` per valid file and one ``file:line:column: what; hint``
line per problem (on stderr); exit 0 only if every file is valid, 2 otherwise. ``list``
prints each scenario's name, tags and description. ``--selector EXPR`` (``list``, ``run``;
repeatable, ANDed: ``tag=smoke``, ``name=spec-*``, ...) picks scenarios; a selection
matching none exits 2 with one line.

``run FILE|DIR...`` validates every file, then runs the scenarios: an invalid file never
starts a cluster (one located line per problem, exit 2); a backend whose tools are missing
exits 3 with one line saying what to install, before anything starts. Exit 0 only if
every scenario passed, was flaky (passed on a ``--retries`` retry) or was skipped (it
checked nothing: the reason is in the table, it never passes); 1 otherwise. The options
are in ``--help`` and docs/scenarios.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.clusters.selection import BACKEND_FLAGS, BackendOverride, override_from
from harness.report import RunReport, ScenarioReport, Status
from harness.runner.plan import ScenarioPlan, missing_tools, plan_scenario
from harness.runner.run import RunResult
from harness.runner.summary import failure_lines, problem_lines
from harness.scenario import Scenario
from harness.scenario.collection import collect_scenarios
from harness.scenario.select import SYNTAX, InvalidSelector, Selector, describe, parse_selector
from harness.scenario.select import selected as is_selected

EXIT_INVALID = 2
EXIT_FAILED = 1
EXIT_UNAVAILABLE = 3
_STYLE = {
    Status.PASSED: "green",
    Status.FLAKY: "magenta",
    Status.FAILED: "red",
    Status.ERROR: "red bold",
    Status.SKIPPED: "yellow",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_validate = sub.add_parser(
        "validate", help="check scenario files; one located line per problem"
    )
    p_validate.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p_validate.set_defaults(func=validate)
    p_list = sub.add_parser("list", help="list scenarios: name, tags, description")
    p_list.add_argument("paths", nargs="*", default=["scenarios"], metavar="FILE|DIR")
    add_selector_option(p_list)
    p_list.set_defaults(func=list_scenarios)
    p = sub.add_parser("run", help="run scenarios; exit 0 only if every expectation held")
    p.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p.add_argument("--junit", type=Path, metavar="FILE", help="JUnit XML, one case per check")
    p.add_argument(
        "--report-dir", type=Path, metavar="DIR", help="index.html, report.json and process logs"
    )
    p.add_argument(
        "--keep-going", action="store_true", help="run the remaining scenarios after a failure"
    )
    add_selector_option(p)
    p.add_argument(
        "--retries",
        type=_retries,
        default=0,
        metavar="N",
        help="run a failed scenario again, from fresh clusters, up to N more times; passing "
        "on a retry is reported as flaky (exit 0) (default: 0)",
    )
    for flag in BACKEND_FLAGS:
        p.add_argument(flag.flag, metavar=flag.metavar, choices=flag.choices, help=flag.help)
    p.set_defaults(func=run)


def add_selector_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--selector",
        action="append",
        default=[],
        metavar="EXPR",
        help=f"only scenarios matching EXPR: {SYNTAX} (shell-style patterns: 'spec-*'); "
        "repeat to require several",
    )


def parse_selector_args(command: str, texts: Sequence[str]) -> tuple[Selector, ...] | None:
    """The ``--selector`` values parsed, or None after printing the one line saying what
    is wrong."""
    try:
        return tuple(parse_selector(t) for t in texts)
    except InvalidSelector as exc:
        print(f"watcher-harness {command}: --selector: {exc}", file=sys.stderr)
        return None


def select(
    loaded: Sequence[tuple[Path, Scenario]], selectors: Sequence[Selector]
) -> list[tuple[Path, Scenario]]:
    return [(file, s) for file, s in loaded if is_selected(s, selectors)]


def nothing_selected(command: str, selectors: Sequence[Selector], total: int) -> str:
    """The one line for a selection that matches none of ``total`` scenarios."""
    plural = "" if total == 1 else "s"
    return (
        f"watcher-harness {command}: --selector {describe(selectors)} matches none of the "
        f"{total} scenario{plural} given"
    )


def validate(args: argparse.Namespace) -> int:
    collected = collect_scenarios(args.paths)
    for file in dict.fromkeys(file for file, _ in collected.scenarios):
        print(f"ok: {file}")
    for line in collected.problems:
        print(line, file=sys.stderr)
    return 0 if collected.ok else EXIT_INVALID


def list_scenarios(args: argparse.Namespace) -> int:
    selectors = parse_selector_args("list", args.selector)
    if selectors is None:
        return EXIT_INVALID
    collected = collect_scenarios(args.paths)
    shown = select(collected.scenarios, selectors)
    if shown:
        width = max(len(s.name) for _, s in shown)
        for file, s in shown:
            tags = ",".join(s.tags) or "-"
            description = " ".join(s.description.split()) or "-"
            print(f"{s.name:{width}}  [{tags}]  {description}  ({file})")
    for line in collected.problems:
        print(line, file=sys.stderr)
    if not collected.ok:
        return EXIT_INVALID
    if collected.scenarios and not shown:
        print(nothing_selected("list", selectors, len(collected.scenarios)), file=sys.stderr)
        return EXIT_INVALID
    return 0


def _retries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of retries (0, 1, 2, ...)")
    return value


def summary_table(report: RunReport) -> Table:
    """One row per scenario; a ``reason`` column when any was skipped (say it checked
    nothing because its steps need what the webhook under test lacks)."""
    skipped = any(s.status is Status.SKIPPED for s in report.scenarios)
    table = Table(title=f"run {report.run_id}", title_justify="left")
    columns = ("scenario", "status", "expectations", "duration") + (("reason",) if skipped else ())
    for column in columns:
        table.add_column(column, justify="right" if column == "duration" else "left")
    for s in report.scenarios:
        style = _STYLE[s.status]
        row = [
            s.name,
            f"[{style}]{s.status_text}[/]",
            f"{s.expectations_passed}/{len(s.expectations)}",
            f"{s.total_duration:.1f} s",
        ]
        if skipped:
            row.append(escape(s.error or "") if s.status is Status.SKIPPED else "")
        table.add_row(*row)
    return table


def backend_override(args: argparse.Namespace) -> BackendOverride:
    """The command line's say on every scenario's backend (over ``WATCHER_HARNESS_*``,
    over the files)."""
    return override_from(lambda flag: getattr(args, flag.dest))


def _selected(args: argparse.Namespace) -> list[Scenario] | None:
    """The valid scenarios the command line selects; None after printing why there are
    none to run (a bad selector, an invalid file, a selection matching nothing)."""
    selectors = parse_selector_args("run", args.selector)
    if selectors is None:
        return None
    collected = collect_scenarios(args.paths)
    if not collected.ok:
        for line in collected.problems:
            print(line, file=sys.stderr)
        return None
    loaded = select(collected.scenarios, selectors)
    if not loaded:
        print(nothing_selected("run", selectors, len(collected.scenarios)), file=sys.stderr)
        return None
    return [s for _, s in loaded]


def _cannot_start(plans: Sequence[ScenarioPlan]) -> list[str]:
    """The lines saying why the chosen backends cannot run here (an invalid choice, missing
    tools), asked before anything starts; none if they can. A scenario the backend cannot
    run is not one: the runner reports it skipped."""
    missing = asyncio.run(missing_tools(plans))
    reasons = [plan.error or tools for plan, tools in zip(plans, missing, strict=True)]
    return [line for r in dict.fromkeys(r for r in reasons if r) for line in r.splitlines()]


class _Progress:
    """What the terminal shows while the plans run (nothing when stdout is not one): a
    status line, a line per finished scenario with its failures, and each retry."""

    def __init__(self, console: Console, total: int, retries: int) -> None:
        self.console = console
        self.quiet = not console.is_terminal
        self.status = console.status("starting") if not self.quiet else None
        self.total = total
        self.attempts = retries + 1
        self.position = 0

    def start(self, scenario: Scenario) -> None:
        self.position += 1
        if self.status is not None:
            self.status.update(f"[{self.position}/{self.total}] running {scenario.name}")

    def done(self, result: ScenarioReport) -> None:
        if self.quiet:
            return
        style = _STYLE[result.status]
        self.console.print(
            f"[{style}]{result.status.value:7}[/] {result.name} "
            f"({result.expectations_passed}/{len(result.expectations)} expectations, "
            f"{result.duration:.1f} s)"
        )
        for line in failure_lines(result):
            self.console.print(f"    {line}", markup=False, highlight=False)

    def retry(self, failed: ScenarioReport, attempt: int) -> None:
        if self.status is not None:
            self.status.update(
                f"[{self.position}/{self.total}] running {failed.name} (attempt {attempt} of "
                f"{self.attempts})"
            )
        if self.quiet:
            return
        self.console.print(
            f"[yellow]retry  [/] {failed.name}: attempt {attempt - 1} {failed.status.value} "
            f"({failed.duration:.1f} s); attempt {attempt} of {self.attempts} from fresh "
            "clusters"
        )
        for line in problem_lines(failed):
            self.console.print(f"    {line}", markup=False, highlight=False)

    def run(self, runs: Coroutine[Any, Any, RunResult]) -> RunResult:
        if self.status is None:
            return asyncio.run(runs)
        with self.status:
            return asyncio.run(runs)


def _print_results(progress: _Progress, result: RunResult) -> None:
    """The summary table, (quiet) every failure on its own line, where the reports are."""
    progress.console.print(summary_table(result.report))
    if progress.quiet:
        for s in result.report.scenarios:
            for line in failure_lines(s):
                print(f"{s.name}: {line}")
    for label, path in (("HTML report", result.written.html), ("JUnit", result.written.junit)):
        if path is not None:
            print(f"{label}: {path}")


def run(args: argparse.Namespace) -> int:
    scenarios = _selected(args)
    if scenarios is None:
        return EXIT_INVALID
    from harness.runner import run_all  # the environment is imported only to run
    from harness.runner.scenario import RunOptions

    plans = [plan_scenario(s, backend_override(args)) for s in scenarios]
    problems = _cannot_start(plans)
    for line in problems:
        print(f"watcher-harness run: {line}", file=sys.stderr)
    if problems:
        return EXIT_UNAVAILABLE
    progress = _Progress(Console(), len(plans), args.retries)
    runs = run_all(
        plans,
        report_dir=args.report_dir,
        junit=args.junit,
        keep_going=args.keep_going,
        options=RunOptions(log_dir=args.report_dir / "logs" if args.report_dir else None),
        retries=args.retries,
        on_start=progress.start,
        on_done=progress.done,
        on_retry=progress.retry,
    )
    result = progress.run(runs)
    _print_results(progress, result)
    report = result.report
    return 0 if report.ok and len(report.scenarios) == len(plans) else EXIT_FAILED
