"""Items that measure latency run with at most one other item, as on two workers.

Latency bounds (write → event p50/p99, write round trips) are set for this 2-core machine
with two items running at once; with more workers the bound would measure the neighbours.
The workers of one run share a small state file (under ``flock``): which worker runs an
item, whether it is exclusive, which exclusive items wait. :func:`may_start` decides, as
a pure function: while an exclusive item runs, at most two items run (two exclusive ones
may run together); an exclusive item starts when at most one other runs; while one waits,
no other item starts, so it is not starved. A worker that died leaves nothing behind: its
entry is dropped when its process is gone.

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

from harness.scenario import ExpectOp, Scenario

MARKER = "exclusive: measures latency; runs with at most one other item (xdist)"
POLL_S = 0.05


def measures_latency(scenario: Scenario) -> bool:
    """Whether any step of ``scenario`` bounds a latency."""
    for step in scenario.steps:
        for _, operations in step.blocks():
            for op in operations:
                if not isinstance(op, ExpectOp):
                    continue
                writes = op.expect.writes
                if op.expect.latency is not None or (writes and writes.has_latency_bound):
                    return True
    return False


def lock_dir(run_id: str) -> Path:
    """Where the workers of one pytest run (xdist's ``testrunuid``) keep their state."""
    path = Path(tempfile.gettempdir()) / f"watcher-harness-turns-{os.getuid()}-{run_id}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


BESIDE = 1
"""How many other items may run beside one that measures latency."""


def may_start(
    running: Mapping[int, bool], waiting: Set[int], worker: int, *, exclusive: bool
) -> bool:
    """Whether ``worker`` may start its item, given the items ``running`` (worker →
    exclusive?) and the exclusive items ``waiting``."""
    after = {**running, worker: exclusive}
    if any(after.values()) and len(after) > BESIDE + 1:
        return False
    return exclusive or not (waiting - {worker})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _state(path: Path) -> Iterator[dict[str, Any]]:
    """The shared state, read and written back under an exclusive lock."""
    with path.open("a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        text = file.read()
        state: dict[str, Any] = json.loads(text) if text else {"running": {}, "waiting": {}}
        for table in ("running", "waiting"):  # entries of workers that died
            state[table] = {w: e for w, e in state[table].items() if _alive(e["pid"])}
        yield state
        file.seek(0)
        file.truncate()
        file.write(json.dumps(state))


@contextmanager
def turn(directory: Path, worker: int, *, exclusive: bool) -> Iterator[None]:
    """Run worker ``worker``'s item in its turn: beside anything, or, if ``exclusive``,
    beside at most one other item."""
    path = directory / "turns.json"
    me = {"pid": os.getpid(), "exclusive": exclusive}
    key = str(worker)
    while True:
        with _state(path) as state:
            running = {int(w): e["exclusive"] for w, e in state["running"].items()}
            waiting = {int(w) for w in state["waiting"]}
            if may_start(running, waiting, worker, exclusive=exclusive):
                state["running"][key] = me
                state["waiting"].pop(key, None)
                break
            if exclusive:
                state["waiting"][key] = me
        time.sleep(POLL_S)
    try:
        yield
    finally:
        with _state(path) as state:
            state["running"].pop(key, None)
