"""``rejections``: requests a listener refused with one reason since the window opened."""

from __future__ import annotations

from harness.expect.check import Check, bounds, counted
from harness.expect.observations import Observations
from harness.scenario import RejectionExpectation


def judge(r: RejectionExpectation, obs: Observations) -> Check:
    """Requests a listener refused with ``reason`` since the window opened."""
    count = round(obs.rejections.get((r.listener, r.reason), 0.0))
    subject = f"listener={r.listener} reason={r.reason}"
    return counted("rejections", f"rejections {subject}", count, bounds(*r.bounds), "rejection")
