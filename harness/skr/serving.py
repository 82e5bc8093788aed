"""Which certificate a host-run webhook presents: one TLS handshake, and polling for a new one.

A rotation is done only when the webhook serves the new certificate (it reloads its files
without restart), so the installation asks the webhook itself instead of trusting files.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from harness.clusters import ports
from harness.skr.errors import SkrInstallError
from watcher import pki

HANDSHAKE_TIMEOUT = 3.0
"""Seconds one look at the webhook's certificate may take: a peer that accepted and then
says nothing (a process starting or stopping) is asked again, not waited on."""


async def served_certificate(skr: str, bind_host: str, port: int, ca_bundle_pem: bytes) -> bytes:
    """The DER certificate SKR ``skr``'s webhook, bound to ``bind_host:port``, presents now."""
    context = ssl.create_default_context(cadata=ca_bundle_pem.decode("ascii"))
    context.check_hostname = False  # we compare the certificate itself
    context.verify_mode = ssl.CERT_NONE  # expired/foreign overrides must be readable too
    host = ports.LOOPBACK if bind_host == "0.0.0.0" else bind_host
    async with asyncio.timeout(HANDSHAKE_TIMEOUT):
        _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    if not der:
        raise SkrInstallError(f"SKR {skr}: webhook presented no certificate")
    return bytes(der)


async def wait_serving(
    skr: str,
    bind_host: str,
    port: int,
    ca_bundle_pem: bytes,
    leaf: pki.Issued,
    *,
    within: float,
    log_path: Path,
) -> float:
    """Poll until the webhook serves ``leaf``; seconds it took (``log_path``: its log, for
    the error)."""
    wanted = leaf.certificate.public_bytes(serialization.Encoding.DER)
    loop = asyncio.get_running_loop()
    started = loop.time()
    last = "no handshake yet"
    while True:
        try:
            if await served_certificate(skr, bind_host, port, ca_bundle_pem) == wanted:
                return loop.time() - started
            last = "an older certificate"
        except TimeoutError:
            last = f"no TLS answer within {HANDSHAKE_TIMEOUT:g} s"
        except (OSError, ssl.SSLError) as e:
            last = f"{type(e).__name__}: {e}"
        if loop.time() - started > within:
            raise SkrInstallError(
                f"SKR {skr}: webhook still serves {last} after {within:g} s; log: {log_path}"
            )
        await asyncio.sleep(0.05)  # polling a condition, not guessing readiness
