"""Items that measure latency run with at most one other item, as on two workers.

Latency bounds (write → event p50/p99, write round trips) are set for this 2-core machine
with two items running at once; with more workers the bound would measure the neighbours.
Each xdist worker has a slot (a lock file) that it holds while its item runs. An item that
measures latency also takes the slots of all but one of the other workers, as they come
free: those workers start nothing until it is done, one worker goes on. A turnstile lock
makes the taking of slots one item at a time, so two such items cannot each hold half.

What measures latency: a scenario with a ``latency`` bound or a ``writes`` p50/p99/max
(:func:`measures_latency`), or a test marked ``@pytest.mark.exclusive``.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

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
    """Where the workers of one pytest run (xdist's ``testrunuid``) keep their locks."""
    path = Path(tempfile.gettempdir()) / f"watcher-harness-turns-{os.getuid()}-{run_id}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _try_lock(file: IO[str]) -> bool:
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def turn(directory: Path, worker: int, workers: int, *, exclusive: bool) -> Iterator[None]:
    """Run worker ``worker``'s item (of ``workers``) in its turn: beside anything, or, if
    ``exclusive``, beside at most one other item."""
    with ExitStack() as stack:
        slots: list[IO[str]] = [
            stack.enter_context(open(directory / f"slot-{i}", "a")) for i in range(workers)
        ]
        turnstile = stack.enter_context(open(directory / "turnstile", "a"))
        own, others = slots[worker], [s for i, s in enumerate(slots) if i != worker]
        wanted = max(0, workers - 2) if exclusive else 0
        while True:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            if _try_lock(own):
                break
            fcntl.flock(turnstile, fcntl.LOCK_UN)  # another item holds our slot
            time.sleep(POLL_S)
        held: list[IO[str]] = []
        while len(held) < wanted:  # the turnstile stays ours: nobody else takes slots
            for slot in others:
                if len(held) < wanted and slot not in held and _try_lock(slot):
                    held.append(slot)
            if len(held) < wanted:
                time.sleep(POLL_S)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            for taken in (own, *held):
                fcntl.flock(taken, fcntl.LOCK_UN)
