"""Every entry of one ``expect`` judged against one snapshot, in the file's order."""

from __future__ import annotations

from harness.expect import churned, counts
from harness.expect.check import Check
from harness.expect.observations import Observations
from harness.scenario import Expect


def judge(expect: Expect, obs: Observations) -> list[Check]:
    checks = [counts.events(e, obs) for e in expect.events]
    if expect.truth is not None:
        checks.append(churned.truth(expect.truth, obs))
    checks += [counts.reconciles(r, obs) for r in expect.reconciles]
    checks += [counts.rejections(r, obs) for r in expect.rejections]
    checks += [counts.metric(m, obs) for m in expect.metrics]
    if expect.latency is not None:
        checks.append(churned.latency(expect.latency, obs))
    if expect.writes is not None:
        checks.append(churned.writes(expect.writes, obs))
    return checks
