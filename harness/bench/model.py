"""What a benchmark run produced: tables, targets and every figure (pure data, no I/O).

Each benchmark module returns one :class:`BenchResult`; the suite adds :class:`RunMeta`
(command, machine, versions) and hands both to the writers in :mod:`harness.bench.writer`.
``figures`` holds every measured number as plain JSON values, so ``docs/benchmarks.json``
is the complete record and the tables are a view of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.report.stats import percentile

Cell = str | int | float | None


def ms(seconds: float) -> float:
    """Seconds → milliseconds, rounded for tables (3 significant decimals below 10 ms)."""
    value = seconds * 1000
    return round(value, 3 if abs(value) < 10 else 1)


@dataclass(frozen=True)
class Table:
    """One markdown table: a title, column headings and rows of cells."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: row {row!r} has {len(row)} cells for "
                    f"{len(self.columns)} columns"
                )

    @classmethod
    def of(
        cls,
        title: str,
        records: Sequence[Mapping[str, Cell]],
        note: str = "",
        *,
        columns: tuple[str, ...] = (),
    ) -> Table:
        """A table from one mapping per row (heading → cell), so each heading stands next to
        its cell; ``columns`` (default: the first row's headings) when there may be no rows."""
        heads = columns or (tuple(records[0]) if records else ())
        return cls(title, heads, tuple(tuple(r[c] for c in heads) for r in records), note)


@dataclass(frozen=True)
class Target:
    """A target from the issue, what was measured against it, and whether it was met.

    ``met`` is None when the figure could not be measured in this run; ``note`` explains
    a miss (the bottleneck and what would lift it) or how the figure was taken.
    """

    what: str
    target: str
    measured: str
    met: bool | None
    note: str = ""


@dataclass(frozen=True)
class BenchResult:
    """Everything one benchmark reports."""

    name: str
    title: str
    seconds: float = 0.0
    """Wall time; the suite sets it for the benchmarks it runs."""
    description: str = ""
    tables: tuple[Table, ...] = ()
    targets: tuple[Target, ...] = ()
    figures: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    error: str = ""
    """Set when the benchmark failed; the other benchmarks still run and report."""

    def to_json(self) -> dict[str, Any]:
        """Everything but the tables and the description (views of ``figures``)."""
        kept = {k: v for k, v in asdict(self).items() if k not in ("tables", "description")}
        return {**kept, "seconds": round(self.seconds, 2)}


@dataclass(frozen=True)
class RunMeta:
    """The run: how it was started, on what machine, with which versions."""

    command: str
    date: str
    cores: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    seconds: float
    versions: Mapping[str, str]
    quick: bool

    @property
    def busy(self) -> bool:
        """Whether other work competed for the CPUs (1-minute load ≥ half the cores)."""
        return max(self.load_before[0], self.load_after[0]) >= self.cores / 2

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 1), "busy": self.busy}


def summary(values: Sequence[float]) -> dict[str, float | int]:
    """count / p50 / p99 / max of ``values`` (already in the unit to report), nearest rank."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "p50": round(percentile(values, 50), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }
