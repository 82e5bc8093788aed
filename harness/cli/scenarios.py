"""``watcher-harness validate`` and ``watcher-harness list``: read scenario files, run nothing.

``validate`` prints ``ok: <file>`` per valid file and one ``file:line:column: what; hint``
line per problem (on stderr); exit 0 only if every file is valid, 2 otherwise.
``list`` prints each scenario's name, tags and description; ``--selector EXPR``
(repeatable, ANDed: ``tag=smoke``, ``tag!=slow``, ``name=spec-*``, ``name!=...``) lists
only the matching ones, and a selection matching none exits 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.scenario import Scenario
from harness.scenario.collection import collect_scenarios
from harness.scenario.select import SYNTAX, InvalidSelector, Selector, describe, parse_selector
from harness.scenario.select import selected as is_selected

EXIT_INVALID = 2


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
