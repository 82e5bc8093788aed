"""The fleet's health table, from the metrics a monitor exposes (pure: samples in, rows out).

Reading the metrics rather than the monitor itself means the table works against any
operator that runs a :class:`~watcher.health.monitor.HealthMonitor` and serves its
registry — ours, or yours — over plain Prometheus text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from watcher.health.state import State

Sample = tuple[str, Mapping[str, str], float]
"""(metric name, labels, value), as a Prometheus text parser yields them."""

SEVERITY = {State.HEALTHY: 0, State.UNKNOWN: 1, State.DEGRADED: 2, State.BROKEN: 3}
_STYLE = {
    State.HEALTHY: "green",
    State.UNKNOWN: "dim",
    State.DEGRADED: "yellow",
    State.BROKEN: "red",
}


@dataclass(frozen=True)
class HealthRow:
    runtime_id: str
    state: State
    reason: str
    detail: str
    age: float | None
    round_trip: float | None
    misses: int


def rows_from_samples(samples: Iterable[Sample]) -> list[HealthRow]:
    """One row per runtime in ``watcher_health_state``, worst first, then by id."""
    states: dict[str, tuple[State, str, str]] = {}
    ages: dict[str, float] = {}
    trips: dict[str, float] = {}
    misses: dict[str, float] = {}
    for name, labels, value in samples:
        rid = labels.get("runtime_id")
        if rid is None:
            continue
        if name == "watcher_health_state" and value == 1:
            try:
                state = State(labels.get("state", ""))
            except ValueError:
                continue
            states[rid] = (state, labels.get("reason", ""), labels.get("detail", ""))
        elif name == "watcher_health_heartbeat_age_seconds":
            ages[rid] = value
        elif name == "watcher_health_last_round_trip_seconds":
            trips[rid] = value
        elif name == "watcher_health_consecutive_misses":
            misses[rid] = value
    rows = [
        HealthRow(rid, s, reason, detail, ages.get(rid), trips.get(rid), int(misses.get(rid, 0)))
        for rid, (s, reason, detail) in states.items()
    ]
    return sorted(rows, key=lambda r: (-SEVERITY[r.state], r.runtime_id))


def worst(rows: Sequence[HealthRow]) -> State | None:
    return max((r.state for r in rows), key=SEVERITY.__getitem__, default=None)


def _seconds(value: float | None, unit: str = "s") -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if unit == "ms" else f"{value:.1f} s"


def render(rows: Sequence[HealthRow], title: str = "watcher health") -> str:
    """A plain-text table (the product image carries no terminal-UI library)."""
    counts = {s: sum(1 for r in rows if r.state is s) for s in State}
    summary = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
    header = ("RUNTIME", "STATE", "REASON", "DETAIL", "LAST ECHO", "ROUND TRIP", "MISSES")
    body = [
        (
            r.runtime_id,
            r.state.value,
            r.reason,
            r.detail or "-",
            f"{_seconds(r.age)} ago" if r.age is not None else "-",
            _seconds(r.round_trip, "ms"),
            str(r.misses),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    lines = [f"{title}: {len(rows)} runtimes ({summary or 'none'})"]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (header, *body)
    ]
    return "\n".join(lines)


__all__ = ["SEVERITY", "HealthRow", "Sample", "render", "rows_from_samples", "worst"]
