"""``writes``: the churn writes' own round trip (admission included) and how many the API
server refused or never answered."""

from __future__ import annotations

from harness.churn.model import ExecutedMutation
from harness.expect.check import Check, combined
from harness.expect.checks import CountBound, LatencyBounds, Verdict, check_latency, count_verdict
from harness.expect.observations import Observations
from harness.expect.truth import window_churns
from harness.scenario import Count, WriteLatency


def window_writes(obs: Observations, cluster: str | None) -> list[ExecutedMutation]:
    """Every churn write of the window (``cluster``: one SKR's)."""
    return [
        e
        for c in window_churns(obs)
        for e in c.executed
        if cluster is None or e.mutation.cluster == cluster
    ]


def judge(w: WriteLatency, obs: Observations) -> Check:
    done = window_writes(obs, w.cluster)
    samples = [e.acked_at - e.sent_at for e in done if e.ok]
    subject = f"write round trip ({w.cluster or 'every SKR'}, admission included)"
    verdicts: list[Verdict] = []
    if w.has_latency_bound:
        verdicts += check_latency(samples, LatencyBounds(w.p50, w.p99, w.max), subject=subject)
    if w.failed is not None:
        failed = sum(1 for e in done if not e.ok)
        bound = CountBound(*Count.bounds_of(w.failed))
        verdicts.append(
            count_verdict(
                failed, bound, f"writes of {w.cluster or 'every SKR'}", noun="failed write"
            )
        )
        subject = f"writes ({w.cluster or 'every SKR'}): round trip and failures"
    return combined("writes", subject, verdicts, suffix=f" (n={len(samples)})")
