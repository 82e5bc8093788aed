"""Upstream's webhook as test vectors: AdmissionReviews in, answers and KCP requests out.

Literal values from ``watcher-reference.md`` §3 (upstream ``runtime-watcher``
``admissionreview/handler.go`` and its integration test table), not computed by our code:
what each operation/shape is answered and which exact bytes go to which KCP path. Pure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from harness.scenario.requirements import UPSTREAM_WEBHOOK_METRICS

MANAGER = "lifecycle-manager"
RUNTIME_ID = "runtime-conformance"
EVENT_PATH = f"/v2/{MANAGER}/event"
SUCCEEDED = "kcp request succeeded"
QUEUED = "kcp request queued"
QUEUED_WHY = (
    "async delivery answers before the event is delivered, so it does not claim success "
    "(docs/webhook.md, Answers); WATCHER_DELIVERY_MODE=sync answers as upstream"
)
KYMA_BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
CONFIGMAP_BODY = (
    b'{"watched":{"Namespace":"default","Name":"demo"},'
    b'"watchedGvk":{"group":"","version":"v1","kind":"ConfigMap"}}'
)
SECURITY_HEADERS = {
    "Strict-Transport-Security": "max-age=31536000; includeSubDomains",
    "Content-Security-Policy": "default-src 'self'",
}


@dataclass(frozen=True)
class AdmissionCase:
    name: str
    review: dict[str, Any]
    message: str
    """Upstream's ``response.status.message`` (sync, the KCP answering 200)."""
    body: bytes | None
    """The exact body upstream POSTs to :data:`EVENT_PATH`; None: no KCP request."""


def _kyma(channel: str = "regular", state: str = "Ready") -> dict[str, Any]:
    return {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": "default", "namespace": "kyma-system", "generation": 1},
        "spec": {"channel": channel},
        "status": {"state": state},
    }


def configmap(value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "demo", "namespace": "default"},
        "data": {"key": value},
    }


def review(
    uid: str,
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    sub_resource: str = "",
) -> dict[str, Any]:
    """An ``admission.k8s.io/v1`` AdmissionReview as the API server sends it."""
    source = obj or old or {}
    group, _, version = source.get("apiVersion", "v1").rpartition("/")
    meta = source.get("metadata", {})
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": source.get("kind", "")},
        "resource": {"group": group, "version": version, "resource": "kymas"},
        "operation": operation,
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "userInfo": {"username": "conformance"},
        "object": obj,
        "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _with_annotation(obj: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"]["annotations"] = {"note": "metadata only"}
    return changed


CASES: tuple[AdmissionCase, ...] = (
    AdmissionCase("CREATE", review("u-create", "CREATE", _kyma()), SUCCEEDED, KYMA_BODY),
    AdmissionCase(
        "UPDATE spec changed",
        review("u-spec", "UPDATE", _kyma("fast"), _kyma("regular")),
        SUCCEEDED,
        KYMA_BODY,
    ),
    AdmissionCase(
        "UPDATE spec unchanged (metadata only)",
        review("u-same", "UPDATE", _with_annotation(_kyma()), _kyma()),
        "no change detected on watched resource kyma-system/default",
        None,
    ),
    AdmissionCase(
        "UPDATE object without spec",
        review("u-nospec", "UPDATE", configmap("b"), configmap("a")),
        SUCCEEDED,
        CONFIGMAP_BODY,
    ),
    AdmissionCase(
        "UPDATE status changed",
        review("u-status", "UPDATE", _kyma(state="Error"), _kyma(), sub_resource="status"),
        SUCCEEDED,
        KYMA_BODY,
    ),
    AdmissionCase(
        "UPDATE status unchanged",
        review("u-status-same", "UPDATE", _kyma(), _kyma(), sub_resource="status"),
        "no change detected on watched resource kyma-system/default",
        None,
    ),
    AdmissionCase(
        "UPDATE other subresource",
        review("u-scale", "UPDATE", _kyma(), _kyma(), sub_resource="scale"),
        "invalid subresource: watched resource kyma-system/default",
        None,
    ),
    AdmissionCase("DELETE", review("u-delete", "DELETE", None, _kyma()), SUCCEEDED, KYMA_BODY),
    AdmissionCase(
        "CONNECT",
        review("u-connect", "CONNECT", _kyma()),
        "operation CONNECT not supported for operator.kyma-project.io/v1beta2, Kind=Kyma",
        None,
    ),
)
"""The table upstream's integration test walks: every operation with every object shape."""

UPSTREAM_METRICS = (
    *UPSTREAM_WEBHOOK_METRICS,
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
)
"""Names a dashboard built on upstream's webhook reads (after the table ran, every one
exists: ``watcher_failed_kcp_total`` counts the invalid subresource)."""
