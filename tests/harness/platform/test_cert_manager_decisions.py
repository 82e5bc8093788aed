"""cert-manager's decisions as the harness plays them for KLM (pure): reading specs, keys and
certificates, the Secret, why to re-issue, readiness, status, and issuer readiness."""

from __future__ import annotations

import base64
import datetime as dt
import string
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.durations import parse_duration
from harness.platform.cert_manager import decisions as d
from harness.platform.cert_manager import signing, spec
from harness.platform.cert_manager.spec import Certificate, Foreign, Invalid

NOW = dt.datetime(2025, 3, 1, 12, 0, 0, 250_000, tzinfo=dt.UTC)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
KLM_SUBJECT = {
    "organizationalUnits": ["BTP Kyma Runtime"],
    "organizations": ["SAP SE"],
    "localities": ["Walldorf"],
    "provinces": ["Baden-Wuerttemberg"],
    "countries": ["DE"],
}


def cert_obj(**fields: Any) -> dict[str, Any]:
    base = {"secretName": "leaf-tls", "issuerRef": {"name": "ca-issuer"}}
    return {"metadata": {"name": "leaf", "namespace": "ns", "generation": 1}, "spec": base | fields}


def certificate(**fields: Any) -> Certificate:
    """ECDSA P-256 unless said otherwise: the tests reuse one key (RSA takes long)."""
    fields = {"commonName": "leaf.example.com", "privateKey": {"algorithm": "ECDSA"}} | fields
    parsed = spec.parse_certificate(cert_obj(**fields))
    assert isinstance(parsed, Certificate), parsed
    return parsed


def ca_issuer(secret: dict[str, Any] | None) -> d.IssuerState:
    obj = {
        "metadata": {"name": "ca-issuer", "namespace": "ns"},
        "spec": {"ca": {"secretName": "ca"}},
    }
    return d.issuer_state("ca-issuer", spec.parse_issuer(obj), secret)


def issued(cert: Certificate, signer: signing.Signer | None) -> tuple[signing.Issued, d.Stored]:
    done = signing.issue(cert, signer, NOW, EC_KEY)
    return done, d.read_secret(d.secret_body(cert, done))


CA_CERT = certificate(commonName="klm-ca", isCA=True)
CA = signing.issue(CA_CERT, None, NOW)
CA_SECRET = d.secret_body(CA_CERT, CA)
SIGNER = signing.Signer(CA.certificate, CA.key)


# -- reading specs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0), ("90s", 90), ("1h30m", 5400), ("2160h", 7776000), ("1.5h", 5400), ("3ms", 0.003)],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "1", "h", "1d", "1h 30m", "-1h", "one hour", 5])
def test_what_go_refuses_is_no_duration(text: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_a_minimal_certificate_gets_cert_managers_defaults() -> None:
    cert = certificate(usages=[], duration=None, privateKey=None, emailAddresses=["a@b.c"])
    assert (cert.duration, cert.renew_before, cert.is_ca) == (dt.timedelta(days=90), None, False)
    assert cert.usages == ("digital signature", "key encipherment")
    assert (cert.private_key.algorithm, cert.private_key.bits) == ("RSA", 2048)
    assert (cert.private_key.encoding, cert.private_key.rotation_policy) == ("PKCS1", "Always")
    assert cert.ignored == ("emailAddresses",)  # logged once by the controller
    assert certificate(privateKey={"algorithm": "ECDSA"}).private_key.bits == 256


def test_klms_certificate_is_read_as_written() -> None:
    cert = certificate(
        subject=KLM_SUBJECT,
        dnsNames=["skr.example.com"],
        ipAddresses=["127.0.0.1", "::1"],
        uris=["spiffe://kyma/runtime"],
        duration="2160h",
        renewBefore="1440h",
        isCA=False,
        usages=["digital signature", "key encipherment", "server auth", "client auth"],
        privateKey={"algorithm": "RSA", "size": 4096, "rotationPolicy": "Never"},
        secretTemplate={"labels": {"a": "b"}, "annotations": {"c": "d"}},
        issuerRef={"name": "ca-issuer", "kind": "Issuer", "group": "cert-manager.io"},
    )
    assert cert.subject.organizational_units == ("BTP Kyma Runtime",)
    assert [str(a) for a in cert.ip_addresses] == ["127.0.0.1", "::1"]
    assert cert.renew_before == dt.timedelta(hours=1440) and cert.private_key.bits == 4096
    assert cert.private_key.rotation_policy == "Never"
    assert cert.secret_template.labels == {"a": "b"} and cert.issuer_ref.kind == "Issuer"


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"secretName": ""}, "spec.secretName: Field required"),
        ({"issuerRef": {"kind": "Issuer"}}, "spec.issuerRef.name: Field required"),
        ({"commonName": "", "dnsNames": []}, "at least one of commonName"),
        ({"commonName": "x" * 65}, "spec.commonName: String should have at most 64"),
        ({"duration": "1d"}, "spec.duration: invalid duration '1d'"),
        ({"duration": "1h", "renewBefore": "2h"}, "renewBefore must be positive and less"),
        ({"privateKey": {"algorithm": "Ed25519"}}, "spec.privateKey.algorithm: Input should be"),
        ({"privateKey": {"size": 1024}}, "between 2048 & 8192"),
        ({"privateKey": {"algorithm": "ECDSA", "size": 521}}, "serves ECDSA 256, 384"),
        ({"usages": ["code signing"]}, "spec.usages.0: Input should be"),
        ({"subject": {"countries": ["Germany"]}}, "spec.subject.countries.0"),
        ({"ipAddresses": ["10.0.0"]}, "spec.ipAddresses.0"),
    ],
)
def test_what_cert_managers_webhook_refuses_is_invalid(fields: dict[str, Any], said: str) -> None:
    parsed = spec.parse_certificate(cert_obj(**{"commonName": "leaf"} | fields))
    assert isinstance(parsed, Invalid) and said in parsed.message


@pytest.mark.parametrize(
    ("ref", "issuer"),
    [
        ({"name": "root", "kind": "ClusterIssuer"}, "ClusterIssuer.cert-manager.io/root"),
        ({"name": "x", "kind": "AWSPCAIssuer", "group": "awspca.cert-manager.io"}, "AWSPCAIssuer"),
    ],
)
def test_other_issuers_are_someone_elses(ref: dict[str, str], issuer: str) -> None:
    parsed = spec.parse_certificate(cert_obj(issuerRef=ref, privateKey={"algorithm": "Ed25519"}))
    assert isinstance(parsed, Foreign) and parsed.issuer.startswith(issuer)


# -- keys and certificates -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "header"),
    [
        ({"algorithm": "RSA"}, b"-----BEGIN RSA PRIVATE KEY-----"),
        ({"algorithm": "ECDSA", "size": 384}, b"-----BEGIN EC PRIVATE KEY-----"),
        ({"algorithm": "ECDSA", "encoding": "PKCS8"}, b"-----BEGIN PRIVATE KEY-----"),
    ],
)
def test_keys_are_made_and_encoded_as_the_spec_says(key: dict[str, Any], header: bytes) -> None:
    cert = certificate(privateKey=key)
    done = signing.issue(cert, None, NOW)
    assert done.tls_key.startswith(header) and signing.key_fits(done.key, cert.private_key)
    assert not signing.key_fits(done.key, certificate(privateKey={"size": 3072}).private_key)


def test_a_leaf_carries_the_spec_signed_by_the_ca() -> None:
    cert = certificate(
        commonName="runtime-1",
        subject=KLM_SUBJECT,
        dnsNames=["skr.example.com"],
        ipAddresses=["127.0.0.1"],
        uris=["spiffe://kyma/runtime-1"],
        duration="2160h",
        usages=["digital signature", "key encipherment", "server auth", "client auth"],
    )
    done, _ = issued(cert, SIGNER)
    leaf = done.certificate
    leaf.verify_directly_issued_by(SIGNER.certificate)
    assert done.ca_crt == base64.b64decode(CA_SECRET["data"]["tls.crt"])
    assert leaf.subject.rfc4514_string() == (
        "CN=runtime-1,OU=BTP Kyma Runtime,O=SAP SE,L=Walldorf,ST=Baden-Wuerttemberg,C=DE"
    )
    assert leaf.not_valid_before_utc == NOW.replace(microsecond=0)
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == dt.timedelta(hours=2160)
    usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    ekus = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(ekus) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert not signing.is_ca(leaf) and isinstance(leaf.signature_hash_algorithm, hashes.SHA256)
    aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ski = SIGNER.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest


def test_a_self_signed_ca_is_its_own_ca_crt() -> None:
    ca = SIGNER.certificate
    assert ca.issuer == ca.subject and signing.is_ca(ca)
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert CA_SECRET["data"]["ca.crt"] == CA_SECRET["data"]["tls.crt"]
    nameless, _ = issued(certificate(commonName="", dnsNames=["a.example.com"]), None)
    sans = nameless.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert sans.critical  # an empty subject makes the SANs critical, as Go marks them


# -- the Secret ----------------------------------------------------------------------------


def test_the_secret_is_what_cert_manager_writes() -> None:
    cert = certificate(
        commonName="runtime-1",
        dnsNames=["a.example.com", "b.example.com"],
        ipAddresses=["127.0.0.1", "::1"],
        uris=["spiffe://kyma/a"],
        secretTemplate={"labels": {"team": "klm"}, "annotations": {"note": "x"}},
        issuerRef={"name": "ca-issuer", "kind": "Issuer"},
    )
    done, _ = issued(cert, SIGNER)
    body = d.secret_body(cert, done)
    assert body["type"] == "kubernetes.io/tls"
    assert d.secret_body(cert, done, "Opaque")["type"] == "Opaque"  # immutable: kept
    assert sorted(body["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert body["metadata"]["labels"] == {"team": "klm", d.FAO_LABEL: "true"}
    assert body["metadata"]["annotations"] == {
        "note": "x",
        "cert-manager.io/certificate-name": "leaf",
        "cert-manager.io/issuer-name": "ca-issuer",
        "cert-manager.io/issuer-kind": "Issuer",
        "cert-manager.io/issuer-group": "",
        "cert-manager.io/common-name": "runtime-1",
        "cert-manager.io/alt-names": "a.example.com,b.example.com",
        "cert-manager.io/ip-sans": "127.0.0.1,::1",
        "cert-manager.io/uri-sans": "spiffe://kyma/a",
    }


def test_unusable_secrets_are_named() -> None:
    body = CA_SECRET
    other = signing.issue(CA_CERT, None, NOW).tls_key
    mismatched = {**body, "data": {**body["data"], "tls.key": base64.b64encode(other).decode()}}
    garbage = {**body, "data": {"tls.crt": "bm9wZQ==", "tls.key": "!!"}}
    reasons = [d.read_secret(s).problem for s in (None, {**body, "data": {}}, garbage, mismatched)]
    said = ["DoesNotExist", "MissingData", "InvalidKeyPair", "InvalidKeyPair"]
    assert [r.reason if r else None for r in reasons] == said
    assert reasons[3] is not None and "does not match" in reasons[3].message


# -- why to issue, readiness, status -------------------------------------------------------


def test_a_fresh_secret_needs_nothing_until_its_renewal_time() -> None:
    cert = certificate(duration="3h", renewBefore="1h")
    done, stored = issued(cert, SIGNER)
    renewal = d.renewal_time(cert, done.certificate)
    assert renewal == NOW.replace(microsecond=0) + dt.timedelta(hours=2)
    assert d.reissue_reason(cert, stored, {}, renewal - dt.timedelta(seconds=1)) is None
    due = d.reissue_reason(cert, stored, {}, renewal)
    assert due is not None and due.reason == "Renewing" and "2025-03-01 14:00:00" in due.message
    assert d.renewal_time(certificate(duration="3h"), done.certificate) == renewal  # 2/3 in
    expired = d.readiness(cert, stored, NOW + dt.timedelta(hours=4))
    assert expired is not None and expired.reason == "Expired"


def test_what_reissues() -> None:
    cert = certificate(dnsNames=["a.example.com"])
    _, stored = issued(cert, SIGNER)
    manual = {"conditions": [{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered"}]}
    assert d.reissue_reason(cert, stored, manual, NOW) == d.Why("ManuallyTriggered", "")
    moved = certificate(dnsNames=["b.example.com"], isCA=True)
    why = d.reissue_reason(moved, stored, {}, NOW)
    assert why is not None and why.message.endswith("[spec.dnsNames spec.isCA]")
    bigger = certificate(dnsNames=["a.example.com"], privateKey={"algorithm": "ECDSA", "size": 384})
    assert "[spec.privateKey]" in str(d.reissue_reason(bigger, stored, {}, NOW))
    elsewhere = certificate(dnsNames=["a.example.com"], issuerRef={"name": "other"})
    why = d.reissue_reason(elsewhere, stored, {}, NOW)
    assert why is not None and why.reason == "IncorrectIssuer"
    assert why.message.endswith('previously issued by "Issuer.cert-manager.io/ca-issuer"')
    missing = d.reissue_reason(cert, d.read_secret(None), {}, NOW)
    assert missing == d.Why("DoesNotExist", "Issuing certificate as Secret does not exist")


def test_the_status_through_waiting_and_issuing() -> None:
    cert = certificate(duration="24h")
    waiting = d.certificate_status({}, cert, d.read_secret(None), NOW, waiting="waiting for X")
    ready = d.condition(waiting, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "DoesNotExist")
    assert ready["message"].endswith("does not exist; waiting for X") and "notAfter" not in waiting
    manual = waiting | {
        "conditions": [*waiting["conditions"], {"type": "Issuing", "status": "True"}]
    }
    _, stored = issued(cert, SIGNER)
    later = NOW + dt.timedelta(minutes=1)
    done = d.certificate_status(manual, cert, stored, later, issued=True)
    assert done["revision"] == 1 and d.condition(done, "Issuing") is None
    assert (done["notBefore"], done["renewalTime"]) == (
        "2025-03-01T12:00:00Z",
        "2025-03-02T04:00:00Z",
    )
    ready = d.condition(done, "Ready")
    assert ready == {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": d.READY_MESSAGE,
        "lastTransitionTime": "2025-03-01T12:01:00Z",
        "observedGeneration": 1,
    }
    again = d.certificate_status(done, cert, stored, later + dt.timedelta(hours=1), issued=True)
    assert again["revision"] == 2 and d.condition(again, "Ready") == ready  # no flip: time kept
    assert d.status_patch(done, again) == {"revision": 2}
    assert d.status_patch({"a": 1, "b": 2}, {"a": 1}) == {"b": None}
    obj = {"metadata": {"generation": 1}, "status": done}
    assert d.is_issued(obj, 1) and not d.is_issued(obj, 2)
    assert not d.is_issued({**obj, "metadata": {"generation": 2}}, 1)
    assert "Ready=True (Ready: Certificate is up to date" in d.describe(obj)


def test_issuer_readiness_is_what_cert_managers_setup_says() -> None:
    def issuer(body: dict[str, Any]) -> spec.Issuer | Invalid:
        return spec.parse_issuer({"metadata": {"name": "i", "namespace": "ns"}, "spec": body})

    assert d.issuer_state("i", issuer({"selfSigned": {}}), None).why == d.Why("IsReady", "")
    assert d.issuer_state("i", None, None).why == d.Why("NotFound", 'Issuer "i" not found')
    assert d.issuer_state("i", issuer({"acme": {}}), None).why.reason == "NotSupported"
    assert d.issuer_state("i", issuer({"ca": {}}), None).why.reason == "InvalidSpec"
    absent = ca_issuer(None)
    assert not absent.ready and absent.why == d.Why(
        "ErrGetKeyPair", 'Error getting keypair for CA issuer: secret "ca" does not exist'
    )
    leaf = certificate()
    not_ca = ca_issuer(d.secret_body(leaf, issued(leaf, None)[0]))
    assert not not_ca.ready and not_ca.why.reason == "ErrInvalidKeyPair"
    assert ca_issuer(CA_SECRET).why == d.Why("KeyPairVerified", "Signing CA verified")


# -- the property: nothing KLM can write makes the controller loop -------------------------

NAME = st.from_regex(r"[a-z0-9]{1,8}(\.[a-z0-9]{1,8}){0,2}", fullmatch=True)
WORD = st.text(string.ascii_letters + string.digits + " -._", min_size=1, max_size=20).filter(
    lambda s: s.strip() == s
)
USAGES = sorted([*signing.KEY_USAGES, *signing.EXTENDED_KEY_USAGES])


@st.composite
def certificate_specs(draw: st.DrawFn) -> dict[str, Any]:
    seconds = draw(st.integers(2, 10**7))
    before = draw(st.one_of(st.none(), st.integers(1, seconds - 1)))
    fields: dict[str, Any] = {
        "commonName": draw(st.one_of(st.just(""), WORD)),
        "dnsNames": draw(st.lists(NAME, max_size=4)),
        "ipAddresses": [str(a) for a in draw(st.lists(st.ip_addresses(), max_size=3))],
        "uris": [f"spiffe://{n}/w" for n in draw(st.lists(NAME, max_size=2))],
        "subject": {
            "organizations": draw(st.lists(WORD, max_size=2)),
            "organizationalUnits": draw(st.lists(WORD, max_size=2)),
            "localities": draw(st.lists(WORD, max_size=1)),
            "provinces": draw(st.lists(WORD, max_size=1)),
            "countries": draw(st.lists(st.sampled_from(["DE", "US"]), max_size=1)),
        },
        "isCA": draw(st.booleans()),
        "usages": draw(st.lists(st.sampled_from(USAGES), max_size=4)),
        "duration": f"{seconds}s",
        "renewBefore": f"{before}s" if before else None,
        "privateKey": {"algorithm": "ECDSA", "encoding": draw(st.sampled_from(["PKCS1", "PKCS8"]))},
    }
    if not (fields["commonName"] or fields["dnsNames"] or fields["ipAddresses"] or fields["uris"]):
        fields["commonName"] = "fallback"
    return fields


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(certificate_specs(), st.booleans())
def test_a_valid_spec_once_issued_needs_no_reissue(
    fields: dict[str, Any], self_signed: bool
) -> None:
    cert = spec.parse_certificate(cert_obj(**fields))
    assert isinstance(cert, Certificate), cert
    done, stored = issued(cert, None if self_signed else SIGNER)
    status = d.certificate_status({}, cert, stored, NOW, issued=True)
    assert d.reissue_reason(cert, stored, status, NOW) is None
    assert d.readiness(cert, stored, NOW) is None
    assert d.is_issued({"metadata": {"generation": 1}, "status": status}, 1)
    assert stored.annotations == d.stored_of(cert, done).annotations
