"""Prometheus text → ``{"name{label=\"v\",...}": value}``, for asserting on webhook metrics.

Pure. Labels are sorted by name so keys are stable; a sample without labels is its bare
name. ``value`` looks one sample up and treats a missing one as 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families


def sample_key(name: str, labels: Mapping[str, str] | None = None) -> str:
    """``name`` or ``name{a="x",b="y"}`` with labels sorted by name."""
    if not labels:
        return name
    inner = ",".join(f'{k}="{labels[k]}"' for k in sorted(labels))
    return f"{name}{{{inner}}}"


def parse_metrics(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text exposition, keyed by :func:`sample_key`."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample_key(sample.name, sample.labels)] = float(sample.value)
    return samples


def value(samples: Mapping[str, float], name: str, **labels: str) -> float:
    """The sample ``name{labels}``, 0.0 when absent (counters not yet incremented)."""
    return samples.get(sample_key(name, labels), 0.0)
