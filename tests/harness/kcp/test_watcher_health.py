"""KLM's watcher-health glue: the Kyma condition and the write-failure reasons (pure)."""

from __future__ import annotations

import pytest

from harness.kcp.lifecycle_manager.kyma.skr_access import SkrAccessError
from harness.kcp.lifecycle_manager.watcher_health import _write_failure, health_condition
from harness.kube import KubeError
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


def test_certificate_overrides_by_name() -> None:
    assert CertificateOverride.named("none").is_default
    assert CertificateOverride.named("wrong-san", skr_domain="x.example").skr_domain == "x.example"
    assert CertificateOverride.named("empty-cn").common_name == ""
    with pytest.raises(ValueError, match="unknown certificate override 'bogus'"):
        CertificateOverride.named("bogus")
