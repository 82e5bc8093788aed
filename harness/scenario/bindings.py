"""Bindings: ``${{ name }}`` in any string value of a scenario, one syntax for everything.

Pure. Matrix values and ``bindings`` are filled in at load time (a string that is exactly
one reference takes the value's type); the built-ins only a running environment knows
(``runId``, ``clusters.<cluster>.*``, ``gateway.*``, ``listeners.<component>.*``,
``harness.*``) and captured names stay in the text until the operation runs
(:func:`bind_operation`), but their names are still checked at load time. An unknown name
is a located validation error with a "did you mean" hint. ``${{`` is chosen because shell
text in ``script`` commands uses ``$VAR`` and ``${VAR}``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from harness.scenario.clusters import KCP, counted_skr_names
from harness.scenario.errors import Loc, Problem

REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
MALFORMED = re.compile(r"\$\{\{(?!\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\}\})[^}]*\}?\}?")
"""A ``${{`` that does not open a reference (``${{ list[0] }}``, ``${{ a b }}``, unclosed)."""
CLUSTER_FIELDS = ("name", "server", "kubeconfig", "runtimeId")
LISTENER_FIELDS = ("url", "port")
GATEWAY_FIELDS = ("url", "port")
HARNESS_FIELDS = ("python", "get")
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_-]*"
"""A binding's (or a captured value's) name."""
_SINGLE_FIELDS = {"gateway": GATEWAY_FIELDS, "harness": HARNESS_FIELDS}
_UNKNOWN_HINT = "bindings, matrix.<key> and built-ins (docs/scenarios.md)"


def builtin_problem(name: str, clusters: Sequence[str], components: Sequence[str]) -> str | None:
    """``None`` if ``name`` is a valid run-time built-in, else why not."""
    parts = name.split(".")
    if parts == ["runId"] or (len(parts) == 2 and parts[1] in _SINGLE_FIELDS.get(parts[0], ())):
        return None
    families = {
        "clusters": ("cluster", "cluster", clusters, CLUSTER_FIELDS),
        "listeners": ("listener", "component", components, LISTENER_FIELDS),
    }
    if len(parts) != 3 or parts[0] not in families:
        return "unknown"
    what, placeholder, declared, fields = families[parts[0]]
    if parts[1] not in declared:
        return f"no {what} {parts[1]!r} ({parts[0]}: {', '.join(declared)})"
    if parts[2] not in fields:
        return f"{parts[0]}.<{placeholder}> has {', '.join(fields)}"
    return None


def is_builtin(name: str) -> bool:
    return name == "runId" or name.split(".")[0] in ("clusters", "listeners", "gateway", "harness")


def substitute(
    value: Any,
    values: Mapping[str, Any],
    *,
    path: Loc = (),
    unknown: Callable[[str, Loc], None] | None = None,
) -> Any:
    """``value`` with every ``${{ name }}`` whose name is in ``values`` replaced; other
    names are left in place and reported to ``unknown(name, path)``."""
    if isinstance(value, str):
        return _substitute_text(value, values, path, unknown)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = _substitute_key(k, values, path, unknown)
            out[key] = substitute(v, values, path=(*path, k), unknown=unknown)
        return out
    if isinstance(value, list):
        return [
            substitute(v, values, path=(*path, i), unknown=unknown) for i, v in enumerate(value)
        ]
    return value


def _substitute_text(
    text: str, values: Mapping[str, Any], path: Loc, unknown: Callable[[str, Loc], None] | None
) -> Any:
    """A string that is exactly one known reference takes the value's type; otherwise each
    known reference is written into the text."""
    report = unknown or (lambda _name, _path: None)
    for bad in MALFORMED.finditer(text):
        report(bad.group(0), path)
    whole = REFERENCE.fullmatch(text.strip())
    if whole is not None and whole.group(1) in values:
        return values[whole.group(1)]

    def replace(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in values:
            return str(values[name])
        report(name, path)
        return m.group(0)

    return REFERENCE.sub(replace, text)


def _substitute_key(
    key: Any, values: Mapping[str, Any], path: Loc, unknown: Callable[[str, Loc], None] | None
) -> Any:
    """A mapping key with its references filled in; always text (a key is a name)."""
    if not isinstance(key, str) or "${{" not in key:
        return key
    filled = substitute(key, values, path=(*path, key), unknown=unknown)
    return filled if isinstance(filled, str) else str(filled)


# Captured names ----------------------------------------------------------------------------

CAPTURING_OPERATIONS = ("assert", "script")
"""Operations whose ``capture: {name: expression}`` gives names values during the run."""


def captured_names(steps: Any) -> dict[str, Loc]:
    """Every name a ``capture`` (on ``assert``/``script``) or a ``set`` operation gives a
    value during the run → where it is first given. Reads the raw YAML (before
    validation), so it tolerates anything malformed: the model reports that."""
    found: dict[str, Loc] = {}
    if not isinstance(steps, list):
        return found
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        for block in ("try", "catch", "finally"):
            ops = step.get(block)
            if not isinstance(ops, list):
                continue
            for j, op in enumerate(ops):
                for key, names in _names_given(op):
                    for name in names:
                        found.setdefault(name, ("steps", i, block, j, key))
    return found


def _names_given(op: Any) -> Iterator[tuple[str, list[str]]]:
    if not isinstance(op, dict) or len(op) != 1:
        return
    key, body = next(iter(op.items()))
    if key == "set" and isinstance(body, dict):
        yield key, [k for k in body if isinstance(k, str)]
    elif key in CAPTURING_OPERATIONS and isinstance(body, dict):
        capture = body.get("capture")
        if isinstance(capture, dict):
            yield key, [k for k in capture if isinstance(k, str)]


# Load time ---------------------------------------------------------------------------------


def _declared(data: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Cluster names and listener components the (substituted) scenario declares."""
    clusters = [KCP]
    skrs = (
        (data.get("clusters") or {}).get("skrs") if isinstance(data.get("clusters"), dict) else None
    )
    if isinstance(skrs, list):
        clusters += [
            s["name"] for s in skrs if isinstance(s, dict) and isinstance(s.get("name"), str)
        ]
    elif isinstance(skrs, dict) and isinstance(skrs.get("count"), int):
        clusters += counted_skr_names(skrs["count"], skrs.get("prefix", "skr"))
    components = ["lifecycle-manager"]
    for lst in data.get("listeners") or []:
        if isinstance(lst, dict) and isinstance(lst.get("component"), str):
            components.append(lst["component"])
    return clusters, components


def _scope(
    bindings: Any, inherited: Mapping[str, Any], path: Loc, problems: list[Problem]
) -> dict[str, Any]:
    scope = dict(inherited)
    if bindings is None:
        return scope
    if not isinstance(bindings, dict):
        problems.append(Problem(path, "bindings is a mapping of name: value"))
        return scope
    for key, value in bindings.items():
        if not isinstance(key, str) or not re.fullmatch(NAME_PATTERN, key):
            problems.append(
                Problem((*path, str(key)), f"binding name {key!r} is not a name ({NAME_PATTERN})")
            )
            continue
        scope[key] = substitute(value, scope)
    return scope


def resolve_load_time(
    data: dict[str, Any], matrix_values: Mapping[str, Any]
) -> tuple[dict[str, Any], list[Problem]]:
    """``data`` with matrix values and bindings substituted; every unknown name a problem
    (built-ins are checked against the declared clusters and listeners and kept). The
    result is one plain instance: no ``matrix``, its bindings as resolved."""
    problems: list[Problem] = []
    scope = _scope(data.get("bindings"), matrix_values, ("bindings",), problems)
    rest = {k: v for k, v in data.items() if k not in ("steps", "bindings", "matrix")}
    rest = substitute(rest, scope)
    captured = captured_names(data.get("steps"))
    problems += _captured_problems(captured, scope)
    known = _Known(scope, captured, *_declared(rest))
    out = substitute(rest, scope, unknown=known.reporter(problems))
    if isinstance(data.get("bindings"), dict):  # as resolved, so the instance stands alone
        out["bindings"] = {k: scope[k] for k in data["bindings"] if k in scope}
    steps = data.get("steps")
    if isinstance(steps, list):
        out["steps"] = [
            _resolve_step(step, i, scope, known, problems) for i, step in enumerate(steps)
        ]
    elif steps is not None:
        out["steps"] = steps
    return out, problems


def _resolve_step(
    step: Any, index: int, scope: Mapping[str, Any], known: _Known, problems: list[Problem]
) -> Any:
    """One step with its own bindings over the scenario's (``scope``) substituted."""
    if not isinstance(step, dict):
        return step
    step_scope = _scope(step.get("bindings"), scope, ("steps", index, "bindings"), problems)
    body = {k: v for k, v in step.items() if k != "bindings"}
    report = known.reporter(problems, also=step_scope)
    body = substitute(body, step_scope, path=("steps", index), unknown=report)
    if isinstance(step.get("bindings"), dict):
        body["bindings"] = {k: step_scope[k] for k in step["bindings"] if k in step_scope}
    return body


def _captured_problems(captured: Mapping[str, Loc], scope: Mapping[str, Any]) -> list[Problem]:
    """A captured name must be a new name."""
    problems = []
    for name, where in captured.items():
        if name in scope or is_builtin(name):
            message = f"{name!r} is already a binding; a captured name must be new"
            problems.append(Problem(where, message, "choose another name"))
        elif not re.fullmatch(NAME_PATTERN, name):
            message = f"captured name {name!r} is not a name ({NAME_PATTERN})"
            problems.append(Problem(where, message))
    return problems


@dataclass(frozen=True)
class _Known:
    """What a reference may name at load time: bindings in ``scope``, names captured during
    the run, and the built-ins of the declared ``clusters`` and listener ``components``."""

    scope: Mapping[str, Any]
    captured: Mapping[str, Loc]
    clusters: Sequence[str]
    components: Sequence[str]

    def names(self) -> list[str]:
        """Every name, for "did you mean"."""
        known = [*self.scope, "runId"]
        known += [f"clusters.{c}.{f}" for c in self.clusters for f in CLUSTER_FIELDS]
        known += [f"listeners.{c}.{f}" for c in self.components for f in LISTENER_FIELDS]
        known += [f"gateway.{f}" for f in GATEWAY_FIELDS]
        known += [f"harness.{f}" for f in HARNESS_FIELDS]
        return known + list(self.captured)

    def problem(self, name: str, at: Loc, names: Sequence[str]) -> Problem | None:
        """What is wrong with a reference to ``name`` left in place, if anything."""
        if name.startswith("${{"):
            return Problem(
                at,
                f"{name!r} is not a reference",
                "write ${{ name }} with a binding, matrix.<key>, a built-in or a "
                f"captured name ({NAME_PATTERN} and dots); no indexes or expressions",
            )
        if name in self.captured or name.split(".")[0] in self.captured:
            return None  # given a value during the run
        if is_builtin(name) and builtin_problem(name, self.clusters, self.components) is None:
            return None
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else _UNKNOWN_HINT
        return Problem(at, f"unknown binding {name!r}", hint)

    def reporter(
        self, problems: list[Problem], also: Iterable[str] = ()
    ) -> Callable[[str, Loc], None]:
        """``substitute``'s ``unknown``: adds the problem to ``problems``; ``also``: more
        names (a step's bindings) to suggest."""
        names = [*self.names(), *also]

        def report(name: str, at: Loc) -> None:
            problem = self.problem(name, at, names)
            if problem is not None:
                problems.append(problem)

        return report


# Run time ----------------------------------------------------------------------------------


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"clusters": {"kcp": {"server": u}}}`` → ``{"clusters.kcp.server": u}``."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


M = TypeVar("M", bound=BaseModel)


def has_references(op: BaseModel) -> bool:
    return "${{" in op.model_dump_json(by_alias=True)


def bind_operation(
    op: M, builtins: Mapping[str, Any], captured: Mapping[str, Any] | None = None
) -> M:
    """``op`` with the run-time built-ins and the values captured so far substituted
    (validated again), or ``op`` itself when it uses none. A captured value keeps its type
    where a string is exactly its reference; ``${{ name.key }}`` reaches into a captured
    map."""
    if not has_references(op):
        return op
    values = flatten(builtins)
    if captured:
        values.update(flatten(captured))
        values.update(captured)
    data = op.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return type(op).model_validate(substitute(data, values))


def references(op: BaseModel) -> list[str]:
    """The names ``op`` still refers to (after binding: the ones that had no value)."""
    return sorted(set(REFERENCE.findall(op.model_dump_json(by_alias=True))))
