"""Periodic readings of RSS and open file descriptors of named processes, from ``/proc``.

RSS is ``VmRSS`` of ``/proc/<pid>/status`` (what the kernel charges the process now); the
descriptor count is the number of entries in ``/proc/<pid>/fd``, and ``connections`` is how
many of them are TCP sockets in state ESTABLISHED (their inodes looked up in
``/proc/net/tcp`` and ``tcp6``): pooled keep-alive connections, which the soak's fd
criterion tells apart from everything else (see :mod:`harness.soak.model`). A target's pid
is asked for at every tick, so a restarted process shows up as a new pid instead of a gap.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.aio import Service
from harness.clusters import procfs
from harness.soak.model import Role, Sample

PidOf = Callable[[], int | None]


@dataclass(frozen=True)
class Target:
    """A process to sample: its name in reports, its role and how to find its pid now."""

    name: str
    role: Role
    pid: PidOf


ESTABLISHED = "01"  # TCP state in /proc/net/tcp


def established_inodes(proc: Path = procfs.PROC) -> frozenset[str]:
    """Socket inodes of every ESTABLISHED TCP connection in this network namespace."""
    out: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except (FileNotFoundError, PermissionError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == ESTABLISHED:
                out.add(fields[9])
    return frozenset(out)


def fd_counts(pid: int, established: frozenset[str]) -> tuple[int | None, int | None]:
    """(open descriptors, of which ESTABLISHED TCP sockets); (None, None) if gone."""
    directory = procfs.PROC / str(pid) / "fd"
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None, None
    connections = 0
    for name in names:
        try:
            target = os.readlink(directory / name)
        except OSError:  # closed between listdir and readlink
            continue
        if target.startswith("socket:[") and target[8:-1] in established:
            connections += 1
    return len(names), connections


def command_name(pid: int) -> str:
    """``/proc/<pid>/comm`` (e.g. ``envoy``, ``python3``), "" if unknown."""
    try:
        return (procfs.PROC / str(pid) / "comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def read(target: Target, t: float, established: frozenset[str] = frozenset()) -> Sample:
    pid = target.pid()
    if pid is None:
        return Sample(t, target.name, None, None, None)
    fds, connections = fd_counts(pid, established)
    return Sample(t, target.name, pid, procfs.rss_bytes(pid), fds, connections)


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

    def tick(self) -> list[Sample]:
        """Read every target once (also called directly for a first and a last reading)."""
        t = self._clock() - self.origin
        established = established_inodes()
        batch = [read(target, t, established) for target in self.targets]
        self.samples.extend(batch)
        if self._on_sample is not None:
            self._on_sample(batch)
        return batch

    async def _run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(self.interval)

    async def start(self) -> None:
        self.spawn(self._run(), "soak-sampler")
