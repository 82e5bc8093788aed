"""Every entry of one ``expect`` judged against one snapshot, in the file's order; one
module per expectation kind."""

from __future__ import annotations

from harness.expect import (
    events,
    latency,
    metrics,
    reconciles,
    rejections,
    timeline,
    truth,
    writes,
)
from harness.expect.check import Check
from harness.expect.observations import Observations
from harness.scenario import Expect


def judge(expect: Expect, obs: Observations) -> list[Check]:
    checks = [events.judge(e, obs) for e in expect.events]
    if expect.truth is not None:
        checks.append(truth.judge(expect.truth, obs))
    checks += [reconciles.judge(r, obs) for r in expect.reconciles]
    checks += [rejections.judge(r, obs) for r in expect.rejections]
    checks += [metrics.judge(m, obs) for m in expect.metrics]
    if expect.latency is not None:
        checks.append(latency.judge(expect.latency, obs))
    if expect.writes is not None:
        checks.append(writes.judge(expect.writes, obs))
    checks += [timeline.judge(t, obs) for t in expect.timeline]
    return checks
