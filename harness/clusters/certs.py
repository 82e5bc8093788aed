"""Certificates a local kube-apiserver needs, issued with :mod:`watcher.pki`.

Each cluster gets its own serving CA (the API server's certificate, IP SAN 127.0.0.1 and
DNS ``localhost``), its own client CA (the admin user is a client certificate with
``O=system:masters``), and a service-account signing key pair. Nothing is shared across
clusters, so a credential of one cluster is refused by another — which is what a
multi-cluster test must be able to rely on.

Keys are ECDSA P-256 (microseconds to generate where RSA takes tens of milliseconds), and
validity starts an hour in the past so a skewed clock never makes a fresh cluster's
certificates "not yet valid".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from watcher import pki

VALIDITY = dt.timedelta(days=7)
CLOCK_SKEW = dt.timedelta(hours=1)


def _start() -> dt.datetime:
    return dt.datetime.now(dt.UTC) - CLOCK_SKEW


@dataclass(frozen=True)
class CertKey:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, cert_path: Path, key_path: Path) -> None:
        """Write both files; the key is readable by the owner only."""
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.key_pem)


def create_ca(common_name: str) -> pki.CertificateAuthority:
    """A self-signed CA that issues this cluster's leaf certificates."""
    return pki.create_ca(
        common_name, validity=VALIDITY + CLOCK_SKEW, not_before=_start(), key_type="ec"
    )


def issue(
    ca: pki.CertificateAuthority,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    server: bool = False,
    client: bool = False,
) -> CertKey:
    """A leaf certificate signed by ``ca``, for TLS server and/or client use."""
    issued = pki.issue(
        ca,
        common_name,
        organizations=organizations,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        server_auth=server,
        client_auth=client,
        validity=VALIDITY + CLOCK_SKEW,
        not_before=_start(),
        key_type="ec",
    )
    return CertKey(issued.cert_pem, issued.key_pem)


def service_account_key_pair() -> CertKey:
    """An ECDSA key pair for signing service-account tokens.

    ``cert_pem`` holds the *public key* (what ``--service-account-key-file`` reads), not a
    certificate; ``key_pem`` the private key (``--service-account-signing-key-file``).
    """
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return CertKey(public, private)
