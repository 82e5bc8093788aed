"""Which TLS peers may hand the listener an ``X-Forwarded-Client-Cert``: the gateway only.

Pure. In ``xfcc`` identity mode the runtime id comes from a header, and a header is only
as trustworthy as whoever set it. The KCP gateway (Envoy) sets it after verifying the
SKR's certificate; anyone else who can reach the listener port could set it too. So the
listener serves mTLS towards the gateway: the TLS layer proves the peer holds a
certificate from the gateway CA (handshake fails otherwise), and this allow-list says
which identities from that CA are gateways. A certificate from the right CA that is not
on the list (another workload of the same mesh) gets 403 ``untrusted-proxy`` and its
XFCC is never parsed.

Entries: ``cn:<name>``, ``dns:<name>``, ``uri:<uri>`` match that field exactly; a bare
``<name>`` matches the Subject CN, a DNS SAN or a URI SAN.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

from watcher.errors import ConfigError
from watcher.listener.certs import subject_alt_names
from watcher.listener.errors import ClientCertificateError, UntrustedProxy

_KINDS = ("cn", "dns", "uri")


def _parse(entry: str) -> tuple[str, str]:
    """``(kind, value)`` with kind ``cn``/``dns``/``uri`` or ``any`` for a bare name."""
    text = entry.strip()
    kind, sep, value = text.partition(":")
    if sep and kind.lower() in _KINDS:
        kind, text = kind.lower(), value
    else:
        kind = "any"
    if not text:
        raise ConfigError(f"trusted gateway entry {entry!r} names nobody")
    return kind, text


@dataclass(frozen=True)
class TrustedGateways:
    """The allow-list of gateway identities (see the module docstring for entries)."""

    entries: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise ConfigError("the trusted gateway allow-list is empty; name at least one")
        for entry in self.entries:
            _parse(entry)

    @classmethod
    def of(cls, entries: Iterable[str]) -> TrustedGateways:
        return cls(tuple(entries))

    def identities(self, cert: x509.Certificate) -> dict[str, tuple[str, ...]]:
        """What the certificate claims, by kind (``cn``, ``dns``, ``uri``)."""
        cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        sans = subject_alt_names(cert)
        return {
            "cn": tuple(str(n.value) for n in cns),
            "dns": sans.dns,
            "uri": sans.uris,
        }

    def check(self, cert: x509.Certificate) -> str:
        """The matching entry; ``UntrustedProxy`` if no entry matches this peer."""
        try:
            claims = self.identities(cert)
        except ClientCertificateError as exc:
            raise UntrustedProxy(f"peer certificate is unusable: {exc}") from None
        for entry in self.entries:
            kind, value = _parse(entry)
            kinds = _KINDS if kind == "any" else (kind,)
            if any(value in claims[k] for k in kinds):
                return entry
        shown = ", ".join(f"{k}={list(v)}" for k, v in claims.items() if v) or "no names"
        raise UntrustedProxy(
            f"TLS peer ({shown}) is not a trusted gateway; only "
            f"{', '.join(self.entries)} may forward client certificates"
        )


__all__ = ["TrustedGateways", "UntrustedProxy"]
