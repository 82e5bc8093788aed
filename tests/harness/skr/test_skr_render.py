"""harness.skr.objects (pure parts) and harness.skr.webhook.webhook_env."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from harness.skr.objects import render_skr_configuration, secret_manifest
from harness.skr.webhook import TlsPaths, WebhookConfig, webhook_env
from watcher import pki
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict


@pytest.fixture(scope="module")
def ca_pem() -> bytes:
    return pki.create_ca(key_type="ec").cert_pem


def test_renders_all_watchers_against_the_local_webhook_port(ca_pem: bytes) -> None:
    klm = parse_watcher(klm_watcher_dict())
    cms = parse_watcher(
        watcher_dict(
            "cm-watcher",
            manager="cm-manager",
            resource=("", "v1", "configmaps"),
            service=("cm-events", "kcp-system", 8080),
            labels_to_watch={"watch": "me"},
        )
    )
    vwc = render_skr_configuration(
        [klm, cms], webhook_port=41234, ca_bundle_pem=ca_pem, failure_policy="Fail"
    )
    assert vwc is not None and vwc["metadata"]["name"] == "skr-webhook"
    hooks = vwc["webhooks"]
    assert [h["name"] for h in hooks] == [
        "kcp-system.klm-watcher.operator.kyma-project.io",
        "kcp-system.cm-watcher.operator.kyma-project.io",
    ]
    assert [h["clientConfig"]["url"] for h in hooks] == [
        "https://127.0.0.1:41234/validate/lifecycle-manager",
        "https://127.0.0.1:41234/validate/cm-manager",
    ]
    assert all(base64.b64decode(h["clientConfig"]["caBundle"]) == ca_pem for h in hooks)
    assert all("service" not in h["clientConfig"] for h in hooks)
    assert {h["failurePolicy"] for h in hooks} == {"Fail"}
    assert hooks[1]["objectSelector"] == {"matchLabels": {"watch": "me"}}


def test_default_failure_policy_is_upstreams_and_no_watchers_means_none(ca_pem: bytes) -> None:
    vwc = render_skr_configuration(
        [parse_watcher(klm_watcher_dict())], webhook_port=1, ca_bundle_pem=ca_pem
    )
    assert vwc is not None and vwc["webhooks"][0]["failurePolicy"] == "Ignore"
    assert render_skr_configuration([], webhook_port=1, ca_bundle_pem=ca_pem) is None


def test_secret_manifest_is_a_tls_secret() -> None:
    body = secret_manifest({"tls.crt": b"c", "tls.key": b"k", "ca.crt": b"a"})
    assert body["type"] == "kubernetes.io/tls"
    assert body["metadata"] == {"name": "skr-webhook-tls", "namespace": "kyma-system"}
    assert {k: base64.b64decode(v) for k, v in body["data"].items()} == {
        "tls.crt": b"c",
        "tls.key": b"k",
        "ca.crt": b"a",
    }


def test_webhook_env_is_upstream_style_on_loopback(tmp_path: Path) -> None:
    config = WebhookConfig(
        kcp_addr="127.0.0.1:9443",
        delivery_mode="sync",
        extra_env={"WATCHER_WORKERS": "2"},
    )
    env = webhook_env(
        config, TlsPaths(tmp_path), webhook_port=8443, metrics_port=2112, base={"PATH": "/bin"}
    )
    assert env == {
        "PATH": "/bin",
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": "8443",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": "2112",
        "CA_CERT": str(tmp_path / "ca.crt"),
        "TLS_CERT": str(tmp_path / "tls.crt"),
        "TLS_KEY": str(tmp_path / "tls.key"),
        "KCP_ADDR": "127.0.0.1:9443",
        "KCP_CONTRACT": "v2",
        "WATCHER_DELIVERY_MODE": "sync",
        "WATCHER_LOG_LEVEL": "INFO",
        "WATCHER_TLS_RELOAD_SECONDS": "1",
        "WATCHER_WORKERS": "2",
    }
