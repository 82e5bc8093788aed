"""XFCC parsing is quote-aware and strict; format_xfcc → parse gives the certificate back."""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_testing import make_cert, pem_of

from watcher.errors import WatcherError
from watcher.listener.certs import runtime_id, subject_alt_names
from watcher.listener.errors import ClientCertificateError, XfccError
from watcher.listener.xfcc import (
    certificate_from_xfcc,
    first_cert_value,
    format_xfcc,
    parse_xfcc,
    query_unescape,
)

ENVOY_LIKE = (
    'Hash=abc;Cert="-----BEGIN%20CERTIFICATE-----%0AMII";'
    'Subject="CN=runtime-a,OU=a\\,b;c=d,O=\\"quoted\\"";URI=;DNS=skr-a.example.com'
)


def test_parses_envoy_shape_with_quoted_commas_and_semicolons() -> None:
    assert parse_xfcc(ENVOY_LIKE) == [
        [
            ("Hash", "abc"),
            ("Cert", "-----BEGIN%20CERTIFICATE-----%0AMII"),
            ("Subject", 'CN=runtime-a,OU=a\\,b;c=d,O="quoted"'),
            ("URI", ""),
            ("DNS", "skr-a.example.com"),
        ]
    ]


def test_splits_elements_on_unquoted_commas_only() -> None:
    header = 'By=spiffe://a;Subject="x,y";DNS=a, By=spiffe://b;DNS=b,,'
    assert parse_xfcc(header) == [
        [("By", "spiffe://a"), ("Subject", "x,y"), ("DNS", "a")],
        [("By", "spiffe://b"), ("DNS", "b")],
    ]


def test_backslash_pairs_other_than_quote_are_kept_and_do_not_end_a_value() -> None:
    assert parse_xfcc('Subject="CN=a\\\\";DNS=x') == [[("Subject", "CN=a\\\\"), ("DNS", "x")]]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Hash", "has no '='"),
        ("Hash=1;Cert", "'Cert' at offset 7 has no '='"),
        ("=x", "empty key"),
        ('Cert="abc', "unterminated quoted value"),
        ('Cert="abc\\"', "unterminated quoted value"),
        ('Cert="a"b;DNS=x', "unexpected text after its closing quote"),
    ],
)
def test_malformed_headers_are_rejected_with_a_message(header: str, message: str) -> None:
    with pytest.raises(XfccError, match=message):
        parse_xfcc(header)


def test_xfcc_error_belongs_to_the_error_tree() -> None:
    assert issubclass(XfccError, ClientCertificateError)
    assert issubclass(XfccError, WatcherError)
    assert issubclass(XfccError, ValueError)


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [("a+b", "a b"), ("%2B%2b", "++"), ("%0A", "\n"), ("%C3%BC", "ü"), ("", "")],
)
def test_query_unescape_like_go(encoded: str, decoded: str) -> None:
    assert query_unescape(encoded) == decoded


@pytest.mark.parametrize("bad", ["%", "%2", "%zz", "abc%g0", "%FF"])
def test_query_unescape_rejects_bad_escapes(bad: str) -> None:
    with pytest.raises(XfccError):
        query_unescape(bad)


def test_first_cert_value_uses_first_element_and_any_key_case() -> None:
    assert first_cert_value('cert="one";DNS=a,Cert="two"') == "one"
    with pytest.raises(XfccError, match=r"no Cert= \(keys present: DNS\)"):
        first_cert_value("DNS=a,Cert=two")
    with pytest.raises(XfccError, match="empty"):
        first_cert_value("Cert=;DNS=a")


def test_certificate_from_xfcc_accepts_envoy_output() -> None:
    cert = make_cert("runtime-a", dns=["skr-a.example.com"])
    assert certificate_from_xfcc(format_xfcc(cert)) == cert


def test_certificate_from_xfcc_accepts_unquoted_and_plus_free_encodings() -> None:
    cert = make_cert("runtime-a")
    # Go's QueryUnescape turns '+' into a space, so '+' must travel as %2B.
    encoded = urllib.parse.quote(pem_of(cert), safe="")
    assert "%2B" in encoded or "+" not in pem_of(cert)
    assert certificate_from_xfcc(f"Cert={encoded}") == cert
    # Quotes that survive URL decoding are stripped, as upstream does.
    assert certificate_from_xfcc(f"Cert=%22{encoded}%22") == cert


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "header is missing"),
        ("", "header is empty"),
        ("Hash=1;DNS=x", "no Cert="),
        ('Cert="-----BEGIN%20CERTIFICATE-----%zz"', "invalid URL escape '%zz'"),
        ('Cert="hello"', "not PEM"),
        (
            'Cert="-----BEGIN%20CERTIFICATE-----%0Agarbage%0A-----END%20CERTIFICATE-----"',
            "not a valid X.509 certificate",
        ),
    ],
)
def test_certificate_from_xfcc_failures(header: str | None, message: str) -> None:
    with pytest.raises(XfccError, match=message):
        certificate_from_xfcc(header)


def test_a_header_is_parsed_once_and_a_bad_one_fails_every_time() -> None:
    """The per-header cache: the same text gives the same certificate object (no second
    parse); failures are not remembered, and the size limit is checked before the cache."""
    header = format_xfcc(make_cert("runtime-cached", dns=["cached.example.com"]))
    first = certificate_from_xfcc(header)
    assert certificate_from_xfcc(header) is first
    assert subject_alt_names(first) is subject_alt_names(certificate_from_xfcc(header))
    for _ in range(2):
        with pytest.raises(XfccError, match="not PEM"):
            certificate_from_xfcc('Cert="hello"')
    with pytest.raises(XfccError, match="limit is"):
        certificate_from_xfcc(header, max_bytes=len(header) - 1)


def test_certificate_from_xfcc_enforces_the_size_limit() -> None:
    header = format_xfcc(make_cert("runtime-a"))
    assert certificate_from_xfcc(header, max_bytes=len(header))
    with pytest.raises(XfccError, match=f"{len(header)} bytes, limit is {len(header) - 1}"):
        certificate_from_xfcc(header, max_bytes=len(header) - 1)


def test_format_xfcc_matches_envoy_shape() -> None:
    cert = make_cert("runtime-a", dns=["skr-a.example.com", "skr-webhook.kyma-system.svc"])
    der = cert.public_bytes(serialization.Encoding.DER)
    pairs = parse_xfcc(format_xfcc(cert, by="spiffe://kcp/gateway"))[0]
    assert [k for k, _ in pairs] == ["By", "Hash", "Cert", "Subject", "URI", "DNS", "DNS"]
    assert dict(pairs[:2]) == {
        "By": "spiffe://kcp/gateway",
        "Hash": hashlib.sha256(der).hexdigest(),
    }
    assert pairs[3:] == [
        ("Subject", "CN=runtime-a"),
        ("URI", ""),
        ("DNS", "skr-a.example.com"),
        ("DNS", "skr-webhook.kyma-system.svc"),
    ]
    text = format_xfcc(cert)
    assert text.startswith("Hash=") and ';Cert="-----BEGIN%20CERTIFICATE-----%0A' in text


# --------------------------------------------------------------------------------------
# Property: what a gateway formats, the listener reads back exactly.

_tricky_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(",;=\"\\+<>#= '%")),
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=64,
).filter(lambda s: len(s.encode("utf-8")) <= 64)  # X.509 bounds CN/OU at 64 (UTF-8 bytes)
_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_dns = st.lists(_label, min_size=1, max_size=4).map(".".join)
_uri = st.builds("spiffe://cluster.local/ns/{}/sa/{}".format, _label, _label)
_ip = st.ip_addresses().map(str)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    common_name=_tricky_text,
    unit=st.none() | _tricky_text,
    dns=st.lists(_dns, max_size=4),
    uris=st.lists(_uri, max_size=3),
    ips=st.lists(_ip, max_size=3),
)
def test_format_then_parse_gives_back_certificate_cn_and_sans(
    common_name: str, unit: str | None, dns: list[str], uris: list[str], ips: list[str]
) -> None:
    extra = [(NameOID.ORGANIZATIONAL_UNIT_NAME, unit)] if unit is not None else []
    cert = make_cert(common_name, extra_names=extra, dns=dns, uris=uris, ips=ips)
    header = format_xfcc(cert)

    parsed = certificate_from_xfcc(header)
    assert parsed == cert
    assert runtime_id(parsed) == common_name
    sans = subject_alt_names(parsed)
    assert (list(sans.dns), list(sans.uris), list(sans.ips)) == (dns, uris, ips)

    pairs = parse_xfcc(header)
    assert len(pairs) == 1
    fields = pairs[0]
    # Envoy embeds the RFC 4514 subject as is; only its escaped quotes are unescaped.
    assert dict(fields)["Subject"] == cert.subject.rfc4514_string().replace('\\"', '"')
    assert [v for k, v in fields if k == "DNS"] == dns
    assert [v for k, v in fields if k == "URI"] == (uris or [""])


def test_property_covers_the_certificate_helpers(
    cert_factory: Callable[..., x509.Certificate],
) -> None:
    cert = cert_factory('a,b;c="d"=e', dns=["x.example"])
    assert runtime_id(certificate_from_xfcc(format_xfcc(cert))) == 'a,b;c="d"=e'
