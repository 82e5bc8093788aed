"""Shared pieces of the gateway tests: real PKI files, mTLS clients, VirtualServices."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from watcher.pki import (
    create_ca,
    issue_runtime_certificate,
    issue_server_certificate,
    write_atomic,
)
from watcher.render.envoy import TlsFiles


@dataclass(frozen=True)
class Pki:
    gateway: TlsFiles  # serving cert + key of the gateway, KCP CA bundle
    runtime_cert: Path
    runtime_key: Path
    foreign_cert: Path  # same CN, signed by a CA the gateway does not trust
    foreign_key: Path
    ca: Path
    runtime_id: str = "runtime-a"


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, foreign_ca = create_ca("kcp-ca"), create_ca("foreign-ca")
    server = issue_server_certificate(ca, "kcp-gateway")
    runtime = issue_runtime_certificate(ca, "runtime-a", "skr-a.example.com")
    foreign = issue_runtime_certificate(foreign_ca, "runtime-a", "skr-a.example.com")
    files = {
        "ca.crt": ca.cert_pem,
        "gw.crt": server.cert_pem,
        "gw.key": server.key_pem,
        "rt.crt": runtime.cert_pem,
        "rt.key": runtime.key_pem,
        "foreign.crt": foreign.cert_pem,
        "foreign.key": foreign.key_pem,
    }
    for name, data in files.items():
        write_atomic(directory / name, data)
    return Pki(
        gateway=TlsFiles(
            cert_chain=str(directory / "gw.crt"),
            private_key=str(directory / "gw.key"),
            ca=str(directory / "ca.crt"),
        ),
        runtime_cert=directory / "rt.crt",
        runtime_key=directory / "rt.key",
        foreign_cert=directory / "foreign.crt",
        foreign_key=directory / "foreign.key",
        ca=directory / "ca.crt",
    )


def client_context(pki: Pki, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def virtual_service(name: str, manager: str, service: str, port: int = 8080) -> dict[str, Any]:
    """A VirtualService like the one KLM renders for a Watcher (namespace kcp-system)."""
    return {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": {"name": name, "namespace": "kcp-system"},
        "spec": {
            "gateways": ["kcp-system/klm-watcher"],
            "hosts": ["listener.kyma.local"],
            "http": [
                {
                    "name": f"kcp-system/{name}",
                    "match": [{"uri": {"prefix": f"/v2/{manager}/event"}}],
                    "route": [
                        {
                            "destination": {
                                "host": f"{service}.kcp-system.svc.cluster.local",
                                "port": {"number": port},
                            }
                        }
                    ],
                }
            ],
        },
    }


def service_key(service: str, port: int = 8080) -> str:
    return f"{service}.kcp-system.svc.cluster.local:{port}"


EVENT = {
    "watched": {"name": "kyma-sample", "namespace": "kcp-system"},
    "watchedGvk": {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
}


async def post_event(
    session: aiohttp.ClientSession,
    url: str,
    context: ssl.SSLContext,
    headers: dict[str, str] | None = None,
) -> tuple[int, str]:
    async with session.post(
        url, data=json.dumps(EVENT), headers=headers or {}, ssl=context
    ) as response:
        return response.status, await response.text()


async def eventually(
    check: Callable[[], Awaitable[bool]], *, within: float = 5.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() >= deadline:
            raise AssertionError(f"{what} not reached within {within} s")
        await asyncio.sleep(0.01)  # polling a condition until the deadline
