"""Reading Prometheus text (a kube-apiserver's /metrics) for ``metrics`` expectations.

A sample is named with some of its labels; the value is the sum over every series whose
labels include the given ones (so ``apiserver_admission_webhook_request_total`` with
``{name: ...}`` adds up every operation and code). ``quantile`` estimates a histogram's
quantile from its cumulative ``_bucket`` series like PromQL's ``histogram_quantile``
(linear inside the bucket).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_samples(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition."""
    return [
        Sample(s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _selected(samples: Iterable[Sample], name: str, labels: Mapping[str, str]) -> list[Sample]:
    return [
        s
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def sample_sum(samples: Iterable[Sample], name: str, labels: Mapping[str, str]) -> float:
    """The sum over every series of ``name`` whose labels include ``labels`` (0: none)."""
    return sum(s.value for s in _selected(samples, name, labels))


def histogram_quantile(
    samples: Iterable[Sample], name: str, labels: Mapping[str, str], q: float
) -> float:
    """The ``q`` quantile of histogram ``name`` (its ``<name>_bucket`` series, summed per
    ``le`` over the labels not given); NaN without observations."""
    buckets: dict[float, float] = {}
    for s in _selected(samples, f"{name}_bucket", labels):
        bound = float(s.labels.get("le", "+Inf"))
        buckets[bound] = buckets.get(bound, 0.0) + s.value
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return math.nan
    rank = q * ordered[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # PromQL: the highest finite bound
            width = count - lower_count
            share = (rank - lower_count) / width if width > 0 else 1.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound
