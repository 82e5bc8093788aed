"""Scenario → EnvironmentSpec (on a backend already chosen: tests/harness/runner/test_plan.py)."""

from __future__ import annotations

from harness.clusters.selection import BackendChoice
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.runner.spec import environment_spec
from harness.scenario import loads_scenario
from harness.skr.certs import CertificateOverride

LOCAL = BackendChoice(name="local")
SCENARIO = """
name: mapping
clusters:
  skrs:
    - name: skr-a
    - name: skr-b
      runtimeId: rt-b
      skrDomain: b.example.com
      certificate: {override: wrong-san, skrDomain: other.example.com}
      deliveryMode: sync
watchers:
  - default: true
  - name: cms
    manager: config-manager
    resource: configmaps
    labelsToWatch: {app: demo}
    service: {name: cm-events, port: 8084}
listeners:
  - component: config-manager
    service: {name: cm-events, port: 8084}
settings:
  sanPinning: false
  requeue: {success: 10s, busy: 1s}
steps:
  - name: s
    try: [{wait: 1s}]
"""


def test_skrs_keep_identity_certificate_and_delivery_mode() -> None:
    spec = environment_spec(loads_scenario(SCENARIO), LOCAL, webhook_env={"WATCHER_X": "1"})
    a, b = spec.skrs
    assert (a.name, a.runtime_id, a.skr_domain) == (
        "skr-a",
        "runtime-skr-a",
        "skr-a.kyma.example.com",
    )
    assert a.certificate == CertificateOverride()
    assert a.delivery_mode == "async"
    assert (b.runtime_id, b.skr_domain, b.delivery_mode) == ("rt-b", "b.example.com", "sync")
    assert b.certificate == CertificateOverride.wrong_san("other.example.com")
    assert spec.webhook_env == {"WATCHER_X": "1"} and spec.backend is LOCAL


def test_watchers_listeners_and_settings() -> None:
    spec = environment_spec(loads_scenario(SCENARIO), LOCAL)
    names = [w["metadata"]["name"] for w in spec.watchers]
    assert names == ["klm-watcher", "cms"]
    assert spec.watchers[1]["spec"]["labelsToWatch"] == {"app": "demo"}
    assert [(x.component, x.service) for x in spec.listeners] == [
        ("config-manager", ("cm-events", "kcp-system", 8084))
    ]
    assert spec.pin_san is False
    assert spec.intervals == RequeueIntervals(success=10.0, busy=1.0, error=5.0, warning=30.0)


def test_defaults_are_klms_setup() -> None:
    spec = environment_spec(
        loads_scenario(
            "name: d\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: s, try: [{wait: 1}]}]\n"
        ),
        LOCAL,
    )
    assert [w["metadata"]["name"] for w in spec.watchers] == ["klm-watcher"]
    assert spec.listeners == () and spec.pin_san is True
    assert spec.intervals == RequeueIntervals()
