"""Certificates, a running listener and an HTTP client for the listener tests.

A plain module with a unique name (not conftest.py): several conftest modules exist in
the tree and ``import conftest`` would pick whichever was imported last.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from multidict import CIMultiDict

from watcher.listener import XFCC_HEADER, Listener, ListenerConfig, ListenerEvent, format_xfcc
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent

_KEY = ec.generate_private_key(ec.SECP256R1())
_NOW = datetime.datetime.now(datetime.UTC)


def make_cert(
    common_name: str | None = "runtime-a",
    *,
    extra_names: Iterable[tuple[x509.ObjectIdentifier, str]] = (),
    dns: Iterable[str] = (),
    uris: Iterable[str] = (),
    ips: Iterable[str] = (),
) -> x509.Certificate:
    """A certificate with exactly the subject and SANs asked for (signed by one test key).

    The listener never checks the chain (the gateway did), so a self-issued certificate
    is enough wherever the certificate only travels in an XFCC header.
    """
    attributes = [x509.NameAttribute(oid, value) for oid, value in extra_names]
    if common_name is not None:
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    name = x509.Name(attributes)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")]))
        .public_key(_KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(hours=1))
        .not_valid_after(_NOW + datetime.timedelta(days=1))
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.UniformResourceIdentifier(u) for u in uris]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(_KEY, hashes.SHA256())


def pem_of(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class TlsFiles:
    """PEM files in tmp_path for a direct-mTLS listener and one client."""

    ca: trustme.CA
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_chain: Path  # key and certificate in one file


async def until(predicate: Callable[[], bool], deadline: float = 5.0) -> None:
    """Let the loop run until ``predicate()`` holds; fail after ``deadline`` seconds.

    For states inside our own process that have no event to wait on (a handler parked in
    the stream); every step yields, so nothing is slept through.
    """
    async with asyncio.timeout(deadline):
        while not predicate():
            await asyncio.sleep(0.001)


# --------------------------------------------------------------------------------------
# A listener under test and a client for it

COMPONENT = "lifecycle-manager"
PATH = f"/v2/{COMPONENT}/event"
BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
EVENT = WatchEvent(
    ObjectKey("kyma-system", "default"),
    GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma"),
)
CERT = make_cert("runtime-a", dns=["skr-a.example.com", "skr-webhook.kyma-system.svc"])
XFCC = {XFCC_HEADER: format_xfcc(CERT)}
NOW = 1_700_000_000.25


@asynccontextmanager
async def running(**settings: Any) -> AsyncIterator[Listener]:
    config = ListenerConfig(component=COMPONENT, **settings)
    async with Listener(config, clock=lambda: NOW) as listener:
        yield listener


async def call(
    session: aiohttp.ClientSession,
    url: str,
    *,
    body: Any = BODY,
    headers: Mapping[str, str] | CIMultiDict[str] | None = None,
    method: str = "POST",
) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    async with session.request(
        method, url, data=body, headers=XFCC if headers is None else headers
    ) as response:
        payload = await response.json() if response.content_type == "application/json" else {}
        return response.status, payload, response.headers


async def next_event(listener: Listener) -> ListenerEvent:
    return await asyncio.wait_for(anext(listener.events()), 2)


def rejected(listener: Listener, reason: str) -> float:
    return listener.metrics.value("watcher_listener_events_rejected_total", {"reason": reason})


class Kymas:
    def __init__(self, annotations: dict[str, dict[str, str]]) -> None:
        self.annotations = annotations

    async def __call__(self, runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None:
        return self.annotations.get(str(owner) if owner else runtime_id)
