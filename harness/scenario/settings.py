"""``settings``: knobs of the KCP side (SAN pinning, the Lifecycle-Manager's requeue times)."""

from __future__ import annotations

from pydantic import Field

from harness.scenario.values import Model, PositiveDuration


class Requeue(Model):
    """Time until the next reconcile per outcome; KLM's defaults
    (:class:`harness.kcp.reconciler.RequeueIntervals`)."""

    success: PositiveDuration = 300.0
    busy: PositiveDuration = 5.0
    error: PositiveDuration = 5.0
    """The first retry after an error, doubled per consecutive error up to ``errorMax``."""
    warning: PositiveDuration = 30.0
    error_max: PositiveDuration = 30.0


class Settings(Model):
    san_pinning: bool = True
    requeue: Requeue = Field(default_factory=Requeue)
