"""Watchers → the SKR ValidatingWebhookConfiguration, exactly as KLM renders it."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from render_testing import unique_watcher_dicts

from watcher import pki
from watcher.errors import CertificateError, InvalidWatcher
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, parse_watchers, watcher_dict
from watcher.render.webhook_config import (
    ServiceTarget,
    UrlTarget,
    render_webhook_configuration,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CA_PEM = pki.create_ca(now=NOW, key_type="ec").cert_pem
CA_B64 = base64.b64encode(CA_PEM).decode()


def test_klm_default_watcher_renders_exactly() -> None:
    config = render_webhook_configuration([parse_watcher(klm_watcher_dict())], ca_bundle_pem=CA_PEM)
    assert config == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": "skr-webhook",
            "labels": {"operator.kyma-project.io/managed-by": "lifecycle-manager"},
        },
        "webhooks": [
            {
                "name": "kcp-system.klm-watcher.operator.kyma-project.io",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {
                        "name": "skr-webhook",
                        "namespace": "kyma-system",
                        "path": "/validate/lifecycle-manager",
                        "port": 443,
                    },
                    "caBundle": CA_B64,
                },
                "failurePolicy": "Ignore",
                "objectSelector": {"matchLabels": {"operator.kyma-project.io/watched-by": "kyma"}},
                "rules": [
                    {
                        "apiGroups": ["operator.kyma-project.io"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["kymas"],
                    }
                ],
                "sideEffects": "NoneOnDryRun",
                "timeoutSeconds": 15,
            }
        ],
    }


def test_url_target_fail_policy_and_status_field() -> None:
    obj = watcher_dict(
        "cm-watcher",
        namespace="default",
        manager="cm-manager",
        resource=("", "v1", "configmaps"),
        field="status",
        service=("cm-events", "default", 9000),
    )
    config = render_webhook_configuration(
        [parse_watcher(obj)],
        ca_bundle_pem=CA_PEM,
        target=UrlTarget("127.0.0.1", 40123),
        failure_policy="Fail",
        timeout_seconds=5,
    )
    (webhook,) = config["webhooks"]
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:40123/validate/cm-manager",
        "caBundle": CA_B64,
    }
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["timeoutSeconds"] == 5
    assert webhook["rules"][0]["resources"] == ["configmaps/status"]
    assert webhook["rules"][0]["apiGroups"] == [""]
    assert webhook["objectSelector"] == {}


def test_url_target_brackets_ipv6() -> None:
    assert UrlTarget("::1", 8443).url("/validate/x") == "https://[::1]:8443/validate/x"


def test_custom_service_target() -> None:
    config = render_webhook_configuration(
        [parse_watcher(klm_watcher_dict())],
        ca_bundle_pem=CA_PEM,
        target=ServiceTarget(name="wh", namespace="ns", port=8443),
        labels={},
    )
    assert "labels" not in config["metadata"]
    assert config["webhooks"][0]["clientConfig"]["service"] == {
        "name": "wh",
        "namespace": "ns",
        "path": "/validate/lifecycle-manager",
        "port": 8443,
    }


def test_no_watchers_gives_an_empty_list() -> None:
    assert render_webhook_configuration([], ca_bundle_pem=CA_PEM)["webhooks"] == []


def test_unusable_ca_bundle_and_duplicates_are_refused() -> None:
    watcher = parse_watcher(klm_watcher_dict())
    with pytest.raises(CertificateError):
        render_webhook_configuration([watcher], ca_bundle_pem=b"not a pem")
    with pytest.raises(InvalidWatcher, match="appears twice"):
        render_webhook_configuration([watcher, watcher], ca_bundle_pem=CA_PEM)
    with pytest.raises(ValueError, match="timeout_seconds"):
        render_webhook_configuration([watcher], ca_bundle_pem=CA_PEM, timeout_seconds=31)


@given(unique_watcher_dicts())
def test_one_uniquely_named_webhook_per_watcher_in_order(objs: list[dict[str, Any]]) -> None:
    watchers = parse_watchers(objs)
    config = render_webhook_configuration(watchers, ca_bundle_pem=CA_PEM)
    webhooks = config["webhooks"]
    assert [w["name"] for w in webhooks] == [
        f"{o['metadata']['namespace']}.{o['metadata']['name']}.operator.kyma-project.io"
        for o in objs
    ]
    assert len({w["name"] for w in webhooks}) == len(webhooks)
    for obj, watcher, webhook in zip(objs, watchers, webhooks, strict=True):
        (rule,) = webhook["rules"]
        resource = obj["spec"]["resourceToWatch"]["resource"]
        assert rule["resources"][0].endswith("/status") == (obj["spec"]["field"] == "status")
        assert rule["resources"] == [
            resource + "/status" if obj["spec"]["field"] == "status" else resource
        ]
        assert webhook["clientConfig"]["service"]["path"] == f"/validate/{watcher.manager}"
        assert webhook["objectSelector"].get("matchLabels", {}) == obj["spec"]["labelsToWatch"]
        assert webhook["clientConfig"]["caBundle"] == CA_B64
