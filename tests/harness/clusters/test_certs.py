"""Cluster certificates work in a real TLS handshake, and the admin is system:masters."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from cryptography.x509.oid import NameOID

from harness.clusters.certs import create_ca, issue, service_account_key_pair
from harness.clusters.contexts import render_kubeconfig
from watcher import pki


def write_pair(
    ca: pki.CertificateAuthority, tmp_path: Path, name: str, **kw: object
) -> tuple[Path, Path]:
    pair = issue(ca, name, **kw)  # type: ignore[arg-type]
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    pair.write(cert, key)
    return cert, key


async def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> str:
    """Connect over TLS on loopback; return the CN of the client certificate the server saw."""
    seen: list[str] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert")
        seen.append(dict(x[0] for x in peer["subject"])["commonName"] if peer else "")
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname=host
        )
        await reader.read()
        writer.close()
        await writer.wait_closed()
    return seen[0]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_serving_and_client_certificates_in_a_real_handshake(
    tmp_path: Path, host: str
) -> None:
    serving_ca = create_ca("serving-ca")
    client_ca = create_ca("client-ca")
    (tmp_path / "serving-ca.crt").write_bytes(serving_ca.cert_pem)
    (tmp_path / "client-ca.crt").write_bytes(client_ca.cert_pem)
    s_cert, s_key = write_pair(
        serving_ca, tmp_path, "apiserver", dns_names=["localhost"], ip_addresses=["127.0.0.1"],
        server=True,
    )  # fmt: skip
    c_cert, c_key = write_pair(
        client_ca, tmp_path, "admin", organizations=["system:masters"], client=True
    )

    server_ctx = ssl.create_default_context(
        ssl.Purpose.CLIENT_AUTH, cafile=tmp_path / "client-ca.crt"
    )
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.load_cert_chain(s_cert, s_key)
    client_ctx = ssl.create_default_context(cafile=tmp_path / "serving-ca.crt")
    client_ctx.load_cert_chain(c_cert, c_key)

    assert await handshake(server_ctx, client_ctx, host) == "admin"
    admin = x509.load_pem_x509_certificate(c_cert.read_bytes())
    orgs = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == ["system:masters"]
    assert (c_key.stat().st_mode & 0o777) == 0o600


async def test_another_clusters_ca_is_not_trusted(tmp_path: Path) -> None:
    ours, theirs = create_ca("ours"), create_ca("theirs")
    cert, key = write_pair(ours, tmp_path, "apiserver", ip_addresses=["127.0.0.1"], server=True)
    (tmp_path / "theirs.crt").write_bytes(theirs.cert_pem)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=tmp_path / "theirs.crt")
    with pytest.raises(ssl.SSLCertVerificationError):
        await handshake(server_ctx, client_ctx, "127.0.0.1")


def test_service_account_key_pair_matches() -> None:
    pair = service_account_key_pair()
    public = load_pem_public_key(pair.cert_pem)
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    private = load_pem_private_key(pair.key_pem, password=None)
    assert public.public_numbers() == private.public_key().public_numbers()  # type: ignore[union-attr]


@pytest.mark.parametrize("embed", [False, True])
def test_kubeconfig_refers_to_or_embeds_the_credentials(tmp_path: Path, embed: bool) -> None:
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (tmp_path / name).write_text(f"PEM of {name}")
    doc = yaml.safe_load(
        render_kubeconfig(
            "skr-a",
            "https://127.0.0.1:6443",
            ca_file=tmp_path / "ca.crt",
            client_cert_file=tmp_path / "admin.crt",
            client_key_file=tmp_path / "admin.key",
            embed=embed,
        )
    )
    assert doc["current-context"] == "skr-a"
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    if embed:
        assert set(user) == {"client-certificate-data", "client-key-data"}
        assert "certificate-authority-data" in cluster
    else:
        assert user["client-key"] == str(tmp_path / "admin.key")
        assert cluster["certificate-authority"] == str(tmp_path / "ca.crt")
