"""Metrics exposed as upstream's Go client exposes them: without ``*_created`` samples.

prometheus-client adds a ``<name>_created`` sample (the creation time) to every counter
and histogram; Go's client does not. A dashboard or recording rule built on upstream's
webhook or listener never expects them, and they double the series a scrape returns.
The registry keeps them (tests read them); only the exposition leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric


class UpstreamExposition:
    """``generate_latest(UpstreamExposition(registry))``: ``registry`` without ``*_created``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


def summed_sample(
    registry: CollectorRegistry, name: str, labels: Mapping[str, str] | None = None
) -> float:
    """The value of sample ``name`` in ``registry`` (0 when absent), summed over the labels
    not given — what tests, scenarios and health checks read."""
    wanted = dict(labels or {})
    return sum(
        sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in wanted.items())
    )


__all__ = ["UpstreamExposition", "summed_sample"]
