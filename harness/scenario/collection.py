"""Finding and loading the scenarios of some files and directories: the one place the
command line (``validate``, ``list``, ``run``) and the pytest plugin read scenario files.

Pure apart from reading the files. Every problem is one located line
(``file:line:column: what; hint``): invalid files, names used twice (across files and
matrix instances), and directories without scenario files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.scenario.errors import InvalidScenario
from harness.scenario.loader import duplicate_names, load_scenario_instances, scenario_files
from harness.scenario.model import Scenario


@dataclass(frozen=True)
class Collected:
    """The valid scenarios (one per matrix instance, with their files, in file order) and
    the problem lines; an invalid file contributes no scenario."""

    scenarios: tuple[tuple[Path, Scenario], ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def empty_directory_problem(path: str | Path) -> str:
    return f"{path}: no scenario files (*.yaml, *.yml) in this directory"


def collect_scenarios(paths: Iterable[str | Path]) -> Collected:
    """Every scenario instance in ``paths`` (files, or directories searched recursively for
    ``*.yaml``/``*.yml``) and every problem found, in the order: empty directories, then
    the files' problems in file order, then duplicate names."""
    paths = list(paths)
    problems = [
        empty_directory_problem(p) for p in paths if Path(p).is_dir() and not scenario_files([p])
    ]
    loaded: list[tuple[Path, Scenario]] = []
    for file in scenario_files(paths):
        try:
            loaded.extend((file, scenario) for scenario in load_scenario_instances(file))
        except InvalidScenario as exc:
            problems.extend(e.line() for e in exc.errors)
    problems.extend(e.line() for e in duplicate_names([s for _, s in loaded]))
    return Collected(tuple(loaded), tuple(problems))
