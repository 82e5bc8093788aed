"""The HTTPS requests of ``request`` steps: one request and its :class:`HttpOutcome`, and
the broken client certificates that probe the gateway.

Apart from the sessions because it needs no environment: a session says where a request
goes and with which certificate, this sends it.
"""

from __future__ import annotations

import json
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from harness.skr.certs import CertificateOverride, issue_webhook_certificate
from watcher import pki

REQUEST_TIMEOUT = 10.0
FOREIGN_RUNTIME_ID = "foreign-runtime"
FOREIGN_SKR_DOMAIN = "foreign.kyma.example.com"


@dataclass(frozen=True)
class HttpOutcome:
    """What one ``request`` got: a response ``status``, or ``refused`` (the TLS handshake or
    connection was refused or reset), or neither (``detail`` says what went wrong)."""

    status: int | None = None
    refused: bool = False
    detail: str = ""

    def describe(self) -> str:
        if self.status is not None:
            return f"status {self.status}"
        if self.refused:
            return f"refused ({self.detail})" if self.detail else "refused"
        return f"no response ({self.detail})"


def request_body(body: Mapping[str, Any] | str | None) -> tuple[bytes | None, dict[str, str]]:
    """The bytes to send and the content type they imply (objects go as JSON)."""
    if body is None:
        return None, {}
    if isinstance(body, str):
        return body.encode(), {}
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


def client_context(ca_bundle_pem: bytes, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """TLS client context trusting ``ca_bundle_pem``, presenting ``cert_pem``/``key_pem``
    (through a private temporary directory: ``ssl`` loads a key only from a file)."""
    context = ssl.create_default_context(cadata=ca_bundle_pem.decode())
    with tempfile.TemporaryDirectory(prefix="client-") as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(str(cert), str(key))
    return context


async def send_request(
    url: str,
    context: ssl.SSLContext,
    method: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any] | str | None,
    *,
    total_seconds: float = REQUEST_TIMEOUT,
) -> HttpOutcome:
    """One HTTPS request; a refused or reset TLS handshake or connection is an outcome,
    not an error. A server certificate the client does not trust is not a refusal."""
    data, implied = request_body(body)
    sent = {**implied, **headers}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=total_seconds)) as client,
            client.request(method, url, data=data, headers=sent, ssl=context) as response,
        ):
            await response.read()
            return HttpOutcome(status=response.status)
    except aiohttp.ClientConnectorCertificateError as exc:
        return HttpOutcome(detail=f"gateway certificate not trusted: {exc}")
    except TimeoutError:
        return HttpOutcome(detail=f"timed out after {total_seconds:g} s")
    except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
        return HttpOutcome(refused=True, detail=f"{type(exc).__name__}: {exc}")


PROBE_OVERRIDES: Mapping[str, Callable[[], CertificateOverride]] = {
    "foreign": CertificateOverride.foreign_ca,
    "expired": CertificateOverride.expired,
    "not-yet-valid": CertificateOverride.not_yet_valid,
    "empty-cn": CertificateOverride.empty_cn,
}


def probe_certificate(ca: pki.CertificateAuthority, kind: str) -> pki.Issued:
    """A fresh client certificate of ``kind`` (``foreign``: from a CA nobody trusts;
    ``expired``, ``not-yet-valid``, ``empty-cn``: from ``ca``, the KCP's current CA)."""
    if kind not in PROBE_OVERRIDES:
        raise ValueError(
            f"unknown probe certificate {kind!r}; use one of {sorted(PROBE_OVERRIDES)}"
        )
    override = PROBE_OVERRIDES[kind]()
    return issue_webhook_certificate(ca, FOREIGN_RUNTIME_ID, FOREIGN_SKR_DOMAIN, override)
