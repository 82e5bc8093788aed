"""The Kyma reconcile's pure parts: catalog resolution, Manifests, status aggregation."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.kcp.lifecycle_manager.kyma.modules import (
    INSTALL_ANNOTATION,
    Catalog,
    catalog_visible,
    desired_manifest,
    manifest_name,
    plan_modules,
    requested_modules,
    stale_manifests,
)
from harness.kcp.lifecycle_manager.kyma.status import (
    ERROR,
    PROCESSING,
    READY,
    WARNING,
    aggregate,
    kyma_status,
    module_entry,
    same_status,
)
from harness.kcp.lifecycle_manager.manifest_controller import needs_install, target_state
from watcher.domain import BETA_LABEL, INTERNAL_LABEL, KYMA_NAME_LABEL, MODULE_NAME_LABEL


def template(module: str, version: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "ModuleTemplate",
        "metadata": {"name": f"{module}-{version}", "namespace": "kcp-system", "labels": labels},
        "spec": {"moduleName": module, "version": version},
    }


def meta(module: str, **channels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": module, "namespace": "kcp-system"},
        "spec": {
            "moduleName": module,
            "channels": [{"channel": c, "version": v} for c, v in channels.items()],
        },
    }


KYMA = {
    "apiVersion": "operator.kyma-project.io/v1beta2",
    "kind": "Kyma",
    "metadata": {"name": "kyma-a", "namespace": "kcp-system", "uid": "u-1", "labels": {}},
}
CATALOG = Catalog.build(
    [template("serverless", "1.0.0"), template("serverless", "1.1.0"), template("api", "2.0.0")],
    [meta("serverless", regular="1.0.0", fast="1.1.0"), meta("api", regular="2.0.0")],
    KYMA,
)


def test_modules_resolve_through_channel_and_version() -> None:
    spec = {"channel": "regular", "modules": [{"name": "serverless", "channel": "fast"},
                                              {"name": "api"}]}  # fmt: skip
    plans = plan_modules(spec, CATALOG)
    assert [(p.name, p.channel, p.version, p.error) for p in plans] == [
        ("serverless", "fast", "1.1.0", ""),
        ("api", "regular", "2.0.0", ""),
    ]


def test_unknown_module_or_channel_is_an_error_entry_and_the_others_proceed() -> None:
    spec = {"modules": [{"name": "nope"}, {"name": "api", "channel": "rapid"}, {"name": "api"}]}
    plans = plan_modules(spec, CATALOG)
    assert [p.error for p in plans] == [
        "module nope not found",
        "module api has no channel rapid (channels: regular)",
    ]  # the duplicate "api" entry is ignored
    spec = {"modules": [{"name": "nope"}, {"name": "serverless"}]}
    entries = [module_entry(p, None) for p in plan_modules(spec, CATALOG)]
    assert [(e["name"], e["state"]) for e in entries] == [
        ("nope", ERROR),
        ("serverless", PROCESSING),
    ]
    assert aggregate(entries) == ERROR


def test_internal_and_beta_templates_reach_only_kymas_labelled_alike() -> None:
    internal = template("secret", "1.0.0", **{INTERNAL_LABEL: "true"})
    beta = template("preview", "0.1.0", **{BETA_LABEL: "true"})
    plain: dict[str, Any] = {"metadata": {"labels": {}}}
    assert not catalog_visible(internal, plain) and not catalog_visible(beta, plain)
    assert catalog_visible(internal, {"metadata": {"labels": {INTERNAL_LABEL: "true"}}})
    assert not catalog_visible(beta, {"metadata": {"labels": {INTERNAL_LABEL: "true"}}})
    catalog = Catalog.build([internal], [meta("secret", regular="1.0.0")], KYMA)
    (plan,) = plan_modules({"modules": [{"name": "secret"}]}, catalog)
    assert plan.template is None
    assert plan.error == "no ModuleTemplate for module secret version 1.0.0"


def test_manifest_is_owned_and_labelled_like_klms() -> None:
    broken = template("api", "2.0.0")
    broken["metadata"]["annotations"] = {INSTALL_ANNOTATION: "fail", "other": "x"}
    catalog = Catalog.build([broken], [meta("api", regular="2.0.0")], KYMA)
    (plan,) = plan_modules({"modules": [{"name": "api", "managed": False}]}, catalog)
    manifest = desired_manifest(KYMA, plan)
    assert manifest["metadata"]["name"] == manifest_name("kyma-a", "api") == "kyma-a-api"
    assert manifest["metadata"]["labels"][KYMA_NAME_LABEL] == "kyma-a"
    assert manifest["metadata"]["labels"][MODULE_NAME_LABEL] == "api"
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert manifest["metadata"]["annotations"] == {INSTALL_ANNOTATION: "fail"}
    assert manifest["spec"]["managed"] is False and manifest["spec"]["version"] == "2.0.0"
    assert target_state(manifest) == ERROR
    existing = [
        {"metadata": {"name": "kyma-a-old", "labels": {MODULE_NAME_LABEL: "old"}}},
        {"metadata": {"name": "kyma-a-api", "labels": {MODULE_NAME_LABEL: "api"}}},
    ]
    assert stale_manifests(existing, [plan]) == ["kyma-a-old"]


def test_manifest_install_is_due_until_its_generation_is_observed() -> None:
    m: dict[str, Any] = {"metadata": {"generation": 2}, "status": {}}
    assert needs_install(m)
    m["status"] = {"state": READY, "observedGeneration": 1}
    assert needs_install(m)
    m["status"]["observedGeneration"] = 2
    assert not needs_install(m) and target_state(m) == READY


@given(st.lists(st.sampled_from([READY, PROCESSING, WARNING, ERROR]), max_size=6))
def test_the_kyma_state_is_its_worst_module(states: list[str]) -> None:
    entries = [{"name": f"m{i}", "state": s} for i, s in enumerate(states)]
    rank = [READY, PROCESSING, WARNING, ERROR]
    worst = max(states, key=rank.index, default=READY)
    assert aggregate(entries) == worst
    assert aggregate(entries, failures=["SKR unreachable"]) == ERROR


def test_status_keeps_times_while_nothing_changes() -> None:
    first = kyma_status(None, [], catalog_synced=True, at=1_000.0)
    assert first["state"] == READY and first["lastOperation"]["operation"] == "kyma is ready"
    again = kyma_status(first, [], catalog_synced=True, at=2_000.0)
    assert same_status(first, again) and again == first
    entries = [{"name": "api", "state": PROCESSING}]
    later = kyma_status(first, entries, catalog_synced=True, at=3_000.0)
    assert later["state"] == PROCESSING and not same_status(first, later)
    catalog, modules = later["conditions"]
    assert catalog["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    assert modules["status"] == "False" and modules["message"] == "not ready: api"
    assert modules["lastTransitionTime"] == "1970-01-01T00:50:00Z"


def test_requested_modules_default_to_the_kyma_channel() -> None:
    spec = {"channel": "fast", "modules": [{"name": "a"}, {"name": "b", "channel": "regular"},
                                           "junk", {"channel": "x"}]}  # fmt: skip
    assert requested_modules(spec) == [("a", "fast", True), ("b", "regular", True)]
