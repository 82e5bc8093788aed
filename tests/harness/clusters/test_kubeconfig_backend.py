"""The kubeconfig backend's refusals, before it touches any cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.contexts import ContextAccess, merged_kubeconfig
from harness.clusters.kubeconfig_backend import KubeconfigBackend, cluster_from_access
from harness.clusters.selection import ClusterTarget
from harness.errors import ClusterError


async def test_an_unknown_cluster_or_context_is_named(tmp_path: Path) -> None:
    file = tmp_path / "k"
    file.write_text(
        merged_kubeconfig({"kcp": ContextAccess("kcp", "https://127.0.0.1:1", token="t")})
    )
    backend = KubeconfigBackend({"kcp": ClusterTarget((file,), "kcp")})
    with pytest.raises(ClusterError, match=r"no context for cluster 'skr-a'; have \['kcp'\]"):
        async with backend.start(["kcp", "skr-a"]):
            raise AssertionError("must not start")
    other = KubeconfigBackend(lambda name: ClusterTarget((file,), f"dev-{name}"))
    with pytest.raises(
        ClusterError, match=r"no kubeconfig context 'dev-kcp' in .*\(contexts: kcp\)"
    ):
        async with other.start(["kcp"]):
            raise AssertionError("must not start")


async def test_an_api_server_that_does_not_answer_is_reported(tmp_path: Path) -> None:
    file = tmp_path / "k"
    file.write_text(
        merged_kubeconfig({"kcp": ContextAccess("kcp", "https://127.0.0.1:1", token="t")})
    )
    backend = KubeconfigBackend({"kcp": ClusterTarget((file,), "kcp")}, reach_timeout=5)
    with pytest.raises(ClusterError, match=r"cluster kcp \(https://127.0.0.1:1\) does not answer"):
        async with backend.start(["kcp"]):
            raise AssertionError("must not start")
    assert backend.ownerships == {}  # nothing noted, nothing to delete


def test_certificates_become_files_and_tokens_stay_in_the_kubeconfig(tmp_path: Path) -> None:
    with_cert = cluster_from_access(
        "kcp",
        ContextAccess("x", "https://a:1", ca_pem=b"CA", client_cert_pem=b"C", client_key_pem=b"K"),
        tmp_path / "kcp",
    )
    assert with_cert.ca_file is not None and with_cert.ca_file.read_bytes() == b"CA"
    assert (
        with_cert.client_key_file is not None
        and with_cert.client_key_file.stat().st_mode & 0o077 == 0
    )
    assert str(with_cert.client_cert_file) in with_cert.kubeconfig.read_text()
    token = cluster_from_access(
        "skr-a", ContextAccess("y", "https://b:2", token="tok"), tmp_path / "a"
    )
    assert token.ca_file is None and token.client_cert_file is None
    assert "token: tok" in token.kubeconfig.read_text()
    assert token.control is None and token.process is None
