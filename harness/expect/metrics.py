"""``metrics``: one sample (or a histogram quantile) compared with a value."""

from __future__ import annotations

from harness.expect.check import Check
from harness.expect.checks import check_metric
from harness.expect.observations import Observations, metric_key
from harness.scenario import MetricExpectation


def judge(m: MetricExpectation, obs: Observations) -> Check:
    """One sample compared with ``op``; a series that does not exist reads 0."""
    value = obs.metrics.get(metric_key(m.target, m.name, m.labels, m.quantile), 0.0)
    name = m.name if m.quantile is None else f"{m.name} quantile {m.quantile:g}"
    verdict = check_metric(name, value, m.op, m.value, labels=m.labels)
    return Check("metrics", f"{m.target} {verdict.expected}", verdict)
