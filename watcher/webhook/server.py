"""The running webhook: ``Webhook`` composes the parts; ``main`` is ``watcher-webhook``.

Start order is TLS → spool (if ``WATCHER_SPOOL_DIR``, async mode) → metrics server → KCP
client → delivery (replaying the spool) → HTTPS server, and stop is the reverse, so the
admission endpoint is the first thing to go (no new events), the queue is drained while
the KCP client still works, ``/metrics`` stays up to the end and the spool is closed last. A part
that fails to start unwinds the parts already started (``AsyncExitStack``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

from aiohttp import web

from watcher.errors import CertificateError, ConfigError
from watcher.serverheader import without_server_header
from watcher.webhook.app import AdmissionConfig, AdmissionHandler, build_runner
from watcher.webhook.delivery import Delivery, DrainReport
from watcher.webhook.kcpclient import KcpClient, KcpRequestSetupError, KcpResponse
from watcher.webhook.metrics import WebhookMetrics
from watcher.webhook.settings import WebhookSettings, load_settings
from watcher.webhook.spool import Spool, SpoolError, SpoolRecord
from watcher.webhook.tlsreload import TLSReloader

log = logging.getLogger("watcher.webhook")


class _NoKcp:
    """Sender used when ``KCP_ADDR`` is unset; the handler never reaches it."""

    async def post(self, path: str, body: bytes, *, time_limit: float) -> KcpResponse:
        raise KcpRequestSetupError("KCP_ADDR is not set")


def _bound_port(runner: web.AppRunner) -> int:
    port = runner.addresses[0][1]
    assert isinstance(port, int)
    return port


class Webhook:
    """One SKR webhook, in process: ``async with Webhook(settings) as hook: hook.port``.

    Ports 0 in ``settings`` bind free ports; ``port``/``metrics_port`` tell which. ``stop``
    returns the drain report (None in sync mode or before start).
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        metrics: WebhookMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or WebhookMetrics()
        self.tls = TLSReloader(settings.tls, interval=settings.tls_reload_interval)
        self._clock = clock
        self._rng = rng
        self._stack: AsyncExitStack | None = None
        self._ready = False
        self.delivery: Delivery | None = None
        self.spool: Spool | None = None
        self.drain_report: DrainReport | None = None
        self.port = 0
        self.metrics_port = 0

    @property
    def url(self) -> str:
        """``https://<host>:<port>`` of the admission server."""
        return f"https://{self.settings.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.settings.metrics_host}:{self.metrics_port}"

    async def __aenter__(self) -> Webhook:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start every part; raises ``CertificateError``/``OSError`` after unwinding."""
        s = self.settings
        async with AsyncExitStack() as stack:
            self.tls.load()
            self.tls.start()
            stack.push_async_callback(self.tls.stop)

            replay: list[SpoolRecord] = []
            spool: Spool | None = None
            if s.delivery.spool_dir is not None and s.delivery.mode == "async":
                spool = Spool(
                    s.delivery.spool_dir,
                    segment_bytes=s.delivery.spool_segment_bytes,
                    fsync=s.delivery.spool_fsync,
                )
                replay = spool.open()
                stack.callback(spool.close)
                self.metrics.spool_corrupt.inc(spool.corrupt_lines)
                if spool.corrupt_lines:
                    log.warning(
                        "spool %s: skipped %d torn or unreadable line(s)",
                        spool.directory,
                        spool.corrupt_lines,
                    )
            self.spool = spool

            metrics_runner = web.AppRunner(self._metrics_app(), access_log=None)
            await metrics_runner.setup()
            stack.push_async_callback(metrics_runner.cleanup)
            await web.TCPSite(metrics_runner, s.metrics_host, s.metrics_port).start()
            self.metrics_port = _bound_port(metrics_runner)

            sender: KcpClient | _NoKcp = _NoKcp()
            if s.kcp_base_url is not None:
                client = KcpClient(
                    s.kcp_base_url,
                    self.tls,
                    pool_size=s.delivery.pool_size,
                    keepalive_timeout=s.delivery.keepalive,
                )
                await client.start()
                stack.push_async_callback(client.close)
                sender = client

            delivery = Delivery(
                sender,
                settings=s.delivery,
                metrics=self.metrics,
                clock=self._clock,
                rng=self._rng,
                spool=spool,
            )
            delivery.start(replay)
            stack.push_async_callback(self._drain, delivery)
            self.delivery = delivery

            handler = AdmissionHandler(
                config=AdmissionConfig(
                    kcp_addr=s.kcp_addr,
                    kcp_contract=s.kcp_contract,
                    legacy_owner=s.legacy_owner,
                    mode=s.delivery.mode,
                    max_body_bytes=s.max_body_bytes,
                    body_timeout=s.body_timeout,
                ),
                delivery=delivery,
                metrics=self.metrics,
                clock=self._clock,
            )
            access_log = log if log.isEnabledFor(logging.DEBUG) else None
            runner = build_runner(handler, header_timeout=s.header_timeout, access_log=access_log)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            site = web.TCPSite(runner, s.host, s.port, ssl_context=self.tls.server_context)
            await site.start()
            self.port = _bound_port(runner)
            self._ready = True
            self._stack = stack.pop_all()
        log.info(
            "webhook listening on %s (metrics %s, delivery %s, KCP %s, spool %s)",
            self.url,
            self.metrics_url,
            s.delivery.mode,
            s.kcp_base_url or "not configured",
            self.spool.directory if self.spool is not None else "off",
        )

    async def _drain(self, delivery: Delivery) -> None:
        self._ready = False
        self.drain_report = await delivery.drain()

    async def stop(self) -> DrainReport | None:
        """Stop in reverse order; idempotent."""
        self._ready = False
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
            report = self.drain_report
            if report is not None and self.settings.delivery.mode == "async":
                log.info(
                    "webhook stopped: %d event(s) delivered while draining, %d left%s",
                    report.delivered,
                    report.left,
                    " (drain timed out)" if report.timed_out else "",
                )
        return self.drain_report if self.settings.delivery.mode == "async" else None

    def _metrics_app(self) -> web.Application:
        async def metrics(request: web.Request) -> web.Response:
            del request
            return web.Response(
                body=self.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"}
            )

        async def healthz(request: web.Request) -> web.Response:
            del request
            return web.json_response({"status": "ok"})

        async def readyz(request: web.Request) -> web.Response:
            del request
            if self._ready:
                return web.json_response({"status": "ready", "tlsGeneration": self.tls.generation})
            return web.json_response({"status": "not ready"}, status=503)

        app = without_server_header(web.Application())
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        return app


# ------------------------------------------------------------------------------ CLI


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: easy to grep and to ship to a log store."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("watcher").setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(level)


async def serve(settings: WebhookSettings) -> None:
    """Run until SIGTERM/SIGINT, then drain and stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Webhook(settings):
            await stop.wait()
            log.info("signal received; draining")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def main(argv: list[str] | None = None) -> int:
    """``watcher-webhook``: configuration from the environment only (see settings.py)."""
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print("usage: watcher-webhook\nconfigured by environment variables; see docs/webhook.md")
        return 0
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"watcher-webhook: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    try:
        asyncio.run(serve(settings))
    except CertificateError as exc:
        print(f"watcher-webhook: certificate error: {exc}", file=sys.stderr)
        return 2
    except SpoolError as exc:
        print(f"watcher-webhook: spool error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"watcher-webhook: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
