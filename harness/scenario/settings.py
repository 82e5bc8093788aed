"""``settings``: knobs of the KCP side (SAN pinning, the Lifecycle Manager's requeue times,
its concurrency and how long a Manifest takes to become Ready)."""

from __future__ import annotations

from pydantic import Field

from harness.scenario.values import Duration, Model, PositiveDuration


class Requeue(Model):
    """Time until the next reconcile per outcome; KLM's defaults
    (:class:`harness.kcp.reconciler.RequeueIntervals`)."""

    success: PositiveDuration = 300.0
    busy: PositiveDuration = 5.0
    error: PositiveDuration = 5.0
    """The first retry after an error, doubled per consecutive error up to ``errorMax``."""
    warning: PositiveDuration = 30.0
    error_max: PositiveDuration = 30.0


class Klm(Model):
    """The Lifecycle Manager stand-in: ``concurrency`` is KLM's
    ``max-concurrent-kyma-reconciles`` (default 1); ``manifestReadyAfter`` is how long the
    Manifest stand-in takes to make a module's Manifest Ready (or Error)."""

    concurrency: int = Field(default=1, ge=1, le=32)
    manifest_ready_after: Duration = 0.5


class Settings(Model):
    san_pinning: bool = True
    requeue: Requeue = Field(default_factory=Requeue)
    klm: Klm = Field(default_factory=Klm)
