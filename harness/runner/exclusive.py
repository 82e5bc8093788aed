"""Items that measure latency run alone: while one runs, no other xdist worker starts one.

Latency bounds (write → event p50/p99, write round trips) are set for this 2-core machine
with two things running at once; with more workers the bound measures the neighbours. So
every item holds a shared lock while it runs, and an item that measures latency holds it
exclusively — a readers-writer lock across the worker processes, from two lock files: the
exclusive item first takes the turnstile (no new item starts), then waits until the
running ones are done. Without xdist there is nobody to wait for.

What measures latency: a scenario with a ``latency`` bound or a ``writes`` p50/p99/max
(:func:`measures_latency`), or a test marked ``@pytest.mark.exclusive``.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.scenario import ExpectOp, Scenario

MARKER = "exclusive: measures latency; no other xdist worker starts an item while it runs"


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
    """Where the workers of one pytest run (xdist's ``testrunuid``) keep their two locks."""
    path = Path(tempfile.gettempdir()) / f"watcher-harness-turns-{os.getuid()}-{run_id}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextmanager
def turn(directory: Path, *, exclusive: bool) -> Iterator[None]:
    """Run the caller's item in its turn: shared, or alone."""
    with open(directory / "turnstile", "a") as turnstile, open(directory / "room", "a") as room:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
