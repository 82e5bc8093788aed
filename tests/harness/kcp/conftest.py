"""Fixtures for the KCP tests: no leaked tasks; a real KCP API server with our CRDs (e2e)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries, cache_root, kube_apiserver_path
from harness.clusters.plane import Cluster, LocalBackend
from harness.kube import apply_crds, ensure_namespace

HERE = Path(__file__).parent
CRDS = [HERE.parents[2] / "fixtures" / "crds" / f"{n}.yaml" for n in ("watcher", "kyma", "istio")]
FIRST_BUILD_TIMEOUT = 1800


def _load_cluster_fixtures() -> object:
    """The cluster tests' conftest (binaries ensured once per session), reused here."""
    spec = importlib.util.spec_from_file_location(
        "_clusters_conftest", HERE.parent / "clusters" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cluster_binaries = _load_cluster_fixtures().cluster_binaries  # type: ignore[attr-defined]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give e2e tests here time for a first build of kube-apiserver, if one is due."""
    if kube_apiserver_path(cache_root()).is_file():
        return
    for item in items:
        if item.get_closest_marker("e2e") and HERE in item.path.parents:
            item.add_marker(pytest.mark.timeout(FIRST_BUILD_TIMEOUT), append=False)


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves tasks running (aiohttp's own get a moment to finish)."""
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    leftover = asyncio.all_tasks() - before - {current}
    if leftover:
        _, pending = await asyncio.wait(leftover, timeout=1.0)
        for task in pending:
            task.cancel()
        assert not pending, f"test leaked tasks: {pending}"


@pytest.fixture
async def kcp(cluster_binaries: Binaries, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A fresh KCP API server with the Watcher, Kyma and Istio CRDs and ``kcp-system``."""
    async with LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(["kcp"]) as env:
        cluster = env["kcp"]
        async with cluster.api_client() as api:
            await apply_crds(api, CRDS)
            await ensure_namespace(api, "kcp-system")
        yield cluster
