"""Partial object trees against actual objects (chainsaw-style ``assert`` semantics). Pure.

Scenarios state what an object must look like without restating all of it, so ``expected``
is a *partial* tree and ``match_object(expected, actual)`` says where it differs. The rules
(subset maps, JSON-typed scalars, element-wise lists, ``$anyOrder``/``$contains``/``$oneOf``
and ``(expression)`` keys) are in docs/scenarios.md; the syntax is checked in
``harness.matching.syntax`` and an expression that fails while evaluating is a mismatch,
not an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from harness.matching.functions import search
from harness.matching.mismatches import MISSING, Mismatch, ObjectMatch, short_value
from harness.matching.syntax import (
    ANY_ORDER,
    ONE_OF,
    Path,
    format_path,
    is_expression_key,
    is_list,
    json_kind,
    raise_on_problems,
    special_key,
)


def scalars_equal(expected: Any, actual: Any) -> bool:
    """JSON equality: numbers by value, but booleans are not numbers (Python says they are)."""
    expected_kind, actual_kind = json_kind(expected), json_kind(actual)
    if expected_kind != actual_kind:
        return False
    if expected_kind == "number" and (_is_nan(expected) or _is_nan(actual)):
        return _is_nan(expected) and _is_nan(actual)
    return bool(expected == actual)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def match_object(expected: Any, actual: Any) -> ObjectMatch:
    """Match a partial ``expected`` tree against ``actual`` (rules in the module docstring).

    Raises ``ExpressionError`` if ``expected`` has an invalid expression or special map.
    """
    raise_on_problems(expected)
    return _checked_match(expected, actual)


def _checked_match(expected: Any, actual: Any) -> ObjectMatch:
    mismatches = _match(expected, actual, ())
    return ObjectMatch(ok=not mismatches, mismatches=tuple(mismatches))


def _match(expected: Any, actual: Any, path: Path) -> list[Mismatch]:
    if isinstance(expected, Mapping):
        special = special_key(expected)
        if special == ONE_OF:
            return _match_one_of(expected[special], actual, path)
        if special is not None:
            return _match_special(special, expected[special], actual, path)
        return _match_map(expected, actual, path)
    if is_list(expected):
        return _match_list(expected, actual, path)
    if scalars_equal(expected, actual):
        return []
    return [_mismatch(path, expected, actual, _scalar_reason(expected, actual))]


def _mismatch(path: Path, expected: Any, actual: Any, reason: str) -> Mismatch:
    return Mismatch(format_path(path), expected, actual, reason)


def _scalar_reason(expected: Any, actual: Any) -> str:
    if json_kind(expected) == json_kind(actual):
        return "not equal"
    return f"expected {json_kind(expected)}, got {json_kind(actual)}"


def _wrong_kind(path: Path, expected: Any, actual: Any, wanted: str) -> list[Mismatch]:
    return [_mismatch(path, expected, actual, f"expected {wanted}, got {json_kind(actual)}")]


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
    if not is_list(actual):
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
    if not is_list(actual):
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
        f"matches none of {len(alternatives)} alternatives {short_value(list(alternatives))}; "
        f"the closest, {short_value(alternatives[best])}, differs{where}: {first.reason}{more}"
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
    raise_on_problems(expected)
    results = [_checked_match(expected, candidate) for candidate in candidates]
    first = next((i for i, result in enumerate(results) if result.ok), None)
    return first, results


def closest(results: Sequence[ObjectMatch]) -> int | None:
    """Index of the result with the fewest mismatches (first on ties); None if empty."""
    if not results:
        return None
    return min(range(len(results)), key=lambda i: len(results[i].mismatches))
