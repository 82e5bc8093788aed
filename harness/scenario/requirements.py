"""``requires``: what a scenario or a step needs of the SKR webhook beyond upstream's contract.

The library runs against any webhook that takes upstream's environment contract
(``--webhook-command``). What only our webhook does is named here; a scenario or step that
depends on it says so, and against another implementation it is skipped with the reason
instead of failing for the wrong one::

    requires: {webhook: [async-delivery, spool]}

Some needs are read off the scenario itself, so they cannot be forgotten: a ``metrics``
expectation on ``webhook/<skr>`` naming a metric upstream's webhook does not export needs
``metrics``; an SKR with ``deliveryMode`` needs ``settings``. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from harness.scenario.clusters import Clusters
from harness.scenario.expectations import MetricExpectation
from harness.scenario.operations import ExpectOp, Operation
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

UPSTREAM_WEBHOOK_METRICS = frozenset(
    {
        "watcher_admission_request_total",
        "watcher_admission_request_error_total",
        "watcher_kcp_requests_total",
        "watcher_failed_kcp_total",
        "watcher_request_duration",
        "watcher_fips_mode",
    }
)
"""What upstream's webhook exports besides the Go client's ``process_*`` and ``go_*``."""


def upstream_webhook_metric(name: str) -> bool:
    return name in UPSTREAM_WEBHOOK_METRICS or name.startswith(("process_", "go_"))


class Requirements(Model):
    """What a scenario or step needs of the webhook (see the module doc)."""

    webhook: tuple[WebhookFeature, ...] = ()


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
