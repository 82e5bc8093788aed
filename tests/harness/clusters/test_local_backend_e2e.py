"""The local backend with real etcd and kube-apiservers: isolation and complete cleanup."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import client

from harness.clusters import procfs
from harness.clusters.binaries import Binaries
from harness.clusters.etcd import Etcd
from harness.clusters.plane import Cluster, ClusterBackend, LocalBackend
from harness.clusters.process import owned_process_groups, safety_net
from harness.errors import ClusterError, ProcessExitedEarly

pytestmark = pytest.mark.e2e


async def create_marker(cluster: Cluster, namespace: str) -> None:
    async with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        await core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
        )
        await core.create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"only-in-{cluster.name}"),
                data={"cluster": cluster.name},
            ),
        )


async def config_maps(cluster: Cluster, namespace: str) -> dict[str, str] | None:
    """name → data["cluster"] of the ConfigMaps in ``namespace`` (None if it does not exist)."""
    async with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        try:
            await core.read_namespace(namespace)
        except client.ApiException as e:
            assert e.status == 404
            return None
        items = (await core.list_namespaced_config_map(namespace)).items
        return {cm.metadata.name: cm.data["cluster"] for cm in items if cm.data}


async def test_clusters_are_isolated_and_leave_nothing_behind(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    backend: ClusterBackend = LocalBackend(cluster_binaries, log_dir=tmp_path / "logs")
    async with backend.start(["skr-a", "skr-b"]) as env:
        a, b = env["skr-a"], env["skr-b"]
        assert a.server != b.server and a.kubeconfig.is_file()
        await asyncio.gather(create_marker(a, "iso-a"), create_marker(b, "iso-b"))

        assert await config_maps(a, "iso-a") == {"only-in-skr-a": "skr-a"}
        assert await config_maps(b, "iso-b") == {"only-in-skr-b": "skr-b"}
        assert await config_maps(b, "iso-a") is None  # skr-a's namespace is not in skr-b
        assert await config_maps(a, "iso-b") is None

        # Credentials are per cluster too: skr-b's server certificate is not trusted with
        # skr-a's CA (and skr-a's admin certificate would not be accepted by skr-b).
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with aiohttp.ClientSession() as session:
                await session.get(f"{b.server}/readyz", ssl=a.ssl_context())

        pids = [r.pid for r in env.processes]
        assert all(pid and procfs.is_alive(pid) for pid in pids)
        assert set(env.rss_bytes()) == {r.name for r in env.processes}
        temp_dirs = env.temp_dirs
        assert all(d.is_dir() for d in temp_dirs)

    assert not any(pid and procfs.is_alive(pid) for pid in pids)
    assert not any(pid in owned_process_groups() for pid in pids)
    assert not any(d.exists() for d in temp_dirs)
    assert all(r.exit_code is not None for r in env.processes)
    assert (tmp_path / "logs" / "kube-apiserver-skr-a.log").is_file()  # kept: caller's dir


async def test_a_failing_api_server_unwinds_everything_started(
    cluster_binaries: Binaries, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_groups: list[int] = []
    created_dirs: list[Path] = []
    register = safety_net.register
    mkdtemp = tempfile.mkdtemp

    def recording_register(pgid: int, name: str) -> None:
        started_groups.append(pgid)
        register(pgid, name)

    def recording_mkdtemp(*args: object, **kwargs: object) -> str:
        path = mkdtemp(*args, **kwargs)  # type: ignore[call-overload]
        created_dirs.append(Path(path))
        return str(path)

    monkeypatch.setattr(safety_net, "register", recording_register)
    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)

    backend = LocalBackend(cluster_binaries, extra_args={"skr-b": ["--no-such-flag=1"]})
    with pytest.raises(ProcessExitedEarly) as caught:
        async with backend.start(["skr-a", "skr-b"]):
            pytest.fail("skr-b must not start")
    assert "kube-apiserver[skr-b] exited with code" in str(caught.value)
    assert "unknown flag: --no-such-flag" in str(caught.value)
    assert len(started_groups) >= 2  # etcd and skr-b at least (skr-a may have been cancelled)
    assert not any(procfs.group_members(g) for g in started_groups)
    assert not set(started_groups) & set(owned_process_groups())
    assert created_dirs and not any(d.exists() for d in created_dirs)


async def test_invalid_names_are_refused_before_anything_starts(cluster_binaries: Binaries) -> None:
    with pytest.raises(ClusterError, match="duplicate"):
        async with LocalBackend(cluster_binaries).start(["kcp", "kcp"]):
            pass
    with pytest.raises(ClusterError, match="invalid cluster names"):
        async with LocalBackend(cluster_binaries).start(["KCP/1"]):
            pass


async def test_etcd_alone_reports_health_and_removes_its_data(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    async with Etcd(cluster_binaries.etcd, log_path=tmp_path / "etcd.log") as etcd:
        assert etcd.data_dir is not None and etcd.data_dir.is_dir()
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{etcd.client_url}/health") as r,
        ):
            assert (await r.json(content_type=None))["health"] == "true"
    assert not etcd.data_dir.exists()
    assert etcd.process is not None and etcd.process.pid is not None
    assert not procfs.is_alive(etcd.process.pid)
