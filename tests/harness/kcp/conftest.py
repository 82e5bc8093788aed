"""Fixtures for the KCP tests: no leaked tasks; a real KCP API server with our CRDs (e2e)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries
from harness.clusters.plane import Cluster, LocalBackend
from harness.kube import ensure_namespace
from harness.kube.crds import apply_crds

HERE = Path(__file__).parent
CRDS = [HERE.parents[2] / "fixtures" / "crds" / f"{n}.yaml" for n in ("watcher", "kyma", "istio")]


@pytest.fixture(autouse=True)
def _fail_on_leaked_tasks(no_leaked_tasks: None) -> None:
    """Every test here must leave no asyncio task behind (the repository's ``conftest.py``)."""


@pytest.fixture
async def kcp(cluster_binaries: Binaries, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A fresh KCP API server with the Watcher, Kyma and Istio CRDs and ``kcp-system``."""
    async with LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(["kcp"]) as env:
        cluster = env["kcp"]
        async with cluster.api_client() as api:
            await apply_crds(api, CRDS)
            await ensure_namespace(api, "kcp-system")
        yield cluster
