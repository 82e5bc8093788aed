"""The SKR install bundle: Secret, Services and a locked-down Deployment."""

from __future__ import annotations

import base64

import pytest

from watcher.errors import CertificateError
from watcher.render.skr_bundle import SkrBundleSettings, render_skr_bundle

TLS = {"tls.crt": b"CERT", "tls.key": b"KEY", "ca.crt": b"CA"}


def test_bundle_objects_in_apply_order() -> None:
    objs = render_skr_bundle(image="watcher:dev", kcp_addr="127.0.0.1:8443", tls=TLS)
    assert [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs] == [
        ("Secret", "kyma-system", "skr-webhook-tls"),
        ("Service", "kyma-system", "skr-webhook"),
        ("Service", "kyma-system", "skr-webhook-metrics"),
        ("Deployment", "kyma-system", "skr-webhook"),
    ]
    secret, service, metrics, _ = objs
    assert secret["type"] == "kubernetes.io/tls"
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == TLS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}
    ]
    assert metrics["spec"]["ports"][0]["port"] == 2112
    assert service["spec"]["selector"] == {"app": "skr-webhook"}


def test_deployment_env_mounts_and_security() -> None:
    deployment = render_skr_bundle(image="watcher:dev", kcp_addr="kcp.example:443", tls=TLS)[-1]
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "watcher:dev"
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "WEBHOOK_PORT": "8443",
        "METRICS_PORT": "2112",
        "TLS_CERT": "/app/etc/ssl/tls.crt",
        "TLS_KEY": "/app/etc/ssl/tls.key",
        "CA_CERT": "/app/etc/ssl/ca.crt",
        "KCP_ADDR": "kcp.example:443",
        "KCP_CONTRACT": "v2",
    }
    assert container["volumeMounts"] == [
        {"name": "ssl", "mountPath": "/app/etc/ssl", "readOnly": True}
    ]
    assert pod["volumes"][0]["secret"]["secretName"] == "skr-webhook-tls"
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["readinessProbe"]["tcpSocket"] == {"port": "https"}


def test_health_path_switches_probes_to_https() -> None:
    deployment = render_skr_bundle(
        image="i",
        kcp_addr="h:1",
        tls=TLS,
        settings=SkrBundleSettings(health_path="/healthz", contract="v1"),
    )[-1]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "https",
        "scheme": "HTTPS",
    }
    assert {"name": "KCP_CONTRACT", "value": "v1"} in container["env"]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(CertificateError, match=r"ca\.crt"):
        render_skr_bundle(image="i", kcp_addr="h:1", tls={"tls.crt": b"c", "tls.key": b"k"})
    with pytest.raises(ValueError, match="image"):
        render_skr_bundle(image="", kcp_addr="h:1", tls=TLS)
    with pytest.raises(ValueError, match="kcp_addr"):
        render_skr_bundle(image="i", kcp_addr="https://h:1/", tls=TLS)
