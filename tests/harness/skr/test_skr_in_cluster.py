"""The in-cluster SKR installation's plan against a fake API: what is applied in which
order, the service clientConfig, the bounded Availability wait and its message, faults
as Kubernetes operations, metrics through the service proxy, and removal in reverse."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.clusters.plane import Cluster
from harness.clusters.selection import choose_backend
from harness.environment.hosting import gateway_listen_address, skr_installation
from harness.environment.spec import EnvironmentSpec, SkrSpec
from harness.kube import KubeError, Obj, Resource
from harness.runner.plan import backend_refusal
from harness.scenario.loader import load_scenario, loads_scenario
from harness.skr.errors import SkrInstallError
from harness.skr.in_cluster import (
    RESTART_ANNOTATION,
    ROTATION_REFUSED,
    InClusterSkrInstallation,
    available,
    metrics_proxy_path,
)
from watcher import pki
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
IMAGE = "kyma-watcher:test"
KCP_ADDR = "172.18.0.1:32443"
AVAILABLE = {
    "availableReplicas": 1,
    "conditions": [{"type": "Available", "status": "True"}],
}


def _key(kind: str, name: str, namespace: str | None) -> tuple[str, str, str]:
    return (kind, namespace or "", name)


class FakeCalls:
    """An API server of dicts; the Deployment turns Available after ``ready_after`` GETs."""

    def __init__(self, *, ready_after: int | None = 1, metrics: str | None = None) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.log: list[tuple[str, str, str]] = []
        self.ready_after = ready_after
        self.gets = 0
        self.metrics = metrics
        self.paths: list[str] = []

    async def apply(self, obj: Mapping[str, Any]) -> Obj:
        meta = obj["metadata"]
        key = _key(obj["kind"], meta["name"], meta.get("namespace"))
        self.objects[key] = dict(obj)
        self.log.append(("apply", obj["kind"], meta["name"]))
        return dict(obj)

    async def get(self, resource: Resource, name: str, namespace: str | None) -> Obj | None:
        self.gets += 1
        obj = self.objects.get(_key(resource.kind, name, namespace))
        if obj is None:
            return None
        ready = self.ready_after is not None and self.gets >= self.ready_after
        return {**obj, "status": AVAILABLE if ready else {"replicas": 1}}

    async def delete(self, resource: Resource, name: str, namespace: str | None) -> None:
        self.objects.pop(_key(resource.kind, name, namespace), None)
        self.log.append(("delete", resource.kind, name))

    async def patch(
        self, resource: Resource, name: str, namespace: str | None, body: Mapping[str, Any]
    ) -> Obj:
        self.log.append(("patch", resource.kind, repr(dict(body))))
        return dict(body)

    async def delete_pods(self, namespace: str, selector: str) -> None:
        self.log.append(("delete-pods", namespace, selector))

    async def get_text(self, path: str) -> str:
        self.paths.append(path)
        if self.metrics is None:
            raise KubeError(f"GET {path}: 503 'no endpoints available'", status=503)
        return self.metrics


def cluster(name: str = "skr-a") -> Cluster:
    return Cluster(
        name=name,
        server="https://skr.example:6443",
        kubeconfig=Path("/nonexistent"),
        ca_file=None,
        client_cert_file=None,
        client_key_file=None,
        process=None,
        kubeconfig_embedded="",
    )


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    return pki.create_ca("kcp-ca-test")


def installation(
    ca: pki.CertificateAuthority, calls: FakeCalls, **kwargs: Any
) -> InClusterSkrInstallation:
    return InClusterSkrInstallation(
        cluster(),
        runtime_id="runtime-a",
        skr_domain="skr-a.kyma.example.com",
        ca=ca,
        ca_bundle_pem=ca.cert_pem,
        kcp_addr=KCP_ADDR,
        image=IMAGE,
        calls=calls,
        poll_seconds=0.001,
        **kwargs,
    )


async def test_install_applies_the_rendered_set_in_order_and_waits_for_available(
    ca: pki.CertificateAuthority,
) -> None:
    calls = FakeCalls(ready_after=3)
    inst = installation(ca, calls)
    await inst.install()
    kinds = [kind for op, kind, _ in calls.log if op == "apply"]
    assert kinds[:3] == ["Namespace", "ServiceAccount", "PriorityClass"]
    assert "ValidatingWebhookConfiguration" not in kinds  # comes with the Watchers
    assert kinds.index("Secret") < kinds.index("Deployment") < kinds.index("NetworkPolicy")
    deployment = calls.objects[("Deployment", "kyma-system", "skr-webhook")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert container["image"] == IMAGE and env["KCP_ADDR"] == KCP_ADDR
    secret = calls.objects[("Secret", "kyma-system", "skr-webhook-tls")]
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca.cert_pem
    assert calls.gets == 3 and inst.running and "1 replica" in inst.state
    assert inst.process_records == ()  # nothing runs on this host
    assert inst.metrics_url == "https://skr.example:6443" + metrics_proxy_path("kyma-system")
    assert inst.webhook_url == "https://skr-webhook.kyma-system.svc:443"


async def test_watchers_render_a_service_client_config_and_uninstall_removes_all(
    ca: pki.CertificateAuthority,
) -> None:
    calls = FakeCalls()
    inst = installation(ca, calls)
    await inst.install()
    applied = set(calls.objects)
    watcher = parse_watcher(klm_watcher_dict())
    await inst.apply_watchers([watcher])
    vwc = calls.objects[("ValidatingWebhookConfiguration", "", "skr-webhook")]
    configs = [w["clientConfig"] for w in vwc["webhooks"]]
    assert configs and all("url" not in c for c in configs)
    assert {c["service"]["name"] for c in configs} == {"skr-webhook"}
    assert {c["service"]["path"] for c in configs} == {f"/validate/{watcher.manager}"}
    assert base64.b64decode(configs[0]["caBundle"]) == ca.cert_pem
    await inst.apply_watchers([])
    assert ("ValidatingWebhookConfiguration", "", "skr-webhook") not in calls.objects
    await inst.apply_watchers([watcher])
    await inst.uninstall()
    deletes = [(kind, name) for op, kind, name in calls.log if op == "delete"]
    assert deletes[-len(applied) :][0] == ("ValidatingWebhookConfiguration", "skr-webhook")
    assert set(calls.objects) == {("Namespace", "", "kyma-system")}  # ownership removes it
    assert len(applied) > 5 and not inst.running


async def test_a_deployment_that_never_becomes_available_fails_in_one_line_and_rolls_back(
    ca: pki.CertificateAuthority,
) -> None:
    calls = FakeCalls(ready_after=None)
    inst = installation(ca, calls, available_timeout=0.05)
    with pytest.raises(SkrInstallError) as info:
        await inst.install()
    message = str(info.value)
    assert "\n" not in message
    assert "not Available within 0.05 s" in message
    assert IMAGE in message and "node" in message and "describe pod" in message
    assert set(calls.objects) == {("Namespace", "", "kyma-system")}


async def test_faults_are_kubernetes_operations(ca: pki.CertificateAuthority) -> None:
    calls = FakeCalls()
    inst = installation(ca, calls)
    await inst.install()
    await inst.kill()
    assert calls.log[-1] == ("delete-pods", "kyma-system", "app=skr-webhook")
    await inst.stop()
    assert calls.log[-1] == ("patch", "Deployment", "{'spec': {'replicas': 0}}")
    assert not inst.running and inst.state.endswith("0 replica(s)")
    before = calls.gets
    await inst.start()
    assert ("patch", "Deployment", "{'spec': {'replicas': 1}}") in calls.log
    assert calls.gets > before and inst.running  # start waits for Available
    with pytest.raises(SkrInstallError, match="rotation is not supported"):
        await inst.rotate(ca.cert_pem, inst.leaf)
    assert "WATCHER_HARNESS_WEBHOOK_MODE=host" in ROTATION_REFUSED
    await inst.uninstall()


async def test_metrics_come_through_the_service_proxy(ca: pki.CertificateAuthority) -> None:
    calls = FakeCalls(metrics="# TYPE watcher_admission_request_total counter\n"
                      "watcher_admission_request_total 7\n")  # fmt: skip
    inst = installation(ca, calls)
    await inst.install()
    assert await inst.metric("watcher_admission_request_total") == 7.0
    assert calls.paths == [
        "/api/v1/namespaces/kyma-system/services/skr-webhook-metrics:2112/proxy/metrics"
    ]
    calls.metrics = None
    with pytest.raises(SkrInstallError, match=r"service proxy: .*503"):
        await inst.metrics()
    await inst.uninstall()


def test_no_image_is_refused_naming_the_variable(ca: pki.CertificateAuthority) -> None:
    with pytest.raises(SkrInstallError, match="WATCHER_HARNESS_IMAGE"):
        InClusterSkrInstallation(
            cluster(),
            runtime_id="r",
            skr_domain="d.example.com",
            ca=ca,
            ca_bundle_pem=ca.cert_pem,
            kcp_addr=KCP_ADDR,
            image="",
        )


def test_available_needs_the_condition_and_the_replicas() -> None:
    assert available({"status": AVAILABLE})
    assert not available({"status": {"availableReplicas": 1}})
    assert not available({"status": {"conditions": AVAILABLE["conditions"]}})
    assert not available(None)
    assert metrics_proxy_path("ns").endswith("/ns/services/skr-webhook-metrics:2112/proxy/metrics")


def test_the_environment_picks_the_installation_by_webhook_mode(
    ca: pki.CertificateAuthority,
) -> None:
    env = {"WATCHER_HARNESS_KUBECONFIG": "/k", "WATCHER_HARNESS_WEBHOOK_MODE": "in-cluster"}
    spec = EnvironmentSpec(backend=choose_backend("kubeconfig", env=env))
    skr = SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com")
    leaf = pki.issue_runtime_certificate(ca, skr.runtime_id, skr.skr_domain)
    inst = skr_installation(
        spec,
        skr,
        cluster(),
        ca=ca,
        leaf=leaf,
        ca_bundle_pem=ca.cert_pem,
        gateway_port=40443,
        host_address="10.0.0.5",
        env={"WATCHER_HARNESS_IMAGE": IMAGE},
    )
    assert isinstance(inst, InClusterSkrInstallation)
    assert (inst.kcp_addr, inst.image) == ("10.0.0.5:40443", IMAGE)
    assert inst.leaf is leaf  # KLM's certificate, not one of its own
    assert gateway_listen_address(spec) == "0.0.0.0"
    host = skr_installation(
        EnvironmentSpec(),
        skr,
        cluster(),
        ca=ca,
        leaf=leaf,
        ca_bundle_pem=ca.cert_pem,
        gateway_port=40443,
        host_address="127.0.0.1",
    )
    assert not isinstance(host, InClusterSkrInstallation)
    assert host.host_address == "127.0.0.1"
    assert host.leaf is leaf
    knobs = EnvironmentSpec(backend=spec.backend, webhook_env={"WATCHER_RETRY_MAX_SECONDS": "1"})
    with pytest.raises(SkrInstallError, match="WATCHER_HARNESS_WEBHOOK_MODE=host"):
        skr_installation(
            knobs,
            skr,
            cluster(),
            ca=ca,
            leaf=leaf,
            ca_bundle_pem=ca.cert_pem,
            gateway_port=1,
            host_address="10.0.0.5",
            env={},
        )


@pytest.mark.parametrize(
    ("file", "reason"),
    [
        ("cert-rotation.yaml", "cannot rotate certificates"),
        ("webhook-restart.yaml", "no sync delivery"),
    ],
)
def test_scenarios_the_in_cluster_webhook_cannot_run_are_refused_before_start(
    file: str, reason: str
) -> None:
    text = (SCENARIOS / file).read_text(encoding="utf-8")
    if reason == "no sync delivery":  # no library scenario uses sync delivery
        text = text.replace("    - name: skr-b\n", "    - name: skr-b\n      deliveryMode: sync\n")
        assert "deliveryMode: sync" in text
    scenario = loads_scenario(text, base_dir=SCENARIOS)
    env = {"WATCHER_HARNESS_KUBECONFIG": "/k", "WATCHER_HARNESS_WEBHOOK_MODE": "in-cluster"}
    refusal = backend_refusal(scenario, choose_backend("kubeconfig", env=env)) or ""
    assert reason in refusal and "WATCHER_HARNESS_WEBHOOK_MODE=host" in refusal
    assert reason != "no sync delivery" or "skr-b" in refusal
    host = choose_backend("kubeconfig", env={"WATCHER_HARNESS_KUBECONFIG": "/k"})
    assert backend_refusal(scenario, host) is None
    webhook_restart = load_scenario(SCENARIOS / "webhook-restart.yaml")
    assert backend_refusal(webhook_restart, choose_backend("kubeconfig", env=env)) is None


async def test_repair_puts_back_a_deleted_secret_and_configuration(
    ca: pki.CertificateAuthority,
) -> None:
    calls = FakeCalls()
    inst = installation(ca, calls)
    await inst.install()
    await inst.apply_watchers([parse_watcher(klm_watcher_dict())])
    assert await inst.repair() == ()  # nothing lost: applied again, nothing reported
    secret = ("Secret", "kyma-system", "skr-webhook-tls")
    vwc = ("ValidatingWebhookConfiguration", "", "skr-webhook")
    kept = calls.objects.pop(secret), calls.objects.pop(vwc)
    assert await inst.repair() == (
        "Secret skr-webhook-tls",
        "ValidatingWebhookConfiguration skr-webhook",
    )
    assert (calls.objects[secret], calls.objects[vwc]) == kept


async def test_a_new_certificate_goes_into_the_secret_and_rolls_the_pods(
    ca: pki.CertificateAuthority,
) -> None:
    calls = FakeCalls()
    inst = installation(ca, calls)
    await inst.install()
    secret = ("Secret", "kyma-system", "skr-webhook-tls")
    first = calls.objects[secret]["data"]
    assert not any(entry[0] == "patch" for entry in calls.log)
    new_ca = pki.create_ca("kcp-ca-2")
    leaf = pki.issue_runtime_certificate(new_ca, "runtime-a", "skr-a.kyma.example.com")
    bundle = pki.rotate_ca_bundle(ca.cert_pem, new_ca.cert_pem)
    changed = await inst.repair(lambda: [parse_watcher(klm_watcher_dict())], (leaf, bundle))
    assert changed[0] == "certificate" and inst.leaf is leaf
    data = calls.objects[secret]["data"]
    assert data != first
    assert base64.b64decode(data["tls.crt"]) == leaf.cert_pem
    assert base64.b64decode(data["ca.crt"]) == bundle
    patches = [entry for entry in calls.log if entry[0] == "patch"]
    assert len(patches) == 1 and RESTART_ANNOTATION in patches[0][2]
    assert format(leaf.certificate.serial_number, "x") in patches[0][2]
    # The same certificate again changes nothing and restarts nothing.
    assert "certificate" not in await inst.repair(None, (leaf, bundle))
    assert len([entry for entry in calls.log if entry[0] == "patch"]) == 1
    await inst.remove()
    assert secret not in calls.objects
    assert ("ValidatingWebhookConfiguration", "", "skr-webhook") not in calls.objects
