"""The in-cluster SKR installation against a real kube-apiserver of the local backend.

Local API servers run no kubelet, so no pod ever starts: the test plays the Deployment
controller and kubelet by writing ``status`` (availableReplicas, the Available condition)
through the status subresource while the installation waits. Everything else is real:
server-side apply of the rendered set, the Availability poll, the webhook configuration
with the service clientConfig, and the removal at the end. A test that needs a pod to
run is skipped with the reason."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import Binaries
from harness.clusters.contexts import merged_kubeconfig, select_context
from harness.clusters.kubeconfig_backend import KubeconfigBackend
from harness.clusters.ownership import ALL_KINDS, inventory
from harness.clusters.plane import Cluster, Environment, LocalBackend
from harness.clusters.selection import ClusterTarget
from harness.kube import DEPLOYMENTS, NAMESPACES, get, merge_patch
from harness.manifests.apply import resource_for
from harness.skr.errors import SkrInstallError
from harness.skr.in_cluster import VWCS, InClusterSkrInstallation
from watcher import pki
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

IMAGE = "kyma-watcher:e2e"
KCP_ADDR = "127.0.0.1:32443"
NS, NAME = "kyma-system", "skr-webhook"


@pytest.fixture
async def clusters(cluster_binaries: Binaries, tmp_path: Path) -> AsyncIterator[Environment]:
    async with LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(["skr-a"]) as env:
        yield env


async def play_kubelet(api: ApiClient) -> int:
    """Mark the Deployment Available once it exists (what the controllers would do);
    returns how many polls it took."""
    polls = 0
    while await get(api, DEPLOYMENTS, NAME, NS) is None:
        polls += 1
        await asyncio.sleep(0.05)  # the installation creates it a moment later
    status = {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
        ],
    }
    await merge_patch(api, DEPLOYMENTS, NAME, NS, {"status": status}, subresource="status")
    return polls


def installation(cluster: Cluster, *, available_timeout: float = 30) -> InClusterSkrInstallation:
    """runtime-a's in-cluster install on ``cluster`` (a fresh KCP CA each time)."""
    ca = pki.create_ca("kcp-ca-e2e")
    return InClusterSkrInstallation(
        cluster,
        runtime_id="runtime-a",
        skr_domain="skr-a.kyma.example.com",
        ca=ca,
        ca_bundle_pem=ca.cert_pem,
        kcp_addr=KCP_ADDR,
        image=IMAGE,
        available_timeout=available_timeout,
        poll_seconds=0.1,
    )


async def install_as_if_scheduled(inst: InClusterSkrInstallation, api: ApiClient) -> None:
    """Install while :func:`play_kubelet` stands in for the node that would run the pod."""
    kubelet = asyncio.create_task(play_kubelet(api))
    await inst.install()
    await kubelet


async def test_install_applies_service_client_config_and_removes_everything(
    clusters: Environment,
) -> None:
    inst = installation(clusters["skr-a"])
    async with clusters["skr-a"].api_client() as api:
        await install_as_if_scheduled(inst, api)
        deployment = await get(api, DEPLOYMENTS, NAME, NS)
        assert deployment is not None
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert container["image"] == IMAGE and env["KCP_ADDR"] == KCP_ADDR

        watcher = parse_watcher(klm_watcher_dict())
        await inst.apply_watchers([watcher])
        vwc = await get(api, VWCS, "skr-webhook")
        assert vwc is not None
        config = vwc["webhooks"][0]["clientConfig"]
        assert "url" not in config
        assert config["service"] == {
            "name": NAME,
            "namespace": NS,
            "path": f"/validate/{watcher.manager}",
            "port": 443,
        }
        assert base64.b64decode(config["caBundle"]) == inst.ca_bundle_pem  # the KCP CA

        stored = [o for o in inst.applied if o["kind"] != "Namespace"]
        for obj in stored:
            meta = obj["metadata"]
            assert await get(api, resource_for(obj), meta["name"], meta.get("namespace"))
        await inst.uninstall()
        assert await get(api, VWCS, "skr-webhook") is None
        for obj in stored:
            meta = obj["metadata"]
            left = await get(api, resource_for(obj), meta["name"], meta.get("namespace"))
            assert left is None or left["metadata"].get("deletionTimestamp"), obj["kind"]
        assert len(stored) >= 8  # SA, PriorityClass, Secret, 2 Services, Deployment, 4 NPs


async def test_without_a_kubelet_the_wait_ends_with_the_one_line_reason(
    clusters: Environment,
) -> None:
    inst = installation(clusters["skr-a"], available_timeout=1.0)
    with pytest.raises(SkrInstallError, match=r"not Available within 1 s.*pull image") as info:
        await inst.install()
    assert "\n" not in str(info.value)
    async with clusters["skr-a"].api_client() as api:
        assert await get(api, DEPLOYMENTS, NAME, NS) is None  # rolled back


async def test_a_crashed_run_is_removed_by_the_kubeconfig_backends_ownership(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    """Installed in-cluster through the kubeconfig backend and never uninstalled (as if
    the harness died half-way): leaving the backend removes every object it applied."""
    async with LocalBackend(cluster_binaries).start(["skr-a"]) as local:
        access = select_context(local["skr-a"].kubeconfig_embedded)
        file = tmp_path / "kubeconfig"
        file.write_text(merged_kubeconfig({"dev-skr": access}), encoding="utf-8")
        async with local["skr-a"].api_client() as foreign:
            before = await inventory(foreign, ALL_KINDS)
            backend = KubeconfigBackend(
                {"skr-a": ClusterTarget((file,), "dev-skr")},
                run_id="run-in-cluster",
                namespaces={"skr-a": [NS]},
            )
            async with backend.start(["skr-a"]) as env:
                inst = installation(env["skr-a"])
                async with env["skr-a"].api_client() as api:
                    await install_as_if_scheduled(inst, api)
                    await inst.apply_watchers([parse_watcher(klm_watcher_dict())])
                    assert await get(api, VWCS, "skr-webhook") is not None
                    assert await get(api, DEPLOYMENTS, NAME, NS) is not None
                # no uninstall: the backend's ownership cleanup is all that runs
            after = await inventory(foreign, ALL_KINDS)
            assert after.new_since(before, ours=True) == {r: {} for r in after.objects}
            assert await get(foreign, VWCS, "skr-webhook") is None
            assert await get(foreign, DEPLOYMENTS, NAME, NS) is None
            assert await get(foreign, NAMESPACES, NS) is None


@pytest.mark.skip(
    reason="needs a node that runs pods (kubelet, container runtime, the image): local API "
    "servers run none; run the scenario library with --cluster-backend kind "
    "--cluster-webhook in-cluster on a machine with Docker"
)
async def test_in_cluster_webhook_delivers_events() -> None:
    raise AssertionError("never runs here")
