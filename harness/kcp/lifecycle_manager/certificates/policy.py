"""When KLM renews, trusts and serves which certificate (klm-reference §3), as pure decisions.

KLM's rotation keeps every SKR connected while its CA changes: a new CA enters the
gateway's bundle (``caAddedToBundleAt``), each Kyma reconcile re-issues a client
certificate issued before that, the gateway serves the new CA only after a grace period,
and a CA leaves the bundle when it expires. Pure, so hypothesis can test the timing rules
without clocks or keys; X.509 has whole seconds, so instants compare at that precision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from cryptography import x509

from watcher import pki

CA_ISSUER: Final = "klm-watcher-selfsigned"
"""The CA Issuer of KLM's deployment config (``config/watcher``)."""
KLM_SUBJECT: Final = {
    "organizationalUnits": ["BTP Kyma Runtime"],
    "organizations": ["SAP SE"],
    "localities": ["Walldorf"],
    "provinces": ["Baden-Württemberg"],
    "countries": ["DE"],
}


@dataclass(frozen=True)
class CertificateTimings:
    """KLM's defaults; a scenario shortens them to run a rotation in about a minute."""

    ca_validity: dt.timedelta = dt.timedelta(days=90)
    ca_renew_before: dt.timedelta = dt.timedelta(days=61)
    """A new CA is made this long before the current one expires."""
    client_validity: dt.timedelta = dt.timedelta(days=60)
    client_renew_before: dt.timedelta = dt.timedelta(days=30)
    grace: dt.timedelta = dt.timedelta(days=4)
    """How long after a new CA entered the bundle the gateway switches to serving it."""

    def __post_init__(self) -> None:
        for name in ("ca_validity", "client_validity"):
            if getattr(self, name) <= dt.timedelta(0):
                raise ValueError(f"{name} must be positive")
        if not dt.timedelta(0) <= self.ca_renew_before < self.ca_validity:
            raise ValueError("ca_renew_before must be at least 0 and shorter than ca_validity")
        if not dt.timedelta(0) <= self.client_renew_before < self.client_validity:
            raise ValueError(
                "client_renew_before must be at least 0 and shorter than client_validity"
            )
        if self.grace < dt.timedelta(0):
            raise ValueError("grace must not be negative")


def whole_second(moment: dt.datetime) -> dt.datetime:
    """``moment`` without its fraction: what an X.509 time or an RFC 3339 annotation holds."""
    return moment.replace(microsecond=0)


@dataclass(frozen=True)
class BundleEntry:
    """One CA of the gateway's bundle: its certificate and when it entered the bundle."""

    certificate: x509.Certificate
    added_at: dt.datetime

    @property
    def expires_at(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc


def ca_renewal_due(ca: x509.Certificate, now: dt.datetime, timings: CertificateTimings) -> bool:
    """Whether the current CA is close enough to its end that a new one must be made."""
    return now >= ca.not_valid_after_utc - timings.ca_renew_before


E = TypeVar("E", bound=BundleEntry)


def unexpired(bundle: Sequence[E], now: dt.datetime) -> list[E]:
    """The bundle without the CAs that have expired, newest first."""
    kept = [e for e in bundle if e.expires_at > now]
    return sorted(kept, key=lambda e: e.added_at, reverse=True)


def serving_entry(bundle: Sequence[BundleEntry], now: dt.datetime, grace: dt.timedelta) -> int:
    """Index of the CA the gateway serves: the newest one in the bundle for the grace
    period, else the oldest (a CA that starts the bundle serves at once)."""
    if not bundle:
        raise ValueError("the bundle is empty")
    for index, entry in enumerate(bundle):
        if now >= entry.added_at + grace:
            return index
    return len(bundle) - 1


def next_deadline(
    bundle: Sequence[BundleEntry], serving: int, now: dt.datetime, timings: CertificateTimings
) -> dt.datetime:
    """The next moment something is due: the current CA's renewal, a serving switch still
    waiting for its grace, or the expiry of a CA in the bundle."""
    if not bundle:
        raise ValueError("the bundle is empty")
    moments = [bundle[0].expires_at - timings.ca_renew_before]
    moments += [e.added_at + timings.grace for e in bundle[:serving]]
    moments += [e.expires_at for e in bundle]
    future = [m for m in moments if m > now]
    return min(future) if future else now


def common_name(certificate: x509.Certificate) -> str:
    return pki.name_cn(certificate.subject)


def issuer_name(certificate: x509.Certificate) -> str:
    """The CN of the CA that signed ``certificate``."""
    return pki.name_cn(certificate.issuer)


def dns_names(certificate: x509.Certificate) -> list[str]:
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return san.value.get_values_for_type(x509.DNSName)


def client_renewal_reason(
    certificate: x509.Certificate,
    *,
    runtime_id: str,
    skr_domain: str,
    issuing_ca: x509.Certificate,
    ca_added_at: dt.datetime,
    now: dt.datetime,
    timings: CertificateTimings,
) -> str | None:
    """Why a Kyma's client certificate must be issued again (None: it is fine).

    KLM's rule is the ``caAddedToBundleAt`` comparison; the issuer check covers a
    certificate issued by the old CA within the same second as the new CA's arrival."""
    if common_name(certificate) != runtime_id:
        return f"its CN {common_name(certificate)!r} is not the runtime id {runtime_id!r}"
    if skr_domain not in dns_names(certificate):
        return f"it does not name the skr-domain {skr_domain!r}"
    if certificate.not_valid_before_utc < whole_second(ca_added_at):
        return "it was issued before the newest CA entered the bundle (caAddedToBundleAt)"
    if certificate.issuer != issuing_ca.subject:
        return f"it is not signed by the current CA {common_name(issuing_ca)!r}"
    if now >= certificate.not_valid_after_utc - timings.client_renew_before:
        return "it is due for renewal"
    return None
