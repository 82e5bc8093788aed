"""``requires``: what a scenario or a step needs of the SKR webhook or the Lifecycle Manager
beyond what upstream's show.

The library runs against any webhook or KLM that takes upstream's contract; what only ours
do or show is named here, so a scenario depending on it is skipped with the reason against
another implementation instead of failing for the wrong one (docs/scenarios.md,
*Requirements*). Some needs are read off the scenario itself, so they cannot be forgotten
(e.g. a ``metrics`` expectation on a metric upstream's webhook does not export). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from harness.scenario.clusters import Clusters
from harness.scenario.expectations import Expect, MetricExpectation
from harness.scenario.fault_ops import AnyFault, BreakFault, ProcessFault, RotateFault
from harness.scenario.operations import ExpectOp, FaultOp, Operation
from harness.scenario.settings import Settings
from harness.scenario.values import Model

WebhookFeature = Literal["async-delivery", "spool", "metrics", "settings", "certificate-reload"]

WEBHOOK_FEATURES: Mapping[WebhookFeature, str] = {
    "async-delivery": "answers at once and delivers after, retrying, so an event outlives an "
    "outage of the KCP, the gateway or a listener longer than one admission call",
    "spool": "keeps queued events on disk, so a killed webhook's successor delivers them",
    "metrics": "exports metrics upstream's webhook has not (watcher_delivery_*, "
    "watcher_events_*, watcher_spool_*, ...)",
    "settings": "takes our WATCHER_* settings (delivery mode, retries, queue, spool)",
    "certificate-reload": "takes a renewed certificate from the mounted files without a "
    "restart (upstream's reads it once; KLM restarts the pod), so a rotation loses no "
    "admission",
}

UPSTREAM_WEBHOOK_METRICS = (
    "watcher_admission_request_total",
    "watcher_admission_request_error_total",
    "watcher_kcp_requests_total",
    "watcher_failed_kcp_total",
    "watcher_request_duration",
    "watcher_fips_mode",
)
"""What upstream's webhook exports besides the Go client's ``process_*`` and ``go_*``."""


def upstream_webhook_metric(name: str) -> bool:
    return name in UPSTREAM_WEBHOOK_METRICS or name.startswith(("process_", "go_"))


KlmFeature = Literal[
    "reconcile-triggers",
    "reconcile-outcomes",
    "rejection-reasons",
    "san-pinning",
    "modules",
    "webhook-config-replace",
    "harness-klm",
]

KLM_FEATURES: Mapping[KlmFeature, str] = {
    "reconcile-triggers": "says why each reconcile started (kyma-created, kyma-changed, "
    "requeue-timer, ...); of upstream's, the log shows only which event queued a Kyma",
    "reconcile-outcomes": "says what each reconcile came to (success, busy, warning); "
    "upstream's log says only when one failed",
    "rejection-reasons": "counts refused events by reason where the harness reads them at "
    "once (our listener, in the harness's process)",
    "san-pinning": "refuses an event whose certificate does not name its Kyma's skr-domain "
    "(upstream's relies on Istio's mTLS alone since 2026)",
    "modules": "resolves modules from the KCP's ModuleTemplates (upstream's needs an OCI "
    "registry with OCM descriptors, which this machine has not)",
    "webhook-config-replace": "puts an altered webhook configuration back whole; a "
    "server-side apply keeps what other writers set (a url beside its service "
    "clientConfig) and the API server refuses the result",
    "harness-klm": "is the harness's own, in its process: settings.klm (certificate "
    "timings, health, Manifest readiness, Watcher rollout), certificate faults, and "
    "webhooks the harness stops and starts (a KLM process owns the webhook Deployment; "
    "its pod can be killed)",
}


class Requirements(Model):
    """What a scenario or step needs of the webhook and the KLM (see the module doc)."""

    webhook: tuple[WebhookFeature, ...] = ()
    klm: tuple[KlmFeature, ...] = ()


def _metric_expectations(operations: Iterable[Operation]) -> Iterator[MetricExpectation]:
    for op in operations:
        if isinstance(op, ExpectOp):
            yield from op.expect.metrics


def derived_from_operations(operations: Iterable[Operation]) -> dict[WebhookFeature, str]:
    """The needs the operations show: our webhook metrics they read."""
    ours = sorted(
        {
            m.name
            for m in _metric_expectations(operations)
            if m.target.startswith("webhook/") and not upstream_webhook_metric(m.name)
        }
    )
    return {"metrics": f"reads {', '.join(ours)}"} if ours else {}


def derived_from_clusters(clusters: Clusters) -> dict[WebhookFeature, str]:
    """The needs the cluster list shows: a chosen delivery mode."""
    chosen = [s.name for s in clusters.skrs if "delivery_mode" in s.model_fields_set]
    return {"settings": f"sets deliveryMode of {', '.join(chosen)}"} if chosen else {}


def missing_features(
    needs: Mapping[WebhookFeature, str], declared: Iterable[WebhookFeature], command: str
) -> str | None:
    """Why these needs cannot be met by the webhook ``command`` (None: nothing needed)."""
    wanted = dict(needs)
    for feature in declared:
        wanted.setdefault(feature, "declared")
    if not wanted:
        return None
    parts = [
        f"{feature} ({why}; our webhook {WEBHOOK_FEATURES[feature]})"
        if why != "declared"
        else f"{feature} (our webhook {WEBHOOK_FEATURES[feature]})"
        for feature, why in sorted(wanted.items())
    ]
    return f"needs our webhook's {'; '.join(parts)}, not {command!r}"


def _reconcile_needs(trigger: str | None, outcomes: frozenset[str] | None) -> set[KlmFeature]:
    needs: set[KlmFeature] = set()
    if trigger not in (None, "watch-event"):
        needs.add("reconcile-triggers")
    if outcomes is not None and outcomes - {"error"}:
        needs.add("reconcile-outcomes")
    return needs


def _operation_klm_needs(op: Operation) -> dict[KlmFeature, str]:
    if isinstance(op, ExpectOp):
        return _expect_klm_needs(op.expect)
    if isinstance(op, FaultOp):
        return _fault_klm_needs(op.fault)
    return {}


def _expect_klm_needs(expect: Expect) -> dict[KlmFeature, str]:
    found: dict[KlmFeature, str] = {}
    for r in expect.reconciles:
        for feature in _reconcile_needs(r.trigger, r.outcomes):
            found.setdefault(feature, f"expects reconciles of {r.kyma} by trigger/outcome")
    ordered = [
        o.reconcile for t in expect.timeline for o in (t.first, t.then) if o.reconcile is not None
    ]
    for sel in ordered:
        for feature in _reconcile_needs(sel.trigger, sel.outcomes):
            found.setdefault(feature, "orders reconciles by trigger/outcome")
    for rejection in expect.rejections:
        found.setdefault("rejection-reasons", f"counts {rejection.reason} refusals")
        if rejection.reason == "san-mismatch":
            found.setdefault("san-pinning", "expects SAN-mismatch refusals")
    return found


def _fault_klm_needs(fault: AnyFault) -> dict[KlmFeature, str]:
    if isinstance(fault, RotateFault | BreakFault):
        return {"harness-klm": "changes the certificates the harness's KLM issues"}
    if (
        isinstance(fault, ProcessFault)
        and fault.target.startswith("webhook/")
        and fault.action != "kill"  # a KLM process owns the Deployment: no stop, start
    ):
        return {"harness-klm": f"{fault.action}s {fault.target} (only kill otherwise)"}
    return {}


def derived_klm_from_operations(operations: Iterable[Operation]) -> dict[KlmFeature, str]:
    """What the operations need of the KLM beyond upstream's (see :data:`KLM_FEATURES`)."""
    found: dict[KlmFeature, str] = {}
    for op in operations:
        for feature, why in _operation_klm_needs(op).items():
            found.setdefault(feature, why)
    return found


def derived_klm_from_scenario(
    settings: Settings, *, modules: int, changes_watchers: bool
) -> dict[KlmFeature, str]:
    """What the scenario's declarations need of the KLM beyond upstream's."""
    found: dict[KlmFeature, str] = {}
    klm = settings.klm
    if klm.health is not None:
        found["harness-klm"] = "turns watcher health on (settings.klm.health)"
    elif "certificates" in klm.model_fields_set:
        found["harness-klm"] = "sets certificate timings (settings.klm.certificates)"
    elif "manifest_ready_after" in klm.model_fields_set:
        found["harness-klm"] = "sets settings.klm.manifestReadyAfter"
    elif not settings.san_pinning:
        found["harness-klm"] = "turns SAN pinning off (settings.sanPinning)"
    elif changes_watchers and klm.watcher_rollout == "immediate":
        found["harness-klm"] = "changes Watchers with immediate rollout (settings.klm)"
    if modules:
        found["modules"] = f"declares {modules} module(s)"
    return found


def missing_klm_features(
    needs: Mapping[KlmFeature, str],
    declared: Iterable[KlmFeature],
    provided: Iterable[str],
    command: str,
) -> str | None:
    """Why these needs cannot be met by the KLM ``command`` showing ``provided`` (None:
    they can)."""
    wanted = dict(needs)
    for feature in declared:
        wanted.setdefault(feature, "declared")
    have = set(provided)
    lacking = {f: why for f, why in wanted.items() if f not in have}
    if not lacking:
        return None
    parts = [
        f"{feature} ({'' if why == 'declared' else why + '; '}a KLM that {KLM_FEATURES[feature]})"
        for feature, why in sorted(lacking.items())
    ]
    return f"needs {'; '.join(parts)}; not shown by KLM {command!r}"
