"""``settings``: knobs of the KCP side (SAN pinning, the Lifecycle Manager's requeue times,
its concurrency, how long a Manifest takes to become Ready, its certificate timings and
how Watcher changes reach the SKRs)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.scenario.values import Duration, Model, PositiveDuration


class Requeue(Model):
    """Time until the next reconcile per outcome; KLM's defaults
    (:class:`harness.kcp.lifecycle_manager.queue.reconciler.RequeueIntervals`)."""

    success: PositiveDuration = 300.0
    busy: PositiveDuration = 5.0
    error: PositiveDuration = 5.0
    """The first retry after an error, doubled per consecutive error up to ``errorMax``."""
    warning: PositiveDuration = 30.0
    error_max: PositiveDuration = 30.0


DAY = 86400.0


class Certificates(Model):
    """KLM's certificate timings (klm-reference §3; defaults are KLM's): a new CA
    ``caRenewBefore`` its end, client certificates re-issued ``clientRenewBefore`` theirs
    (and whenever they predate the newest CA), the gateway serving the new CA ``grace``
    after it entered the bundle. Short values run a whole rotation in about a minute."""

    ca_validity: PositiveDuration = 90 * DAY
    ca_renew_before: Duration = 61 * DAY
    client_validity: PositiveDuration = 60 * DAY
    client_renew_before: Duration = 30 * DAY
    grace: Duration = 4 * DAY

    @model_validator(mode="after")
    def _renewal_before_end(self) -> Certificates:
        if self.ca_renew_before >= self.ca_validity:
            raise ValueError("caRenewBefore must be shorter than caValidity")
        if self.client_renew_before >= self.client_validity:
            raise ValueError("clientRenewBefore must be shorter than clientValidity")
        return self


class Health(Model):
    """Watcher health (``docs/health.md``): a heartbeat into every SKR each ``interval``,
    missed when not back within ``timeout`` (shorter than the interval); a round trip
    above ``slow`` (optional) counts as Degraded."""

    interval: PositiveDuration = 60.0
    timeout: PositiveDuration = 5.0
    slow: PositiveDuration | None = None

    @model_validator(mode="after")
    def _timeout_within_interval(self) -> Health:
        if self.timeout >= self.interval:
            raise ValueError("timeout must be shorter than interval")
        return self


class Klm(Model):
    """The Lifecycle Manager: ``concurrency`` is KLM's ``max-concurrent-kyma-reconciles``
    (default 1); ``manifestReadyAfter`` is how long the Manifest stand-in takes to make a
    module's Manifest Ready (or Error); ``certificates`` its certificate timings;
    ``watcherRollout`` how a Watcher change reaches the SKRs: ``immediate`` (ours: every
    SKR re-rendered at once) or ``reconcile`` (KLM's: at each Kyma's next reconcile);
    ``health`` turns watcher health on (the ``watcher-health`` Watcher, heartbeats, the
    Kymas' ``WatcherHealth`` condition; off when absent)."""

    concurrency: int = Field(default=1, ge=1, le=32)
    manifest_ready_after: Duration = 0.5
    certificates: Certificates = Field(default_factory=Certificates)
    watcher_rollout: Literal["immediate", "reconcile"] = "immediate"
    health: Health | None = None


class Settings(Model):
    san_pinning: bool = True
    requeue: Requeue = Field(default_factory=Requeue)
    klm: Klm = Field(default_factory=Klm)
