"""Partial object trees: subset maps, JSON scalar equality, list forms, JMESPath keys,
load-time validation, and the texts reports show."""

from __future__ import annotations

from typing import Any

import pytest
from matching_kit import WEBHOOK_CONFIG, only

from harness.matching.mismatches import (
    MISSING,
    Mismatch,
    ObjectMatch,
    diff,
    select_mismatch_summary,
)
from harness.matching.objects import closest, match_any, match_object, scalars_equal
from harness.matching.syntax import (
    ROOT,
    ExpressionError,
    check_expressions,
)

# --- maps and scalars ----------------------------------------------------------------------


def test_maps_match_as_subsets() -> None:
    expected = {
        "metadata": {"labels": {"tier": "watcher"}},
        "kind": "ValidatingWebhookConfiguration",
    }
    assert match_object(expected, WEBHOOK_CONFIG) == ObjectMatch(ok=True)
    assert match_object({}, WEBHOOK_CONFIG).ok


def test_missing_key_is_reported_at_its_path_with_a_quoted_name() -> None:
    expected = {"metadata": {"labels": {"app.kubernetes.io/part-of": "kyma"}}}
    mismatch = only(match_object(expected, WEBHOOK_CONFIG))
    assert mismatch == Mismatch(
        'metadata.labels["app.kubernetes.io/part-of"]', "kyma", MISSING, "missing key"
    )


def test_null_is_not_a_missing_key() -> None:
    assert match_object({"a": None}, {"a": None}).ok
    assert only(match_object({"a": None}, {})).reason == "missing key"


@pytest.mark.parametrize(
    ("expected", "actual"),
    [(1, 1.0), (1.0, 1), (0, -0.0), (True, True), ("x", "x"), (None, None), (2**70, 2**70)],
)
def test_equal_scalars(expected: Any, actual: Any) -> None:
    assert scalars_equal(expected, actual)
    assert match_object({"v": expected}, {"v": actual}).ok


@pytest.mark.parametrize(
    ("expected", "actual", "reason"),
    [
        (True, 1, "expected boolean, got number"),
        (1, True, "expected number, got boolean"),
        (False, 0, "expected boolean, got number"),
        (0, False, "expected number, got boolean"),
        ("1", 1, "expected string, got number"),
        (2, "2", "expected number, got string"),
        (None, "", "expected null, got string"),
        ("", None, "expected string, got null"),
        (1, 2, "not equal"),
        ("a", "b", "not equal"),
        (1, [1], "expected number, got list"),
        ("x", {"x": 1}, "expected string, got map"),
    ],
)
def test_unequal_scalars(expected: Any, actual: Any, reason: str) -> None:
    assert not scalars_equal(expected, actual)
    assert only(match_object({"v": expected}, {"v": actual})) == Mismatch(
        "v", expected, actual, reason
    )


def test_containers_of_the_wrong_kind() -> None:
    assert only(match_object({"a": {"b": 1}}, {"a": [1]})).reason == "expected map, got list"
    assert only(match_object({"a": [1]}, {"a": {"0": 1}})).reason == "expected list, got map"
    assert only(match_object([1], "x")).path == ROOT


def test_nan_equals_only_nan() -> None:
    assert scalars_equal(float("nan"), float("nan"))
    assert not scalars_equal(float("nan"), 1.0)


# --- lists ---------------------------------------------------------------------------------


def test_lists_match_element_wise_with_partial_items() -> None:
    expected = {"webhooks": [{"name": "kyma.operator.kyma-project.io"}, {"rules": [{}]}]}
    assert match_object(expected, WEBHOOK_CONFIG).ok


def test_list_order_matters_by_default() -> None:
    expected = {"webhooks": [{"rules": [{"operations": ["UPDATE", "CREATE"]}]}, {}]}
    match = match_object(expected, WEBHOOK_CONFIG)
    assert [m.path for m in match.mismatches] == [
        "webhooks[0].rules[0].operations[0]",
        "webhooks[0].rules[0].operations[1]",
    ]


def test_a_length_mismatch_is_one_mismatch_at_the_list() -> None:
    expected = {"webhooks": [{}, {}, {"name": "x"}]}
    mismatch = only(match_object(expected, WEBHOOK_CONFIG))
    assert (mismatch.path, mismatch.reason) == ("webhooks", "length 2, expected 3")
    assert mismatch.actual is WEBHOOK_CONFIG["webhooks"]


def test_tuples_count_as_lists() -> None:
    assert match_object({"a": (1, 2)}, {"a": [1, 2]}).ok
    assert match_object({"a": {"$contains": (2,)}}, {"a": [1, 2]}).ok


def test_any_order_matches_a_permutation() -> None:
    expected = {
        "webhooks": {
            "$anyOrder": [
                {"name": "manifest.operator.kyma-project.io"},
                {"name": "kyma.operator.kyma-project.io"},
            ]
        }
    }
    assert match_object(expected, WEBHOOK_CONFIG).ok


def test_any_order_backtracks_past_a_greedy_choice() -> None:
    # Greedy would give {a: 1} the first actual item and leave {a: 1, b: 2} nothing.
    expected = {"$anyOrder": [{"a": 1}, {"a": 1, "b": 2}]}
    assert match_object(expected, [{"a": 1, "b": 2}, {"a": 1}]).ok


def test_any_order_needs_the_same_length() -> None:
    mismatch = only(match_object({"x": {"$anyOrder": [1]}}, {"x": [1, 2]}))
    assert (mismatch.path, mismatch.reason) == ("x", "length 2, expected 1")
    assert mismatch.expected == {"$anyOrder": [1]}


def test_any_order_is_one_to_one() -> None:
    mismatch = only(match_object({"$anyOrder": [{"a": 1}, {"a": 1}]}, [{"a": 1}, {"a": 2}]))
    assert mismatch.path == ROOT
    assert mismatch.reason == "no one-to-one match for items"


def test_any_order_names_items_that_match_nothing() -> None:
    mismatch = only(match_object({"$anyOrder": [1, 5, 7]}, [1, 2, 3]))
    assert mismatch.reason == (
        "no one-to-one match for items (expected item 1, 2 matches no actual item)"
    )


def test_contains_allows_extra_items_but_needs_distinct_ones() -> None:
    actual = {"ops": ["CREATE", "UPDATE", "DELETE"]}
    assert match_object({"ops": {"$contains": ["DELETE", "CREATE"]}}, actual).ok
    assert match_object({"ops": {"$contains": []}}, actual).ok
    mismatch = only(match_object({"ops": {"$contains": ["CREATE", "CREATE"]}}, actual))
    assert (mismatch.path, mismatch.reason) == ("ops", "no distinct match for items")
    assert not match_object({"ops": {"$contains": ["PATCH"]}}, actual).ok


def test_contains_items_are_partial() -> None:
    expected = {"status": {"conditions": {"$contains": [{"type": "Ready", "status": "False"}]}}}
    assert match_object(expected, WEBHOOK_CONFIG).ok


def test_special_forms_want_a_list() -> None:
    mismatch = only(match_object({"a": {"$contains": [1]}}, {"a": {"b": 1}}))
    assert (mismatch.path, mismatch.reason) == ("a", "expected list, got map")


def test_other_dollar_keys_are_ordinary() -> None:
    schema = {"$ref": "#/definitions/x", "$schema": "s"}
    assert match_object({"$ref": "#/definitions/x"}, schema).ok
    assert only(match_object({"$id": "y"}, schema)).reason == "missing key"


# --- alternatives: $oneOf ----------------------------------------------------------------------


def test_one_of_matches_any_alternative_anywhere() -> None:
    kyma = {"status": {"state": "Warning", "conditions": [{"type": "Ready", "status": "False"}]}}
    assert match_object({"status": {"state": {"$oneOf": ["Error", "Warning"]}}}, kyma).ok
    assert match_object({"$oneOf": [{"status": {"state": "Ready"}}, {"status": {}}]}, kyma).ok
    assert match_object({"status": {"conditions": {"$oneOf": [[], [{}]]}}}, kyma).ok
    assert match_object({"a": {"$oneOf": [None]}}, {"a": None}).ok
    assert match_object({"a": {"$oneOf": [1]}}, {"a": 1.0}).ok
    assert not match_object({"a": {"$oneOf": [1]}}, {"a": True}).ok


def test_one_of_alternatives_use_every_rule() -> None:
    expected = {
        "webhooks": {
            "$oneOf": [
                {"$contains": [{"name": "absent"}]},
                {"$anyOrder": [{"name": "manifest.operator.kyma-project.io"}, {}]},
            ]
        },
        "status": {
            "$oneOf": [
                {"(length(conditions))": 3},
                {"(conditions[?type=='Ready'] | [0].status)": {"$oneOf": ["False", "Unknown"]}},
            ]
        },
    }
    assert match_object(expected, WEBHOOK_CONFIG).ok
    items = {"ops": {"$contains": [{"$oneOf": ["PATCH", "DELETE"]}]}}
    assert match_object(items, {"ops": ["CREATE", "DELETE"]}).ok


def test_one_of_names_the_alternatives_and_the_closest_difference() -> None:
    expected = {"status": {"state": {"$oneOf": ["Error", "Warning"]}}}
    mismatch = only(match_object(expected, {"status": {"state": "Ready"}}))
    assert mismatch == Mismatch(
        "status.state",
        {"$oneOf": ["Error", "Warning"]},
        "Ready",
        "matches none of 2 alternatives [Error, Warning]; the closest, Error, differs: not equal",
    )
    maps = {"$oneOf": [{"a": 1, "b": 2}, {"a": 1, "b": {"c": 3}, "d": 4}, {"x": 1}]}
    match = match_object({"spec": maps}, {"spec": {"a": 1, "b": {"c": 4}, "d": 4}})
    assert only(match).reason == (
        "matches none of 3 alternatives [{a: 1, b: 2}, {a: 1, b: {c: 3}, d: 4}, {x: 1}]; "
        "the closest, {a: 1, b: 2}, differs at spec.b: expected number, got map"
    )
    assert select_mismatch_summary(match).startswith("spec: matches none of 3 alternatives")
    assert "- expected: {$oneOf: [" in diff(match)
    alternatives = [{"a": 1, "b": 2}, {"c": 1}]
    missing = only(match_object({"s": {"$oneOf": alternatives}}, {"s": {"b": 1}}))
    assert missing.reason.endswith("differs at s.c: missing key")
    several = only(match_object({"$oneOf": [{"a": 1, "b": 1, "c": 1}]}, {}))
    assert several.reason.endswith("differs at a: missing key (+2 more)")


def test_one_of_under_a_missing_key_is_a_missing_key() -> None:
    mismatch = only(match_object({"state": {"$oneOf": ["Error", None]}}, {}))
    assert (mismatch.reason, mismatch.expected) == ("missing key", {"$oneOf": ["Error", None]})


def test_problems_inside_alternatives_are_located() -> None:
    expected = {"a": {"$oneOf": [{"b": 1}, {"(x[)": 1}, {"$oneOf": []}]}}
    assert [path for path, _ in check_expressions(expected)] == [
        ("a", "$oneOf", 1, "(x[)"),
        ("a", "$oneOf", 2, "$oneOf"),
    ]
    with pytest.raises(ExpressionError, match=r'^a\["\$oneOf"\]\[1\]\.\(x\[\): invalid JMESPath'):
        match_object(expected, {"a": {"b": 1}})  # although the first alternative matches


# --- JMESPath keys -------------------------------------------------------------------------


def test_expression_keys_evaluate_against_the_map_they_sit_in() -> None:
    expected = {
        "(length(webhooks))": 2,
        "status": {"(conditions[?type=='Ready'])": [{"status": "False"}]},
        "metadata": {"(labels.tier)": "watcher"},
    }
    assert match_object(expected, WEBHOOK_CONFIG).ok


def test_expression_key_mismatch_paths() -> None:
    expected = {"status": {"(conditions[?type=='Ready'])": [{"status": "True"}]}}
    mismatch = only(match_object(expected, WEBHOOK_CONFIG))
    assert mismatch.path == "status.(conditions[?type=='Ready'])[0].status"
    assert (mismatch.expected, mismatch.actual) == ("True", "False")
    top = only(match_object({"(length(webhooks))": 3}, WEBHOOK_CONFIG))
    assert (top.path, top.actual) == ("(length(webhooks))", 2)


def test_expression_results_take_special_forms() -> None:
    expected = {"(webhooks[].name)": {"$contains": ["manifest.operator.kyma-project.io"]}}
    assert match_object(expected, WEBHOOK_CONFIG).ok


def test_an_expression_that_fails_on_this_object_is_a_mismatch() -> None:
    mismatch = only(match_object({"(length(nothing))": 0}, {}))
    assert mismatch.path == "(length(nothing))"
    assert mismatch.actual is MISSING
    assert mismatch.reason.startswith("expression failed: In function length()")
    mixed = only(match_object({"(max_by(a, &b))": 1}, {"a": [{"b": "x"}, {"b": 1}]}))
    assert mixed.reason.startswith("expression failed: ")


@pytest.mark.parametrize(
    ("key", "complaint"),
    [
        ("(conditions[)", "Incomplete expression"),
        ("(a])", "Unexpected token: ]"),
        ("(`x)", "Unclosed ` delimiter"),
        ("()", "cannot be empty"),
        ("(nope(a))", "unknown function nope()"),
        ("(length(a, b))", "length() takes 1 argument(s), got 2"),
        ("(merge())", "merge() takes at least 1 argument(s), got 0"),
        ("(a[?length(b, c)])", "length() takes 1 argument(s), got 2"),
        ("(a[::0])", "slice step cannot be zero"),
    ],
)
def test_invalid_expressions_raise_whatever_the_object(key: str, complaint: str) -> None:
    # Under a key the object lacks, so the expression is never evaluated: still an error.
    expected = {"absent": {key: 1}}
    with pytest.raises(ExpressionError) as raised:
        match_object(expected, {})
    message = str(raised.value)
    assert message.startswith(f"absent.{key}: invalid JMESPath {key[1:-1]!r}: ")
    assert complaint in message
    assert "\n" not in message


def test_valid_expressions_have_no_problems() -> None:
    expected = {
        "(length(webhooks))": 2,
        "x": [{"(a[?b=='c'] | [0].d)": {"$anyOrder": [{"(@)": 1}]}}],
        "(not_null(a, b, c))": None,
    }
    assert check_expressions(expected) == []
    assert check_expressions(7) == []


# --- several candidates --------------------------------------------------------------------


def test_match_any_returns_the_first_match_and_all_results() -> None:
    candidates = [{"name": "a", "n": 1}, {"name": "b", "n": 2}, {"name": "b", "n": 2, "x": 0}]
    index, results = match_any({"name": "b"}, candidates)
    assert index == 1
    assert [r.ok for r in results] == [False, True, True]


def test_closest_has_the_fewest_mismatches() -> None:
    candidates = [{"a": 0, "b": 0}, {"a": 1, "b": 0}, {"a": 0, "b": 1}]
    index, results = match_any({"a": 1, "b": 1}, candidates)
    assert index is None
    assert closest(results) == 1
    assert closest([]) is None
    assert match_any({"a": 1}, []) == (None, [])


def test_match_any_validates_even_without_candidates() -> None:
    with pytest.raises(ExpressionError):
        match_any({"(x[)": 1}, [])
