"""The kubeconfig backend against a real API server it knows only by a kubeconfig file:
it removes exactly what the run created — also after a failure — and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio.config import new_client_from_config

from harness.clusters.binaries import Binaries
from harness.clusters.contexts import merged_kubeconfig, select_context
from harness.clusters.kubeconfig_backend import KubeconfigBackend
from harness.clusters.ownership import ALL_KINDS, MANAGED_BY_LABEL, RUN_LABEL, inventory
from harness.clusters.plane import Cluster, LocalBackend
from harness.clusters.selection import ClusterTarget
from harness.errors import ClusterError
from harness.kube import CRDS, NAMESPACES, WATCHERS, create, ensure_namespace, get, merge_patch
from harness.kube.crds import apply_crds
from watcher.render.watcher_cr import klm_watcher_dict

pytestmark = pytest.mark.e2e
CRD_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "crds"


def config_map(name: str, namespace: str = "default") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
    }


def vwc(name: str) -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [],
    }


def write_kubeconfig(local: Cluster, path: Path) -> Path:
    access = select_context(local.kubeconfig_embedded)
    path.write_text(merged_kubeconfig({"dev-kcp": access}))
    return path


async def test_everything_the_run_created_goes_and_nothing_else(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    from harness.clusters.ownership import CLUSTER_SCOPED, NAMESPACED

    configmaps = next(r for r in NAMESPACED if r.plural == "configmaps")
    webhooks = CLUSTER_SCOPED[0]
    async with LocalBackend(cluster_binaries).start(["kcp"]) as local:
        file = write_kubeconfig(local["kcp"], tmp_path / "kubeconfig")
        foreign = await new_client_from_config(config_file=str(local["kcp"].kubeconfig))
        async with foreign:  # somebody else on the shared cluster (another user agent)
            await create(foreign, NAMESPACES, {"metadata": {"name": "theirs"}})
            before = await inventory(foreign, ALL_KINDS)
            backend = KubeconfigBackend(
                {"kcp": ClusterTarget((tmp_path / "nope", file), "dev-kcp")},
                run_id="run-1",
                namespaces={"kcp": ["kcp-system", "theirs"]},
            )
            async with backend.start(["kcp"]) as env:
                cluster = env["kcp"]
                assert env.backend == "kubeconfig" and env.processes == ()
                assert cluster.control is None and cluster.process is None
                with pytest.raises(ClusterError, match="the kubeconfig backend cannot stop"):
                    env.control("kcp")
                assert file not in cluster.kubeconfig.parents  # a copy in its own directory
                async with cluster.api_client() as api:
                    ns = await get(api, NAMESPACES, "kcp-system")
                    assert ns is not None
                    labels = ns["metadata"]["labels"]
                    assert labels[MANAGED_BY_LABEL] == "watcher-harness"
                    assert labels[RUN_LABEL] == "run-1"
                    theirs = await get(api, NAMESPACES, "theirs")
                    assert theirs is not None and not theirs["metadata"].get("labels", {}).get(
                        RUN_LABEL
                    )
                    await apply_crds(api, [CRD_DIR / "watcher.yaml", CRD_DIR / "kyma.yaml"])
                    watcher = await create(api, WATCHERS, klm_watcher_dict())
                    await merge_patch(
                        api,
                        WATCHERS,
                        watcher["metadata"]["name"],
                        "kcp-system",
                        {"metadata": {"finalizers": ["operator.kyma-project.io/watcher"]}},
                    )
                    await ensure_namespace(api, "extra")
                    await create(api, configmaps, config_map("ours-in-extra", "extra"))
                    await create(api, configmaps, config_map("ours"))
                    await create(api, configmaps, config_map("ours-in-theirs", "theirs"))
                    await create(api, webhooks, vwc("ours"))
                # meanwhile somebody else writes too
                # (with data: an object of nothing but a name records no field manager)
                theirs_cm = {**config_map("theirs-during-the-run"), "data": {"owner": "them"}}
                await create(foreign, configmaps, theirs_cm)
            owned = [o for o in backend.ownerships.values()]
            assert owned == []  # handed over and cleaned
            after = await inventory(foreign, ALL_KINDS)
            assert after.new_since(before, ours=True) == {r: {} for r in after.objects}
            assert await get(foreign, configmaps, "theirs-during-the-run", "default") is not None
            assert await get(foreign, NAMESPACES, "theirs") is not None
            assert await get(foreign, configmaps, "ours-in-theirs", "theirs") is None
            for name in ("kcp-system", "extra"):
                assert await get(foreign, NAMESPACES, name) is None
            assert await get(foreign, CRDS, "watchers.operator.kyma-project.io") is None


async def test_a_failed_run_is_cleaned_up_too(cluster_binaries: Binaries, tmp_path: Path) -> None:
    async with LocalBackend(cluster_binaries).start(["kcp"]) as local:
        file = write_kubeconfig(local["kcp"], tmp_path / "kubeconfig")
        backend = KubeconfigBackend({"kcp": ClusterTarget((file,), "dev-kcp")}, run_id="run-2")
        with pytest.raises(RuntimeError, match="scenario broke"):
            async with backend.start(["kcp"]) as env:
                async with env["kcp"].api_client() as api:
                    await ensure_namespace(api, "half-done")
                raise RuntimeError("scenario broke")
        async with local["kcp"].api_client() as api:
            assert await get(api, NAMESPACES, "half-done") is None
