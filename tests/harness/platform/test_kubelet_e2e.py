"""The kubelet emulation against a real kube-apiserver, with the objects KLM applies to an
SKR (upstream's ``skr-webhook`` resources): the API server calls the webhook through its
Service (ClusterIP → kube-proxy → EndpointSlice → pod). As KLM's, the webhook configuration
fails open, so a call that misses the webhook shows as a missing event at the KCP stub."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.clusters import procfs
from harness.clusters.binaries import Binaries
from harness.clusters.plane import LocalBackend
from harness.conformance.kcp_stub import KcpStub
from harness.kube import DEPLOYMENTS, ENDPOINT_SLICES, SERVICES
from harness.manifests.apply import apply_object
from harness.platform.kubelet import Kubelet
from harness.skr.certs import issue_webhook_certificate
from harness.skr.metrics import parse_metrics, value
from harness.skr.webhook import webhook_executable
from watcher import pki

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="pods run in network namespaces (root)"),
    pytest.mark.usefixtures("no_leaked_tasks"),
]

NS, NAME = "kyma-system", "skr-webhook"
KEY = f"{NS}/{NAME}"
IMAGE = "europe-docker.pkg.dev/kyma-project/prod/runtime-watcher:1.4.3"
WATCHED = {"kubelet-e2e.kyma-project.io/watched": "true"}
RESTART_TRIGGER = "operator.kyma-project.io/pod-restart-trigger"


def commands(image: str) -> Sequence[str] | None:
    return [webhook_executable()] if "/runtime-watcher:" in image else None


@dataclass
class Skr:
    api: ApiClient
    kubelet: Kubelet
    ca: pki.CertificateAuthority
    kcp: KcpStub


@pytest.fixture
async def skr(cluster_binaries: Binaries, tmp_path: Path) -> AsyncIterator[Skr]:
    """One SKR of the local backend (loopback ClusterIPs), a KCP stub and the kubelet."""
    ca = pki.create_ca("kubelet-e2e-ca", key_type="ec")
    gateway = pki.issue_server_certificate(ca, "kcp-gateway", key_type="ec")
    pki.write_secret_files(tmp_path, pki.secret_data(gateway, ca.cert_pem))
    backend = LocalBackend(cluster_binaries, log_dir=tmp_path / "logs")
    async with (
        backend.start(["skr"]) as env,
        env["skr"].api_client() as api,
        KcpStub(tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt") as kcp,
    ):
        await kube.ensure_namespace(api, NS)
        workdir = tmp_path / "kubelet"
        async with Kubelet(api, cluster="skr", workdir=workdir, commands=commands) as kubelet:
            yield Skr(api, kubelet, ca, kcp)
        # Leaving stopped every process, removed the slices and the pod directories.
        assert all(r.pid and not procfs.is_alive(r.pid) for r in kubelet.records)
        assert (await kube.list_objects(api, ENDPOINT_SLICES, NS))[0] == []
        assert not list((workdir / NS).glob("*"))


def tls_secret(ca: pki.CertificateAuthority) -> kube.Obj:
    leaf = issue_webhook_certificate(ca, "runtime-e2e", "skr-e2e.kyma.example.com")
    data = pki.secret_data(leaf, ca.cert_pem)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "skr-webhook-tls", "namespace": NS},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def services() -> list[kube.Obj]:
    def service(name: str, port: int, port_name: str, target: str) -> kube.Obj:
        spec = {"selector": {"app": NAME}, "ports": [{"name": port_name, "port": port,
                                                      "targetPort": target}]}  # fmt: skip
        meta = {"name": name, "namespace": NS, "labels": {"app": NAME}}
        return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}

    return [
        service(NAME, 443, "webhook", "watcher-port"),
        service(f"{NAME}-metrics", 2112, "http-metrics", "metrics-port"),
    ]


def deployment(kcp_port: int, *, image: str = IMAGE, trigger: str = "1") -> kube.Obj:
    env = {
        "WEBHOOK_PORT": "8443",
        "METRICS_PORT": "2112",
        "TLS_KEY": "/app/etc/ssl/tls.key",
        "TLS_CERT": "/app/etc/ssl/tls.crt",
        "CA_CERT": "/app/etc/ssl/ca.crt",
        "TLS_CALLBACK": "true",
        "KCP_CONTRACT": "v2",
        "KCP_ADDR": f"localhost:{kcp_port}",
    }
    pod_name = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    container = {
        "name": "server",
        "image": image,
        "env": [pod_name, *({"name": k, "value": v} for k, v in env.items())],
        "ports": [
            {"containerPort": 8443, "name": "watcher-port"},
            {"containerPort": 2112, "name": "metrics-port"},
        ],
        "volumeMounts": [{"name": "ssl", "mountPath": "/app/etc/ssl"}],
        "resources": {"limits": {"memory": "200Mi"}, "requests": {"cpu": "10m"}},
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True},
    }
    items = [{"key": k, "path": k} for k in ("tls.key", "tls.crt", "ca.crt")]
    volume = {"name": "ssl", "secret": {"secretName": "skr-webhook-tls", "items": items}}
    labels = {"app": NAME, RESTART_TRIGGER: trigger, "sidecar.istio.io/inject": "false"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NS, "labels": {"app": NAME}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "skr-webhook-priority",
                    "containers": [container],
                    "volumes": [volume],
                },
            },
        },
    }


def webhook_configuration(ca: pki.CertificateAuthority) -> kube.Obj:
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["configmaps"]}  # fmt: skip
    service = {"name": NAME, "namespace": NS, "path": "/validate/lifecycle-manager"}
    webhook = {
        "name": "lifecycle-manager.operator.kyma-project.io",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "failurePolicy": "Ignore",
        "timeoutSeconds": 15,
        "objectSelector": {"matchLabels": WATCHED},
        "rules": [rule],
        "clientConfig": {"service": service, "caBundle": base64.b64encode(ca.cert_pem).decode()},
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME},
        "webhooks": [webhook],
    }


async def eventually(check: Callable[[], Any], within: float, what: str) -> Any:
    """The first result of ``check()`` (awaited if a coroutine) that is not None or False."""
    deadline = time.monotonic() + within
    while (result := await _value(check())) in (None, False):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        await asyncio.sleep(0.1)
    return result


async def _value(result: Any) -> Any:
    return await result if isinstance(result, Awaitable) else result


async def admitted(skr: Skr, name: str, *, within: float = 10) -> bool:
    """Whether a watched ConfigMap's admission reached the webhook: its event at the KCP."""
    before = len(skr.kcp.requests)
    meta = {"name": name, "namespace": "default", "labels": dict(WATCHED)}
    await kube.create(
        skr.api, kube.CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    )
    requests = await skr.kcp.wait(before + 1, within=within)
    return any(f'"{name}"' in r.body.decode() for r in requests[before:])


async def answers(url: str) -> bool:
    """Whether a new TLS connection to ``url`` gets an HTTP answer."""
    connector = aiohttp.TCPConnector(force_close=True, ssl=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        try:
            async with session.post(url, data=b"{}") as answer:
                return answer.status > 0
        except aiohttp.ClientError:
            return False


async def ready_replicas(api: ApiClient, ready: int) -> kube.Obj:
    async def check() -> kube.Obj | None:
        current = await kube.get(api, DEPLOYMENTS, NAME, NS) or {"metadata": {}}
        status = current.get("status") or {}
        observed = status.get("observedGeneration") == current["metadata"].get("generation")
        return status if observed and int(status.get("readyReplicas") or 0) == ready else None

    return await eventually(check, 15, f"Deployment status readyReplicas={ready}")  # type: ignore[no-any-return]


async def slices(api: ApiClient) -> list[kube.Obj]:
    selector = f"kubernetes.io/service-name={NAME}"
    return (await kube.list_objects(api, ENDPOINT_SLICES, NS, label_selector=selector))[0]


async def test_the_api_server_calls_the_webhook_through_its_service(skr: Skr) -> None:
    api, kubelet = skr.api, skr.kubelet
    for obj in [tls_secret(skr.ca), *services(), deployment(skr.kcp.port)]:
        await apply_object(api, obj)
    started = time.monotonic()
    pod = await kubelet.wait_ready(NS, NAME, within=30)
    assert time.monotonic() - started < 15

    # What KLM waits for, and what the pod got: upstream's env, the Secret's paths rewritten.
    status = await ready_replicas(api, 1)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Available"]["status"] == "True"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    ssl_dir = pod.pod_dir / "volumes" / "ssl"
    assert pod.env["POD_NAME"] == pod.name and pod.env["TLS_KEY"] == str(ssl_dir / "tls.key")
    assert (ssl_dir / "ca.crt").read_bytes() == skr.ca.cert_pem
    assert set(pod.host_ports) == {8443, 2112}

    # The slice lists the pod's IP and container port under the Service port's name.
    (slice_,) = await slices(api)
    assert slice_["ports"] == [{"name": "webhook", "port": 8443, "protocol": "TCP"}]
    assert [e["addresses"] for e in slice_["endpoints"]] == [[pod.ip]]
    route = next(r for r in kubelet.routes() if r.service == NAME)
    assert (route.port, route.endpoints) == (443, ((pod.ip, 8443),))

    # The API server calls the webhook: Service → ClusterIP → kube-proxy → pod → KCP.
    await apply_object(api, webhook_configuration(skr.ca))
    attempts = iter(range(100))
    await eventually(lambda: admitted(skr, f"warm-up-{next(attempts)}", within=1), 15, "active")
    assert await admitted(skr, "first")
    metrics = await kube.get(api, SERVICES, f"{NAME}-metrics", NS)
    assert metrics is not None
    url = f"http://{metrics['spec']['clusterIP']}:2112/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as answer:
        samples = parse_metrics(await answer.text())
    assert value(samples, "watcher_kcp_requests_total") >= 2

    # KLM's restart trigger: a new pod; meanwhile every new connection to the Service is
    # answered by a webhook (a call on a kept-alive connection to the old pod may still
    # race with its shutdown, as in a cluster).
    await kube.merge_patch(api, DEPLOYMENTS, NAME, NS, {"spec": {"template": {"metadata": {
        "labels": {RESTART_TRIGGER: "2"}}}}})  # fmt: skip
    service = await kube.get(api, SERVICES, NAME, NS)
    assert service is not None
    url, deadline = f"https://{service['spec']['clusterIP']}/validate/x", time.monotonic() + 30
    while (rolled := kubelet.pods[KEY]).pid in (None, pod.pid) or procfs.is_alive(pod.pid or 0):
        assert await answers(url), kubelet.all_pods()
        assert time.monotonic() < deadline, kubelet.all_pods()
    rolled = await kubelet.wait_ready(NS, NAME, within=30)
    assert rolled.name != pod.name and rolled.template_hash != pod.template_hash
    assert await admitted(skr, "after-the-rollout")

    # A crashed container restarts in the same pod; the first call after wait_ready arrives.
    killed = await kubelet.kill_pod(NS, NAME)
    assert killed == rolled.pid
    await eventually(lambda: kubelet.pods[KEY].pid not in (None, killed), 30, "restarted")
    restarted = await kubelet.wait_ready(NS, NAME, within=30)
    assert (restarted.name, restarted.ip, restarted.restart_count) == (rolled.name, rolled.ip, 1)
    assert restarted.last_exit_code == 137
    assert await admitted(skr, "right-after-the-restart")

    # Scaled to 0: the process stops, the slice and the route go, calls no longer arrive.
    await kube.merge_patch(api, DEPLOYMENTS, NAME, NS, {"spec": {"replicas": 0}})
    await kubelet.wait_gone(NS, NAME, within=30)
    assert not procfs.is_alive(restarted.pid or 0)
    await eventually(lambda: not kubelet.routes(), 10, "kube-proxy closed the ClusterIP ports")
    await eventually(lambda: _no_slices(api), 10, "the slice is deleted")
    assert not await admitted(skr, "while-scaled-to-zero", within=1)
    assert int((await ready_replicas(api, 0)).get("replicas") or 0) == 0

    # Back to 1, then deleted.
    await kube.merge_patch(api, DEPLOYMENTS, NAME, NS, {"spec": {"replicas": 1}})
    last = await kubelet.wait_ready(NS, NAME, within=30)
    assert await admitted(skr, "scaled-up-again")
    await kube.delete(api, DEPLOYMENTS, NAME, NS)
    await kubelet.wait_gone(NS, NAME, within=30)
    assert not procfs.is_alive(last.pid or 0) and KEY not in kubelet.pods
    assert len(kubelet.records) == 4  # first, rolled, restarted, scaled up


async def _no_slices(api: ApiClient) -> bool:
    return await slices(api) == []


async def test_a_pod_waits_for_its_secret_and_an_unknown_image_is_reported(skr: Skr) -> None:
    api, kubelet = skr.api, skr.kubelet
    await apply_object(api, services()[0])
    await apply_object(api, deployment(skr.kcp.port, image="registry.example.com/other:1.0"))

    async def replica_failure() -> str | None:
        current = await kube.get(api, DEPLOYMENTS, NAME, NS) or {}
        conditions = ((current.get("status") or {}).get("conditions")) or []
        return next((c["message"] for c in conditions if c["type"] == "ReplicaFailure"), None)

    message = "no host command for image registry.example.com/other:1.0"
    assert message in await eventually(replica_failure, 15, "ReplicaFailure on the Deployment")
    assert kubelet.pods[KEY].reason == message and kubelet.records == []

    # The right image, but its Secret does not exist yet: ContainerCreating, nothing runs.
    await apply_object(api, deployment(skr.kcp.port))
    waiting = 'ContainerCreating: MountVolume.SetUp failed for volume "ssl" : secret "skr-webhook-tls" not found'  # noqa: E501
    await eventually(
        lambda: KEY in kubelet.pods and kubelet.pods[KEY].reason == waiting, 15, "waits"
    )
    assert kubelet.records == []
    await apply_object(api, tls_secret(skr.ca))
    pod = await kubelet.wait_ready(NS, NAME, within=30)
    await ready_replicas(api, 1)
    assert await replica_failure() is None

    # A changed Secret reaches the mounted files; the process keeps running.
    other_ca = pki.create_ca("rotated-ca", key_type="ec")
    rotated = tls_secret(skr.ca)
    rotated["data"]["ca.crt"] = base64.b64encode(other_ca.cert_pem).decode()
    await kube.merge_patch(api, kube.SECRETS, "skr-webhook-tls", NS, {"data": rotated["data"]})
    ca_file = pod.pod_dir / "volumes" / "ssl" / "ca.crt"
    await eventually(lambda: ca_file.read_bytes() == other_ca.cert_pem, 10, "ca.crt follows")
    assert kubelet.pods[KEY].pid == pod.pid and kubelet.pods[KEY].restart_count == 0
