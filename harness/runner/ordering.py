"""Longest items first, so that the last minutes of an xdist run are not one long item.

xdist hands items to its workers in collection order, two at a time per worker. With 108
e2e items of 4-82 s on four workers, the collected order ended with one worker running a
long scenario alone (simulated from a run's durations: 384 s against 341 s when the
longest start first). The durations of the last run are kept in pytest's cache
(``.pytest_cache``); an item the cache does not know yet is estimated from its scenario's
timeout, or as a typical e2e test. Every worker computes the same order from the same file,
as xdist requires.

Items that bound a latency (:mod:`harness.runner.exclusive`) go last, longest first among
them: such an item waits until all but one of the other workers are free, which at the start
of a run — beside the longest items — kept workers idle for minutes; at the end only short
items are left to wait for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

CACHE_KEY = "watcher-harness/durations"
TYPICAL_TEST_S = 10.0
TIMEOUT_SHARE = 0.2
"""A scenario without a recorded duration takes about a fifth of its timeout (measured:
process-restarts 82 s of 240 s, burst 18 s of 120 s)."""

T = TypeVar("T")


def estimate(recorded: float | None, scenario_timeout: float | None) -> float:
    """Expected seconds of one item: its last duration, else a guess from its timeout."""
    if recorded is not None:
        return recorded
    if scenario_timeout is not None:
        return scenario_timeout * TIMEOUT_SHARE
    return TYPICAL_TEST_S


def longest_first(
    items: Sequence[T],
    expected: Callable[[T], float],
    last: Callable[[T], bool] = lambda _: False,
) -> list[T]:
    """``items`` by expected duration, longest first, those ``last`` says after the others;
    equal ones keep their order."""
    return sorted(items, key=lambda item: (last(item), -expected(item)))


def merged(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """The cache after a run: this run's durations over the last ones (items not run
    this time keep theirs, so a partial run does not forget the rest)."""
    return {**old, **{k: round(v, 1) for k, v in new.items()}}
