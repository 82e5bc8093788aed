"""Latency summaries shared by the writers and the plots (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of non-empty ``values``: the
    project's one definition (scenario expectations, reports, soak and benchmarks all use
    it, so a benchmark p99 and a scenario p99 of the same samples agree).

    Nearest rank returns an observed sample, so "p99 = 41 ms" means some event took 41 ms.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is not in (0, 100]")
    ordered = sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True)
class LatencySummary:
    count: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> LatencySummary | None:
        """Summary of ``values_ms``, or None when there are none."""
        if not values_ms:
            return None
        p50, p99 = percentile(values_ms, 50), percentile(values_ms, 99)
        return cls(len(values_ms), p50, p99, max(values_ms))

    def __str__(self) -> str:
        return f"n={self.count} p50={self.p50:.1f} ms p99={self.p99:.1f} ms max={self.max:.1f} ms"
