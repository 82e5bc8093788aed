"""``watcher-harness validate`` and ``watcher-harness list``: read scenario files, run nothing.

``validate`` prints ``ok: <file>`` per valid file and one ``file:line:column: what; hint``
line per problem (on stderr); exit 0 only if every file is valid, 2 otherwise.
``list`` prints each scenario's name, tags and description.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.scenario import InvalidScenario, Scenario, load_scenario, scenario_files
from harness.scenario.loader import duplicate_names

EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p_validate = sub.add_parser(
        "validate", help="check scenario files; one located line per problem"
    )
    p_validate.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p_validate.set_defaults(func=validate)
    p_list = sub.add_parser("list", help="list scenarios: name, tags, description")
    p_list.add_argument("paths", nargs="*", default=["scenarios"], metavar="FILE|DIR")
    p_list.set_defaults(func=list_scenarios)


def _load(paths: list[str]) -> tuple[list[tuple[Path, Scenario]], list[str]]:
    """Valid scenarios with their files, and the problem lines."""
    loaded: list[tuple[Path, Scenario]] = []
    problems: list[str] = []
    files = scenario_files(paths)
    for path in paths:
        if Path(path).is_dir() and not scenario_files([path]):
            problems.append(f"{path}: no scenario files (*.yaml, *.yml) in this directory")
    for file in files:
        try:
            loaded.append((file, load_scenario(file)))
        except InvalidScenario as exc:
            problems.extend(e.line() for e in exc.errors)
    problems.extend(e.line() for e in duplicate_names([s for _, s in loaded]))
    return loaded, problems


def validate(args: argparse.Namespace) -> int:
    loaded, problems = _load(args.paths)
    for file, _ in loaded:
        print(f"ok: {file}")
    for line in problems:
        print(line, file=sys.stderr)
    return EXIT_INVALID if problems else 0


def list_scenarios(args: argparse.Namespace) -> int:
    loaded, problems = _load(args.paths)
    if loaded:
        width = max(len(s.name) for _, s in loaded)
        for file, s in loaded:
            tags = ",".join(s.tags) or "-"
            description = " ".join(s.description.split()) or "-"
            print(f"{s.name:{width}}  [{tags}]  {description}  ({file})")
    for line in problems:
        print(line, file=sys.stderr)
    return EXIT_INVALID if problems else 0
