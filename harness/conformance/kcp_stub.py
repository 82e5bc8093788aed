"""The KCP as a webhook conformance check sees it: every request, byte for byte.

An HTTPS server on loopback that requires a client certificate from the test CA (TLS 1.3,
as KLM's gateway) and records, per request, the method, path, headers, exact body, the
client certificate's CN and the negotiated TLS version, then answers 200 with an empty
body, as upstream's listener does.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from harness.aio import Service
from harness.clusters.ports import LOOPBACK


@dataclass(frozen=True)
class KcpRequest:
    method: str
    path: str
    content_type: str
    body: bytes
    client_cn: str
    tls_version: str


def _common_name(peer: object) -> str:
    if not isinstance(peer, dict):
        return ""
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


class KcpStub(Service):
    """``async with KcpStub(cert, key, ca) as kcp:`` → ``kcp.address``, ``kcp.requests``."""

    def __init__(self, cert: Path, key: Path, ca: Path) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.load_cert_chain(cert, key)
        context.load_verify_locations(cafile=str(ca))
        context.verify_mode = ssl.CERT_REQUIRED
        self._context = context
        self.port = 0
        self.requests: list[KcpRequest] = []
        self._arrived = asyncio.Event()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    async def _handle(self, request: web.Request) -> web.Response:
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport else None
        self.requests.append(
            KcpRequest(
                method=request.method,
                path=request.path_qs,
                content_type=request.headers.get("Content-Type", ""),
                body=await request.read(),
                client_cn=_common_name(transport.get_extra_info("peercert") if transport else None),
                tls_version=ssl_object.version() if ssl_object is not None else "",
            )
        )
        self._arrived.set()
        return web.Response(status=200)

    async def wait(self, count: int, within: float) -> list[KcpRequest]:
        """The requests once there are ``count`` (or whatever came within ``within`` s)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while len(self.requests) < count:
                    self._arrived.clear()
                    await self._arrived.wait()
        return list(self.requests)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self.stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=self._context)
        await site.start()
        port = runner.addresses[0][1]
        assert isinstance(port, int)
        self.port = port
