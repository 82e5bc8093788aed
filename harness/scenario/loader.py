"""Read scenario files; report every problem as ``file:line:column: what; hint``.

The YAML is composed into a node tree (which keeps line and column of every key and
value) and constructed from that same tree. Validation errors carry a path of YAML keys
and list indexes (pydantic's ``loc``, by alias, plus the tags of discriminated unions);
walking the model types and the node tree side by side along that path finds the node to
point at and the model whose keys are expected there, for "did you mean" hints.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Discriminator, Tag, ValidationError
from pydantic_core import ErrorDetails

from harness.scenario.errors import InvalidScenario, Location, ScenarioError
from harness.scenario.model import Scenario, Step
from harness.scenario.operations import OPERATIONS, ApplyOp
from harness.scenario.references import Loc, ReferenceProblems

SUFFIXES = (".yaml", ".yml")
_NAMED_SECTIONS: dict[tuple[str, ...], tuple[str, str]] = {
    ("steps",): ("step", "name"),
    ("clusters", "skrs"): ("SKR", "name"),
    ("watchers",): ("Watcher", "name"),
    ("listeners",): ("listener", "component"),
    ("kymas",): ("Kyma", "name"),
}


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
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidScenario(
            [ScenarioError(f"cannot read the file: {reason}", location=Location(str(path)))]
        ) from None
    return loads_scenario(text, source=str(path), base_dir=path.parent)


def load_scenarios(paths: Iterable[str | Path]) -> list[Scenario]:
    """Every scenario in ``paths`` (files or directories); one :class:`InvalidScenario`
    lists the problems of all files, and scenario names used by more than one file."""
    scenarios: list[Scenario] = []
    errors: list[ScenarioError] = []
    for file in scenario_files(paths):
        try:
            scenarios.append(load_scenario(file))
        except InvalidScenario as exc:
            errors.extend(exc.errors)
    errors.extend(duplicate_names(scenarios))
    if errors:
        raise InvalidScenario(errors)
    return scenarios


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
    exist when given)."""
    node, data = _parse(text, source)
    errors = _duplicate_keys(node, source)
    if not isinstance(data, dict):
        raise InvalidScenario(
            [
                *errors,
                ScenarioError(
                    f"a scenario is a mapping with name, clusters and steps; got {_show(data)}",
                    location=_at(source, node),
                ),
            ]
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors.extend(_translate(exc, node, data, source))
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
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


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


def _at(source: str, node: yaml.Node) -> Location:
    return Location(source, node.start_mark.line + 1, node.start_mark.column + 1)


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
                            location=_at(source, key),
                            hint=f"first given on line {first.line + 1}; remove one",
                        )
                    )
                seen[key.value] = key
            out.extend(_duplicate_keys(value, source))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            out.extend(_duplicate_keys(item, source))
    return out


# Walking types and nodes along an error's path ---------------------------------------------


@dataclass
class _Found:
    node: yaml.Node  # the deepest node on the path that exists in the YAML
    key: yaml.Node | None  # its key node, if it is a mapping value
    path: list[str | int] = field(default_factory=list)  # YAML path, union tags left out
    parent: type[BaseModel] | None = None  # the model that owns the last path element
    type: Any = None  # the type at the end of the path (None: unknown)
    complete: bool = True  # every element of the path exists in the YAML


def _unwrap(tp: Any) -> tuple[str, Any]:
    """``("model", cls)``, ``("seq", item)``, ``("dict", value)``,
    ``("union", {tag: type})`` or ``("leaf", None)``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            inner, *meta = typing.get_args(tp)
            if any(isinstance(m, Discriminator) for m in meta):
                members = {}
                for member in typing.get_args(inner):
                    tags = [m.tag for m in typing.get_args(member)[1:] if isinstance(m, Tag)]
                    if tags:
                        members[tags[0]] = member
                return "union", members
            tp = inner
            continue
        if origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(options) != 1:
                return "leaf", None
            tp = options[0]
            continue
        if origin in (tuple, list):
            return "seq", typing.get_args(tp)[0]
        if origin is dict:
            return "dict", typing.get_args(tp)[1]
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return "model", tp
        return "leaf", None


def _field_type(model: type[BaseModel], key: str | int) -> Any:
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            if info.metadata:
                return typing.Annotated[(info.annotation, *info.metadata)]
            return info.annotation
    return None


def _child(node: yaml.Node, key: str | int) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                return k, v
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key], node.value[key]
    return None


def _resolve(loc: Sequence[str | int], root: yaml.Node) -> _Found:
    found = _Found(node=root, key=None, type=Scenario)
    for element in loc:
        kind, arg = _unwrap(found.type) if found.type is not None else ("leaf", None)
        if kind == "union" and isinstance(arg, dict) and element in arg:
            found.type = arg[element]
            continue
        found.parent = arg if kind == "model" else None
        if found.parent is not None:
            found.type = _field_type(found.parent, element)
        elif kind in ("seq", "dict"):
            found.type = arg
        else:
            found.type = None
        found.path.append(element)
        if not found.complete:
            continue
        child = _child(found.node, element)
        if child is None:
            # Past the YAML: a missing key, or (type unknown) a union tag we cannot tell.
            if found.type is None and kind not in ("model", "seq", "dict"):
                found.path.pop()
                continue
            found.complete = False
            continue
        found.key, found.node = child
    return found


def _data_at(data: Any, path: Sequence[str | int]) -> Any:
    for element in path:
        in_dict = isinstance(data, dict) and element in data
        in_list = isinstance(data, list) and isinstance(element, int) and 0 <= element < len(data)
        if not (in_dict or in_list):
            return None
        data = data[element]
    return data


def _dotted(path: Sequence[str | int]) -> str:
    out = ""
    for element in path:
        out += f"[{element}]" if isinstance(element, int) else (f".{element}" if out else element)
    return out


def _where(path: Sequence[str | int], data: Any) -> str:
    """``step 'deploy', try[0].patch.cluster``, ``SKR 'skr-a'``, ``settings.requeue``."""
    for prefix, (what, key) in _NAMED_SECTIONS.items():
        n = len(prefix)
        if tuple(path[:n]) == prefix and len(path) > n and isinstance(path[n], int):
            item = _data_at(data, path[: n + 1])
            name = item.get(key) if isinstance(item, dict) else None
            base = f"{what} {name!r}" if isinstance(name, str) else f"{_dotted(path[: n + 1])}"
            rest = _dotted(path[n + 1 :])
            return f"{base}, {rest}" if rest else base
    return _dotted(path) or "the scenario"


def _show(value: Any) -> str:
    kinds = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "nothing (null)"
    for t, name in kinds.items():
        if isinstance(value, t):
            if t in (dict, list):
                return name
            return f"{name} {_short(value)}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    return _short(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Translating errors ---------------------------------------------------------------------------

_EXPECTED = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def _translate(
    exc: ValidationError, root: yaml.Node, data: Any, source: str
) -> list[ScenarioError]:
    out: list[ScenarioError] = []
    errors = exc.errors(include_url=False)
    for err in errors:
        if err["type"] == "too_short" and any(
            len(other["loc"]) > len(err["loc"]) and other["loc"][: len(err["loc"])] == err["loc"]
            for other in errors
        ):
            continue  # a list whose items failed: the items' errors say why
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("error"), ReferenceProblems):
            for p in ctx["error"].problems:
                out.append(_located(p.loc, p.message, p.hint, root, data, source))
            continue
        out.append(_one(err, root, data, source))
    return out


def _located(
    loc: Loc, message: str, hint: str, root: yaml.Node, data: Any, source: str
) -> ScenarioError:
    found = _resolve(loc, root)
    where = _where(found.path, data)
    return ScenarioError(f"{where}: {message}", location=_at(source, found.node), hint=hint)


def _one(err: ErrorDetails, root: yaml.Node, data: Any, source: str) -> ScenarioError:
    found = _resolve(err["loc"], root)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    path = found.path
    node = found.node

    if kind == "extra_forbidden" and path:
        key = str(path[-1])
        where = _where(path[:-1], data)
        known = _keys(found.parent)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        if close:
            hint = f"did you mean {close[0]!r}?"
        elif known:
            hint = f"known keys: {', '.join(known)}"
        else:
            hint = ""
        if found.parent is Step and key in OPERATIONS:
            hint = f"operations go in a list under try, catch or finally: try: [{{{key}: ...}}]"
        return ScenarioError(
            f"unknown key {key!r} in {where}",
            location=_at(source, found.key or node),
            hint=hint,
        )
    if kind == "missing" and path:
        return ScenarioError(
            f"missing key {str(path[-1])!r} in {_where(path[:-1], data)}",
            location=_at(source, node),
        )
    where = _where(path, data)
    value = _data_at(data, path)
    if kind == "union_tag_invalid":
        tag = str(ctx.get("tag"))
        key_node = node.value[0][0] if isinstance(node, yaml.MappingNode) and node.value else node
        return ScenarioError(
            f"{where}: unknown operation {tag!r}",
            location=_at(source, key_node),
            hint=_did_you_mean(tag, list(OPERATIONS), "operations"),
        )
    if kind == "union_tag_not_found":
        _, members = _unwrap(found.type) if found.type is not None else ("leaf", {})
        if "process" in members:
            return ScenarioError(
                f"{where}: a fault has action and target, kcp, or rotate; got {_show(value)}",
                location=_at(source, node),
                hint="e.g. {action: stop, target: gateway}, {kcp: {delay: 1s}}, {rotate: leaf}",
            )
        keys = ", ".join(repr(k) for k in value) if isinstance(value, dict) else ""
        got = f"keys {keys}" if keys else _show(value)
        return ScenarioError(
            f"{where}: an operation is a mapping with exactly one key; got {got}",
            location=_at(source, node),
            hint=f"one of {', '.join(OPERATIONS)}; put each operation in its own list item",
        )
    if kind in ("literal_error", "enum"):
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = _did_you_mean(str(value), options, "allowed") if options else ""
        return ScenarioError(
            f"{where}: {_show(value)} is not allowed; expected {ctx.get('expected')}",
            location=_at(source, node),
            hint=hint,
        )
    if kind in _EXPECTED:
        return ScenarioError(
            f"{where}: expected {_EXPECTED[kind]}, got {_show(value)}",
            location=_at(source, node),
        )
    message = err["msg"].removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        message = f"{_show(value)} does not match the pattern {ctx.get('pattern')}"
    elif message.startswith("Input should be"):
        message = message.replace("Input should be", "should be", 1) + f", got {_show(value)}"
    return ScenarioError(f"{where}: {message}", location=_at(source, node))


def _keys(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _did_you_mean(word: str, options: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    listing = f"{what}: {', '.join(options)}"
    return f"did you mean {close[0]!r}? ({listing})" if close else listing


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
                found = _resolve(("steps", i, block, j, "apply", "apply", "file"), root)
                out.append(
                    ScenarioError(
                        f"{_where(found.path, names)}: file {file!r} not found",
                        location=_at(source, found.node),
                        hint=f"paths are relative to the scenario's directory {base_dir}",
                    )
                )
    return out
