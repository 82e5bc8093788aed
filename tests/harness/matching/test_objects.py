"""Partial object trees: subset maps, JSON scalar equality, list forms, JMESPath keys,
load-time validation, and the texts reports show."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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
    SPECIAL_KEYS,
    ExpressionError,
    Path,
    check_expressions,
    format_path,
    is_expression_key,
)

KEYS = st.text(max_size=8).filter(lambda k: not is_expression_key(k) and k not in SPECIAL_KEYS)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)


def json_values(max_leaves: int) -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
        max_leaves=max_leaves,
    )


JSON = json_values(20)
ITEMS = st.lists(json_values(5), max_size=5)

WEBHOOK_CONFIG = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {
        "name": "skr-webhook",
        "labels": {"app.kubernetes.io/name": "skr-webhook", "tier": "watcher"},
    },
    "webhooks": [
        {
            "name": "kyma.operator.kyma-project.io",
            "rules": [{"resources": ["kymas"], "operations": ["CREATE", "UPDATE"]}],
        },
        {
            "name": "manifest.operator.kyma-project.io",
            "rules": [{"resources": ["secrets"], "operations": ["DELETE"]}],
        },
    ],
    "status": {
        "conditions": [
            {"type": "Installed", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "Pending"},
        ]
    },
}


def only(match: ObjectMatch) -> Mismatch:
    assert len(match.mismatches) == 1, match.mismatches
    return match.mismatches[0]


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


# --- paths, diff and summary ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ((), ROOT),
        (("webhooks", 1, "rules", 0, "resources"), "webhooks[1].rules[0].resources"),
        (
            ("metadata", "labels", "app.kubernetes.io/name"),
            'metadata.labels["app.kubernetes.io/name"]',
        ),
        (("a-b", "c d", ""), '["a-b"]["c d"][""]'),
        ((0, "(length(x))"), "[0].(length(x))"),
        (("(length(x))",), "(length(x))"),
        (("_x9",), "_x9"),
        (("ünï",), '["ünï"]'),
    ],
)
def test_format_path(path: Path, text: str) -> None:
    assert format_path(path) == text


def test_diff_shows_the_relevant_subtrees_only() -> None:
    expected = {
        "metadata": {"labels": {"tier": "sidecar"}},
        "webhooks": [{}, {"rules": [{"resources": ["configmaps", "pods"]}]}],
    }
    match = match_object(expected, WEBHOOK_CONFIG)
    assert diff(match) == "\n".join(
        [
            "metadata.labels.tier: not equal",
            "  - expected: sidecar",
            "  + actual: watcher",
            "webhooks[1].rules[0].resources: length 1, expected 2",
            "  - expected: [configmaps, pods]",
            "  + actual: [secrets]",
        ]
    )


def test_diff_indents_block_yaml_under_the_markers() -> None:
    ready = {"type": "Ready", "status": "True", "message": "the watcher webhook is serving"}
    match = match_object({"status": {"x": 1}}, {"status": [ready, {"type": "Installed"}]})
    assert diff(match) == "\n".join(
        [
            "status: expected map, got list",
            "  - expected: {x: 1}",
            "  + actual:",
            "      - type: Ready",
            "        status: 'True'",
            "        message: the watcher webhook is serving",
            "      - type: Installed",
        ]
    )


def test_diff_marks_missing_keys_and_truncates_big_subtrees() -> None:
    big = {f"key{i}": i for i in range(100)}
    match = match_object({"a": 1, "b": [1]}, {"b": big})
    text = diff(match)
    assert "a: missing key\n  - expected: 1\n  + actual: (missing)" in text
    assert text.endswith("      … (truncated)")
    assert len(text.splitlines()) < 50
    long_text = diff(match_object({"s": "x"}, {"s": "y" * 10_000}))
    assert len(long_text) < 4200
    assert "… (truncated)" in long_text


def test_diff_of_a_match_is_empty() -> None:
    assert diff(match_object({}, {})) == ""
    assert select_mismatch_summary(ObjectMatch(ok=True)) == ""


def test_summary_is_one_line_with_a_count() -> None:
    expected = {
        "webhooks": [{}, {"rules": [{"resources": ["configmaps"]}]}],
        "kind": "Secret",
        "absent": {"x": 1},
    }
    match = match_object(expected, WEBHOOK_CONFIG)
    assert select_mismatch_summary(match) == (
        "webhooks[1].rules[0].resources[0]: expected configmaps, got secrets (+2 more)"
    )
    missing = match_object({"absent": {"x": [1, 2]}}, {})
    assert select_mismatch_summary(missing) == "absent: missing key, expected {x: [1, 2]}"
    length = match_object({"a": [1]}, {"a": [1, 2]})
    assert select_mismatch_summary(length) == "a: length 2, expected 1"


def test_summary_shortens_long_values() -> None:
    summary = select_mismatch_summary(match_object({"a": "x" * 500}, {"a": "y"}))
    assert len(summary) < 150
    assert "…" in summary


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


# --- properties ----------------------------------------------------------------------------


def drop_keys(value: Any, data: st.DataObject) -> Any:
    """A partial copy: each map loses a random selection of its keys."""
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if data.draw(st.booleans())}
        return {k: drop_keys(v, data) for k, v in kept.items()}
    if isinstance(value, list):
        return [drop_keys(v, data) for v in value]
    return value


def scalar_paths(value: Any, path: Path = ()) -> list[Path]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in scalar_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in scalar_paths(v, (*path, i))]
    return [path]


def replaced(value: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    result = copy.deepcopy(value)
    node = result
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = new
    return result


@settings(max_examples=60, deadline=None)
@given(JSON)
def test_anything_matches_itself(value: Any) -> None:
    assert match_object(value, value) == ObjectMatch(ok=True)


@settings(max_examples=60, deadline=None)
@given(JSON, st.data())
def test_any_subset_matches(value: Any, data: st.DataObject) -> None:
    assert match_object(drop_keys(value, data), value).ok


@settings(max_examples=60, deadline=None)
@given(JSON, st.data())
def test_one_changed_scalar_is_found_where_it_is(value: Any, data: st.DataObject) -> None:
    paths = scalar_paths(value)
    assume(paths)
    path = data.draw(st.sampled_from(paths))
    node = value
    for part in path:
        node = node[part]
    old = node
    new = "☃ changed" if not scalars_equal(old, "☃ changed") else 0
    mismatch = only(match_object(replaced(value, path, new), value))
    assert mismatch.path == format_path(path)
    assert (mismatch.expected, mismatch.actual) == (new, old)


@settings(max_examples=60, deadline=None)
@given(ITEMS, st.randoms(use_true_random=False))
def test_any_order_matches_a_shuffle(items: list[Any], rng: random.Random) -> None:
    shuffled = list(items)
    rng.shuffle(shuffled)
    assert match_object({"$anyOrder": shuffled}, items).ok
    assert match_object({"x": {"$anyOrder": shuffled}}, {"x": items}).ok


@settings(max_examples=60, deadline=None)
@given(ITEMS, st.data())
def test_contains_matches_a_sub_multiset(items: list[Any], data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(range(len(items))), unique=True)) if items else []
    assert match_object({"$contains": [items[i] for i in chosen]}, items).ok


@settings(max_examples=60, deadline=None)
@given(JSON, JSON)
def test_diff_and_summary_cover_every_mismatch(expected: Any, actual: Any) -> None:
    match = match_object(expected, actual)
    assert match.ok == (not match.mismatches)
    text = diff(match)
    assert text == diff(match_object(expected, actual))
    for mismatch in match.mismatches:
        assert f"{mismatch.path}: {mismatch.reason}" in text
    summary = select_mismatch_summary(match)
    assert "\n" not in summary
    assert summary.startswith(match.mismatches[0].path) if match.mismatches else summary == ""


@settings(max_examples=80, deadline=None)
@given(JSON, st.data())
def test_one_of_matches_iff_some_alternative_does(actual: Any, data: st.DataObject) -> None:
    near = [drop_keys(actual, data) for _ in range(data.draw(st.integers(0, 2)))]
    alternatives = data.draw(st.permutations([*data.draw(st.lists(JSON, max_size=3)), *near]))
    assume(alternatives)
    alone = [match_object(alternative, actual).ok for alternative in alternatives]
    match = match_object({"$oneOf": alternatives}, actual)
    assert match.ok == any(alone)
    assert match_object({"x": {"$oneOf": alternatives}}, {"x": actual}).ok == any(alone)
    if not match.ok:
        assert only(match).path == ROOT
        assert only(match).reason.startswith(f"matches none of {len(alternatives)} alternatives")


def test_an_unmatched_map_item_is_shown_beside_its_closest_item() -> None:
    actual = {
        "webhooks": [
            {"name": "klm", "rules": [{"resources": ["kymas"]}]},
            {"name": "demo", "rules": [{"resources": ["secrets"]}], "sideEffects": "None"},
        ]
    }
    expected = {"webhooks": {"$contains": [{"name": "demo", "rules": [{"resources": ["cm"]}]}]}}
    result = match_object(expected, actual)
    closest, whole = result.mismatches
    assert closest.path == "webhooks[1]"
    assert closest.expected == {"name": "demo", "rules": [{"resources": ["cm"]}]}
    assert closest.actual == actual["webhooks"][1]
    assert closest.reason == (
        "expected item 0 matches no item; the closest differs at webhooks[1].rules[0].resources[0]"
    )
    assert whole.path == "webhooks" and whole.reason.startswith("no distinct match")
    assert diff(result).index("webhooks[1]") < diff(result).index("webhooks:")
