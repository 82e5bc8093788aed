"""The KCP manifest set: CRDs, Gateway, Watchers, Kymas, VirtualServices, Envoy gateway."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from watcher import pki
from watcher.errors import CertificateError, InvalidWatcher
from watcher.render.errors import RenderError
from watcher.render.kcp_manifests import KcpManifestParams, Runtime, render_kcp_manifests
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

CRD_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "crds"
CRDS = [
    doc
    for path in sorted(CRD_DIR.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    if doc
]
CA = pki.create_ca()
SERVER = pki.issue_server_certificate(CA, "kcp-gateway", dns_names=["kcp.example.com"])
TLS = {"tls.crt": SERVER.cert_pem, "tls.key": SERVER.key_pem, "ca.crt": CA.cert_pem}
CM_WATCHER = watcher_dict(
    "cm-watcher",
    manager="cm-manager",
    resource=("", "v1", "configmaps"),
    service=("cm-listener", "kcp-system", 9080),
)


def _render(**kwargs: Any) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "crds": CRDS,
        "gateway_tls": TLS,
        "watchers": [klm_watcher_dict(), CM_WATCHER],
        "runtimes": [Runtime("runtime-a", "skr-a.example.com")],
    }
    params.update(kwargs)
    return render_kcp_manifests(KcpManifestParams(**params))


def _one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_definitions_come_before_the_objects_that_use_them() -> None:
    kinds = [o["kind"] for o in _render()]
    assert kinds[0] == "Namespace"
    last_crd = max(i for i, k in enumerate(kinds) if k == "CustomResourceDefinition")
    for kind in ("Gateway", "Watcher", "Kyma", "VirtualService"):
        assert kinds.index(kind) > last_crd
    assert kinds.index("Secret") < kinds.index("Deployment")
    assert kinds.index("ConfigMap") < kinds.index("Deployment")
    assert (
        kinds.count("CustomResourceDefinition") == len(CRDS) == 7
    )  # watcher, kyma, 2 istio, 2 catalog, manifest


def test_watchers_are_clean_and_routed() -> None:
    raw = klm_watcher_dict(uid="1234")
    raw["status"] = {"state": "Ready"}
    raw["metadata"]["resourceVersion"] = "7"
    objs = _render(watchers=[raw, CM_WATCHER])
    watcher = _one(objs, "Watcher", "klm-watcher")
    assert "status" not in watcher
    assert {"uid", "resourceVersion"}.isdisjoint(watcher["metadata"])
    vs = _one(objs, "VirtualService", "klm-watcher")
    assert "ownerReferences" not in vs["metadata"]
    assert vs["spec"]["gateways"] == ["kcp-system/klm-watcher"]
    assert vs["spec"]["http"][0]["match"] == [{"uri": {"prefix": "/v2/lifecycle-manager/event"}}]
    assert _one(objs, "VirtualService", "cm-watcher")["spec"]["hosts"] == ["listener.kyma.local"]


def test_kyma_per_runtime_carries_id_and_domain() -> None:
    kyma = _one(_render(), "Kyma", "runtime-a")
    assert kyma["metadata"]["namespace"] == "kcp-system"
    assert kyma["metadata"]["labels"]["kyma-project.io/runtime-id"] == "runtime-a"
    assert kyma["metadata"]["annotations"] == {"skr-domain": "skr-a.example.com"}


def test_envoy_config_routes_every_watcher_by_dns() -> None:
    config = _one(_render(), "ConfigMap", "watcher-gateway-envoy")["data"]
    assert set(config) == {"envoy.json", "lds.yaml", "cds.yaml", "rds.yaml"}
    bootstrap = json.loads(config["envoy.json"])
    lds_path = bootstrap["dynamic_resources"]["lds_config"]["path_config_source"]["path"]
    assert lds_path == "/etc/envoy/config/lds.yaml"
    clusters = json.loads(config["cds.yaml"])["resources"]
    assert sorted(c["name"] for c in clusters) == [
        "cm-listener_kcp-system_9080",
        "klm-controller-manager-events_kcp-system_8082",
    ]
    assert {c["type"] for c in clusters} == {"STRICT_DNS"}
    routes = json.loads(config["rds.yaml"])["resources"][0]["virtual_hosts"][0]["routes"]
    prefixes = [r["match"].get("prefix") for r in routes]
    assert "/v2/lifecycle-manager/event" in prefixes
    assert "/v2/cm-manager/event" in prefixes
    listener = json.loads(config["lds.yaml"])["resources"][0]
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 8443}


def test_gateway_deployment_secret_and_service() -> None:
    objs = _render(node_port=30443)
    secret = _one(objs, "Secret", "watcher-gateway-tls")
    assert base64.b64decode(secret["data"]["ca.crt"]) == CA.cert_pem
    pod = _one(objs, "Deployment", "watcher-gateway")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:2] == ["-c", "/etc/envoy/config/envoy.json"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    service = _one(objs, "Service", "watcher-gateway")["spec"]
    assert service["type"] == "NodePort"
    assert service["ports"][0]["nodePort"] == 30443
    assert _one(_render(), "Service", "watcher-gateway")["spec"]["type"] == "ClusterIP"


def test_bad_inputs_are_refused_with_a_reason() -> None:
    with pytest.raises(RenderError, match="not a CustomResourceDefinition"):
        _render(crds=[{"kind": "ConfigMap"}])
    with pytest.raises(CertificateError, match=r"tls\.key"):
        _render(gateway_tls={"tls.crt": SERVER.cert_pem, "ca.crt": CA.cert_pem})
    with pytest.raises(RenderError, match="30000"):
        _render(node_port=443)
    with pytest.raises(RenderError, match="more than once"):
        _render(runtimes=[Runtime("a", "a.example.com"), Runtime("a", "b.example.com")])
    unmatched = watcher_dict(
        "other",
        manager="m",
        resource=("", "v1", "secrets"),
        service=("s", "kcp-system", 80),
        gateway_selector={"matchLabels": {"gateway": "elsewhere"}},
    )
    with pytest.raises(InvalidWatcher, match="matches none"):
        _render(watchers=[unmatched])
