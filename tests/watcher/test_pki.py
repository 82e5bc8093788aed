"""KCP CA, per-runtime and server certificates, CA bundle rotation, atomic files."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import (
    ClientVerifier,
    PolicyBuilder,
    ServerVerifier,
    Store,
    VerificationError,
)

from watcher import pki
from watcher.errors import CertificateError

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
CA = pki.create_ca(now=NOW)
RUNTIME = pki.issue_runtime_certificate(
    CA,
    "runtime-a",
    "skr-a.example.com",
    extra_dns_names=["localhost"],
    extra_ip_addresses=["127.0.0.1"],
    now=NOW,
)


def _sans(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value


def _server_verifier(ca_pem: bytes, at: dt.datetime, name: str) -> ServerVerifier:
    store = Store(pki.load_certificates(ca_pem))
    subject: x509.DNSName | x509.IPAddress
    try:
        subject = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = x509.DNSName(name)
    return PolicyBuilder().store(store).time(at).build_server_verifier(subject)


def _client_verifier(ca_pem: bytes, at: dt.datetime) -> ClientVerifier:
    return (
        PolicyBuilder().store(Store(pki.load_certificates(ca_pem))).time(at).build_client_verifier()
    )


def test_ca_defaults() -> None:
    cert = CA.certificate
    assert CA.common_name == "klm-watcher-selfsigned-ca"
    assert cert.subject == cert.issuer
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc == NOW + pki.CA_VALIDITY
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert isinstance(CA.key, rsa.RSAPrivateKey) and CA.key.key_size == 2048


def test_runtime_certificate_as_cert_manager_issues_it() -> None:
    cert = RUNTIME.certificate
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "runtime-a"
    sans = _sans(cert)
    assert sans.get_values_for_type(x509.DNSName) == [
        "skr-a.example.com",
        "skr-webhook.kyma-system.svc.cluster.local",
        "skr-webhook.kyma-system.svc",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.not_valid_before_utc == NOW
    assert cert.not_valid_after_utc == NOW + dt.timedelta(days=60)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert isinstance(RUNTIME.key, rsa.RSAPrivateKey) and RUNTIME.key.key_size == 2048
    assert cert.issuer == CA.certificate.subject


def test_runtime_certificate_verifies_as_server_and_client() -> None:
    at = NOW + DAY
    for name in ("skr-a.example.com", "skr-webhook.kyma-system.svc", "127.0.0.1"):
        chain = _server_verifier(CA.cert_pem, at, name).verify(RUNTIME.certificate, [])
        assert chain[-1] == CA.certificate
    verified = _client_verifier(CA.cert_pem, at).verify(RUNTIME.certificate, [])
    assert verified.chain[-1] == CA.certificate


def test_foreign_ca_expired_and_not_yet_valid_certificates_fail_verification() -> None:
    foreign = pki.create_ca("someone-else", now=NOW, key_type="ec")
    cases = {
        "foreign": pki.issue_runtime_certificate(foreign, "runtime-x", "x.example", now=NOW),
        "expired": pki.issue_runtime_certificate(
            CA, "runtime-x", "x.example", not_before=NOW - 3 * DAY, validity=DAY
        ),
        "future": pki.issue_runtime_certificate(
            CA, "runtime-x", "x.example", not_before=NOW + 3 * DAY
        ),
    }
    for issued in cases.values():
        with pytest.raises(VerificationError):
            _client_verifier(CA.cert_pem, NOW + DAY).verify(issued.certificate, [])


def test_server_certificate_ec_and_usages() -> None:
    server = pki.issue_server_certificate(CA, "kcp-gateway", now=NOW, key_type="ec")
    assert isinstance(server.key, ec.EllipticCurvePrivateKey)
    eku = server.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    _server_verifier(CA.cert_pem, NOW, "localhost").verify(server.certificate, [])
    with pytest.raises(VerificationError):  # no clientAuth
        _client_verifier(CA.cert_pem, NOW).verify(server.certificate, [])
    both = pki.issue_server_certificate(CA, "listener", client_auth=True, now=NOW, key_type="ec")
    _client_verifier(CA.cert_pem, NOW).verify(both.certificate, [])


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="runtime_id"):
        pki.issue_runtime_certificate(CA, "", "d", now=NOW)
    with pytest.raises(ValueError, match="skr_domain"):
        pki.issue_runtime_certificate(CA, "r", "", now=NOW)
    with pytest.raises(ValueError, match="timezone"):
        pki.create_ca(now=dt.datetime(2026, 1, 1), key_type="ec")
    with pytest.raises(ValueError, match="positive"):
        pki.create_ca(now=NOW, validity=dt.timedelta(0), key_type="ec")


def test_rotation_prepends_and_keeps_old_ca_until_it_expires() -> None:
    old = pki.create_ca(now=NOW, validity=10 * DAY, key_type="ec")
    new = pki.create_ca(now=NOW + 5 * DAY, validity=100 * DAY, key_type="ec")
    old_leaf = pki.issue(
        old, "runtime-old", dns_names=["o.example"], now=NOW, validity=9 * DAY, key_type="ec"
    )
    bundle = pki.rotate_ca_bundle(old.cert_pem, new.cert_pem, now=NOW + 5 * DAY)
    assert pki.load_certificates(bundle) == [new.certificate, old.certificate]
    assert pki.rotate_ca_bundle(bundle, new.cert_pem, now=NOW + 5 * DAY) == bundle  # idempotent
    # certificates of the old CA still verify against the rotated bundle
    _client_verifier(bundle, NOW + 6 * DAY).verify(old_leaf.certificate, [])
    # after the old CA expired it is dropped
    later = NOW + 11 * DAY
    assert pki.load_certificates(pki.drop_expired(bundle, now=later)) == [new.certificate]
    assert pki.load_certificates(pki.rotate_ca_bundle(bundle, new.cert_pem, now=later)) == [
        new.certificate
    ]
    assert pki.drop_expired(b"", now=later) == b""


def test_bad_bundles_raise_certificate_error() -> None:
    with pytest.raises(CertificateError):
        pki.load_certificates(b"garbage")
    with pytest.raises(CertificateError):
        pki.rotate_ca_bundle(CA.cert_pem, b"", now=NOW)


def test_secret_layout_and_atomic_files(tmp_path: Path) -> None:
    data = pki.secret_data(RUNTIME, CA.cert_pem)
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    assert data["tls.crt"].startswith(b"-----BEGIN CERTIFICATE-----")
    assert data["tls.key"].startswith(b"-----BEGIN PRIVATE KEY-----")
    paths = pki.write_secret_files(tmp_path, data)
    assert list(paths) == ["tls.key", "tls.crt", "ca.crt"]
    for name, path in paths.items():
        assert path.read_bytes() == data[name]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    inode = os.stat(paths["ca.crt"]).st_ino
    pki.write_atomic(paths["ca.crt"], b"new", mode=0o644)
    assert paths["ca.crt"].read_bytes() == b"new"
    assert os.stat(paths["ca.crt"]).st_ino != inode  # replaced by rename, not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_write_atomic_leaves_no_temp_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "dir-as-target"
    target.mkdir()
    (target / "occupant").write_text("x")
    with pytest.raises(OSError):
        pki.write_atomic(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-as-target"]


def test_organizations_become_subject_o_attributes() -> None:
    from cryptography.x509.oid import NameOID

    ca = pki.create_ca(key_type="ec")
    admin = pki.issue(
        ca, "admin", organizations=["system:masters"], server_auth=False, key_type="ec"
    )
    subject = admin.certificate.subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    assert admin.common_name == "admin"
