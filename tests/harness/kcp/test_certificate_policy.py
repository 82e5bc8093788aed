"""KLM's certificate rules (``harness.kcp.lifecycle_manager.certificates.policy``) without
clocks or servers."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.kcp.lifecycle_manager.certificates import policy
from harness.kcp.lifecycle_manager.certificates.client import ParsedCertificates
from harness.kcp.tls_secret import (
    SecretLayoutError,
    tls_data,
    tls_secret,
)
from watcher import pki
from watcher.errors import CertificateError

T0 = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.UTC)
TIMINGS = policy.CertificateTimings(
    ca_validity=dt.timedelta(seconds=45),
    ca_renew_before=dt.timedelta(seconds=30),
    grace=dt.timedelta(seconds=5),
)


CAS = [
    pki.create_ca(
        f"kcp-ca-{n}", validity=TIMINGS.ca_validity, now=T0 + dt.timedelta(seconds=15 * (n - 1))
    )
    for n in (3, 2, 1)
]
"""Three CAs made 15 s apart (newest first), each valid 45 s."""


@pytest.fixture
def cas() -> list[pki.CertificateAuthority]:
    return CAS


def bundle(cas: list[pki.CertificateAuthority]) -> list[policy.BundleEntry]:
    return [policy.BundleEntry(ca.certificate, ca.certificate.not_valid_before_utc) for ca in cas]


@given(offset=st.floats(min_value=30, max_value=44.9), later=st.floats(min_value=0, max_value=14))
def test_the_gateway_serves_the_newest_ca_past_its_grace_and_never_goes_back(
    offset: float, later: float
) -> None:
    entries = bundle(CAS)
    now = T0 + dt.timedelta(seconds=offset)
    index = policy.serving_entry(entries, now, TIMINGS.grace)
    serving = entries[index]
    assert serving.expires_at > now  # never an expired CA
    assert index == len(entries) - 1 or now >= serving.added_at + TIMINGS.grace
    # every newer CA is still inside its grace period
    assert all(now < e.added_at + TIMINGS.grace for e in entries[:index])
    after = policy.serving_entry(entries, now + dt.timedelta(seconds=later), TIMINGS.grace)
    assert after <= index  # the same CA or a newer one, never an older one


def test_due_expired_and_next_deadline(cas: list[pki.CertificateAuthority]) -> None:
    entries = bundle(cas)
    oldest = cas[-1].certificate
    assert not policy.ca_renewal_due(oldest, T0 + dt.timedelta(seconds=14), TIMINGS)
    assert policy.ca_renewal_due(oldest, T0 + dt.timedelta(seconds=15), TIMINGS)
    now = T0 + dt.timedelta(seconds=46)  # kcp-ca-1 has expired
    kept = policy.unexpired(list(reversed(entries)), now)
    assert [policy.common_name(e.certificate) for e in kept] == ["kcp-ca-3", "kcp-ca-2"]
    # at 31 s kcp-ca-3 (added at 30 s) waits for its grace: the switch is the next deadline
    now = T0 + dt.timedelta(seconds=31)
    index = policy.serving_entry(entries, now, TIMINGS.grace)
    assert policy.common_name(entries[index].certificate) == "kcp-ca-2"
    assert policy.next_deadline(entries, index, now, TIMINGS) == T0 + dt.timedelta(seconds=35)


def test_a_client_certificate_is_renewed_for_each_reason(
    cas: list[pki.CertificateAuthority],
) -> None:
    new, old = cas[0], cas[1]
    added = new.certificate.not_valid_before_utc
    now = added + dt.timedelta(seconds=1)

    def reason(cert: pki.Issued, **kw: object) -> str | None:
        args: dict[str, object] = {
            "runtime_id": "runtime-a",
            "skr_domain": "a.example.com",
            "issuing_ca": new.certificate,
            "ca_added_at": added + dt.timedelta(microseconds=700_000),
            "now": now,
            "timings": policy.CertificateTimings(),
        }
        args.update(kw)
        return policy.client_renewal_reason(cert.certificate, **args)  # type: ignore[arg-type]

    fresh = pki.issue_runtime_certificate(new, "runtime-a", "a.example.com", now=added)
    assert reason(fresh) is None  # same second as the CA's arrival: X.509 has whole seconds
    before = pki.issue_runtime_certificate(
        old, "runtime-a", "a.example.com", now=added - dt.timedelta(seconds=3)
    )
    assert "caAddedToBundleAt" in (reason(before) or "")
    same_second_old_ca = pki.issue_runtime_certificate(old, "runtime-a", "a.example.com", now=added)
    assert "not signed by the current CA" in (reason(same_second_old_ca) or "")
    assert "CN" in (reason(fresh, runtime_id="runtime-b") or "")
    assert "skr-domain" in (reason(fresh, skr_domain="b.example.com") or "")
    late = added + dt.timedelta(days=31)
    assert reason(fresh, now=late) == "it is due for renewal"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ca_validity": dt.timedelta(0)}, "ca_validity must be positive"),
        ({"ca_renew_before": dt.timedelta(days=90)}, "shorter than ca_validity"),
        ({"client_renew_before": dt.timedelta(days=61)}, "shorter than client_validity"),
        ({"grace": dt.timedelta(seconds=-1)}, "grace must not be negative"),
    ],
)
def test_timings_that_cannot_work_are_refused(
    kwargs: dict[str, dt.timedelta], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        policy.CertificateTimings(**kwargs)


def test_tls_secret_round_trip_and_what_is_wrong_with_a_broken_one() -> None:
    data = {"tls.crt": b"C", "tls.key": b"K", "ca.crt": b"A"}
    secret = tls_secret("x-webhook-tls", "istio-system", data, annotations={"a": "b"})
    assert secret["type"] == "kubernetes.io/tls"
    assert tls_data(secret) == data
    del secret["data"]["tls.key"]
    with pytest.raises(SecretLayoutError, match=r"istio-system/x-webhook-tls lacks tls\.key"):
        tls_data(secret)
    secret["data"]["tls.key"] = "not base64!"
    with pytest.raises(SecretLayoutError, match="not base64"):
        tls_data(secret)


def test_a_kymas_secret_is_parsed_again_only_when_its_content_changed() -> None:
    parsed = ParsedCertificates()
    first = pki.issue_runtime_certificate(CAS[0], "runtime-a", "a.example.com", key_type="ec")
    second = pki.issue_runtime_certificate(CAS[0], "runtime-a", "a.example.com", key_type="ec")
    loaded = parsed.load("kyma-a", first.cert_pem, first.key_pem, "Secret a")
    assert parsed.load("kyma-a", first.cert_pem, first.key_pem, "Secret a") is loaded
    renewed = parsed.load("kyma-a", second.cert_pem, second.key_pem, "Secret a")
    assert renewed is not loaded and renewed.certificate == second.certificate
    parsed.remember("kyma-b", first)
    assert parsed.load("kyma-b", first.cert_pem, first.key_pem, "Secret b") is first
    parsed.forget("kyma-b")
    assert parsed.load("kyma-b", first.cert_pem, first.key_pem, "Secret b") is not first
    with pytest.raises(CertificateError, match="Secret c: the key does not belong"):
        parsed.load("kyma-c", first.cert_pem, second.key_pem, "Secret c")
