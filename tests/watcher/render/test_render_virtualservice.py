"""Watcher + Gateways → the VirtualService that routes the Watcher's events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from render_testing import watcher_dicts

from watcher.errors import InvalidWatcher
from watcher.render.virtualservice import gateway_dict, render_virtual_service, select_gateways
from watcher.render.watcher_cr import LabelSelector, klm_watcher_dict, parse_watcher

KLM_EVENTS_HOST = "klm-controller-manager-events.kcp-system.svc.cluster.local"


def test_klm_default_watcher_renders_exactly() -> None:
    watcher = parse_watcher(klm_watcher_dict(uid="1234"))
    other = gateway_dict("other", labels={"operator.kyma-project.io/watcher-gateway": "other"})
    vs = render_virtual_service(watcher, [other, gateway_dict()])
    assert vs == {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": {
            "name": "klm-watcher",
            "namespace": "kcp-system",
            "ownerReferences": [
                {
                    "apiVersion": "operator.kyma-project.io/v1beta2",
                    "kind": "Watcher",
                    "name": "klm-watcher",
                    "uid": "1234",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "gateways": ["kcp-system/klm-watcher"],
            "hosts": ["listener.kyma.local"],
            "http": [
                {
                    "name": "kcp-system/klm-watcher",
                    "match": [{"uri": {"prefix": "/v2/lifecycle-manager/event"}}],
                    "route": [
                        {
                            "destination": {
                                "host": KLM_EVENTS_HOST,
                                "port": {"number": 8082},
                            }
                        }
                    ],
                }
            ],
        },
    }


def test_all_matching_gateways_sorted_and_hosts_deduplicated() -> None:
    watcher = parse_watcher(klm_watcher_dict(uid="u"))
    gateways = [
        gateway_dict("b", namespace="istio-system", hosts=["b.example.com", "*/shared.example"]),
        gateway_dict("a", hosts=["a.example.com", "shared.example"]),
    ]
    spec = render_virtual_service(watcher, gateways)["spec"]
    assert spec["gateways"] == ["istio-system/b", "kcp-system/a"]
    assert spec["hosts"] == ["b.example.com", "shared.example", "a.example.com"]


def test_match_expressions_select_gateways() -> None:
    selector = LabelSelector.model_validate(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["eu", "us"]}]}
    )
    gateways = [
        gateway_dict("eu", labels={"zone": "eu"}),
        gateway_dict("ap", labels={"zone": "ap"}),
        gateway_dict("none", labels={}),
        gateway_dict("us", labels={"zone": "us"}),
    ]
    assert [g["metadata"]["name"] for g in select_gateways(selector, gateways)] == ["eu", "us"]


def test_unrenderable_cases_raise() -> None:
    with pytest.raises(InvalidWatcher, match=r"no metadata\.uid"):
        render_virtual_service(parse_watcher(klm_watcher_dict()), [gateway_dict()])
    watcher = parse_watcher(klm_watcher_dict(uid="u"))
    with pytest.raises(InvalidWatcher, match="matches none of the 1 Gateway"):
        render_virtual_service(watcher, [gateway_dict(labels={})])
    with pytest.raises(InvalidWatcher, match="declare no hosts"):
        render_virtual_service(watcher, [gateway_dict(hosts=[])])


@given(watcher_dicts())
def test_route_prefix_per_manager(obj: dict[str, Any]) -> None:
    watcher = parse_watcher(obj)
    vs = render_virtual_service(watcher, [gateway_dict()])
    (route,) = vs["spec"]["http"]
    assert route["name"] == f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    assert route["match"] == [{"uri": {"prefix": f"/v2/{watcher.manager}/event"}}]
    info = obj["spec"]["serviceInfo"]
    assert route["route"][0]["destination"] == {
        "host": f"{info['name']}.{info['namespace']}.svc.cluster.local",
        "port": {"number": info["port"]},
    }
    assert vs["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
