"""What a soak measures and how it is judged. Pure: numbers in, numbers and verdicts out.

Growth compares the first window after warm-up with the last window of the run (a run too
short for the warm-up shrinks it, so a short soak is a smoke run of the same checks). RSS
is judged on window means; descriptors without ESTABLISHED connections (bounded keep-alive
pools) on window floors, since a leak lifts the floor for good while in-flight requests
only wobble peaks. A restarted process cannot be judged and fails. See docs/soak.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["watcher", "info"]
"""``watcher``: a watcher process the criteria judge; ``info``: measured, reported only."""


@dataclass(frozen=True)
class Sample:
    """One reading of one process; ``t`` is seconds since the churn started."""

    t: float
    process: str
    pid: int | None
    rss: int | None
    fds: int | None
    connections: int | None = None
    """How many of ``fds`` are ESTABLISHED TCP connections (None: not known)."""

    @property
    def other_fds(self) -> int | None:
        """Descriptors that are not established connections (the judged ones)."""
        if self.fds is None:
            return None
        return self.fds - (self.connections or 0)


@dataclass(frozen=True)
class Windows:
    """``[warmup, first_end]`` and ``[last_start, end]`` in seconds since the start."""

    warmup: float
    first_end: float
    last_start: float
    end: float

    @classmethod
    def of(
        cls,
        duration: float,
        *,
        warmup_fraction: float = 0.2,
        min_warmup: float = 60.0,
        window_fraction: float = 0.1,
    ) -> Windows:
        """The windows of a run of ``duration`` seconds; ValueError if they would overlap."""
        if not (duration > 0 and math.isfinite(duration)):
            raise ValueError(f"duration must be a positive number, got {duration}")
        window = window_fraction * duration
        room = duration - 3 * window  # the two windows and a gap of one between them
        warmup = max(warmup_fraction * duration, min(min_warmup, room))
        if warmup + window > duration - window:
            raise ValueError(
                f"a {duration:g} s run has no room for {warmup:g} s warm-up and two "
                f"{window:g} s windows; lower min_warmup or run longer"
            )
        return cls(warmup, warmup + window, duration - window, duration)


@dataclass(frozen=True)
class Growth:
    """One process from the first window after warm-up to the last window."""

    process: str
    role: Role
    rss_start: float | None
    rss_end: float | None
    fd_floor_start: int | None
    fd_floor_end: int | None
    fd_peak_start: int | None
    fd_peak_end: int | None
    samples: int
    restarted: bool
    conn_peak_start: int | None = None
    conn_peak_end: int | None = None

    @property
    def rss_growth(self) -> float | None:
        """Fraction (0.05 = 5 %); None when a window has no sample."""
        if self.rss_start is None or self.rss_end is None or self.rss_start <= 0:
            return None
        return self.rss_end / self.rss_start - 1.0

    @property
    def fd_growth(self) -> int | None:
        if self.fd_floor_start is None or self.fd_floor_end is None:
            return None
        return self.fd_floor_end - self.fd_floor_start


def _mean(values: Sequence[int]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(group: list[Sample], reading: str) -> list[int]:
    """The readings of ``reading`` (a ``Sample`` attribute) that were taken."""
    return [v for s in group if (v := getattr(s, reading)) is not None]


def growth(samples: Iterable[Sample], windows: Windows, process: str, role: Role) -> Growth:
    """``process``'s growth between the windows (other processes' samples are ignored)."""
    mine = [s for s in samples if s.process == process]
    first = [s for s in mine if windows.warmup <= s.t <= windows.first_end]
    last = [s for s in mine if windows.last_start <= s.t]
    measured = [s for s in mine if windows.warmup <= s.t]
    pids = {s.pid for s in measured if s.pid is not None}

    return Growth(
        process=process,
        role=role,
        rss_start=_mean(_values(first, "rss")),
        rss_end=_mean(_values(last, "rss")),
        fd_floor_start=min(_values(first, "other_fds"), default=None),
        fd_floor_end=min(_values(last, "other_fds"), default=None),
        fd_peak_start=max(_values(first, "fds"), default=None),
        fd_peak_end=max(_values(last, "fds"), default=None),
        samples=len(mine),
        restarted=len(pids) > 1,
        conn_peak_start=max(_values(first, "connections"), default=None),
        conn_peak_end=max(_values(last, "connections"), default=None),
    )


@dataclass(frozen=True)
class OracleCounts:
    """The ground-truth comparison in numbers (see ``harness.expect.match``)."""

    writes_planned: int
    writes_sent: int
    writes_failed: int
    writes_skipped: int
    send_decisions: int
    """(write, webhook) pairs the webhook must turn into an event (k summed over groups)."""
    groups: int
    """(manager, runtime id, object) groups that must receive at least one event."""
    events_received: int
    matched: int
    missing: int
    spurious: int
    duplicates: int
    wrong_listener: int
    wrong_runtime: int

    @property
    def writes_ok(self) -> int:
        return self.writes_sent - self.writes_failed

    @property
    def wrong_routing(self) -> int:
        return self.wrong_listener + self.wrong_runtime


@dataclass(frozen=True)
class Thresholds:
    """The pass criteria."""

    rss_growth: float = 0.10
    fd_tolerance: int = 0
    rate_fraction: float = 0.95


@dataclass(frozen=True)
class Criterion:
    name: str
    ok: bool
    expected: str
    actual: str


def achieved_rate(writes_ok: int, duration: float, elapsed: float) -> float:
    """Accepted writes per second over the planned duration, or longer if the run was late."""
    return writes_ok / max(duration, elapsed) if duration > 0 else 0.0


def decide(
    oracle: OracleCounts,
    growths: Sequence[Growth],
    *,
    target_rate: float,
    achieved: float,
    thresholds: Thresholds = Thresholds(),
) -> tuple[Criterion, ...]:
    """Every criterion with its verdict; the soak passes only if all hold."""
    out = [
        Criterion(
            "oracle: nothing missing",
            oracle.missing == 0 and oracle.groups > 0,
            f"0 missing of {oracle.groups} groups",
            f"{oracle.missing} missing",
        ),
        Criterion(
            "oracle: nothing spurious",
            oracle.spurious == 0,
            "0 spurious",
            f"{oracle.spurious} spurious",
        ),
        Criterion(
            "oracle: no duplicates beyond the coalescing rule",
            oracle.duplicates == 0,
            "0 groups over their bound",
            f"{oracle.duplicates} groups",
        ),
        Criterion(
            "oracle: routing",
            oracle.wrong_routing == 0,
            "0 wrong listener / runtime",
            f"{oracle.wrong_listener} wrong listener, {oracle.wrong_runtime} wrong runtime",
        ),
        Criterion(
            "write rate",
            achieved >= thresholds.rate_fraction * target_rate,
            f">= {thresholds.rate_fraction * target_rate:.1f} writes/s "
            f"({thresholds.rate_fraction:.0%} of {target_rate:g})",
            f"{achieved:.1f} writes/s",
        ),
    ]
    for g in growths:
        if g.role != "watcher":
            continue
        rss = g.rss_growth
        out.append(
            Criterion(
                f"{g.process}: RSS growth",
                rss is not None and not g.restarted and rss < thresholds.rss_growth,
                f"< {thresholds.rss_growth:.0%}",
                _growth_text(rss, g.restarted),
            )
        )
        fd = g.fd_growth
        out.append(
            Criterion(
                f"{g.process}: fd growth (excl. connections)",
                fd is not None and not g.restarted and fd <= thresholds.fd_tolerance,
                f"<= {thresholds.fd_tolerance}",
                "restarted" if g.restarted else ("no samples" if fd is None else f"{fd:+d}"),
            )
        )
    return tuple(out)


def _growth_text(value: float | None, restarted: bool) -> str:
    if restarted:
        return "restarted"
    return "no samples" if value is None else f"{value:+.1%}"


def passed(criteria: Sequence[Criterion]) -> bool:
    return bool(criteria) and all(c.ok for c in criteria)
