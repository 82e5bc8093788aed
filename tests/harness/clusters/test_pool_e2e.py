"""A pooled API server comes back as if new: what a scenario wrote is gone, its CRDs are
not (and take creates at once), and a server a fault restarted is not handed out again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries
from harness.clusters.plane import crd_documents
from harness.clusters.pool import ClusterPool, PooledBackend
from harness.kube import CONFIG_MAPS, KYMAS, NAMESPACES, create, get

CRD = Path(__file__).resolve().parents[3] / "fixtures" / "crds" / "kyma.yaml"
pytestmark = pytest.mark.e2e


@pytest.fixture
def pool(cluster_binaries: Binaries) -> Iterator[ClusterPool]:
    pool = ClusterPool(cluster_binaries)
    yield pool
    pool.close()


def kyma(name: str) -> dict[str, object]:
    return {"apiVersion": KYMAS.api_version, "kind": "Kyma", "metadata": {"name": name}}


async def test_a_given_back_server_is_reset_and_reused(pool: ClusterPool, tmp_path: Path) -> None:
    backend = PooledBackend(pool, log_dir=tmp_path, crds=crd_documents({"kcp": [CRD]}))
    async with backend.start(["kcp"]) as env, env["kcp"].api_client() as api:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kcp-system"}}
        await create(api, NAMESPACES, namespace)
        await create(
            api, KYMAS, {**kyma("first"), "metadata": {"name": "first", "namespace": "kcp-system"}}
        )
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        await create(
            api, CONFIG_MAPS, {**config_map, "metadata": {"name": "c", "namespace": "default"}}
        )
        first_pid = env["kcp"].process.pid if env["kcp"].process else None
    assert (tmp_path / "kube-apiserver-kcp.log").exists()

    async with backend.start(["kcp"]) as env, env["kcp"].api_client() as api:
        assert env["kcp"].process is not None and env["kcp"].process.pid == first_pid
        assert await get(api, NAMESPACES, "kcp-system") is None
        assert await get(api, CONFIG_MAPS, "c", "default") is None
        started = time.monotonic()
        await create(
            api, KYMAS, {**kyma("again"), "metadata": {"name": "again", "namespace": "default"}}
        )
        assert time.monotonic() - started < 1.0  # the CRD is long Established: no 2 s hold
    assert (pool.started, pool.reused) == (1, 1)


async def test_a_server_a_fault_restarted_is_not_handed_out_again(pool: ClusterPool) -> None:
    backend = PooledBackend(pool)
    async with backend.start(["skr"]) as env:
        first_pid = env["skr"].process.pid if env["skr"].process else None
        await env.control("skr").restart()
    async with backend.start(["skr"]) as env:
        assert env["skr"].process is not None and env["skr"].process.pid != first_pid
    assert (pool.started, pool.reused) == (2, 0)
