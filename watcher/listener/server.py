"""``Listener``: owns the aiohttp server, the event stream and the metrics of one listener."""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Self

from aiohttp import web

from watcher.listener.config import ListenerConfig
from watcher.listener.errors import ListenerError, ListenerStartError
from watcher.listener.handler import Clock, EventHandler, build_app, describe
from watcher.listener.metrics import ListenerMetrics
from watcher.listener.stream import EventStream

logger = logging.getLogger("watcher.listener")

# aiohttp refuses header fields above 8190 bytes with its own 400; XFCC headers up to
# the configured limit (and somewhat beyond) must reach the handler to get our 401.
_MIN_FIELD_SIZE = 8190


class Listener:
    """The KCP-side event listener as an async context manager.

    ``async with Listener(config) as listener: async for ev in listener.events(): ...``
    Leaving the context refuses new events, answers waiting senders 503, stops the
    server and ends ``events()`` iteration once the already accepted events are consumed.
    """

    def __init__(self, config: ListenerConfig, *, clock: Clock = time.time) -> None:
        self._config = config
        self._stream = EventStream(config.buffer_size)
        self._metrics = ListenerMetrics(
            buffered=self._stream.buffered, waiting=self._stream.waiting
        )
        self._handler = EventHandler(
            config, stream=self._stream, metrics=self._metrics, clock=clock
        )
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def config(self) -> ListenerConfig:
        return self._config

    @property
    def metrics(self) -> ListenerMetrics:
        return self._metrics

    @property
    def port(self) -> int:
        """The bound port (useful with ``port=0``); only while running."""
        if self._port is None:
            raise ListenerError("listener is not running")
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:43210``."""
        host = self._config.host
        if ":" in host:
            host = f"[{host}]"
        return f"{self._config.scheme}://{host}:{self.port}"

    @property
    def event_url(self) -> str:
        return self.url + self._config.event_path

    def events(self) -> EventStream:
        """Accepted events in arrival order; several consumers share (split) them."""
        return self._stream

    async def start(self) -> None:
        if self._runner is not None:
            raise ListenerError("listener is already running")
        if self._stream.closed:
            raise ListenerError("a stopped Listener cannot be restarted; create a new one")
        config = self._config
        app = build_app(config, self._handler, self._metrics)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=config.shutdown_timeout,
            max_field_size=max(_MIN_FIELD_SIZE, 2 * config.max_xfcc_bytes),
            # aiohttp closes a connection whose request head has not arrived this long
            # after the connect or the previous answer (its default is an hour)
            keepalive_timeout=config.header_timeout,
            # a body left unread by a refusal ends the connection instead of being read
            # and discarded (which aiohttp logs as an error when it does not decompress)
            lingering_time=0,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, config.host, config.port, ssl_context=config.ssl_context)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ListenerStartError(
                f"listener cannot listen on {config.host}:{config.port}: {exc}"
            ) from exc
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        logger.info("listening", extra={"fields": {"url": self.url, **describe(config)}})
        if config.xfcc_trust == "any-client":
            logger.warning(
                "XFCC is believed from any client: no gateway mTLS configured "
                "(trusted_gateways); use only where nobody but the gateway can connect",
                extra={"fields": {"url": self.url}},
            )

    async def stop(self) -> None:
        """Idempotent; refuses new events first so blocked handlers finish quickly."""
        self._stream.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
            logger.info("stopped", extra={"fields": {"url": self.url}})
        self._port = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
