"""Partial object trees against actual objects (chainsaw-style ``assert`` semantics). Pure.

Scenarios state what an object must look like without restating all of it, so ``expected``
is a *partial* YAML-ish tree and ``match_object(expected, actual)`` says where it differs:

* **maps** match as subsets: every key of ``expected`` must be in ``actual`` and match;
  extra keys in ``actual`` are fine (the API server adds plenty);
* **scalars** match by equality, with JSON's types: ``1`` equals ``1.0``, but ``true`` never
  equals ``1`` and a string never equals a number (``"2"`` is not ``2``);
* **lists** match element-wise: same length, item *i* matches item *i*, each partially.

Three special maps each have exactly one key, whose value is a list (a ``$anyOrder``,
``$contains`` or ``$oneOf`` key next to other keys is an ``ExpressionError``; any other
``$`` key, e.g. ``$ref`` in a CRD schema, is an ordinary key). The first two stand where
a list is expected::

    webhooks: {$anyOrder: [{name: a}, {name: b}]}   # same length, some one-to-one pairing
    webhooks: {$contains: [{name: a}]}              # each item matches a distinct actual item

``$oneOf`` stands for any value: a non-empty list of alternatives, each a partial tree
with all these rules; the value matches if it matches at least one. A failure names the
alternatives and the first difference of the closest one::

    status: {state: {$oneOf: [Error, Warning]}}
    spec: {$oneOf: [{channel: fast}, {channel: regular, customModuleStrategy: Ignore}]}

A map key written ``(expression)`` is a JMESPath expression evaluated against the actual
map the key sits in; its result is matched against the value with the same rules::

    (length(webhooks)): 2
    status:
      (conditions[?type=='Ready']): [{status: "True"}]
    (seconds_until(x509(data."tls.crt").notAfter) > `1728000`): true

Besides the standard functions, expressions may call the few of
``harness.matching.functions`` (``x509``, ``x509_bundle``, ``base64_decode``,
``base64_encode``, ``now``, ``to_epoch``, ``seconds_until``, ``seconds_since``); an
error while evaluating (say ``x509`` of something not a certificate) is a mismatch
``expression failed: ...``, not an exception.

An invalid expression (syntax, unknown function, wrong argument count) or a malformed
special map raises ``ExpressionError`` before anything is compared, whatever ``actual``
is; ``check_expressions`` finds all of them without an actual object, so the scenario
loader can report them, located, at load time.

Mismatch paths read like ``webhooks[1].rules[0].resources``,
``metadata.labels["app.kubernetes.io/name"]`` and ``status.(length(conditions))``;
``<root>`` is the top. ``diff`` renders each mismatch's subtrees as YAML for reports,
``select_mismatch_summary`` gives one line for tables.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml
from jmespath.exceptions import JMESPathError

from harness.matching.functions import (
    FUNCTION_TABLE,
    CompiledExpression,
    compile_expression,
    search,
)

ANY_ORDER: Final = "$anyOrder"
CONTAINS: Final = "$contains"
ONE_OF: Final = "$oneOf"
SPECIAL_KEYS: Final = frozenset({ANY_ORDER, CONTAINS, ONE_OF})
MAX_DEPTH: Final = 200
"""An expected tree deeper than this is an ``ExpressionError``: matching recurses only
along ``expected``, so this bounds the stack (a few frames a level; the limit is 1000)
however deep ``actual`` is."""

ROOT: Final = "<root>"
_INLINE_CHARS: Final = 80
_RENDER_LINES: Final = 40
_RENDER_CHARS: Final = 4000
_RENDER_DEPTH: Final = 30
_RENDER_ITEMS: Final = 200
_SUMMARY_VALUE_CHARS: Final = 60
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

PathPart = str | int
Path = tuple[PathPart, ...]


class ExpressionError(ValueError):
    """The expected tree itself is wrong (bad JMESPath or special map), not the object."""


class _Missing:
    """Stands for an absent key in ``Mismatch.actual``; ``None`` would mean JSON null."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True)
class Mismatch:
    """One place where ``actual`` differs; ``expected``/``actual`` are the subtrees there."""

    path: str
    expected: Any
    actual: Any
    reason: str


@dataclass(frozen=True)
class ObjectMatch:
    """Every mismatch, not just the first, so one failed run shows all that is wrong."""

    ok: bool
    mismatches: tuple[Mismatch, ...] = ()


# --- expression and special-map helpers ---------------------------------------------------


def is_expression_key(key: object) -> bool:
    """``(…)`` keys are JMESPath; Kubernetes field and label names never look like that."""
    return isinstance(key, str) and len(key) >= 2 and key[0] == "(" and key[-1] == ")"


def _special_key(node: Mapping[Any, Any]) -> str | None:
    """The ``$anyOrder``/``$contains``/``$oneOf`` key of a map, or None for an ordinary map."""
    for key in node:
        if key in SPECIAL_KEYS:
            return str(key)
    return None


def _special_problem(node: Mapping[Any, Any], key: str) -> str | None:
    if len(node) != 1:
        others = ", ".join(sorted(repr(k) for k in node if k != key))
        return f"{key} must be the only key of its map, found also {others}"
    if key == ONE_OF:
        if not _is_list(node[key]) or not node[key]:
            got = "an empty list" if _is_list(node[key]) else _kind(node[key])
            return f"{key} needs a non-empty list of alternatives, got {got}"
        return None
    if not _is_list(node[key]):
        return f"{key} needs a list of items, got {_kind(node[key])}"
    return None


def _parse_error_text(error: JMESPathError) -> str:
    """jmespath's first line without its caret drawing (the caller names the expression)."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    for prefix in ("Invalid jmespath expression: ", "Bad jmespath expression: "):
        first = first.removeprefix(prefix)
    return first.removesuffix(":").removesuffix(", for expression")


def _static_problems(compiled: CompiledExpression) -> Iterator[str]:
    """Unknown functions, wrong argument counts and zero slice steps, which jmespath only
    finds when that part is evaluated: inside a filter over a missing field it never is."""
    stack: list[Any] = [compiled.parsed.parsed]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        children = node.get("children") or []
        stack.extend(children)
        if node.get("type") == "function_expression":
            yield from _call_problems(str(node.get("value")), len(children))
        elif node.get("type") == "slice" and len(children) == 3 and children[2] == 0:
            yield "slice step cannot be zero"


def _call_problems(name: str, given: int) -> Iterator[str]:
    """Against the standard and the harness's functions (``functions.FUNCTION_TABLE``)."""
    if name not in FUNCTION_TABLE:
        yield f"unknown function {name}()"
        return
    signature = FUNCTION_TABLE[name]["signature"]
    variadic = bool(signature) and bool(signature[-1].get("variadic"))
    if given < len(signature) or (given > len(signature) and not variadic):
        least = "at least " if variadic else ""
        yield f"{name}() takes {least}{len(signature)} argument(s), got {given}"


def expression_problem(key: str) -> str | None:
    """Why an ``(expression)`` key is invalid, or None; ``key`` includes the parentheses."""
    expression = key[1:-1]
    try:
        compiled = compile_expression(expression)
    except JMESPathError as error:
        return f"invalid JMESPath {expression!r}: {_parse_error_text(error)}"
    problem = next(_static_problems(compiled), None)
    return None if problem is None else f"invalid JMESPath {expression!r}: {problem}"


def check_expressions(expected: Any) -> list[tuple[Path, str]]:
    """Every invalid ``(expr)`` key and malformed special map in ``expected``, located.

    Needs no actual object, so scenario files are rejected at load time, all at once.
    """
    problems: list[tuple[Path, str]] = []
    _check(expected, (), problems)
    return problems


def _check(node: Any, path: Path, problems: list[tuple[Path, str]]) -> None:
    """Depth-first in document order; stops descending past ``MAX_DEPTH``."""
    if len(path) > MAX_DEPTH:
        problems.append((path, f"deeper than {MAX_DEPTH} levels"))
    elif isinstance(node, Mapping):
        _check_map(node, path, problems)
    elif _is_list(node):
        for i, item in enumerate(node):
            _check(item, (*path, i), problems)


def _check_map(node: Mapping[Any, Any], path: Path, problems: list[tuple[Path, str]]) -> None:
    special = _special_key(node)
    if special is not None:
        problem = _special_problem(node, special)
        if problem is not None:
            problems.append(((*path, special), problem))
            return
        for i, item in enumerate(node[special]):
            _check(item, (*path, special, i), problems)
        return
    for key, value in node.items():
        problem = expression_problem(key) if is_expression_key(key) else None
        if problem is not None:
            problems.append(((*path, key), problem))
        _check(value, (*path, key), problems)


def _raise_on_problems(expected: Any) -> None:
    problems = check_expressions(expected)
    if problems:
        path, problem = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ExpressionError(f"{format_path(path)}: {problem}{more}")


# --- paths and kinds ---------------------------------------------------------------------


def format_path(path: Path) -> str:
    """``webhooks[1].rules[0]``; keys that are not identifiers are quoted,
    ``(expression)`` keys are shown as written."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        elif isinstance(part, str) and (_IDENTIFIER.fullmatch(part) or is_expression_key(part)):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return text or ROOT


def _kind(value: Any) -> str:
    """JSON's name for a value's type, as reports show it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if _is_list(value):
        return "list"
    return type(value).__name__


def _is_list(value: Any) -> bool:
    """JSON arrays; tuples count too, so frozen specs can be written with them."""
    return isinstance(value, list | tuple)


def scalars_equal(expected: Any, actual: Any) -> bool:
    """JSON equality: numbers by value, but booleans are not numbers (Python says they are)."""
    expected_kind, actual_kind = _kind(expected), _kind(actual)
    if expected_kind != actual_kind:
        return False
    if expected_kind == "number" and (_is_nan(expected) or _is_nan(actual)):
        return _is_nan(expected) and _is_nan(actual)
    return bool(expected == actual)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# --- matching ----------------------------------------------------------------------------


def match_object(expected: Any, actual: Any) -> ObjectMatch:
    """Match a partial ``expected`` tree against ``actual`` (rules in the module docstring).

    Raises ``ExpressionError`` if ``expected`` has an invalid expression or special map.
    """
    _raise_on_problems(expected)
    return _checked_match(expected, actual)


def _checked_match(expected: Any, actual: Any) -> ObjectMatch:
    mismatches = _match(expected, actual, ())
    return ObjectMatch(ok=not mismatches, mismatches=tuple(mismatches))


def _match(expected: Any, actual: Any, path: Path) -> list[Mismatch]:
    if isinstance(expected, Mapping):
        special = _special_key(expected)
        if special == ONE_OF:
            return _match_one_of(expected[special], actual, path)
        if special is not None:
            return _match_special(special, expected[special], actual, path)
        return _match_map(expected, actual, path)
    if _is_list(expected):
        return _match_list(expected, actual, path)
    if scalars_equal(expected, actual):
        return []
    return [_mismatch(path, expected, actual, _scalar_reason(expected, actual))]


def _mismatch(path: Path, expected: Any, actual: Any, reason: str) -> Mismatch:
    return Mismatch(format_path(path), expected, actual, reason)


def _scalar_reason(expected: Any, actual: Any) -> str:
    if _kind(expected) == _kind(actual):
        return "not equal"
    return f"expected {_kind(expected)}, got {_kind(actual)}"


def _wrong_kind(path: Path, expected: Any, actual: Any, wanted: str) -> list[Mismatch]:
    return [_mismatch(path, expected, actual, f"expected {wanted}, got {_kind(actual)}")]


def _match_map(expected: Mapping[Any, Any], actual: Any, path: Path) -> list[Mismatch]:
    if not isinstance(actual, Mapping):
        return _wrong_kind(path, expected, actual, "map")
    mismatches: list[Mismatch] = []
    for key, value in expected.items():
        child = (*path, key)
        got, failure = _lookup(key, actual)
        if failure is not None:
            mismatches.append(_mismatch(child, value, MISSING, failure))
        else:
            mismatches.extend(_match(value, got, child))
    return mismatches


def _lookup(key: Any, node: Mapping[Any, Any]) -> tuple[Any, str | None]:
    """The value under ``key``, or why there is none. An ``(expr)`` key is evaluated against
    ``node``; it was validated up front, so an error now (``length`` of a missing field,
    ``max_by`` over mixed types) is the object's fault: a mismatch, not an exception."""
    if is_expression_key(key):
        try:
            return search(key[1:-1], node), None
        except (TypeError, ValueError) as error:  # JMESPathError is a ValueError
            return None, f"expression failed: {error}"
    if key not in node:
        return None, "missing key"
    return node[key], None


def _match_list(expected: Sequence[Any], actual: Any, path: Path) -> list[Mismatch]:
    if not _is_list(actual):
        return _wrong_kind(path, expected, actual, "list")
    if len(actual) != len(expected):
        reason = f"length {len(actual)}, expected {len(expected)}"
        return [_mismatch(path, expected, actual, reason)]
    mismatches: list[Mismatch] = []
    for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
        mismatches.extend(_match(want, got, (*path, i)))
    return mismatches


def _match_special(key: str, items: Sequence[Any], actual: Any, path: Path) -> list[Mismatch]:
    shown = {key: items}
    if not _is_list(actual):
        return _wrong_kind(path, shown, actual, "list")
    if key == ANY_ORDER and len(actual) != len(items):
        return [_mismatch(path, shown, actual, f"length {len(actual)}, expected {len(items)}")]
    results = [[_match(want, got, (*path, j)) for j, got in enumerate(actual)] for want in items]
    fits = [[not r for r in row] for row in results]
    if _max_assignment(fits) == len(items):
        return []
    noun = "one-to-one" if key == ANY_ORDER else "distinct"
    reason = f"no {noun} match for items"
    lonely = [i for i, row in enumerate(fits) if not any(row)]
    if lonely:
        reason += f" (expected item {', '.join(map(str, lonely))} matches no actual item)"
    closest_first = [_closest_item(i, items[i], results[i], actual, path) for i in lonely]
    return [*(m for m in closest_first if m is not None), _mismatch(path, shown, actual, reason)]


def _match_one_of(alternatives: Sequence[Any], actual: Any, path: Path) -> list[Mismatch]:
    """No mismatch if some alternative matches; else one at ``path`` naming the
    alternatives and where the closest (fewest differences, first on ties) differs."""
    tried: list[list[Mismatch]] = []
    for alternative in alternatives:
        mismatches = _match(alternative, actual, path)
        if not mismatches:
            return []
        tried.append(mismatches)
    best = min(range(len(tried)), key=lambda i: len(tried[i]))
    first = tried[best][0]
    where = "" if first.path == format_path(path) else f" at {first.path}"
    more = f" (+{len(tried[best]) - 1} more)" if len(tried[best]) > 1 else ""
    reason = (
        f"matches none of {len(alternatives)} alternatives {_short(list(alternatives))}; "
        f"the closest, {_short(alternatives[best])}, differs{where}: {first.reason}{more}"
    )
    return [_mismatch(path, {ONE_OF: alternatives}, actual, reason)]


def _closest_item(
    index: int, want: Any, tried: Sequence[list[Mismatch]], actual: Sequence[Any], path: Path
) -> Mismatch | None:
    """For a map item that matches nothing: the actual item with the fewest differences,
    side by side with it (the relevant subtree, not the whole list), naming where they
    differ. ``None`` for scalars (the list itself says it all) or an empty list."""
    if not isinstance(want, Mapping) or not tried:
        return None
    best = min(range(len(tried)), key=lambda j: len(tried[j]))
    where = ", ".join(m.path for m in tried[best][:3])
    more = f" (+{len(tried[best]) - 3} more)" if len(tried[best]) > 3 else ""
    reason = f"expected item {index} matches no item; the closest differs at {where}{more}"
    return _mismatch((*path, best), want, actual[best], reason)


def _max_assignment(fits: list[list[bool]]) -> int:
    """Size of a maximum matching of expected items to distinct actual items (Kuhn's
    augmenting paths; lists in objects are small, so O(n·m²) is fine)."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, fits_here in enumerate(fits[i]):
            if fits_here and j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return sum(place(i, set()) for i in range(len(fits)))


def match_any(
    expected: Any, candidates: Sequence[Mapping[str, Any]]
) -> tuple[int | None, list[ObjectMatch]]:
    """Index of the first candidate that matches (None if none) and every result, so the
    caller can show the closest one (``closest``) when none does."""
    _raise_on_problems(expected)
    results = [_checked_match(expected, candidate) for candidate in candidates]
    first = next((i for i, result in enumerate(results) if result.ok), None)
    return first, results


def closest(results: Sequence[ObjectMatch]) -> int | None:
    """Index of the result with the fewest mismatches (first on ties); None if empty."""
    if not results:
        return None
    return min(range(len(results)), key=lambda i: len(results[i].mismatches))


# --- rendering ---------------------------------------------------------------------------


def diff(match: ObjectMatch) -> str:
    """Each mismatch as its path and reason, then ``- expected:`` and ``+ actual:`` with
    only the subtrees at that path, as YAML: enough to see the problem in a report."""
    blocks = []
    for mismatch in match.mismatches:
        lines = [f"{mismatch.path}: {mismatch.reason}"]
        lines.extend(_marked("- expected:", mismatch.expected))
        lines.extend(_marked("+ actual:", mismatch.actual))
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _marked(marker: str, value: Any) -> list[str]:
    """``marker value`` for one-line renders, else the YAML indented under the marker."""
    rendered = render_yaml(value)
    if "\n" not in rendered:
        return [f"  {marker} {rendered}"]
    return [f"  {marker}", *(f"      {line}" for line in rendered.splitlines())]


def render_yaml(value: Any, *, flow: bool = False) -> str:
    """Compact YAML of a subtree: one flow-style line if it is short (or ``flow``), else
    block style; capped at ~40 lines / 4000 characters; ``(missing)`` for an absent key.
    Deep or huge subtrees are pruned first, so rendering stays cheap and stack-safe."""
    if value is MISSING:
        return "(missing)"
    pruned = _prune(value, _RENDER_DEPTH)
    line = _dump(pruned, flow=True)
    if flow or ("\n" not in line and len(line) <= _INLINE_CHARS):
        return _cap(line)
    return _cap(_dump(pruned, flow=False))


def _dump(value: Any, *, flow: bool) -> str:
    """``yaml.safe_dump`` without the document end marker; ``repr`` for non-YAML values."""
    try:
        text = yaml.safe_dump(
            value,
            default_flow_style=flow,
            sort_keys=False,
            allow_unicode=True,
            width=1_000_000 if flow else 100,
        )
    except yaml.YAMLError:
        return repr(value)
    return text.removesuffix("\n").removesuffix("\n...").removesuffix("...")


def _prune(value: Any, depth: int) -> Any:
    """A copy with containers below ``depth`` levels and items past the first 200 elided."""
    if isinstance(value, Mapping):
        if depth <= 0:
            return "… (map)"
        items = list(value.items())
        pruned = {k: _prune(v, depth - 1) for k, v in items[:_RENDER_ITEMS]}
        if len(items) > _RENDER_ITEMS:
            pruned["…"] = f"{len(items) - _RENDER_ITEMS} more keys"
        return pruned
    if _is_list(value):
        if depth <= 0:
            return "… (list)"
        listed = [_prune(v, depth - 1) for v in value[:_RENDER_ITEMS]]
        if len(value) > _RENDER_ITEMS:
            listed.append(f"… {len(value) - _RENDER_ITEMS} more items")
        return listed
    return value


def _cap(text: str) -> str:
    lines = text.splitlines()
    cut = len(lines) > _RENDER_LINES or len(text) > _RENDER_CHARS
    if not cut:
        return text
    kept = "\n".join(lines[:_RENDER_LINES])[:_RENDER_CHARS]
    return f"{kept}\n… (truncated)"


def select_mismatch_summary(match: ObjectMatch) -> str:
    """One line for tables: the first mismatch, and how many more there are."""
    if not match.mismatches:
        return ""
    first = match.mismatches[0]
    expected = _short(first.expected)
    if first.actual is MISSING:
        line = f"{first.path}: {first.reason}, expected {expected}"
    elif first.reason == "not equal" or first.reason.startswith("expected "):
        line = f"{first.path}: expected {expected}, got {_short(first.actual)}"
    else:
        line = f"{first.path}: {first.reason}"
    more = len(match.mismatches) - 1
    return f"{line} (+{more} more)" if more else line


def _short(value: Any) -> str:
    text = " ".join(render_yaml(value, flow=True).split())
    limit = _SUMMARY_VALUE_CHARS
    return text if len(text) <= limit else text[: limit - 1] + "…"
