"""Kubeconfig contexts: reading one out of a user's files, writing them back embedded."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from harness.clusters.contexts import (
    ContextAccess,
    KubeconfigError,
    find_context,
    merged_kubeconfig,
    select_context,
    single_context_kubeconfig,
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(**users: Mapping[str, object]) -> str:
    """Two clusters; contexts ``dev`` (current) and ``prod``."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "dev",
            "clusters": [
                {"name": "c-dev", "cluster": {"server": "https://dev:6443",
                                              "certificate-authority": "ca.pem"}},
                {"name": "c-prod", "cluster": {"server": "https://prod:6443",
                                               "certificate-authority-data": _b64(b"PROD CA")}},
            ],
            "users": [{"name": n, "user": u} for n, u in users.items()],
            "contexts": [
                {"name": "dev", "context": {"cluster": "c-dev", "user": "u-dev"}},
                {"name": "prod", "context": {"cluster": "c-prod", "user": "u-prod"}},
            ],
        }
    )  # fmt: skip


def test_relative_certificate_files_are_read_from_the_kubeconfigs_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "ca.pem").write_bytes(b"DEV CA")
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "u.crt").write_bytes(b"DEV CERT")
    (tmp_path / "certs" / "u.key").write_bytes(b"DEV KEY")
    user = {"client-certificate": "certs/u.crt", "client-key": "certs/u.key"}
    text = kubeconfig(**{"u-dev": user})
    access = select_context(text, path="k", base=tmp_path)  # current context: dev
    assert access == ContextAccess(
        context="dev",
        server="https://dev:6443",
        ca_pem=b"DEV CA",
        client_cert_pem=b"DEV CERT",
        client_key_pem=b"DEV KEY",
    )
    assert access.uses_client_certificate


def test_a_token_user_and_embedded_ca() -> None:
    access = select_context(kubeconfig(**{"u-prod": {"token": "s3cret"}}), "prod")
    assert (access.server, access.ca_pem, access.token) == (
        "https://prod:6443",
        b"PROD CA",
        "s3cret",
    )
    assert not access.uses_client_certificate
    assert "s3cret" not in repr(access)  # tokens stay out of logs


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        ({"exec": {"command": "gke-gcloud-auth-plugin"}}, "prod", "uses an exec plugin"),
        ({}, "prod", "has no client certificate and no token"),
        ({"token": "t"}, "staging", r"no context named 'staging' \(have: \['dev', 'prod'\]\)"),
        ({"client-certificate-data": _b64(b"C")}, "prod", "client certificate without key"),
    ],
)
def test_unusable_contexts_are_refused_with_the_reason(
    user: dict[str, object], context: str, message: str
) -> None:
    with pytest.raises(KubeconfigError, match=message):
        select_context(kubeconfig(**{"u-prod": user}), context, path="/home/me/.kube/config")


def test_a_missing_certificate_file_names_the_file(tmp_path: Path) -> None:
    text = kubeconfig(**{"u-dev": {"token": "t"}})
    with pytest.raises(KubeconfigError, match=r"certificate-authority .*ca\.pem: No such file"):
        select_context(text, "dev", base=tmp_path)


def test_merged_and_single_context_files_round_trip() -> None:
    a = ContextAccess("x", "https://a:1", ca_pem=b"CA", client_cert_pem=b"C", client_key_pem=b"K")
    b = ContextAccess("y", "https://b:2", token="tok", insecure=True, tls_server_name="b.local")
    text = merged_kubeconfig({"kcp": a, "skr-a": b})
    assert yaml.safe_load(text)["current-context"] == "kcp"
    assert select_context(text, "kcp") == ContextAccess(
        "kcp", "https://a:1", ca_pem=b"CA", client_cert_pem=b"C", client_key_pem=b"K"
    )
    assert select_context(text, "skr-a") == ContextAccess(
        "skr-a", "https://b:2", token="tok", insecure=True, tls_server_name="b.local"
    )
    single = single_context_kubeconfig("only", b)
    assert select_context(single).context == "only"  # its current context


def test_find_context_takes_the_first_file_that_has_it(tmp_path: Path) -> None:
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.write_text(merged_kubeconfig({"kcp": ContextAccess("kcp", "https://1:1", token="a")}))
    second.write_text(
        merged_kubeconfig(
            {
                "kcp": ContextAccess("kcp", "https://2:2", token="b"),
                "skr-a": ContextAccess("skr-a", "https://3:3", token="c"),
            }
        )
    )
    paths = (tmp_path / "missing", first, second)
    assert find_context(paths, "kcp").server == "https://1:1"
    assert find_context(paths, "skr-a").server == "https://3:3"
    with pytest.raises(KubeconfigError) as info:
        find_context(paths, "skr-b")
    assert "missing (No such file or directory)" in str(info.value)
    assert "second (contexts: kcp, skr-a)" in str(info.value)
