"""Bindings: ``${{ name }}`` in any string value of a scenario, one syntax for everything.

Pure. Three kinds of names, resolved at two times:

* **At load time** — ``matrix.<key>`` (this instance's value), the scenario's
  ``bindings`` and a step's ``bindings`` (which shadow the scenario's within the step).
  Binding values may use matrix values and earlier bindings. A string that is exactly one
  reference takes the value's type (``count: ${{ matrix.skrs }}`` is a number); otherwise
  the value is written into the text.
* **At run time** — the built-ins only a running environment knows: ``runId``,
  ``clusters.<cluster>.name|server|kubeconfig|runtimeId``, ``gateway.url|port``,
  ``listeners.<component>.url|port``, ``harness.python`` (the harness's own interpreter,
  with its libraries, for ``script`` helpers) and ``harness.get`` (the built-in object
  reader, ``python -m harness.cli.get``); and the **captured** names, which the run gives
  values as it goes (``capture:`` on ``assert`` and ``script``, the ``set`` operation).
  They stay in the text until the operation runs (:func:`bind_operation`); their names
  are still checked at load time.

References are filled in wherever they stand: in values and in mapping keys.

An unknown name is a located validation error with a "did you mean" hint.
``${{`` is chosen because shell text in ``script`` commands uses ``$VAR`` and ``${VAR}``.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from harness.scenario.clusters import KCP, counted_skr_names

REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
MALFORMED = re.compile(r"\$\{\{(?!\s*[A-Za-z_][A-Za-z0-9_.-]*\s*\}\})[^}]*\}?\}?")
"""A ``${{`` that does not open a reference (``${{ list[0] }}``, ``${{ a b }}``, unclosed)."""
CLUSTER_FIELDS = ("name", "server", "kubeconfig", "runtimeId")
LISTENER_FIELDS = ("url", "port")
GATEWAY_FIELDS = ("url", "port")
HARNESS_FIELDS = ("python", "get")
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_-]*"
"""A binding's (or a captured value's) name."""
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class BindingProblem:
    path: Path
    message: str
    hint: str = ""


def builtin_problem(name: str, clusters: Sequence[str], components: Sequence[str]) -> str | None:
    """``None`` if ``name`` is a valid run-time built-in, else why not."""
    parts = name.split(".")
    if parts == ["runId"]:
        return None
    if parts[0] == "clusters" and len(parts) == 3:
        if parts[1] not in clusters:
            return f"no cluster {parts[1]!r} (clusters: {', '.join(clusters)})"
        if parts[2] not in CLUSTER_FIELDS:
            return f"clusters.<cluster> has {', '.join(CLUSTER_FIELDS)}"
        return None
    if parts[0] == "listeners" and len(parts) == 3:
        if parts[1] not in components:
            return f"no listener {parts[1]!r} (listeners: {', '.join(components)})"
        if parts[2] not in LISTENER_FIELDS:
            return f"listeners.<component> has {', '.join(LISTENER_FIELDS)}"
        return None
    if parts[0] == "gateway" and len(parts) == 2 and parts[1] in GATEWAY_FIELDS:
        return None
    if parts[0] == "harness" and len(parts) == 2 and parts[1] in HARNESS_FIELDS:
        return None
    return "unknown"


def is_builtin(name: str) -> bool:
    return name == "runId" or name.split(".")[0] in ("clusters", "listeners", "gateway", "harness")


def substitute(
    value: Any,
    values: Mapping[str, Any],
    *,
    path: Path = (),
    unknown: Callable[[str, Path], None] | None = None,
) -> Any:
    """``value`` with every ``${{ name }}`` whose name is in ``values`` replaced; other
    names are left in place and reported to ``unknown(name, path)``."""
    if isinstance(value, str):
        if unknown is not None:
            for bad in MALFORMED.finditer(value):
                unknown(bad.group(0), path)
        whole = REFERENCE.fullmatch(value.strip())
        if whole is not None and whole.group(1) in values:
            return values[whole.group(1)]

        def replace(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in values:
                return str(values[name])
            if unknown is not None:
                unknown(name, path)
            return m.group(0)

        return REFERENCE.sub(replace, value)
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


def _substitute_key(
    key: Any, values: Mapping[str, Any], path: Path, unknown: Callable[[str, Path], None] | None
) -> Any:
    """A mapping key with its references filled in; always text (a key is a name)."""
    if not isinstance(key, str) or "${{" not in key:
        return key
    filled = substitute(key, values, path=(*path, key), unknown=unknown)
    return filled if isinstance(filled, str) else str(filled)


# Captured names ----------------------------------------------------------------------------

CAPTURING_OPERATIONS = ("assert", "script")
"""Operations whose ``capture: {name: expression}`` gives names values during the run."""


def captured_names(steps: Any) -> dict[str, Path]:
    """Every name a ``capture`` (on ``assert``/``script``) or a ``set`` operation gives a
    value during the run → where it is first given. Reads the raw YAML (before
    validation), so it tolerates anything malformed: the model reports that."""
    found: dict[str, Path] = {}
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


@dataclass(frozen=True)
class Instance:
    """One matrix combination: its name suffix and its ``matrix.<key>`` values."""

    suffix: str
    values: Mapping[str, Any]


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def instances(matrix: Any) -> tuple[list[Instance], list[BindingProblem]]:
    """Every combination of ``matrix`` (keys in file order); one plain instance without."""
    if matrix is None:
        return [Instance("", {})], []
    if not isinstance(matrix, dict) or not matrix:
        return [], [BindingProblem(("matrix",), "matrix is a mapping of key: [values...]")]
    problems = [
        BindingProblem(("matrix", k), f"matrix.{k} needs a non-empty list of values")
        for k, v in matrix.items()
        if not isinstance(v, list) or not v
    ]
    problems += [
        BindingProblem(("matrix", k, i), "matrix values are strings, numbers or booleans")
        for k, v in matrix.items()
        if isinstance(v, list)
        for i, item in enumerate(v)
        if not isinstance(item, str | int | float | bool)
    ]
    if problems:
        return [], problems
    keys = list(matrix)
    out = []
    for combo in itertools.product(*(matrix[k] for k in keys)):
        suffix = "-".join(
            f"{_label(str(k))}-{_label(str(v))}" for k, v in zip(keys, combo, strict=True)
        )
        out.append(Instance(suffix, {f"matrix.{k}": v for k, v in zip(keys, combo, strict=True)}))
    return out, []


def instance_name(name: str, suffix: str) -> str:
    """``fleet`` + ``skrs-3`` → ``fleet-skrs-3`` (a DNS label; shortened stably if long)."""
    if not suffix:
        return name
    full = f"{name}-{suffix}"
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:54].rstrip('-')}-{digest}"


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
    bindings: Any, inherited: Mapping[str, Any], path: Path, problems: list[BindingProblem]
) -> dict[str, Any]:
    scope = dict(inherited)
    if bindings is None:
        return scope
    if not isinstance(bindings, dict):
        problems.append(BindingProblem(path, "bindings is a mapping of name: value"))
        return scope
    for key, value in bindings.items():
        if not isinstance(key, str) or not re.fullmatch(NAME_PATTERN, key):
            problems.append(
                BindingProblem(
                    (*path, str(key)), f"binding name {key!r} is not a name ({NAME_PATTERN})"
                )
            )
            continue
        scope[key] = substitute(value, scope)
    return scope


def resolve_load_time(
    data: dict[str, Any], matrix_values: Mapping[str, Any]
) -> tuple[dict[str, Any], list[BindingProblem]]:
    """``data`` with matrix values and bindings substituted; every unknown name a problem
    (built-ins are checked against the declared clusters and listeners and kept). The
    result is one plain instance: no ``matrix``, its bindings as resolved."""
    problems: list[BindingProblem] = []
    scope = _scope(data.get("bindings"), matrix_values, ("bindings",), problems)
    rest = {k: v for k, v in data.items() if k not in ("steps", "bindings", "matrix")}
    rest = substitute(rest, scope)
    clusters, components = _declared(rest)
    known = [*scope, "runId", *(f"clusters.{c}.{f}" for c in clusters for f in CLUSTER_FIELDS)]
    known += [f"listeners.{c}.{f}" for c in components for f in LISTENER_FIELDS]
    known += [f"gateway.{f}" for f in GATEWAY_FIELDS]
    known += [f"harness.{f}" for f in HARNESS_FIELDS]
    captured = captured_names(data.get("steps"))
    for name, where in captured.items():
        if name in scope or is_builtin(name):
            problems.append(
                BindingProblem(
                    where,
                    f"{name!r} is already a binding; a captured name must be new",
                    "choose another name",
                )
            )
        elif not re.fullmatch(NAME_PATTERN, name):
            problems.append(
                BindingProblem(where, f"captured name {name!r} is not a name ({NAME_PATTERN})")
            )
    known += list(captured)

    def unknown_in(names: Sequence[str]) -> Callable[[str, Path], None]:
        def report(name: str, at: Path) -> None:
            if name.startswith("${{"):
                problems.append(
                    BindingProblem(
                        at,
                        f"{name!r} is not a reference",
                        "write ${{ name }} with a binding, matrix.<key>, a built-in or a "
                        f"captured name ({NAME_PATTERN} and dots); no indexes or expressions",
                    )
                )
                return
            if name in captured or name.split(".")[0] in captured:
                return  # given a value during the run
            if is_builtin(name):
                problem = builtin_problem(name, clusters, components)
                if problem is None:
                    return
            close = difflib.get_close_matches(name, names, n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else "bindings, matrix.<key> and built-ins (docs/scenarios.md)"
            )
            problems.append(BindingProblem(at, f"unknown binding {name!r}", hint))

        return report

    out = substitute(rest, scope, unknown=unknown_in(known))
    if isinstance(data.get("bindings"), dict):  # as resolved, so the instance stands alone
        out["bindings"] = {k: scope[k] for k in data["bindings"] if k in scope}
    steps = data.get("steps")
    if isinstance(steps, list):
        new_steps = []
        for i, step in enumerate(steps):
            if not isinstance(step, dict):
                new_steps.append(step)
                continue
            step_scope = _scope(step.get("bindings"), scope, ("steps", i, "bindings"), problems)
            body = {k: v for k, v in step.items() if k != "bindings"}
            names = [*known, *step_scope]
            body = substitute(body, step_scope, path=("steps", i), unknown=unknown_in(names))
            if isinstance(step.get("bindings"), dict):
                body["bindings"] = {k: step_scope[k] for k in step["bindings"] if k in step_scope}
            new_steps.append(body)
        out["steps"] = new_steps
    elif steps is not None:
        out["steps"] = steps
    return out, problems


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
