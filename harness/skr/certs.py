"""The SKR webhook's certificate, as KLM's cert-manager issues it, or deliberately broken.

Pure (no I/O). One certificate is both the webhook's serving certificate (the local API
server calls it by IP, hence the IP SAN ``127.0.0.1``) and its mTLS client certificate
towards KCP (CN = runtime id). A :class:`CertificateOverride` turns it into what a fault
scenario needs: a wrong SAN (issued for another SKR domain), expired, not yet valid, or
signed by a CA the KCP does not trust, or without a Subject CN (no runtime id).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from watcher import pki

LOCAL_DNS_NAMES = ("localhost",)
LOCAL_IP_ADDRESSES = ("127.0.0.1",)


@dataclass(frozen=True)
class CertificateOverride:
    """How the runtime certificate departs from the correct one (default: it does not).

    ``skr_domain`` issues for another domain (the SAN no longer matches the Kyma's
    ``skr-domain`` annotation); ``not_before``/``validity`` move the validity window;
    ``ca`` signs with a foreign CA; ``common_name`` replaces the runtime id as Subject CN
    (``""``: no CN at all). Use the constructors for the usual scenarios.
    """

    skr_domain: str | None = None
    not_before: dt.datetime | None = None
    validity: dt.timedelta | None = None
    ca: pki.CertificateAuthority | None = None
    common_name: str | None = None

    @classmethod
    def wrong_san(cls, skr_domain: str = "wrong.skr.invalid") -> CertificateOverride:
        return cls(skr_domain=skr_domain)

    @classmethod
    def expired(cls, *, now: dt.datetime | None = None) -> CertificateOverride:
        """Valid for one hour, ending a day before ``now``."""
        moment = now or dt.datetime.now(dt.UTC)
        return cls(
            not_before=moment - dt.timedelta(days=1, hours=1), validity=dt.timedelta(hours=1)
        )

    @classmethod
    def not_yet_valid(cls, *, now: dt.datetime | None = None) -> CertificateOverride:
        """Valid from a day after ``now``."""
        moment = now or dt.datetime.now(dt.UTC)
        return cls(not_before=moment + dt.timedelta(days=1))

    @classmethod
    def foreign_ca(cls, ca: pki.CertificateAuthority | None = None) -> CertificateOverride:
        """Signed by ``ca`` (default: a fresh CA nobody trusts)."""
        return cls(ca=ca or pki.create_ca("foreign-ca"))

    @classmethod
    def empty_cn(cls) -> CertificateOverride:
        """No Subject CN: a valid chain that carries no runtime id."""
        return cls(common_name="")

    @classmethod
    def named(cls, kind: str, *, skr_domain: str | None = None) -> CertificateOverride:
        """The override a scenario names: ``none``, ``wrong-san`` (for ``skr_domain``),
        ``expired``, ``not-yet-valid``, ``foreign-ca``, ``empty-cn``."""
        makers: dict[str, Callable[[], CertificateOverride]] = {
            "none": cls,
            "wrong-san": lambda: cls.wrong_san(skr_domain or "wrong.skr.invalid"),
            "expired": cls.expired,
            "not-yet-valid": cls.not_yet_valid,
            "foreign-ca": cls.foreign_ca,
            "empty-cn": cls.empty_cn,
        }
        if kind not in makers:
            raise ValueError(
                f"unknown certificate override {kind!r}; use one of: {', '.join(makers)}"
            )
        return makers[kind]()

    @property
    def is_default(self) -> bool:
        return self == CertificateOverride()


def host_sans(host_address: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(DNS names, IPs) the serving certificate needs for API servers that call the webhook
    at ``host_address`` (besides loopback): an IP SAN for an IP, a DNS SAN for a name."""
    dns, ips = LOCAL_DNS_NAMES, LOCAL_IP_ADDRESSES
    if not host_address or host_address in (*dns, *ips):
        return dns, ips
    try:
        ipaddress.ip_address(host_address)
    except ValueError:
        return (*dns, host_address), ips
    return dns, (*ips, host_address)


def issue_webhook_certificate(
    ca: pki.CertificateAuthority,
    runtime_id: str,
    skr_domain: str,
    override: CertificateOverride = CertificateOverride(),
    *,
    now: dt.datetime | None = None,
    host_address: str | None = None,
) -> pki.Issued:
    """The runtime certificate: CN ``runtime_id``; DNS SANs the SKR domain, the webhook
    Service names and ``localhost``; IP SAN ``127.0.0.1``; ``host_address`` (how API
    servers reach this host) as an IP or DNS SAN; then ``override`` applied."""
    dns_names, ip_addresses = host_sans(host_address)
    if override.common_name is not None:
        return pki.issue(
            override.ca or ca,
            override.common_name,
            dns_names=[
                override.skr_domain or skr_domain,
                *pki.WEBHOOK_SERVICE_SANS,
                *dns_names,
            ],
            ip_addresses=ip_addresses,
            validity=override.validity or pki.RUNTIME_VALIDITY,
            not_before=override.not_before,
            now=now,
        )
    return pki.issue_runtime_certificate(
        override.ca or ca,
        runtime_id,
        override.skr_domain or skr_domain,
        extra_dns_names=dns_names,
        extra_ip_addresses=ip_addresses,
        validity=override.validity or pki.RUNTIME_VALIDITY,
        not_before=override.not_before,
        now=now,
    )


def serving_ca_bundle(
    ca_bundle_pem: bytes,
    override: CertificateOverride = CertificateOverride(),
) -> bytes:
    """What the API server must trust to call the webhook: the KCP CA bundle, or the
    foreign CA that signed the serving certificate (so the fault shows up towards KCP,
    not at admission)."""
    return override.ca.cert_pem if override.ca is not None else ca_bundle_pem
