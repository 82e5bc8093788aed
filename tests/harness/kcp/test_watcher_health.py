"""KLM's watcher-health glue: the Kyma condition and the write-failure reasons (pure)."""

from __future__ import annotations

import json

import pytest

from harness.kcp.lifecycle_manager.kyma.skr_access import SkrAccessError
from harness.kcp.lifecycle_manager.watcher_health import (
    _write_failure,
    health_condition,
    webhook_call_failure,
)
from harness.kube import KubeError, error_for_status
from harness.skr.certs import CertificateOverride
from watcher.health.state import Reason, RuntimeHealth, State


def test_the_condition_says_what_the_state_says_and_keeps_its_time() -> None:
    healthy = health_condition(RuntimeHealth(State.HEALTHY, Reason.HEARTBEAT_RECEIVED), 0.0)
    assert healthy == {
        "type": "WatcherHealth",
        "status": "True",
        "reason": "HeartbeatReceived",
        "message": "heartbeats come back through webhook, gateway and listener",
        "lastTransitionTime": "1970-01-01T00:00:00Z",
    }
    broken = RuntimeHealth(State.BROKEN, Reason.EVENT_REFUSED, detail="san-mismatch")
    condition = health_condition(broken, 86400.0)
    assert (condition["status"], condition["reason"]) == ("False", "EventRefused")
    assert condition["message"].startswith("Broken: the listener refuses")
    assert condition["message"].endswith("(san-mismatch)")
    assert condition["lastTransitionTime"] == "1970-01-02T00:00:00Z"
    assert health_condition(RuntimeHealth(), 0.0)["status"] == "Unknown"


def test_write_failures_have_short_bounded_reasons() -> None:
    assert _write_failure(SkrAccessError("no Secret")) == "no SKR access"
    assert _write_failure(KubeError("x", reached=False)) == "unreachable"
    assert _write_failure(KubeError("x", status=401, reason="Unauthorized")) == "401 Unauthorized"
    assert _write_failure(KubeError("x")) == "no answer"


# kube-apiserver v1.35.4's answers to a ConfigMap write whose validating webhook has
# failurePolicy Fail, recorded against a real API server (timeoutSeconds 2)
TIMED_OUT = (
    'Internal error occurred: failed calling webhook "w.example.com": failed to call '
    'webhook: Post "https://127.0.0.1:49753/validate/x?timeout=2s": context deadline exceeded'
)
REFUSED = (
    'Internal error occurred: failed calling webhook "w.example.com": failed to call '
    'webhook: Post "https://127.0.0.1:40289/validate/x?timeout=2s": dial tcp '
    "127.0.0.1:40289: connect: connection refused"
)


def _answer(status: int, reason: str, message: str) -> KubeError:
    body = json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
         "reason": reason, "code": status}
    )  # fmt: skip
    return error_for_status(status, "PATCH", "/api/v1/namespaces/kyma-system/configmaps/hb", body)


def test_a_webhook_that_could_not_be_called_held_the_heartbeat_it_did_not_refuse_it() -> None:
    """The API server took the write and its admission chain failed calling the webhook:
    the heartbeat reached the watcher's side (NoEvent), the SKR is writable. A webhook
    that answered and denied it, or an API server that refused it, is a failed write."""
    timed_out = _answer(500, "InternalError", TIMED_OUT)
    assert webhook_call_failure(timed_out) == "webhook w.example.com timed out"
    refused = _answer(500, "InternalError", REFUSED)
    assert webhook_call_failure(refused) == "webhook w.example.com call failed"
    denied = _answer(400, "BadRequest", 'admission webhook "w.example.com" denied the request: no')
    assert webhook_call_failure(denied) is None
    assert webhook_call_failure(_answer(403, "Forbidden", "configmaps is forbidden")) is None
    assert webhook_call_failure(_answer(500, "InternalError", "etcdserver: timeout")) is None
    assert webhook_call_failure(KubeError("x", reached=False)) is None


def test_certificate_overrides_by_name() -> None:
    assert CertificateOverride.named("none").is_default
    assert CertificateOverride.named("wrong-san", skr_domain="x.example").skr_domain == "x.example"
    assert CertificateOverride.named("empty-cn").common_name == ""
    with pytest.raises(ValueError, match="unknown certificate override 'bogus'"):
        CertificateOverride.named("bogus")
