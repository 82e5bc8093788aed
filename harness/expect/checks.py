"""Simple expectations as pure evaluators: event counts, latency bounds, metric values.

Each returns a ``Verdict`` whose ``text`` is the line a report and a JUnit failure show,
e.g. ``expected exactly 1 event for manager=lifecycle-manager object=kyma-system/default,
got 0``. Percentiles are nearest-rank: the ``ceil(p/100 * n)``-th smallest sample.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.expect.match import ReceivedEvent
from harness.report.stats import percentile

MetricOp = Literal["==", "!=", "<=", ">=", "<", ">"]
_OPS: dict[MetricOp, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str
    expected: str
    actual: str


@dataclass(frozen=True)
class EventFilter:
    """Which received events an expectation counts (``None`` = any); times inclusive."""

    manager: str | None = None
    runtime_id: str | None = None
    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    since: float | None = None
    until: float | None = None

    def matches(self, event: ReceivedEvent) -> bool:
        return (
            (self.manager is None or event.manager == self.manager)
            and (self.runtime_id is None or event.runtime_id == self.runtime_id)
            and (self.namespace is None or event.namespace == self.namespace)
            and (self.name is None or event.name == self.name)
            and (self.kind is None or event.gvk.kind == self.kind)
            and (self.since is None or event.received_at >= self.since)
            and (self.until is None or event.received_at <= self.until)
        )

    def describe(self) -> str:
        parts = []
        if self.manager is not None:
            parts.append(f"manager={self.manager}")
        if self.runtime_id is not None:
            parts.append(f"runtime={self.runtime_id}")
        if self.name is not None or self.namespace is not None:
            obj = f"{self.namespace or ''}/{self.name or '*'}".lstrip("/")
            parts.append(f"object={obj}")
        if self.kind is not None:
            parts.append(f"kind={self.kind}")
        return " ".join(parts) or "any manager and object"


@dataclass(frozen=True)
class CountBound:
    """``at_least`` ≤ count ≤ ``at_most`` (``None``: unbounded)."""

    at_least: int = 0
    at_most: int | None = None

    def __post_init__(self) -> None:
        if self.at_least < 0 or (self.at_most is not None and self.at_most < self.at_least):
            raise ValueError(f"invalid count bounds {self.at_least}..{self.at_most}")

    def holds(self, count: int) -> bool:
        return self.at_least <= count and (self.at_most is None or count <= self.at_most)

    def describe(self, noun: str = "event") -> str:
        """``exactly 1 event``, ``at least 2 events``, ``no events``, ``between 1 and 3 events``."""
        low, high = self.at_least, self.at_most

        def n(count: int, word: str) -> str:
            return f"{word} {count} {noun}{'' if count == 1 else 's'}"

        if high == 0:
            return f"no {noun}s"
        if high is None:
            return n(low, "at least")
        if low == high:
            return n(low, "exactly")
        if low == 0:
            return n(high, "at most")
        return f"between {low} and {high} {noun}s"


def check_count(
    events: Iterable[ReceivedEvent],
    bound: CountBound,
    where: EventFilter = EventFilter(),
    *,
    noun: str = "event",
) -> Verdict:
    """Count the events ``where`` selects against ``bound``."""
    count = sum(1 for e in events if where.matches(e))
    return count_verdict(count, bound, where.describe(), noun=noun)


def count_verdict(count: int, bound: CountBound, subject: str, *, noun: str = "event") -> Verdict:
    """A count of anything (reconciles, rejections) against ``bound``."""
    expected = bound.describe(noun)
    ok = bound.holds(count)
    text = f"{'' if ok else 'expected '}{expected} for {subject}, got {count}"
    return Verdict(ok, text, expected, str(count))


@dataclass(frozen=True)
class LatencyBounds:
    """Upper bounds in seconds (``None``: not checked)."""

    p50: float | None = None
    p99: float | None = None
    max: float | None = None


def check_latency(
    samples: Sequence[float], bounds: LatencyBounds, *, subject: str = "latency"
) -> tuple[Verdict, ...]:
    """One verdict per bound; no samples fails every bound (nothing was measured)."""
    verdicts = []
    for label, p, bound in (
        ("p50", 50.0, bounds.p50),
        ("p99", 99.0, bounds.p99),
        ("max", 100.0, bounds.max),
    ):
        if bound is None:
            continue
        expected = f"{label} {subject} <= {bound:.3f} s"
        if not samples:
            verdicts.append(Verdict(False, f"expected {expected}, got no samples", expected, "-"))
            continue
        value = percentile(samples, p)
        ok = value <= bound
        actual = f"{value:.3f} s"
        text = (
            f"{label} {subject} {actual} <= {bound:.3f} s (n={len(samples)})"
            if ok
            else f"expected {expected}, got {actual} (n={len(samples)})"
        )
        verdicts.append(Verdict(ok, text, expected, actual))
    return tuple(verdicts)


def metric_name(name: str, labels: Mapping[str, str] | None = None) -> str:
    """``name{a="1",b="2"}`` (labels sorted), as Prometheus prints a series."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def check_metric(
    name: str,
    actual: float | None,
    op: MetricOp,
    value: float,
    *,
    labels: Mapping[str, str] | None = None,
) -> Verdict:
    """Compare a sample with ``value``; a series that does not exist counts as 0."""
    series = metric_name(name, labels)
    got = 0.0 if actual is None else actual
    ok = _OPS[op](got, value)
    expected = f"{series} {op} {_num(value)}"
    shown = _num(got) + (" (series absent)" if actual is None else "")
    text = f"{expected}: got {shown}" if ok else f"expected {expected}, got {shown}"
    return Verdict(ok, text, expected, shown)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"
