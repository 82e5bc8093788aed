"""The kind backend with a real Docker engine: clusters come up, answer through the
kubeconfig files kind wrote, and are all deleted afterwards. Skipped (with the reason)
where there is no ``kind`` CLI or no Docker engine — as on the project's CI machines."""

from __future__ import annotations

import asyncio

import pytest

from harness.clusters.kind import KindBackend, KindUnavailable, SubprocessRunner, preflight
from harness.kube import NAMESPACES, ensure_namespace, get

pytestmark = pytest.mark.e2e


def _unavailable() -> str | None:
    try:
        asyncio.run(preflight(SubprocessRunner()))
    except KindUnavailable as exc:
        return str(exc)
    return None


REASON = _unavailable()


@pytest.mark.skipif(REASON is not None, reason=f"needs kind and a Docker engine: {REASON}")
@pytest.mark.timeout(900)
async def test_kind_clusters_come_up_and_are_deleted() -> None:
    runner = SubprocessRunner()
    backend = KindBackend(run_id="e2e-kind", runner=runner)
    async with backend.start(["kcp", "skr-a"]) as env:
        assert env.backend == "kind" and sorted(env.clusters) == ["kcp", "skr-a"]
        assert sorted(backend.created) == ["wh-e2e-kind-kcp", "wh-e2e-kind-skr-a"]
        async with env["skr-a"].api_client() as api:
            await ensure_namespace(api, "kind-probe")
            assert await get(api, NAMESPACES, "kind-probe") is not None
    assert backend.created == []
    listed = await runner.run(["kind", "get", "clusters"])
    assert "wh-e2e-kind-" not in listed.output
