"""Scenario → EnvironmentSpec."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.selection import BackendChoice
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.runner import UnsupportedScenario, environment_spec
from harness.runner.errors import BackendUnsupported
from harness.scenario import loads_scenario
from harness.skr.certs import CertificateOverride

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
    spec = environment_spec(loads_scenario(SCENARIO), log_dir=Path("/tmp/logs"))
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
    assert spec.log_dir == Path("/tmp/logs")


def test_watchers_listeners_and_settings() -> None:
    spec = environment_spec(loads_scenario(SCENARIO))
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
        )
    )
    assert [w["metadata"]["name"] for w in spec.watchers] == ["klm-watcher"]
    assert spec.listeners == () and spec.pin_san is True
    assert spec.intervals == RequeueIntervals()


def test_the_files_backend_is_kept_and_an_override_wins() -> None:
    scenario = loads_scenario(
        "name: k\nbackend: kind\nclusters: {skrs: [{name: skr-a}]}\n"
        "steps: [{name: s, try: [{wait: 1}]}]\n"
    )
    assert environment_spec(scenario).backend == BackendChoice(name="kind")
    chosen = BackendChoice(name="kubeconfig", kubeconfigs=(Path("/k"),))
    assert environment_spec(scenario, backend=chosen).backend is chosen


def test_api_server_faults_are_refused_on_backends_that_do_not_own_the_processes() -> None:
    scenario = loads_scenario(
        "name: k\nclusters: {skrs: [{name: skr-a}]}\n"
        "steps: [{name: s, try: [{fault: {target: apiserver/skr-a, action: stop}}]}]\n"
    )
    assert environment_spec(scenario).backend.name == "local"
    for name in ("kubeconfig", "kind"):
        with pytest.raises(BackendUnsupported, match=f"the {name} backend does not own") as info:
            environment_spec(scenario, backend=BackendChoice(name=name))
        assert "apiserver/skr-a" in str(info.value)
        assert isinstance(info.value, UnsupportedScenario)
