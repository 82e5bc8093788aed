"""``expect``: what must have happened, checked until ``within`` has passed.

Every list entry is one expectation and becomes one JUnit testcase. Counts are
``{exactly: n}``, ``{atLeast: n}``, ``{atMost: n}`` (``atLeast`` and ``atMost`` combine
into a range); ``none: true`` means exactly zero; neither means at least one.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from harness.scenario.reconciles import Outcomes, ReconcileTrigger
from harness.scenario.timeline import TimelineExpectation
from harness.scenario.values import DnsLabel, Duration, Labels, Model, PositiveDuration, Text

DEFAULT_WITHIN = 10.0
METRIC_NAME_PATTERN = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
"""A Prometheus metric name (``webhook/<skr>``, ``listener/<component>``)."""
STAT_NAME_PATTERN = r"^[a-zA-Z_:][a-zA-Z0-9_:.-]*$"
"""An Envoy stat name (``gateway``): dotted, e.g. ``ssl.fail_verify_error``."""
TARGET_PATTERN = r"^(gateway|klm|(listener|webhook|apiserver)/[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"


class Count(Model):
    exactly: int | None = Field(default=None, ge=0)
    at_least: int | None = Field(default=None, ge=0)
    at_most: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> Count:
        if self.exactly is not None and (self.at_least is not None or self.at_most is not None):
            raise ValueError("exactly cannot be combined with atLeast or atMost")
        if self.exactly is None and self.at_least is None and self.at_most is None:
            raise ValueError("a count needs exactly, atLeast or atMost")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"atLeast {self.at_least} is greater than atMost {self.at_most}")
        return self

    @staticmethod
    def bounds_of(count: Count | None) -> tuple[int, int | None]:
        """(at least, at most or ``None`` for unbounded); no count: at least one."""
        if count is None:
            return (1, None)
        if count.exactly is not None:
            return (count.exactly, count.exactly)
        return (count.at_least or 0, count.at_most)


class _Counted(Model):
    count: Count | None = None
    none: bool = False

    @model_validator(mode="after")
    def _count_or_none(self) -> _Counted:
        if self.none and self.count is not None:
            raise ValueError("none: true cannot be combined with count")
        return self

    @property
    def bounds(self) -> tuple[int, int | None]:
        """(at least, at most or ``None`` for unbounded)."""
        return (0, 0) if self.none else Count.bounds_of(self.count)


class ObjectRef(Model):
    """The watched object an event names (``kind`` optional)."""

    namespace: str = ""
    name: Text
    kind: str | None = None


class EventExpectation(_Counted):
    """WatchEvents a manager's listener received (from one SKR, about one object)."""

    manager: DnsLabel
    runtime_id: str | None = None
    cluster: DnsLabel | None = None
    object: ObjectRef | None = None


class Truth(Model):
    """Received events equal the churn ground truth: nothing missing, nothing spurious,
    right listener, right runtime id (see docs/scenarios.md, "Ground truth")."""

    manager: DnsLabel | None = None


class ReconcileExpectation(_Counted):
    """Reconciles of a KCP Kyma (``name`` or ``namespace/name``) by the Lifecycle Manager,
    optionally only those with one ``trigger`` and/or an ``outcome`` (one, or a list of
    alternatives: ``[error, warning]``), and only those that started at most
    ``startedWithin`` after their first trigger (a reconcile is counted once it has
    finished; this bounds how long it waited in the queue)."""

    kyma: Text
    trigger: ReconcileTrigger | None = None
    outcome: Outcomes | None = None
    started_within: Duration | None = None

    @property
    def outcomes(self) -> frozenset[str] | None:
        """The outcomes counted (``None``: any)."""
        return None if self.outcome is None else frozenset(self.outcome)


class RejectionExpectation(_Counted):
    """Requests a listener refused (``reason``: the metric's reason label, e.g.
    ``verification-failed`` or the SAN-pinning category)."""

    listener: DnsLabel
    reason: Text


class MetricExpectation(Model):
    """``target`` ``gateway`` | ``klm`` (the Lifecycle Manager's own metrics, e.g.
    ``lifecycle_mgr_self_signed_cert_not_renew``) | ``listener/<component>`` |
    ``webhook/<skr>`` | ``apiserver/<cluster>`` (the kube-apiserver's own /metrics:
    counters, gauges, histogram ``_count``/``_sum``/``_bucket`` samples, summed over the
    label values not given); the
    sample ``name{labels}`` compared with ``value`` (0 if the series does not exist).

    For ``gateway``, ``name`` is an Envoy stat (dots allowed, no labels): a full name, or a
    short one resolved against the gateway's listener (``ssl.*``, ``downstream_cx_*``) or
    HTTP connection manager (``downstream_rq_*``), see :func:`gateway_stat_name`."""

    target: str = Field(pattern=TARGET_PATTERN)
    name: str = Field(pattern=STAT_NAME_PATTERN)
    labels: Labels = Field(default_factory=dict)
    op: Literal["==", "!=", "<=", ">=", "<", ">"] = "=="
    value: float
    quantile: float | None = Field(default=None, gt=0, lt=1)
    """``apiserver/<cluster>`` only: ``name`` is a histogram; compare this quantile."""

    @model_validator(mode="after")
    def _name_fits_target(self) -> MetricExpectation:
        if self.quantile is not None and not self.target.startswith("apiserver/"):
            raise ValueError("quantile is for apiserver/<cluster> histograms")
        if self.target == "gateway":
            if self.labels:
                raise ValueError("gateway stats have no labels")
        elif not re.fullmatch(METRIC_NAME_PATTERN, self.name):
            raise ValueError(
                f"{self.name!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*); "
                "dotted Envoy stat names are for target gateway only"
            )
        return self


LISTENER_STAT_PREFIXES = ("ssl.", "downstream_cx_")
HTTP_STAT_PREFIXES = ("downstream_rq_",)


def gateway_stat_name(name: str, *, listener_prefix: str, http_prefix: str) -> str:
    """The full Envoy stat for ``name``: listener-scoped short names (``ssl.*``,
    ``downstream_cx_*``) get ``listener_prefix`` (``listener.127.0.0.1_<port>``),
    HTTP-scoped ones (``downstream_rq_*``) ``http_prefix`` (``http.<stat prefix>``); any
    other name is taken as a full name."""
    if name.startswith(LISTENER_STAT_PREFIXES):
        return f"{listener_prefix}.{name}"
    if name.startswith(HTTP_STAT_PREFIXES):
        return f"{http_prefix}.{name}"
    return name


class Latency(Model):
    """Bounds on SKR write → event received at the listener, over this step's events."""

    manager: DnsLabel | None = None
    p50: Duration | None = None
    p99: Duration | None = None
    max: Duration | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> Latency:
        return self.given_any("latency", "p50", "p99", "max")


class WriteLatency(Model):
    """The churn writes of this window (``cluster``: one SKR's). ``p50``/``p99``/``max``
    bound the round trip of accepted writes (sent → the API server's answer): every
    admission webhook call is inside it, so this is how a scenario says admissions stayed
    fast. ``failed`` counts the writes the API server refused or never answered (e.g.
    while it restarts): they are not writes, and the ground truth owes no event for them."""

    cluster: DnsLabel | None = None
    p50: Duration | None = None
    p99: Duration | None = None
    max: Duration | None = None
    failed: Count | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> WriteLatency:
        return self.given_any("writes", "p50", "p99", "max", "failed")

    @property
    def has_latency_bound(self) -> bool:
        return not (self.p50 is None and self.p99 is None and self.max is None)


class Expect(Model):
    within: PositiveDuration = DEFAULT_WITHIN
    events: tuple[EventExpectation, ...] = ()
    truth: Truth | None = None
    reconciles: tuple[ReconcileExpectation, ...] = ()
    rejections: tuple[RejectionExpectation, ...] = ()
    metrics: tuple[MetricExpectation, ...] = ()
    latency: Latency | None = None
    writes: WriteLatency | None = None
    timeline: tuple[TimelineExpectation, ...] = ()
    """Order and distance of two occurrences each (:mod:`harness.scenario.timeline`)."""

    @model_validator(mode="after")
    def _something(self) -> Expect:
        fields = ("events", "truth", "reconciles", "rejections", "metrics", "latency", "writes")
        return self.given_any("expect", *fields, "timeline")
