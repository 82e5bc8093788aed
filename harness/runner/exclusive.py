"""Items that measure latency run with at most one other item, as on two workers.

Latency bounds (write → event p50/p99, write round trips) are set for this 2-core machine
with two items running at once; with more workers the bound would measure the neighbours.
The workers of one run share a small state file (under ``flock``): which worker runs an
item, whether it is exclusive, which exclusive items wait. :func:`may_start` decides, as
a pure function: while an exclusive item runs, at most two items run (two exclusive ones
may run together); an exclusive item starts when at most one other runs; while one waits,
no other item starts, so it is not starved. No other item starts before every exclusive
one has (at most :data:`EXCLUSIVE_FIRST_S`), or the exclusive ones wait for long items
with the other workers idle. A dead worker's entry is dropped when its process is gone.

What measures latency: a scenario with a ``latency`` bound or a ``writes`` p50/p99/max
(:func:`measures_latency`), or a test marked ``@pytest.mark.exclusive``.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.clusters.procfs import is_alive
from harness.runner.context import expects
from harness.scenario import Scenario

MARKER = "exclusive: measures latency; runs with at most one other item (xdist)"
POLL_S = 0.05


def measures_latency(scenario: Scenario) -> bool:
    """Whether any step of ``scenario`` bounds a latency."""
    return any(
        e.latency is not None or (e.writes and e.writes.has_latency_bound)
        for e in expects(scenario)
    )


def lock_dir(run_id: str) -> Path:
    """Where the workers of one pytest run (xdist's ``testrunuid``) keep their state."""
    path = Path(tempfile.gettempdir()) / f"watcher-harness-turns-{os.getuid()}-{run_id}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


BESIDE = 1
"""How many other items may run beside one that measures latency."""
EXCLUSIVE_FIRST_S = 600.0
"""How long an item waits for exclusive items that have not started (one never would if
its worker died before it and xdist did not hand it to another)."""


def may_start(
    running: Mapping[int, bool],
    waiting: Set[int],
    worker: int,
    *,
    exclusive: bool,
    unstarted: int = 0,
) -> bool:
    """Whether ``worker`` may start its item, given the items ``running`` (worker →
    exclusive?), the exclusive items ``waiting`` and how many exclusive items of the run
    have not started yet."""
    after = {**running, worker: exclusive}
    if any(after.values()) and len(after) > BESIDE + 1:
        return False
    return exclusive or not (waiting - {worker} or unstarted)


@contextmanager
def _state(path: Path) -> Iterator[dict[str, Any]]:
    """The shared state, read and written back under an exclusive lock."""
    with path.open("a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        text = file.read()
        state: dict[str, Any] = json.loads(text) if text else {}
        state.setdefault("running", {})
        state.setdefault("waiting", {})
        state.setdefault("started", [])
        for table in ("running", "waiting"):  # entries of workers that died
            state[table] = {w: e for w, e in state[table].items() if is_alive(e["pid"])}
        yield state
        file.seek(0)
        file.truncate()
        file.write(json.dumps(state))


@contextmanager
def turn(
    directory: Path,
    worker: int,
    *,
    exclusive: bool,
    item: str = "",
    exclusive_items: Set[str] = frozenset(),
) -> Iterator[None]:
    """Run worker ``worker``'s item in its turn: beside anything, or, if ``exclusive``,
    beside at most one other item; ``exclusive_items`` (ids) start before the others."""
    path = directory / "turns.json"
    me = {"pid": os.getpid(), "exclusive": exclusive}
    key = str(worker)
    patience = time.monotonic() + EXCLUSIVE_FIRST_S
    while True:
        with _state(path) as state:
            running = {int(w): e["exclusive"] for w, e in state["running"].items()}
            waiting = {int(w) for w in state["waiting"]}
            unstarted = len(exclusive_items - set(state["started"]))
            if time.monotonic() > patience:
                unstarted = 0
            if may_start(running, waiting, worker, exclusive=exclusive, unstarted=unstarted):
                state["running"][key] = me
                state["waiting"].pop(key, None)
                if exclusive:
                    state["started"].append(item)
                break
            if exclusive:
                state["waiting"][key] = me
        time.sleep(POLL_S)
    try:
        yield
    finally:
        with _state(path) as state:
            state["running"].pop(key, None)
