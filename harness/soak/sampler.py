"""Periodic readings of RSS and open file descriptors of named processes, from ``/proc``.

RSS is ``VmRSS`` of ``/proc/<pid>/status`` (what the kernel charges the process now); the
descriptor count is the number of entries in ``/proc/<pid>/fd``. A target's pid is asked
for at every tick, so a restarted process shows up as a new pid instead of a gap.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.aio import Service, spawn, stop_tasks
from harness.clusters import procfs
from harness.soak.model import Role, Sample

PidOf = Callable[[], int | None]


@dataclass(frozen=True)
class Target:
    """A process to sample: its name in reports, its role and how to find its pid now."""

    name: str
    role: Role
    pid: PidOf


def open_fds(pid: int) -> int | None:
    """Entries in ``/proc/<pid>/fd``, or None if the process is gone or not ours."""
    try:
        return len(os.listdir(procfs.PROC / str(pid) / "fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def command_name(pid: int) -> str:
    """``/proc/<pid>/comm`` (e.g. ``envoy``, ``python3``), "" if unknown."""
    try:
        return (procfs.PROC / str(pid) / "comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def read(target: Target, t: float) -> Sample:
    pid = target.pid()
    if pid is None:
        return Sample(t, target.name, None, None, None)
    return Sample(t, target.name, pid, procfs.rss_bytes(pid), open_fds(pid))


class Sampler(Service):
    """Reads every target each ``interval`` seconds from ``start`` to ``stop``.

    ``t`` of a sample is ``clock() - origin``; the runner sets ``origin`` to the churn's
    start so samples and the warm-up windows share one time axis.
    """

    def __init__(
        self,
        targets: list[Target],
        *,
        interval: float = 2.0,
        clock: Callable[[], float] = time.time,
        on_sample: Callable[[list[Sample]], None] | None = None,
    ) -> None:
        self.targets = targets
        self.interval = interval
        self.origin = clock()
        self.samples: list[Sample] = []
        self._clock = clock
        self._on_sample = on_sample
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> list[Sample]:
        """Read every target once (also called directly for a first and a last reading)."""
        t = self._clock() - self.origin
        batch = [read(target, t) for target in self.targets]
        self.samples.extend(batch)
        if self._on_sample is not None:
            self._on_sample(batch)
        return batch

    async def _run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(self.interval)

    async def start(self) -> None:
        self._task = spawn(self._run(), "soak-sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await stop_tasks([task])
