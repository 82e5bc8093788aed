"""Server TLS contexts for the listener, built from PEM files.

Direct mTLS replaces the gateway, so it enforces what the KCP Gateway enforces: TLS 1.3
only and a client certificate signed by the KCP CA bundle.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from watcher.errors import CertificateError


def _readable(path: str | Path, what: str) -> None:
    # ssl reports a missing file without its name; say which one.
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CertificateError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """TLS 1.3 server context without client authentication."""
    _readable(cert_file, "TLS certificate")
    _readable(key_file, "TLS key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.maximum_version = ssl.TLSVersion.TLSv1_3
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(
            f"cannot load TLS certificate {cert_file} with key {key_file}: {exc}"
        ) from None
    return context


def direct_mtls_context(
    cert_file: str | Path, key_file: str | Path, ca_file: str | Path
) -> ssl.SSLContext:
    """TLS 1.3 server context that requires a client certificate issued by ``ca_file``."""
    context = server_context(cert_file, key_file)
    _readable(ca_file, "CA bundle")
    try:
        context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(f"cannot load CA bundle {ca_file}: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def gateway_mtls_context(
    cert_file: str | Path, key_file: str | Path, gateway_ca_file: str | Path
) -> ssl.SSLContext:
    """TLS 1.3 server context for a listener behind the gateway: only peers with a
    certificate from ``gateway_ca_file`` complete the handshake. Which of them count as
    gateways is ``ListenerConfig.trusted_gateways``' job (an allow-list on top)."""
    return direct_mtls_context(cert_file, key_file, gateway_ca_file)
