"""The example scenarios load; defaults, derived values and per-run names are right."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.runner.spec import certificate_override
from harness.scenario import (
    KCP,
    CertificateKind,
    DefaultWatcher,
    ExpectOp,
    PatchOp,
    Scenario,
    WatcherDef,
    instance_names,
    load_scenario,
    loads_scenario,
)
from harness.scenario.collection import collect_scenarios
from harness.skr.certs import CertificateOverride
from watcher.domain import RUNTIME_ID_LABEL, WATCHED_BY_LABEL
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ["spec-watch", "status-watch", "label-filter"]
MINIMAL = """\
name: minimal
clusters:
  skrs: [{name: skr-a}]
steps:
  - name: one
    try: [{wait: 500ms}]
"""


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_loads(name: str) -> None:
    path = ROOT / "scenarios" / f"{name}.yaml"
    scenario = load_scenario(path)
    assert scenario.name == name
    assert scenario.source == str(path)
    assert scenario.description and scenario.tags


def test_directory_loads_every_example() -> None:
    collected = collect_scenarios([ROOT / "scenarios"])
    assert collected.ok, collected.problems
    assert set(EXAMPLES) <= {s.name for _, s in collected.scenarios}


def test_defaults() -> None:
    s = loads_scenario(MINIMAL)
    skr = s.clusters.skrs[0]
    assert (skr.runtime_id, skr.skr_domain) == ("runtime-skr-a", "skr-a.kyma.example.com")
    assert skr.delivery_mode == "async" and skr.certificate.override is CertificateKind.NONE
    assert s.backend == "local" and s.timeout == 300.0
    assert s.watchers == (DefaultWatcher(default=True),)
    assert s.settings.san_pinning is True
    assert s.steps[0].timeout == 60.0 and s.steps[0].try_[0].wait == 0.5  # type: ignore[union-attr]
    assert s.clusters.names == (KCP, "skr-a")


def test_requeue_defaults_match_the_reconciler() -> None:
    requeue = loads_scenario(MINIMAL).settings.requeue
    assert RequeueIntervals(**requeue.model_dump()) == RequeueIntervals()


def test_default_kymas_match_the_environment() -> None:
    kymas = loads_scenario(MINIMAL).effective_kymas
    kcp, skr = kymas
    assert (kcp.cluster, kcp.key) == (KCP, "kcp-system/kyma-skr-a")
    assert kcp.labels == {RUNTIME_ID_LABEL: "runtime-skr-a"}
    assert kcp.annotations == {"skr-domain": "skr-a.kyma.example.com"}
    assert (skr.cluster, skr.key) == ("skr-a", "kyma-system/default")
    assert skr.labels[WATCHED_BY_LABEL] == "kyma"
    assert skr.to_dict()["spec"] == {"channel": "regular"}


def test_watchers_render_to_valid_crs() -> None:
    s = load_scenario(ROOT / "scenarios" / "status-watch.yaml")
    default, status = s.watchers
    assert isinstance(default, DefaultWatcher) and default.to_dict() == klm_watcher_dict()
    assert isinstance(status, WatcherDef)
    cr = parse_watcher(status.to_dict())
    assert (cr.manager, cr.spec.field, cr.spec.service_info.port) == (
        "status-manager",
        "status",
        8083,
    )


def test_kind_shorthand_expands() -> None:
    s = load_scenario(ROOT / "scenarios" / "spec-watch.yaml")
    op = s.steps[0].try_[0]
    assert isinstance(op, PatchOp)
    ref = op.patch.resource
    assert (ref.group, ref.version, ref.resource) == (
        "operator.kyma-project.io",
        "v1beta2",
        "kymas",
    )
    expect = s.steps[0].try_[1]
    assert isinstance(expect, ExpectOp)
    assert expect.expect.events[0].bounds == (1, 1)
    assert expect.expect.events[1].bounds == (0, 0)
    assert expect.expect.reconciles[0].bounds == (1, None)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("none", CertificateOverride()),
        ("wrong-san", CertificateOverride.wrong_san("other.example.com")),
    ],
)
def test_certificate_override(kind: str, expected: CertificateOverride) -> None:
    domain = ", skrDomain: other.example.com" if kind == "wrong-san" else ""
    text = MINIMAL.replace(
        "{name: skr-a}", f"{{name: skr-a, certificate: {{override: {kind}{domain}}}}}"
    )
    assert certificate_override(loads_scenario(text).clusters.skrs[0].certificate) == expected


def test_certificate_override_with_dates_and_ca() -> None:
    for kind in ("expired", "not-yet-valid", "foreign-ca"):
        text = MINIMAL.replace(
            "{name: skr-a}", f"{{name: skr-a, certificate: {{override: {kind}}}}}"
        )
        assert not certificate_override(
            loads_scenario(text).clusters.skrs[0].certificate
        ).is_default


def test_models_are_frozen() -> None:
    s = loads_scenario(MINIMAL)
    with pytest.raises(ValueError, match="frozen"):
        s.name = "other"  # type: ignore[misc]


def _scenario(name: str) -> Scenario:
    return loads_scenario(MINIMAL.replace("name: minimal", f"name: {name}"))


def test_instance_names_are_unique_per_run_and_deterministic() -> None:
    s = _scenario("minimal")
    a, b = instance_names(s, "run1"), instance_names(s, "run2")
    assert a == instance_names(s, "run1")
    assert a.run == "minimal-run1" and a.cluster("skr-a") == "minimal-run1-skr-a"
    assert set(a.clusters.values()).isdisjoint(b.clusters.values())
    assert a.labels != b.labels


def test_instance_names_are_dns_labels_even_when_long() -> None:
    s = _scenario("x" * 63)
    names = instance_names(s, "A Run/ID with spaces" * 3)
    for value in (names.run, *names.clusters.values(), *names.labels.values()):
        assert len(value) <= 63 and value == value.lower() and " " not in value
    other = instance_names(s, "A Run/ID with spaces" * 3 + "!2")
    assert other.run != names.run
