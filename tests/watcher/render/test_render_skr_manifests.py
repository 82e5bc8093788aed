"""The SKR manifest set: every object the in-cluster webhook needs, in apply order."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from watcher import pki
from watcher.errors import CertificateError, InvalidWatcher
from watcher.render.skr_manifests import SkrManifestParams, kcp_port, render_skr_manifests
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

CA = pki.create_ca()
CERT = pki.issue_runtime_certificate(CA, "runtime-a", "skr-a.example.com")
TLS = {"tls.crt": CERT.cert_pem, "tls.key": CERT.key_pem, "ca.crt": CA.cert_pem}
STATUS_WATCHER = watcher_dict(
    "cm-watcher",
    manager="cm-manager",
    resource=("", "v1", "configmaps"),
    field="status",
    service=("cm-listener", "kcp-system", 9080),
)


def _render(**kwargs: Any) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "image": "kyma-watcher:0.1.0",
        "kcp_addr": "gateway.kcp.example.com:443",
        "tls": TLS,
        "watchers": [klm_watcher_dict(), STATUS_WATCHER],
    }
    params.update(kwargs)
    return render_skr_manifests(SkrManifestParams(**params))


def _by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def test_objects_in_apply_order() -> None:
    objs = _render()
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Namespace", "kyma-system"),
        ("ServiceAccount", "skr-webhook"),
        ("PriorityClass", "skr-webhook-priority"),
        ("Secret", "skr-webhook-tls"),
        ("Service", "skr-webhook"),
        ("Service", "skr-webhook-metrics"),
        ("Deployment", "skr-webhook"),
        ("NetworkPolicy", "kyma-project.io--seed-to-watcher"),
        ("NetworkPolicy", "kyma-project.io--watcher-to-apiserver"),
        ("NetworkPolicy", "kyma-project.io--metrics-to-watcher"),
        ("NetworkPolicy", "kyma-project.io--watcher-to-dns"),
        ("ValidatingWebhookConfiguration", "skr-webhook"),
    ]
    namespaced = [o for o in objs if o["kind"] not in ("Namespace", "PriorityClass")]
    assert {o["metadata"].get("namespace") for o in namespaced[:-1]} == {"kyma-system"}


def test_webhook_configuration_uses_the_service() -> None:
    (config,) = _by_kind(_render(), "ValidatingWebhookConfiguration")
    klm, cm = config["webhooks"]
    assert klm["clientConfig"]["service"] == {
        "name": "skr-webhook",
        "namespace": "kyma-system",
        "path": "/validate/lifecycle-manager",
        "port": 443,
    }
    assert "url" not in klm["clientConfig"]
    assert base64.b64decode(klm["clientConfig"]["caBundle"]) == CA.cert_pem
    assert cm["rules"][0]["resources"] == ["configmaps/status"]
    assert cm["clientConfig"]["service"]["path"] == "/validate/cm-manager"


def test_deployment_runs_the_python_webhook_locked_down() -> None:
    (deployment,) = _by_kind(_render(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KCP_ADDR"] == "gateway.kcp.example.com:443"
    assert env["KCP_CONTRACT"] == "v2"
    assert env["TLS_CERT"] == "/app/etc/ssl/tls.crt"
    assert container["image"] == "kyma-watcher:0.1.0"
    assert container["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "metrics",
        "scheme": "HTTP",
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["serviceAccountName"] == "skr-webhook"
    assert pod["priorityClassName"] == "skr-webhook-priority"
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["runAsGroup"] == 30001
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["resources"]["limits"]["memory"] == "256Mi"


def test_network_policies_follow_upstream_and_the_kcp_port() -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in _by_kind(_render(), "NetworkPolicy")}
    seed = policies["kyma-project.io--seed-to-watcher"]
    assert seed["ingress"][0]["from"][0]["podSelector"] == {"matchLabels": {"app": "vpn-shoot"}}
    to_kcp = policies["kyma-project.io--watcher-to-apiserver"]
    assert to_kcp["policyTypes"] == ["Egress"]
    assert to_kcp["egress"] == [{"ports": [{"protocol": "TCP", "port": 443}]}]
    metrics = policies["kyma-project.io--metrics-to-watcher"]
    assert metrics["ingress"] == [{"ports": [{"protocol": "TCP", "port": 2112}]}]
    dns = policies["kyma-project.io--watcher-to-dns"]["egress"]
    assert {p["port"] for rule in dns for p in rule["ports"]} == {53, 8053}
    for spec in policies.values():
        assert spec["podSelector"] == {"matchLabels": {"app": "skr-webhook"}}


def test_portable_and_no_network_policies() -> None:
    objs = _render(network_policies="portable", kcp_addr="172.18.0.2:30443")
    policies = {p["metadata"]["name"]: p["spec"] for p in _by_kind(objs, "NetworkPolicy")}
    assert policies["kyma-project.io--seed-to-watcher"]["ingress"] == [
        {"ports": [{"protocol": "TCP", "port": 8443}]}
    ]
    assert (
        policies["kyma-project.io--watcher-to-apiserver"]["egress"][0]["ports"][0]["port"] == 30443
    )
    assert _by_kind(_render(network_policies="none"), "NetworkPolicy") == []
    assert _by_kind(_render(priority_class=False), "PriorityClass") == []


def test_other_namespace_moves_everything() -> None:
    objs = _render(namespace="watcher-test")
    (config,) = _by_kind(objs, "ValidatingWebhookConfiguration")
    assert config["webhooks"][0]["clientConfig"]["service"]["namespace"] == "watcher-test"
    assert objs[0]["metadata"]["name"] == "watcher-test"
    assert {o["metadata"].get("namespace") for o in objs[1:-1]} - {None} == {"watcher-test"}


@pytest.mark.parametrize(
    ("addr", "port"), [("h:1", 1), ("[::1]:8443", 8443), ("kcp.example.com:65535", 65535)]
)
def test_kcp_port_accepts(addr: str, port: int) -> None:
    assert kcp_port(addr) == port


@pytest.mark.parametrize("addr", ["", "h", "h:0", "h:65536", "https://h:1", "h:1/x", "::1:80"])
def test_kcp_port_refuses(addr: str) -> None:
    with pytest.raises(ValueError, match="<host>:<port>"):
        kcp_port(addr)


def test_bad_inputs_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="image"):
        _render(image="")
    with pytest.raises(ValueError, match="KCP address"):
        _render(kcp_addr="https://kcp:443")
    with pytest.raises(CertificateError, match=r"ca\.crt"):
        _render(tls={"tls.crt": CERT.cert_pem, "tls.key": CERT.key_pem})
    with pytest.raises(CertificateError, match="PEM"):
        _render(tls={**TLS, "ca.crt": b"not a certificate"})
    broken = klm_watcher_dict()
    broken["spec"]["field"] = "metadata"
    with pytest.raises(InvalidWatcher, match=r"spec\.field"):
        _render(watchers=[broken])
