"""Point at the YAML node an error is about, and say what is wrong there.

Pure. Validation errors carry a path of YAML keys and list indexes (pydantic's ``loc``, by
alias, plus the tags of discriminated unions); walking the model types and the node tree
side by side along that path finds the node to point at and the model whose keys are
expected there, for "did you mean" hints.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, Discriminator, Tag, ValidationError
from pydantic_core import ErrorDetails

from harness.scenario.errors import Loc, Location, ScenarioError
from harness.scenario.expectations import METRIC_NAME_PATTERN, TARGET_PATTERN
from harness.scenario.fault_ops import FAULT_TARGET_PATTERN
from harness.scenario.model import Scenario
from harness.scenario.operations import OPERATIONS
from harness.scenario.references import ReferenceProblems
from harness.scenario.selections import SELECTION_CLUSTER_PATTERN
from harness.scenario.steps import Step
from harness.scenario.timeline import TIMELINE_FAULT_TARGET_PATTERN

_NAMED_SECTIONS: dict[tuple[str, ...], tuple[str, str]] = {
    ("steps",): ("step", "name"),
    ("clusters", "skrs"): ("SKR", "name"),
    ("watchers",): ("Watcher", "name"),
    ("listeners",): ("listener", "component"),
    ("kymas",): ("Kyma", "name"),
}


def at(source: str, node: yaml.Node) -> Location:
    return Location(source, node.start_mark.line + 1, node.start_mark.column + 1)


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
                return "union", _tagged_members(inner)
            tp = inner
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(options) != 1:
                return "leaf", None
            tp = options[0]
        else:
            return _container(tp, origin)


def _tagged_members(union: Any) -> dict[str, Any]:
    """A discriminated union's members by their ``Tag``."""
    members = {}
    for member in typing.get_args(union):
        tags = [m.tag for m in typing.get_args(member)[1:] if isinstance(m, Tag)]
        if tags:
            members[tags[0]] = member
    return members


def _container(tp: Any, origin: Any) -> tuple[str, Any]:
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


def node_at(root: yaml.Node, path: Sequence[str | int]) -> yaml.Node:
    """The deepest node of the YAML along ``path`` (keys and indexes, no union tags)."""
    node = root
    for element in path:
        found = _child(node, element)
        if found is None:
            break
        node = found[1]
    return node


def resolve(loc: Sequence[str | int], root: yaml.Node) -> _Found:
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


def place(path: Sequence[str | int], data: Any) -> str:
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


def show(value: Any) -> str:
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

_PATTERNS = {
    FAULT_TARGET_PATTERN: "gateway, listener/<component>, webhook/<skr> or apiserver/<cluster>",
    TARGET_PATTERN: "gateway, klm, listener/<component>, webhook/<skr> or apiserver/<cluster>",
    SELECTION_CLUSTER_PATTERN: 'a cluster name, or "*" for every SKR',
    TIMELINE_FAULT_TARGET_PATTERN: (
        "gateway, kcp, certificates, listener/<component>, webhook/<skr> or apiserver/<cluster>"
    ),
    METRIC_NAME_PATTERN: "a Prometheus metric name",
}
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


def translate(exc: ValidationError, root: yaml.Node, data: Any, source: str) -> list[ScenarioError]:
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
    found = resolve(loc, root)
    where = place(found.path, data)
    return ScenarioError(f"{where}: {message}", location=at(source, found.node), hint=hint)


def _one(err: ErrorDetails, root: yaml.Node, data: Any, source: str) -> ScenarioError:
    found = resolve(err["loc"], root)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    path = found.path
    node = found.node

    if kind == "extra_forbidden" and path:
        key = str(path[-1])
        return ScenarioError(
            f"unknown key {key!r} in {place(path[:-1], data)}",
            location=at(source, found.key or node),
            hint=_unknown_key_hint(key, found.parent),
        )
    if kind == "missing" and path:
        return ScenarioError(
            f"missing key {str(path[-1])!r} in {place(path[:-1], data)}",
            location=at(source, node),
        )
    where = place(path, data)
    value = _data_at(data, path)
    if kind == "union_tag_invalid":
        tag = str(ctx.get("tag"))
        key_node = node.value[0][0] if isinstance(node, yaml.MappingNode) and node.value else node
        return ScenarioError(
            f"{where}: unknown operation {tag!r}",
            location=at(source, key_node),
            hint=_did_you_mean(tag, list(OPERATIONS), "operations"),
        )
    if kind == "union_tag_not_found":
        _, members = _unwrap(found.type) if found.type is not None else ("leaf", {})
        if "process" in members:
            return ScenarioError(
                f"{where}: a fault has action and target, kcp, or rotate; got {show(value)}",
                location=at(source, node),
                hint="e.g. {action: stop, target: gateway}, {kcp: {delay: 1s}}, {rotate: leaf}",
            )
        keys = ", ".join(repr(k) for k in value) if isinstance(value, dict) else ""
        got = f"keys {keys}" if keys else show(value)
        return ScenarioError(
            f"{where}: an operation is a mapping with exactly one key; got {got}",
            location=at(source, node),
            hint=f"one of {', '.join(OPERATIONS)}; put each operation in its own list item",
        )
    if kind in ("literal_error", "enum"):
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = _did_you_mean(str(value), options, "allowed") if options else ""
        return ScenarioError(
            f"{where}: {show(value)} is not allowed; expected {ctx.get('expected')}",
            location=at(source, node),
            hint=hint,
        )
    if kind in _EXPECTED:
        return ScenarioError(
            f"{where}: expected {_EXPECTED[kind]}, got {show(value)}",
            location=at(source, node),
        )
    message = err["msg"].removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern"))
        wanted = _PATTERNS.get(pattern, f"a string matching {pattern}")
        message = f"{show(value)} is not {wanted}"
    elif message.startswith("Input should be"):
        message = message.replace("Input should be", "should be", 1) + f", got {show(value)}"
    return ScenarioError(f"{where}: {message}", location=at(source, node))


def _unknown_key_hint(key: str, model: type[BaseModel] | None) -> str:
    """Where an operation goes, the known key ``key`` is closest to, or all known keys."""
    if model is Step and key in OPERATIONS:
        return f"operations go in a list under try, catch or finally: try: [{{{key}: ...}}]"
    known = _keys(model)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known keys: {', '.join(known)}" if known else ""


def _keys(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _did_you_mean(word: str, options: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    listing = f"{what}: {', '.join(options)}"
    return f"did you mean {close[0]!r}? ({listing})" if close else listing
