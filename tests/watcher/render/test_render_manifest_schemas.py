"""Every rendered manifest against the Kubernetes OpenAPI schemas (``kubernetes-validate``).

The schemas are those of Kubernetes 1.36 (our kube-apiserver is v1.36.3), in strict mode
(unknown fields are errors). Objects of custom resources (Watcher, Kyma, Istio Gateway
and VirtualService) have no built-in schema: the e2e test applies them with server-side
dry-run to an API server that has their CRDs (test_manifests_dry_run_e2e.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from render_testing import unique_watcher_dicts

from watcher import pki
from watcher.render.kcp_manifests import KcpManifestParams, Runtime, render_kcp_manifests
from watcher.render.skr_manifests import SkrManifestParams, render_skr_manifests
from watcher.render.watcher_cr import klm_watcher_dict

SCHEMA_VERSION = "1.36.0"
CUSTOM_KINDS = {"Watcher", "Kyma", "Gateway", "VirtualService"}
CRD_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "crds"
CRDS = [
    doc
    for path in sorted(CRD_DIR.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    if doc
]
CA = pki.create_ca()
SKR = pki.issue_runtime_certificate(CA, "runtime-a", "skr-a.example.com")
KCP = pki.issue_server_certificate(CA, "kcp-gateway", dns_names=["kcp.example.com"])
SKR_TLS = {"tls.crt": SKR.cert_pem, "tls.key": SKR.key_pem, "ca.crt": CA.cert_pem}
KCP_TLS = {"tls.crt": KCP.cert_pem, "tls.key": KCP.key_pem, "ca.crt": CA.cert_pem}


def _validate(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)


def skr_set(**kwargs: Any) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "image": "kyma-watcher:0.1.0",
        "kcp_addr": "kcp.example.com:443",
        "tls": SKR_TLS,
        "watchers": [klm_watcher_dict()],
    }
    params.update(kwargs)
    return render_skr_manifests(SkrManifestParams(**params))


def kcp_set(**kwargs: Any) -> list[dict[str, Any]]:
    params: dict[str, Any] = {
        "crds": CRDS,
        "gateway_tls": KCP_TLS,
        "watchers": [klm_watcher_dict()],
        "runtimes": [Runtime("runtime-a", "skr-a.example.com")],
    }
    params.update(kwargs)
    return render_kcp_manifests(KcpManifestParams(**params))


VARIANTS = {
    "skr-upstream": lambda: skr_set(),
    "skr-portable-no-priority": lambda: skr_set(network_policies="portable", priority_class=False),
    "skr-no-policies-fail-policy": lambda: skr_set(network_policies="none", failure_policy="Fail"),
    "kcp-cluster-ip": lambda: kcp_set(),
    "kcp-node-port": lambda: kcp_set(node_port=30443),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_builtin_object_matches_the_schema(variant: str) -> None:
    objs = VARIANTS[variant]()
    builtin = [o for o in objs if o["kind"] not in CUSTOM_KINDS]
    for obj in builtin:
        _validate(obj)
    # Only the custom kinds lack a schema; the dry-run e2e test covers them.
    for obj in objs:
        if obj["kind"] in CUSTOM_KINDS:
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                _validate(obj)
    assert len(builtin) >= 8


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("Deployment", ("spec", "replicas"), "one"),
        ("Deployment", ("spec", "template", "spec", "containers", 0, "securityContext", "x"), 1),
        ("NetworkPolicy", ("spec", "policyTypes"), "Ingress"),
        (
            "ValidatingWebhookConfiguration",
            ("webhooks", 0, "clientConfig", "service", "port"),
            "443",
        ),
    ],
)
def test_a_broken_object_is_refused(kind: str, path: tuple[Any, ...], value: Any) -> None:
    """The validator really checks: the same objects with one field broken fail."""
    obj = copy.deepcopy(next(o for o in skr_set() if o["kind"] == kind))
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(obj)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unique_watcher_dicts(max_size=4))
def test_any_valid_watchers_give_a_valid_webhook_configuration(
    watchers: list[dict[str, Any]],
) -> None:
    config = skr_set(watchers=watchers)[-1]
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert len(config["webhooks"]) == len(watchers)
    _validate(config)
