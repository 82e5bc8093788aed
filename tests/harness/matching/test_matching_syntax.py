"""What a matching tree may say: special forms and JMESPath keys checked when a file
loads, and how deep trees may go (``harness.matching.syntax``)."""

from __future__ import annotations

from typing import Any

import pytest
from matching_kit import only

from harness.matching.mismatches import (
    diff,
)
from harness.matching.objects import match_object
from harness.matching.syntax import (
    SPECIAL_KEYS,
    ExpressionError,
    check_expressions,
)

# --- malformed special forms and load-time validation --------------------------------------


@pytest.mark.parametrize(
    ("form", "problem"),
    [
        (
            {"$anyOrder": [1], "extra": 1},
            "$anyOrder must be the only key of its map, found also 'extra'",
        ),
        ({"$contains": [1], "$anyOrder": [1]}, "must be the only key of its map"),
        ({"$contains": {"a": 1}}, "$contains needs a list of items, got map"),
        ({"$anyOrder": "abc"}, "$anyOrder needs a list of items, got string"),
        ({"$anyOrder": None}, "$anyOrder needs a list of items, got null"),
        ({"$oneOf": []}, "$oneOf needs a non-empty list of alternatives, got an empty list"),
        ({"$oneOf": "Ready"}, "$oneOf needs a non-empty list of alternatives, got string"),
        ({"$oneOf": {"a": 1}}, "$oneOf needs a non-empty list of alternatives, got map"),
        ({"$oneOf": [1], "x": 2}, "$oneOf must be the only key of its map, found also 'x'"),
        ({"$oneOf": [1], "$contains": [1]}, "must be the only key of its map"),
    ],
)
def test_malformed_special_forms(form: dict[str, Any], problem: str) -> None:
    [(path, found)] = check_expressions({"spec": [form]})
    assert path[:2] == ("spec", 0)
    assert path[2] in SPECIAL_KEYS
    assert problem in found
    with pytest.raises(ExpressionError, match="spec"):
        match_object({"spec": [form]}, {"spec": [[1]]})


def test_check_expressions_finds_every_problem_in_document_order() -> None:
    expected = {
        "a": [{"(foo[)": 1, "b": {"$contains": 1}, "(nope(x))": {"(bad[)": 2}}],
        "c": {"$anyOrder": [{"(also[)": 1}]},
    }
    problems = check_expressions(expected)
    assert [path for path, _ in problems] == [
        ("a", 0, "(foo[)"),
        ("a", 0, "b", "$contains"),
        ("a", 0, "(nope(x))"),
        ("a", 0, "(nope(x))", "(bad[)"),
        ("c", "$anyOrder", 0, "(also[)"),
    ]
    with pytest.raises(ExpressionError, match=r"^a\[0\]\.\(foo\[\): .* \(\+4 more\)$"):
        match_object(expected, {})


# --- depth ---------------------------------------------------------------------------------


def nested(depth: int, leaf: Any, key: str = "a") -> Any:
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


def test_deep_actual_objects_are_fine() -> None:
    assert match_object({"a": {"a": {}}}, nested(5000, 1)).ok


def test_deep_expected_and_actual_within_the_limit() -> None:
    assert match_object(nested(190, 1), nested(190, 1)).ok
    assert only(match_object(nested(190, 2), nested(190, 1))).path == ".".join(["a"] * 190)
    assert match_object(nested(190, {"a": 1}, key="(@)"), {"a": 1}).ok
    text = diff(match_object({"x": nested(180, 1)}, {"x": nested(180, 2)}))
    assert "+ actual: 2" in text


def test_too_deep_expected_trees_are_rejected() -> None:
    [(path, problem)] = check_expressions(nested(1000, 1))
    assert len(path) == 201
    assert problem == "deeper than 200 levels"
    with pytest.raises(ExpressionError, match="deeper than 200 levels"):
        match_object(nested(1000, 1), nested(1000, 1))


def test_deep_subtrees_are_pruned_when_rendered() -> None:
    text = diff(match_object({"x": 1}, {"x": nested(500, 1)}))
    assert "… (map)" in text
