"""``reconciles``: Lifecycle-Manager reconciles of one KCP Kyma, by trigger and outcome."""

from __future__ import annotations

from harness.expect.check import Check, counted
from harness.expect.checks import CountBound
from harness.expect.observations import Observations
from harness.scenario import ReconcileExpectation
from watcher.domain import KCP_NAMESPACE


def kyma_key(kyma: str) -> str:
    """Where a KCP Kyma named without a namespace lives."""
    return kyma if "/" in kyma else f"{KCP_NAMESPACE}/{kyma}"


def judge(r: ReconcileExpectation, obs: Observations) -> Check:
    """Reconciles of one KCP Kyma in the window, by trigger and outcome."""
    key = kyma_key(r.kyma)
    outcomes = r.outcomes
    count = sum(
        1
        for seen in obs.reconciles
        if seen.kyma == key
        and seen.at >= obs.since
        and (r.trigger is None or r.trigger in seen.triggers)
        and (outcomes is None or seen.outcome in outcomes)
        and (r.started_within is None or seen.latency <= r.started_within)
    )
    subject = f"kyma={key}" + (f" trigger={r.trigger}" if r.trigger else "")
    if outcomes is not None:
        subject += f" outcome={'|'.join(sorted(outcomes))}"
    if r.started_within is not None:
        subject += f" started within {r.started_within:g} s of its trigger"
    return counted("reconciles", f"reconciles {subject}", count, CountBound(*r.bounds), "reconcile")
