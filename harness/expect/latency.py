"""``latency``: SKR write → event received, over the window's churn writes (from the
ground truth) or its apply/patch/delete writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from harness.expect.check import Check, combined
from harness.expect.checks import LatencyBounds, check_latency
from harness.expect.observations import Observations
from harness.expect.truth import match, window_churns
from harness.scenario import Latency


def write_latencies(obs: Observations, manager: str | None) -> list[float]:
    """For every apply/patch/delete of the window: its first matching event's delay."""
    got = [
        e
        for e in obs.events
        if e.received_at >= obs.since and (manager is None or e.manager == manager)
    ]
    samples = []
    for w in obs.writes:
        if w.sent_at < obs.since or w.cluster not in obs.runtime_ids:
            continue
        first = min(
            (
                e.received_at
                for e in got
                if e.runtime_id == obs.runtime_ids[w.cluster]
                and e.namespace == w.namespace
                and e.name == w.name
                and e.received_at >= w.sent_at
            ),
            default=None,
        )
        if first is not None:
            samples.append(first - w.sent_at)
    return samples


def judge(lat: Latency, obs: Observations) -> Check:
    churns = window_churns(obs)
    if churns:
        samples: Sequence[float] = match(obs, churns, lat.manager)[0].latency_values
        source = "churn writes"
    else:
        samples = write_latencies(obs, lat.manager)
        source = "writes"
    subject = f"latency ({source} → {lat.manager or 'any manager'})"
    verdicts = check_latency(samples, LatencyBounds(lat.p50, lat.p99, lat.max), subject=subject)
    check = combined("latency", subject, list(verdicts), suffix=f" (n={len(samples)})")
    return dataclasses.replace(check, latencies=tuple(samples))
