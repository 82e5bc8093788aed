"""Watcher CR validation: valid CRs parse, every problem of a broken one is reported."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from render_testing import watcher_dicts

from watcher.errors import InvalidWatcher
from watcher.render.watcher_cr import (
    DEFAULT_GATEWAY_SELECTOR,
    LabelSelector,
    klm_watcher_dict,
    parse_watcher,
    parse_watchers,
)

KLM_WATCHER: dict[str, Any] = {
    "apiVersion": "operator.kyma-project.io/v1beta2",
    "kind": "Watcher",
    "metadata": {
        "name": "klm-watcher",
        "namespace": "kcp-system",
        "labels": {"operator.kyma-project.io/managed-by": "lifecycle-manager"},
    },
    "spec": {
        "resourceToWatch": {
            "group": "operator.kyma-project.io",
            "version": "*",
            "resource": "kymas",
        },
        "labelsToWatch": {"operator.kyma-project.io/watched-by": "kyma"},
        "field": "spec",
        "manager": "lifecycle-manager",
        "serviceInfo": {
            "name": "klm-controller-manager-events",
            "namespace": "kcp-system",
            "port": 8082,
        },
        "gateway": {
            "selector": {"matchLabels": {"operator.kyma-project.io/watcher-gateway": "default"}}
        },
    },
}


def test_klm_default_watcher_dict_is_exact() -> None:
    assert klm_watcher_dict() == KLM_WATCHER
    assert klm_watcher_dict(uid="u")["metadata"]["uid"] == "u"


def test_klm_default_watcher_parses() -> None:
    watcher = parse_watcher(KLM_WATCHER)
    assert watcher.manager == "lifecycle-manager"
    assert watcher.webhook_name == "kcp-system.klm-watcher.operator.kyma-project.io"
    assert watcher.route_name == "kcp-system/klm-watcher"
    assert watcher.spec.service_info.host == (
        "klm-controller-manager-events.kcp-system.svc.cluster.local"
    )
    assert watcher.spec.gateway.selector == LabelSelector.model_validate(DEFAULT_GATEWAY_SELECTOR)


def test_manager_falls_back_to_managed_by_label() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    del obj["spec"]["manager"]
    assert parse_watcher(obj).manager == "lifecycle-manager"
    obj["spec"]["manager"] = ""
    assert parse_watcher(obj).manager == "lifecycle-manager"


def test_core_group_wildcard_version_and_extra_metadata_accepted() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    obj["spec"]["resourceToWatch"] = {"group": "", "version": "v1", "resource": "configmaps"}
    obj["metadata"].update(uid="abc", resourceVersion="7", finalizers=["x"])
    obj["status"] = {"state": "Ready"}
    watcher = parse_watcher(obj)
    assert watcher.spec.resource_to_watch.group == ""
    assert watcher.metadata.uid == "abc"


def test_watcher_is_frozen() -> None:
    watcher = parse_watcher(KLM_WATCHER)
    with pytest.raises(ValueError):
        watcher.kind = "Watcher"  # type: ignore[misc]


def test_every_problem_is_listed_with_its_path() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    del obj["spec"]["resourceToWatch"]["version"]
    obj["spec"]["field"] = "metadata"
    obj["spec"]["manager"] = "../etc"
    obj["spec"]["serviceInfo"]["port"] = "8082"
    obj["spec"]["surprise"] = True
    obj["spec"]["labelsToWatch"] = {"bad key!": "x"}
    with pytest.raises(InvalidWatcher) as info:
        parse_watcher(obj)
    message = str(info.value)
    assert "kcp-system/klm-watcher" in message
    assert "(6 problems)" in message
    for path in (
        "spec.resourceToWatch.version",
        "spec.field",
        "spec.manager",
        "spec.serviceInfo.port",
        "spec.surprise",
        "spec.labelsToWatch",
        "'../etc'",
    ):
        assert path in message


def test_missing_manager_everywhere_is_refused() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    obj["spec"]["manager"] = ""
    del obj["metadata"]["labels"]
    with pytest.raises(InvalidWatcher, match=r"spec\.manager: empty and no label"):
        parse_watcher(obj)


def test_label_manager_is_validated_under_its_own_path() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    obj["spec"]["manager"] = ""
    obj["metadata"]["labels"]["operator.kyma-project.io/managed-by"] = "Lifecycle_Manager"
    with pytest.raises(
        InvalidWatcher, match=r"metadata\.labels\['operator.kyma-project.io/managed-by'\]"
    ):
        parse_watcher(obj)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
            {"a": "1"},
            False,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_label_selector_semantics(
    selector: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is matches


def test_parse_watchers_refuses_duplicates_and_names_broken_indexes() -> None:
    with pytest.raises(InvalidWatcher, match="appears more than once"):
        parse_watchers([KLM_WATCHER, KLM_WATCHER])
    with pytest.raises(InvalidWatcher, match=r"^\[1\] Watcher"):
        parse_watchers([KLM_WATCHER, {"kind": "Watcher", "metadata": {}}])


def test_too_long_webhook_name_is_refused() -> None:
    obj = copy.deepcopy(KLM_WATCHER)
    obj["metadata"]["name"] = ".".join(["a" * 60] * 4)  # 243 characters, a valid name
    with pytest.raises(InvalidWatcher, match="more than 253"):
        parse_watcher(obj)


def _drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    mutate.__name__ = "drop " + ".".join(path)
    return mutate


def _set(value: Any, *path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value

    mutate.__name__ = f"set {'.'.join(path)}={value!r}"
    return mutate


BREAKERS = [
    _drop("spec", "resourceToWatch"),
    _drop("spec", "resourceToWatch", "group"),
    _drop("spec", "resourceToWatch", "resource"),
    _drop("spec", "field"),
    _drop("spec", "serviceInfo"),
    _drop("spec", "serviceInfo", "port"),
    _drop("spec", "gateway"),
    _drop("spec", "gateway", "selector"),
    _drop("metadata", "namespace"),
    _drop("metadata", "name"),
    _set("both", "spec", "field"),
    _set(0, "spec", "serviceInfo", "port"),
    _set(70000, "spec", "serviceInfo", "port"),
    _set(True, "spec", "serviceInfo", "port"),
    _set("Upper", "spec", "manager"),
    _set("a/b", "spec", "manager"),
    _set("x" * 64, "spec", "manager"),
    _set("pods/status", "spec", "resourceToWatch", "resource"),
    _set("Not_A_Group", "spec", "resourceToWatch", "group"),
    _set({"k": 1}, "spec", "labelsToWatch"),
    _set({"k": "v" * 64}, "spec", "labelsToWatch"),
    _set([{"key": "a", "operator": "Maybe"}], "spec", "gateway", "selector", "matchExpressions"),
    _set("extra", "spec", "unknownField"),
    _set("v1", "apiVersion"),
    _set("Kyma", "kind"),
]


@given(
    watcher_dicts(),
    st.lists(st.sampled_from(BREAKERS), min_size=1, max_size=4, unique_by=lambda f: f.__name__),
)
def test_broken_watchers_always_raise_invalid_watcher(
    obj: dict[str, Any], breakers: list[Callable[[dict[str, Any]], None]]
) -> None:
    for breaker in breakers:
        # A KeyError means an earlier breaker removed the parent: the CR is broken already.
        with contextlib.suppress(KeyError):
            breaker(obj)
    with pytest.raises(InvalidWatcher) as info:
        parse_watcher(obj)
    assert "cannot be rendered" in str(info.value)


@given(watcher_dicts())
def test_valid_watchers_parse_and_keep_their_manager(obj: dict[str, Any]) -> None:
    watcher = parse_watcher(obj)
    expected = (
        obj["spec"]["manager"] or obj["metadata"]["labels"]["operator.kyma-project.io/managed-by"]
    )
    assert watcher.manager == expected
