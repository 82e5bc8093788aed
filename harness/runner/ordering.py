"""Longest items first, so that the last minutes of an xdist run are not one long item.

xdist hands items to its workers in collection order; ending with one worker running a
long scenario alone cost 40 s of a 6-minute run. The durations of the last runs are kept
in the harness's cache (``~/.cache/watcher-harness/e2e-durations.json``; pytest's own cache
is off in this project); an item the cache does not know yet is estimated from its
scenario's timeout, or as a typical e2e test. Every worker computes the same order from
the same file, as xdist requires.

Items that bound a latency (:mod:`harness.runner.exclusive`) go first, longest first among
them: anywhere later they wait for long items to drain while other workers idle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from harness.clusters.go_build import cache_root
from harness.report.writer import write_text_atomic

FILE = "e2e-durations.json"
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
    first: Callable[[T], bool] = lambda _: False,
) -> list[T]:
    """``items`` by expected duration, longest first, those ``first`` says before the
    others; equal ones keep their order."""
    return sorted(items, key=lambda item: (not first(item), -expected(item)))


def merged(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """The cache after a run: this run's durations over the last ones (items not run
    this time keep theirs, so a partial run does not forget the rest)."""
    return {**old, **{k: round(v, 1) for k, v in new.items()}}


def durations_file() -> Path:
    return cache_root() / FILE


def load(path: Path) -> dict[str, float]:
    """The recorded durations (none if the file is missing or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def save(path: Path, new: Mapping[str, float]) -> None:
    """Merge this run's durations into the file."""
    write_text_atomic(path, json.dumps(merged(load(path), new), indent=0, sort_keys=True))
