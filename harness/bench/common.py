"""Small helpers shared by the benchmarks: CPU time from /proc, paced load, context."""

from __future__ import annotations

import asyncio
import bisect
import os
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness.clusters import procfs

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far (``/proc/<pid>/stat`` utime + stime)."""
    try:
        raw = (procfs.PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    # after the command: state(0) ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime(11) stime(12)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def run_queue_wait_seconds(pid: int) -> float | None:
    """Seconds ``pid``'s main thread spent runnable but waiting for a CPU, so far
    (``/proc/<pid>/schedstat``, second field): latency that is the machine's, not the code's."""
    try:
        fields = (procfs.PROC / str(pid) / "schedstat").read_text().split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(fields[1]) / 1e9 if len(fields) >= 2 else None


def rss_mib(pid: int | None) -> float | None:
    value = procfs.rss_bytes(pid) if pid else None
    return None if value is None else round(value / 2**20, 1)


def delta(before: float | None, after: float | None, *, digits: int = 2) -> float | None:
    """``after - before`` of two readings (e.g. CPU seconds), None when either failed."""
    return None if before is None or after is None else round(after - before, digits)


def first_at_or_after(times: Sequence[float], at: float) -> float | None:
    """The earliest of sorted ``times`` not before ``at``; None if every one is."""
    i = bisect.bisect_left(times, at)
    return times[i] if i < len(times) else None


def per(
    before: float | None, after: float | None, count: float, *, scale: float = 1000.0
) -> float | None:
    """``scale`` x the growth of a counter (CPU seconds, run-queue wait) per item or per second
    between two readings; None when either failed or there is nothing to divide by."""
    if before is None or after is None or count <= 0:
        return None
    return round(scale * (after - before) / count, 3)


def times_by_key(pairs: Iterable[tuple[K, float]]) -> dict[K, list[float]]:
    """Key → its times, sorted (to bisect for the first one at or after a moment)."""
    found: dict[K, list[float]] = {}
    for key, at in pairs:
        found.setdefault(key, []).append(at)
    for times in found.values():
        times.sort()
    return found


def loadavg() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return (round(one, 2), round(five, 2), round(fifteen, 2))


@dataclass
class BenchContext:
    """What every benchmark gets: the mode, a work directory, results of earlier ones."""

    quick: bool
    workdir: Path
    e2e_seconds: float | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    """Figures a later benchmark reuses (e.g. measured end-to-end delays for requeue)."""

    def logs(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path


async def paced(
    rate: float,
    *,
    count: int,
    duration: float,
    action: Callable[[int], Awaitable[None]],
    max_in_flight: int = 64,
) -> tuple[int, float]:
    """Start ``action(i)`` at ``rate`` per second, at most ``count`` times and for at most
    ``duration`` seconds, with at most ``max_in_flight`` running; wait for all started.

    Returns (started, seconds from the first start to the last completion). When the
    actions cannot keep up, starts are delayed (the achieved rate is lower), never dropped.
    """
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(max_in_flight)
    tasks: set[asyncio.Task[None]] = set()
    errors: list[BaseException] = []

    async def one(i: int) -> None:
        try:
            await action(i)
        except Exception as exc:  # collected and re-raised after the loop
            errors.append(exc)
        finally:
            slots.release()

    start = loop.time()
    started = 0
    while started < count:
        due = start + started / rate
        now = loop.time()
        if now - start >= duration or errors:
            break
        if due > now:
            await asyncio.sleep(due - now)
        await slots.acquire()
        task = asyncio.create_task(one(started), name=f"paced-{started}")
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        started += 1
    if tasks:
        await asyncio.gather(*tasks)
    if errors:
        raise errors[0]
    return started, loop.time() - start


async def each_bounded(
    items: Iterable[T], in_flight: int, action: Callable[[T], Awaitable[object]]
) -> None:
    """``action(item)`` for every item with at most ``in_flight`` running (a worker pool).

    The first failure is raised as it is, after the other workers are cancelled, so
    nothing runs on unowned.
    """
    shared = iter(items)

    async def worker() -> None:
        for item in shared:  # shared iterator: each item is taken once
            await action(item)

    workers = [asyncio.ensure_future(worker()) for _ in range(in_flight)]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def own_cpu_seconds() -> float:
    """This process's CPU seconds: a load generator's cost, next to the servers'."""
    t = os.times()
    return t.user + t.system
