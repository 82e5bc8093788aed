"""The harness's JMESPath certificate functions (``x509``, ``x509_bundle``): what they
describe, every encoding they read, errors as mismatches, the docs' client-certificate
example, and round trips of generated certificates."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from functions_kit import CA, LEAF, NOW, b64
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.matching.functions import FunctionError, search
from harness.matching.mismatches import MISSING, select_mismatch_summary
from harness.matching.objects import match_object
from harness.matching.syntax import check_expressions
from watcher import pki


def der(issued: pki.Issued) -> bytes:
    return issued.certificate.public_bytes(serialization.Encoding.DER)


def secret(issued: pki.Issued, ca_bundle: bytes) -> dict[str, Any]:
    """A kubernetes.io/tls Secret as the API server returns it: ``data`` in base64."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kyma-skr-a-webhook-tls", "namespace": "istio-system"},
        "type": "kubernetes.io/tls",
        "data": {k: b64(v) for k, v in pki.secret_data(issued, ca_bundle).items()},
    }


# --- x509 ------------------------------------------------------------------------------------


def test_x509_describes_a_certificate() -> None:
    assert search("x509(@)", LEAF.cert_pem.decode()) == {
        "subject": {"O": "kyma", "CN": "runtime-skr-a", "text": "CN=runtime-skr-a,O=kyma"},
        "issuer": {"CN": "kcp-ca-1", "text": "CN=kcp-ca-1"},
        "dnsNames": [
            "skr-a.kyma.example.com",
            "skr-webhook.kyma-system.svc.cluster.local",
            "skr-webhook.kyma-system.svc",
        ],
        "ipAddresses": ["127.0.0.1", "::1"],
        "uris": ["spiffe://kyma/runtime-skr-a"],
        "serial": format(LEAF.certificate.serial_number, "x"),
        "notBefore": "2026-11-27T20:00:00Z",
        "notAfter": "2027-01-26T20:00:00Z",
        "isCA": False,
        "sha256": LEAF.certificate.fingerprint(hashes.SHA256()).hex(),
    }


@pytest.mark.parametrize(
    "text",
    [
        LEAF.cert_pem.decode(),
        b64(LEAF.cert_pem),
        b64(der(LEAF)),
        "\n" + b64(der(LEAF))[:40] + "\n " + b64(der(LEAF))[40:] + "\n",
        (LEAF.cert_pem + CA.cert_pem).decode(),
        b64(LEAF.key_pem + LEAF.cert_pem),
    ],
    ids=["pem", "base64-pem", "base64-der", "wrapped-base64", "first-of-bundle", "after-key"],
)
def test_x509_reads_every_encoding(text: str) -> None:
    assert search("x509(@).[subject.CN, issuer.CN]", text) == ["runtime-skr-a", "kcp-ca-1"]


def test_x509_of_a_ca_and_of_repeated_attributes() -> None:
    ca = search("x509(@)", CA.cert_pem.decode())
    assert ca["isCA"] is True
    assert (ca["dnsNames"], ca["ipAddresses"], ca["uris"]) == ([], [], [])
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kyma"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "watcher"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "ops@example.com"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(CA.certificate.subject)
        .public_key(LEAF.key.public_key())
        .serial_number(255)
        .not_valid_before(NOW)
        .not_valid_after(NOW + dt.timedelta(hours=1))
        .sign(CA.key, hashes.SHA256())
    )
    described = search("x509(@)", cert.public_bytes(serialization.Encoding.PEM).decode())
    assert described["subject"] == {
        "C": "DE",
        "O": ["system:masters", "kyma"],
        "OU": "watcher",
        "emailAddress": "ops@example.com",
        "CN": "admin",
        "text": name.rfc4514_string(),
    }
    assert (described["serial"], described["isCA"], described["dnsNames"]) == ("ff", False, [])


def test_x509_bundle_lists_every_certificate() -> None:
    old = pki.create_ca("kcp-ca-0", key_type="ec", now=NOW - dt.timedelta(days=200))
    bundle = CA.cert_pem + old.cert_pem
    for text in (bundle.decode(), b64(bundle)):
        assert search("x509_bundle(@)[].subject.CN", text) == ["kcp-ca-1", "kcp-ca-0"]
    assert search("x509_bundle(@)[].isCA", b64(der(LEAF))) == [False]
    assert search("x509_bundle(@)[0]", bundle.decode()) == search("x509(@)", bundle.decode())


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "not a certificate (empty string)"),
        ("not a certificate!", "not a certificate (18 characters): neither PEM nor base64"),
        (b64(b"garbage"), "base64 of neither PEM nor DER: "),
        (LEAF.key_pem.decode(), "PEM without a CERTIFICATE block (only PRIVATE KEY)"),
        (b64(LEAF.key_pem), "PEM without a CERTIFICATE block (only PRIVATE KEY)"),
        ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", "unreadable PEM"),
        ("-----BEGIN CERT", "(no complete block)"),
    ],
)
def test_what_is_not_a_certificate_is_an_error_saying_why(text: str, complaint: str) -> None:
    for function in ("x509", "x509_bundle"):
        with pytest.raises(FunctionError) as raised:
            search(f"{function}(@)", text)
        assert str(raised.value).startswith(f"{function}(): ")
        assert complaint in str(raised.value)
        assert "PRIVATE KEY-----" not in str(raised.value)  # the input is never echoed
        assert isinstance(raised.value, ValueError)


def test_a_broken_certificate_is_a_mismatch_not_an_exception() -> None:
    actual = {"data": {"tls.crt": b64(b"garbage"), "ca.crt": b64(LEAF.key_pem)}}
    match = match_object(
        {
            "data": {
                '(x509("tls.crt").subject.CN)': "runtime-skr-a",
                '(x509_bundle("ca.crt"))': [],
                '(x509("absent"))': {},
            }
        },
        actual,
    )
    assert [(m.path, m.actual) for m in match.mismatches] == [
        ('data.(x509("tls.crt").subject.CN)', MISSING),
        ('data.(x509_bundle("ca.crt"))', MISSING),
        ('data.(x509("absent"))', MISSING),
    ]
    reasons = [m.reason for m in match.mismatches]
    assert reasons[0].startswith("expression failed: x509(): not a certificate (")
    assert "PEM without a CERTIFICATE block" in reasons[1]
    assert reasons[2].startswith("expression failed: In function x509(), invalid type")
    assert "expression failed: x509(): not a certificate" in select_mismatch_summary(match)


# --- the Kyma client certificate Secret, as docs/scenarios.md checks it ----------------------

DOCS = Path(__file__).resolve().parents[3] / "docs" / "scenarios.md"


def docs_match() -> Any:
    """The ``match`` of the example under "Alternatives and functions", for skr-a."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### Alternatives and functions") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("\n```\n")]
    [step] = yaml.safe_load(block.replace("${{ clusters.skr-a.runtimeId }}", "runtime-skr-a"))
    return step["assert"]["match"]


def test_the_client_certificate_secret(frozen: float) -> None:
    expected = docs_match()
    assert check_expressions(expected) == []
    assert match_object(expected, secret(LEAF, CA.cert_pem)).ok
    assert match_object(
        {"data": {'(length(base64_decode("tls.key")) > `0`)': True}}, secret(LEAF, b"")
    ).ok


def test_an_expired_foreign_client_certificate(frozen: float) -> None:
    foreign = pki.create_ca("foreign-ca", key_type="ec", now=NOW - dt.timedelta(days=400))
    expired = pki.issue(
        foreign,
        "runtime-skr-b",
        dns_names=["skr-b.kyma.example.com"],
        not_before=NOW - dt.timedelta(days=61),
        key_type="ec",
    )
    match = match_object(docs_match(), secret(expired, CA.cert_pem))
    assert [(m.path, m.actual) for m in match.mismatches] == [
        ('data.(x509("tls.crt")).subject.CN', "runtime-skr-b"),
        ('data.(x509("tls.crt")).issuer.CN', "foreign-ca"),
        ('data.(x509("tls.crt")).dnsNames', ["skr-b.kyma.example.com"]),
        ('data.(seconds_until(x509("tls.crt").notAfter) > `0`)', False),
    ]


# --- properties ------------------------------------------------------------------------------

LABEL = r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?"
DNS_NAMES = st.lists(st.from_regex(rf"{LABEL}(\.{LABEL}){{0,3}}", fullmatch=True), unique=True)
COMMON_NAMES = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=64
).filter(lambda name: len(name.encode()) <= 64)  # X.509 caps a CN at 64 bytes
IPS = st.lists(st.ip_addresses(), max_size=3, unique=True)
STARTS = st.datetimes(
    min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2060, 1, 1), timezones=st.just(dt.UTC)
).map(lambda moment: moment.replace(microsecond=0))


@settings(max_examples=40, deadline=None)
@given(COMMON_NAMES, DNS_NAMES, IPS, STARTS, st.integers(1, 10 * 365 * 86400), st.booleans())
def test_x509_round_trips(
    common_name: str,
    dns_names: list[str],
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address],
    start: dt.datetime,
    validity: int,
    as_der: bool,
) -> None:
    issued = pki.issue(
        CA,
        common_name,
        dns_names=dns_names,
        ip_addresses=ips,
        not_before=start,
        validity=dt.timedelta(seconds=validity),
        key_type="ec",
    )
    text = b64(der(issued)) if as_der else issued.cert_pem.decode()
    described = search("x509(@)", text)
    assert described["subject"]["CN"] == common_name
    assert described["issuer"]["CN"] == "kcp-ca-1"
    assert described["dnsNames"] == dns_names
    assert described["ipAddresses"] == [str(ip) for ip in ips]
    assert search("to_epoch(notBefore)", described) == start.timestamp()
    assert search("to_epoch(notAfter)", described) == start.timestamp() + validity
    assert int(described["serial"], 16) == issued.certificate.serial_number
    assert described == search("x509_bundle(@)[0]", text)
