"""The listener's sidecar: where the harness sees, on the wire, the events any KLM gets.

Behind Istio the gateway reaches KLM's listener through its pod's sidecar, which hands the
request over as plain HTTP with XFCC. :class:`ListenerSidecar` plays that hop for a KLM the
harness did not write, forwarding unchanged and recording every :class:`Exchange`; an
accepted event goes to ``on_accepted`` as the same record our in-process listener gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from harness.aio import Service
from harness.clusters import ports
from watcher.errors import WatcherError
from watcher.listener import ListenerEvent, runtime_id
from watcher.listener.xfcc import XFCC_HEADER, certificate_from_xfcc
from watcher.model import WatchEvent, decode_event

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"}
)
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class Exchange:
    """One request the gateway handed to the listener, and its answer."""

    at: float  # when the request reached the sidecar (its answer may come much later)
    method: str
    path: str
    status: int  # 502: the listener could not be reached
    runtime_id: str | None = None  # None: no readable client certificate in XFCC
    event: WatchEvent | None = None  # None: the body is no WatchEvent


def _identity(header: str | None) -> str | None:
    try:
        return runtime_id(certificate_from_xfcc(header))
    except (WatcherError, ValueError):
        return None


def _event(body: bytes) -> WatchEvent | None:
    try:
        return decode_event(body)
    except (WatcherError, ValueError):
        return None


class ListenerSidecar(Service):
    """``async with ListenerSidecar(listener_port) as sidecar:`` — route to ``sidecar.port``."""

    def __init__(
        self,
        listener_port: int,
        *,
        host: str = "127.0.0.1",
        component: str = "lifecycle-manager",
    ) -> None:
        self.listener = f"http://{host}:{listener_port}"
        self.host = host
        self.component = component
        self.port = 0
        self.exchanges: list[Exchange] = []
        self.on_accepted: list[Callable[[ListenerEvent], None]] = []
        self._client: aiohttp.ClientSession | None = None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        arrived = time.time()  # a listener may answer only once the event was consumed
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        assert self._client is not None
        try:
            async with self._client.request(
                request.method, self.listener + request.path_qs, data=body, headers=headers
            ) as answer:
                content = await answer.read()
                status = answer.status
                out_headers = {
                    k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP
                }
        except (aiohttp.ClientError, OSError) as exc:
            status, content, out_headers = 502, f"sidecar: {exc}".encode(), {}
        self._record(request, body, status, arrived)
        return web.Response(status=status, body=content, headers=out_headers)

    def _record(self, request: web.Request, body: bytes, status: int, arrived: float) -> None:
        exchange = Exchange(
            at=arrived,
            method=request.method,
            path=request.path,
            status=status,
            runtime_id=_identity(request.headers.get(XFCC_HEADER)),
            event=_event(body) if request.method == "POST" else None,
        )
        self.exchanges.append(exchange)
        if 200 <= status < 300 and exchange.event is not None and exchange.runtime_id:
            accepted = ListenerEvent(exchange.runtime_id, exchange.event, exchange.at)
            for observe in list(self.on_accepted):
                observe(accepted)

    async def start(self) -> None:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self._client = await self.stack.enter_async_context(session)
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self.stack.push_async_callback(runner.cleanup)
        self.port = ports.free_port()
        await web.TCPSite(runner, self.host, self.port).start()
