"""Read scenario files; report every problem as ``file:line:column: what; hint``.

The YAML is composed into a node tree (which keeps line and column of every key and
value) and constructed from that same tree; :mod:`harness.scenario.locate` maps each
validation error to its node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.scenario.bindings import resolve_load_time
from harness.scenario.errors import InvalidScenario, Location, Problem, ScenarioError
from harness.scenario.locate import at, node_at, place, resolve, show, translate
from harness.scenario.matrix import instance_name, instances
from harness.scenario.model import Scenario
from harness.scenario.operations import ApplyOp

SUFFIXES = (".yaml", ".yml")


# Reading ------------------------------------------------------------------------------------


def scenario_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories expanded to their ``*.yaml``/``*.yml`` files, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file()))
        else:
            out.append(p)
    return out


def load_scenario(path: str | Path) -> Scenario:
    """One scenario file → :class:`Scenario`; :class:`InvalidScenario` lists every problem."""
    path = Path(path)
    return loads_scenario(_read(path), source=str(path), base_dir=path.parent)


def load_scenario_instances(path: str | Path) -> list[Scenario]:
    """One scenario file → its instances: one per ``matrix`` combination (a file without
    ``matrix`` has exactly one). :class:`InvalidScenario` lists every problem."""
    path = Path(path)
    return loads_scenario_instances(_read(path), source=str(path), base_dir=path.parent)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidScenario(
            [ScenarioError(f"cannot read the file: {reason}", location=Location(str(path)))]
        ) from None


def duplicate_names(scenarios: Sequence[Scenario]) -> list[ScenarioError]:
    """Scenario names must be unique across files: reports and test ids use them."""
    first: dict[str, str] = {}
    out = []
    for s in scenarios:
        where = s.source or "<string>"
        if s.name in first:
            out.append(
                ScenarioError(
                    f"scenario name {s.name!r} is already used by {first[s.name]}",
                    location=Location(where),
                    hint="scenario names must be unique",
                )
            )
        else:
            first[s.name] = where
    return out


def loads_scenario(
    text: str, *, source: str = "<string>", base_dir: Path | None = None
) -> Scenario:
    """Parse and validate scenario YAML. ``base_dir`` resolves ``apply.file`` (checked to
    exist when given). A file with a ``matrix`` of several combinations is refused here:
    :func:`loads_scenario_instances` gives them all."""
    found = loads_scenario_instances(text, source=source, base_dir=base_dir)
    if len(found) != 1:
        names = ", ".join(s.name for s in found)
        raise InvalidScenario(
            [
                ScenarioError(
                    f"this matrix has {len(found)} instances ({names})",
                    location=Location(source),
                    hint="load it with load_scenario_instances",
                )
            ]
        )
    return found[0]


def loads_scenario_instances(
    text: str, *, source: str = "<string>", base_dir: Path | None = None
) -> list[Scenario]:
    """Parse, expand the ``matrix``, substitute bindings and validate every instance."""
    node, data = _parse(text, source)
    if not isinstance(data, dict):
        return [_validated(node, data, source, base_dir)]
    combos, problems = instances(data.get("matrix"))
    if problems:
        raise InvalidScenario(_binding_errors(problems, node, data, source))
    out = []
    for combo in combos:
        resolved, problems = resolve_load_time(data, combo.values)
        if problems:
            raise InvalidScenario(_binding_errors(problems, node, data, source))
        if combo.suffix and isinstance(resolved.get("name"), str):
            resolved["name"] = instance_name(resolved["name"], combo.suffix)
        out.append(_validated(node, resolved, source, base_dir))
    return out


def _binding_errors(
    problems: Sequence[Problem], root: yaml.Node, data: Any, source: str
) -> list[ScenarioError]:
    seen: set[tuple[str, int, int]] = set()
    out = []
    for p in problems:
        location = at(source, node_at(root, p.loc))
        key = (p.message, location.line or 0, location.column or 0)
        if key in seen:
            continue  # one line per place, not per matrix instance
        seen.add(key)
        where = place(p.loc, data)
        out.append(ScenarioError(f"{where}: {p.message}", location=location, hint=p.hint))
    return sorted(out, key=_position)


def _validated(node: yaml.Node, data: Any, source: str, base_dir: Path | None) -> Scenario:
    errors = _duplicate_keys(node, source)
    if not isinstance(data, dict):
        raise InvalidScenario(
            [
                *errors,
                ScenarioError(
                    f"a scenario is a mapping with name, clusters and steps; got {show(data)}",
                    location=at(source, node),
                ),
            ]
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors.extend(translate(exc, node, data, source))
    else:
        if base_dir is not None:
            errors.extend(_missing_files(scenario, node, source, base_dir))
        if not errors:
            scenario._source = source
            return scenario
    raise InvalidScenario(sorted(errors, key=_position))


def _position(error: ScenarioError) -> tuple[int, int]:
    return (error.location.line or 0, error.location.column or 0)


def dump_scenario(scenario: Scenario) -> str:
    """YAML that :func:`loads_scenario` reads back into an equal scenario (defaults left out)."""
    data = scenario.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # Non-ASCII is escaped: PyYAML writes NEL and U+2028/9 raw otherwise, and a reader folds
    # those line breaks into spaces (found by the round-trip property).
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=False)


def _parse(text: str, source: str) -> tuple[yaml.Node, Any]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InvalidScenario(
                [
                    ScenarioError(
                        "the file is empty",
                        location=Location(source, 1, 1),
                        hint="a scenario needs at least name, clusters and steps",
                    )
                ]
            )
        return node, loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        hint = ""
        if exc.context and exc.problem:
            hint = exc.context
            if exc.context_mark is not None and exc.context_mark is not mark:
                hint += f" (line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"
        location = Location(source, mark.line + 1, mark.column + 1) if mark else Location(source)
        raise InvalidScenario(
            [ScenarioError(f"YAML syntax error: {what}", location=location, hint=hint)]
        ) from None
    except yaml.YAMLError as exc:
        raise InvalidScenario(
            [ScenarioError(f"YAML error: {exc}", location=Location(source))]
        ) from None
    finally:
        loader.dispose()


def _duplicate_keys(node: yaml.Node, source: str) -> list[ScenarioError]:
    out: list[ScenarioError] = []
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    first = seen[key.value].start_mark
                    out.append(
                        ScenarioError(
                            f"duplicate key {key.value!r}",
                            location=at(source, key),
                            hint=f"first given on line {first.line + 1}; remove one",
                        )
                    )
                seen[key.value] = key
            out.extend(_duplicate_keys(value, source))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            out.extend(_duplicate_keys(item, source))
    return out


def _missing_files(
    scenario: Scenario, root: yaml.Node, source: str, base_dir: Path
) -> list[ScenarioError]:
    out = []
    names = {"steps": [{"name": step.name} for step in scenario.steps]}
    for i, step in enumerate(scenario.steps):
        for block, ops in step.blocks():
            for j, op in enumerate(ops):
                file = op.apply.file if isinstance(op, ApplyOp) else None
                if file is None or (base_dir / file).is_file():
                    continue
                found = resolve(("steps", i, block, j, "apply", "apply", "file"), root)
                out.append(
                    ScenarioError(
                        f"{place(found.path, names)}: file {file!r} not found",
                        location=at(source, found.node),
                        hint=f"paths are relative to the scenario's directory {base_dir}",
                    )
                )
    return out
