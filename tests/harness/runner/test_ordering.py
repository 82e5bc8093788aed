"""The e2e order: longest items first, from the last run or an estimate."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.runner import ordering


def test_a_recorded_duration_wins_over_the_estimate() -> None:
    assert ordering.estimate(3.5, 240.0) == 3.5
    assert ordering.estimate(None, 240.0) == 240.0 * ordering.TIMEOUT_SHARE
    assert ordering.estimate(None, None) == ordering.TYPICAL_TEST_S


def test_longest_first_keeps_the_order_of_equals() -> None:
    items = [("a", 1.0), ("b", 5.0), ("c", 1.0), ("d", 9.0)]
    ordered = ordering.longest_first(items, lambda item: item[1])
    assert [name for name, _ in ordered] == ["d", "b", "a", "c"]


def test_items_that_must_run_almost_alone_go_first() -> None:
    items = [("short", 1.0), ("latency", 9.0), ("long", 5.0), ("latency-short", 2.0)]
    ordered = ordering.longest_first(items, lambda i: i[1], first=lambda i: "latency" in i[0])
    assert [name for name, _ in ordered] == ["latency", "latency-short", "long", "short"]


@given(st.lists(st.floats(min_value=0, max_value=1e4), max_size=50))
def test_longest_first_is_a_sorted_permutation(durations: list[float]) -> None:
    ordered = ordering.longest_first(durations, lambda d: d)
    assert sorted(ordered) == sorted(durations)
    assert all(a >= b for a, b in itertools.pairwise(ordered))


def test_a_partial_run_keeps_what_it_did_not_run() -> None:
    old = {"x": 10.0, "y": 20.0}
    assert ordering.merged(old, {"y": 4.04, "z": 1.26}) == {"x": 10.0, "y": 4.0, "z": 1.3}


def test_the_file_merges_runs_and_survives_garbage(tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    assert ordering.load(path) == {}
    ordering.save(path, {"a": 1.0})
    ordering.save(path, {"b": 2.0})
    assert ordering.load(path) == {"a": 1.0, "b": 2.0}
    path.write_text("[not, json")
    assert ordering.load(path) == {}
