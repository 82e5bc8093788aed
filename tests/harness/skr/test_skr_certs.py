"""harness.skr.certs: the runtime certificate and its deliberate breakages."""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from harness.skr.certs import CertificateOverride, issue_webhook_certificate, serving_ca_bundle
from watcher import pki

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    return pki.create_ca(now=NOW - dt.timedelta(days=1))


def sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = ext.get_values_for_type(x509.DNSName)
    ips = [str(a) for a in ext.get_values_for_type(x509.IPAddress)]
    return dns, ips


def signed_by(cert: x509.Certificate, ca: pki.CertificateAuthority) -> bool:
    try:
        cert.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def test_default_certificate_serves_locally_and_identifies_the_runtime(
    ca: pki.CertificateAuthority,
) -> None:
    leaf = issue_webhook_certificate(ca, "rt-1", "skr-1.example.com", now=NOW)
    dns, ips = sans(leaf.certificate)
    assert leaf.common_name == "rt-1"
    assert dns == [
        "skr-1.example.com",
        "skr-webhook.kyma-system.svc.cluster.local",
        "skr-webhook.kyma-system.svc",
        "localhost",
    ]
    assert ips == ["127.0.0.1"]
    assert ipaddress.ip_address(ips[0]).is_loopback
    usages = leaf.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert leaf.certificate.not_valid_before_utc <= NOW < leaf.certificate.not_valid_after_utc
    assert signed_by(leaf.certificate, ca)
    assert CertificateOverride().is_default


def test_wrong_san_keeps_identity_but_changes_the_domain(ca: pki.CertificateAuthority) -> None:
    override = CertificateOverride.wrong_san("other.example.com")
    leaf = issue_webhook_certificate(ca, "rt-1", "skr-1.example.com", override, now=NOW)
    dns, ips = sans(leaf.certificate)
    assert leaf.common_name == "rt-1"
    assert "other.example.com" in dns and "skr-1.example.com" not in dns
    assert ips == ["127.0.0.1"] and signed_by(leaf.certificate, ca)
    assert not override.is_default


def test_expired_and_not_yet_valid(ca: pki.CertificateAuthority) -> None:
    expired = issue_webhook_certificate(
        ca, "rt", "d.example.com", CertificateOverride.expired(now=NOW), now=NOW
    )
    assert expired.certificate.not_valid_after_utc < NOW
    future = issue_webhook_certificate(
        ca, "rt", "d.example.com", CertificateOverride.not_yet_valid(now=NOW), now=NOW
    )
    assert future.certificate.not_valid_before_utc > NOW
    assert signed_by(expired.certificate, ca) and signed_by(future.certificate, ca)


def test_foreign_ca_signs_and_becomes_the_serving_bundle(ca: pki.CertificateAuthority) -> None:
    foreign = pki.create_ca("foreign-ca", now=NOW - dt.timedelta(days=1))
    override = CertificateOverride.foreign_ca(foreign)
    leaf = issue_webhook_certificate(ca, "rt", "d.example.com", override, now=NOW)
    assert signed_by(leaf.certificate, foreign) and not signed_by(leaf.certificate, ca)
    assert leaf.common_name == "rt"
    # The API server must still reach the webhook; the KCP must be the one to refuse it.
    assert serving_ca_bundle(ca.cert_pem, override) == foreign.cert_pem
    assert serving_ca_bundle(ca.cert_pem) == ca.cert_pem
