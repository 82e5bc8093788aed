"""Properties of matching, over generated JSON trees: anything matches itself and its
subsets, a changed scalar is found where it is, every mismatch is reported."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from matching_kit import only

from harness.matching.mismatches import (
    ObjectMatch,
    diff,
    select_mismatch_summary,
)
from harness.matching.objects import match_object, scalars_equal
from harness.matching.syntax import (
    ROOT,
    SPECIAL_KEYS,
    Path,
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
