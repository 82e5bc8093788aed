"""What the listener reads from a client certificate: the runtime id and the SANs.

Pure. KCP issues one client certificate per Kyma with CN = the Kyma's runtime id and the
SKR domain as a DNS SAN, so these two readings are the whole identity model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

from watcher.listener.errors import ClientCertificateError, CommonNameError

CACHE_SIZE = 4096
"""Certificates whose readings are kept: one per runtime sending events (per process).
A certificate is hashed and compared by its DER bytes, so a cached reading is the reading."""


@functools.lru_cache(maxsize=CACHE_SIZE)
def runtime_id(cert: x509.Certificate) -> str:
    """The runtime id: the certificate's Subject CN.

    Several CNs are refused rather than picking one (Go keeps the last, OpenSSL tools
    show the first): an identity that depends on the reader is no identity.
    """
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) > 1:
        raise CommonNameError(
            f"client certificate has {len(names)} Subject CNs; the runtime id is ambiguous"
        )
    value = names[0].value if names else ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not value:
        subject = cert.subject.rfc4514_string() or "empty"
        raise CommonNameError(
            f"client certificate has no Subject CN (subject: {subject}); "
            "the CN must be the runtime id"
        )
    return value


@dataclass(frozen=True)
class SubjectAltNames:
    """A certificate's SANs as strings, in certificate order."""

    dns: tuple[str, ...] = ()
    uris: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.dns) + len(self.uris) + len(self.ips)


@functools.lru_cache(maxsize=CACHE_SIZE)
def subject_alt_names(cert: x509.Certificate) -> SubjectAltNames:
    """DNS names, URIs and IP addresses; other SAN types play no part in pinning."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return SubjectAltNames()
    except ValueError as exc:  # duplicate or malformed extensions
        raise ClientCertificateError(f"client certificate extensions are invalid: {exc}") from None
    san = ext.value
    return SubjectAltNames(
        dns=tuple(san.get_values_for_type(x509.DNSName)),
        uris=tuple(san.get_values_for_type(x509.UniformResourceIdentifier)),
        ips=tuple(str(ip) for ip in san.get_values_for_type(x509.IPAddress)),
    )
