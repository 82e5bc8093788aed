"""The listener's HTTP layer: one handler that walks the upstream check order.

Behind a gateway with mTLS (``trusted_gateways``), a TLS peer that is not on the gateway
allow-list gets 403 ``untrusted-proxy`` before anything else is looked at (upstream leaves
this to Istio's mesh). Then the order and status codes follow upstream's listener
(reference §5) so SKR-side retry logic behaves the same: 413 body too large → 405 not
POST → 400 wrong contract (upstream today routes only ``/v2``: 404) → 500 body unreadable
→ 400 not a WatchEvent (upstream: 500) →
401 no usable client certificate → 400 empty CN → 403 a verify hook refused → 503
consumer too slow → 200. Every error is JSON ``{"error": ..., "reason": ...}``.

Not in upstream: a body slower than ``body_timeout`` → 408, an ``Expect`` other than
``100-continue`` → 417 (both close the connection); a request head slower than
``header_timeout`` is cut by aiohttp (``keepalive_timeout``, see ``server.py``). Bytes
that are not HTTP/1.1 at all are refused by aiohttp's parser before this handler runs
(400 ``text/plain``, connection closed); the only 5xx are 500 (body unreadable, verify
hook broken) and 503 (consumer too slow, shutting down) — tests/watcher/hostile checks
this with 10,000 generated requests.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from cryptography import x509

from watcher.errors import InvalidWatchEvent
from watcher.listener import metrics as m
from watcher.listener.certs import CACHE_SIZE, runtime_id
from watcher.listener.config import ListenerConfig
from watcher.listener.errors import (
    BackpressureTimeout,
    ClientCertificateError,
    CommonNameError,
    StreamClosed,
    UntrustedProxy,
    VerificationFailed,
)
from watcher.listener.gateway_trust import TrustedGateways
from watcher.listener.metrics import ListenerMetrics
from watcher.listener.stream import EventStream, ListenerEvent
from watcher.listener.verify import Rejection, VerifyHook, VerifyRequest
from watcher.listener.xfcc import XFCC_HEADER, certificate_from_xfcc
from watcher.model import WatchEvent, decode_event
from watcher.serverheader import without_server_header

logger = logging.getLogger("watcher.listener")

Clock = Callable[[], float]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_TOO_LARGE = "request body too large"


class _BodyTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def error_response(
    status: int, error: str, reason: str, *, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response({"error": error, "reason": reason}, status=status, headers=headers)


async def read_body(request: web.Request, limit: int) -> bytes:
    """Read at most ``limit`` bytes; chunked and compressed bodies have no usable
    Content-Length, so the limit is enforced on what actually arrives."""
    body = bytearray()
    while chunk := await request.content.readany():
        body += chunk
        if len(body) > limit:
            raise _BodyTooLarge(len(body))
    return bytes(body)


def xfcc_certificate(request: web.Request, max_bytes: int) -> x509.Certificate:
    """The certificate the gateway forwarded; the first XFCC header value counts."""
    values = request.headers.getall(XFCC_HEADER, [])
    return certificate_from_xfcc(values[0] if values else None, max_bytes=max_bytes)


def tls_peer_certificate(request: web.Request) -> x509.Certificate:
    """The certificate the client presented in the TLS handshake with this listener."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        raise ClientCertificateError("no TLS client certificate on this connection")
    return _certificate_of_der(der)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _certificate_of_der(der: bytes) -> x509.Certificate:
    """Parsed once per distinct certificate (same bytes, same certificate; failures are
    raised, not cached), as for the XFCC header."""
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise ClientCertificateError(f"TLS client certificate is unparsable: {exc}") from None


def gateway_peer_check(trusted: TrustedGateways) -> Callable[[web.Request], str | None]:
    """A per-request check that the TLS peer is a trusted gateway: ``None`` if it is,
    else the reason. Verdicts are cached by certificate, since a gateway keeps its
    connections (and certificate) for many requests."""
    verdicts: dict[bytes, str | None] = {}

    def check(request: web.Request) -> str | None:
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return "no TLS client certificate on this connection; only the gateway may connect"
        if der in verdicts:
            return verdicts[der]
        try:
            trusted.check(x509.load_der_x509_certificate(der))
            verdict: str | None = None
        except UntrustedProxy as exc:
            verdict = str(exc)
        except ValueError as exc:
            verdict = f"TLS client certificate is unparsable: {exc}"
        if len(verdicts) >= 64:  # rotation leaves old certificates behind; stay bounded
            verdicts.clear()
        verdicts[der] = verdict
        return verdict

    return check


def _hook_name(hook: VerifyHook) -> str:
    return str(getattr(hook, "__qualname__", None) or repr(hook))


class EventHandler:
    """Turns one HTTP request into an accepted ``ListenerEvent`` or an error response."""

    def __init__(
        self,
        config: ListenerConfig,
        *,
        stream: EventStream,
        metrics: ListenerMetrics,
        clock: Clock,
    ) -> None:
        self._config = config
        self._stream = stream
        self._metrics = metrics
        self._clock = clock
        trusted = config.trusted_gateways if config.identity == "xfcc" else None
        self._peer_check = gateway_peer_check(trusted) if trusted is not None else None

    def _reject(
        self,
        request: web.Request,
        status: int,
        category: str,
        error: str,
        reason: str,
        *,
        headers: Mapping[str, str] | None = None,
        runtime: str | None = None,
        why: str | None = None,
    ) -> web.Response:
        """The error response; counted, logged, and — when the runtime is known — told to
        the rejection observers (``why``: a finer category than the metric's)."""
        self._metrics.rejected.labels(category).inc()
        if runtime is not None:
            rejection = Rejection(runtime, status, why or category, reason)
            for observe in self._config.rejection_observers:
                try:
                    observe(rejection)
                except Exception:
                    logger.exception("rejection observer failed")
        logger.info(
            "event rejected",
            extra={
                "fields": {
                    "status": status,
                    "category": category,
                    "reason": reason,
                    "path": request.path,
                    "remote": request.remote,
                }
            },
        )
        return error_response(status, error, reason, headers=headers)

    async def handle(self, request: web.Request) -> web.Response:
        """Each step returns its result or the response that ends the request."""
        received_at = self._clock()
        if self._peer_check is not None and (reason := self._peer_check(request)) is not None:
            return self._reject(request, 403, m.REJECT_UNTRUSTED_PROXY, "untrusted proxy", reason)
        rejection = self._check_request(request)
        if rejection is not None:
            return rejection
        event = await self._read_event(request)
        if isinstance(event, web.Response):
            return event
        identity = self._identify(request)
        if isinstance(identity, web.Response):
            return identity
        certificate, runtime = identity
        verify_request = VerifyRequest(
            runtime_id=runtime,
            event=event,
            certificate=certificate,
            contract=self._config.contract,
            headers=request.headers,
        )
        rejection = await self._verify(request, verify_request)
        if rejection is not None:
            return rejection
        accepted = ListenerEvent(
            runtime_id=runtime,
            event=event,
            received_at=received_at,
            contract=self._config.contract,
            certificate=certificate,
        )
        return await self._deliver(request, accepted)

    def _check_request(self, request: web.Request) -> web.Response | None:
        """413 by Content-Length, 405, 400 for the contract: all before reading a byte."""
        config = self._config
        limit = config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            response = self._reject(
                request,
                413,
                m.REJECT_BODY_TOO_LARGE,
                _TOO_LARGE,
                f"Content-Length is {request.content_length} bytes, limit is {limit}",
            )
            response.force_close()  # the unread body must not be taken for a new request
            return response
        if request.method != "POST":
            return self._reject(
                request,
                405,
                m.REJECT_METHOD,
                "method not allowed",
                f"{request.method} is not allowed, events must be POSTed",
                headers={"Allow": "POST"},
            )
        version = request.match_info.get("version", "")
        if version != config.contract:
            return self._reject(
                request,
                400,
                m.REJECT_CONTRACT,
                "wrong contract version",
                f"path has contract {version!r}, this listener serves {config.event_path}",
            )
        return None

    async def _read_event(self, request: web.Request) -> WatchEvent | web.Response:
        """413 while reading, 408 too slow, 500 unreadable, 400 not a WatchEvent (upstream:
        500)."""
        limit = self._config.max_body_bytes
        try:
            if request.content.is_eof():  # the body came with the head: nothing to wait for
                body = await read_body(request, limit)
            else:
                async with asyncio.timeout(self._config.body_timeout):
                    body = await read_body(request, limit)
        except TimeoutError:
            response = self._reject(
                request,
                408,
                m.REJECT_BODY_TIMEOUT,
                "request body too slow",
                f"body not complete within {self._config.body_timeout:g} s",
            )
            request.content.feed_eof()
            response.force_close()
            return response
        except _BodyTooLarge as exc:
            response = self._reject(
                request,
                413,
                m.REJECT_BODY_TOO_LARGE,
                _TOO_LARGE,
                f"body has more than {limit} bytes (read {exc.size})",
            )
            response.force_close()
            return response
        except (web.RequestPayloadError, HttpProcessingError, OSError) as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            response = self._reject(
                request,
                500,
                m.REJECT_UNREADABLE,
                "request body unreadable",
                f"reading the body failed: {detail}",
            )
            # The rest of the stream is garbage: don't let aiohttp drain it after the
            # response (it would log the same error again) and don't reuse the connection.
            request.content.feed_eof()
            response.force_close()
            return response
        try:
            event = decode_event(body)
        except InvalidWatchEvent as exc:
            return self._reject(request, 400, m.REJECT_INVALID_EVENT, "invalid event", str(exc))
        return event

    def _identify(self, request: web.Request) -> tuple[x509.Certificate, str] | web.Response:
        """401 without a usable client certificate, 400 without a runtime id in it."""
        config = self._config
        try:
            if config.identity == "direct-mtls":
                certificate = tls_peer_certificate(request)
            else:
                certificate = xfcc_certificate(request, config.max_xfcc_bytes)
        except ClientCertificateError as exc:
            return self._reject(
                request, 401, m.REJECT_CLIENT_CERT, "no usable client certificate", str(exc)
            )
        try:
            return certificate, runtime_id(certificate)
        except CommonNameError as exc:
            return self._reject(request, 400, m.REJECT_COMMON_NAME, "no runtime id", str(exc))

    async def _verify(
        self, request: web.Request, verify_request: VerifyRequest
    ) -> web.Response | None:
        """403 when a hook refuses, 500 when a hook breaks; hooks run in order."""
        for hook in self._config.verify_hooks:
            try:
                await hook(verify_request)
            except VerificationFailed as exc:
                self._metrics.verification_failed.labels(exc.category).inc()
                self._metrics.failed_verification.labels(m.SERVER_NAME, request.path).inc()
                return self._reject(
                    request,
                    403,
                    m.REJECT_VERIFICATION,
                    "verification failed",
                    exc.reason,
                    runtime=verify_request.runtime_id,
                    why=exc.category,
                )
            except Exception as exc:  # CancelledError is a BaseException and propagates
                name = _hook_name(hook)
                logger.exception(
                    "verify hook failed",
                    extra={"fields": {"hook": name, "runtime_id": verify_request.runtime_id}},
                )
                return self._reject(
                    request,
                    500,
                    m.REJECT_VERIFY_ERROR,
                    "verification error",
                    f"verify hook {name} failed ({type(exc).__name__}); see the listener log",
                    runtime=verify_request.runtime_id,
                )
        return None

    async def _deliver(self, request: web.Request, accepted: ListenerEvent) -> web.Response:
        """200 once the stream took the event, 503 (with Retry-After) when it did not."""
        retry = {"Retry-After": str(self._config.retry_after_seconds)}
        try:
            await self._stream.put(accepted, max_wait=self._config.backpressure_timeout)
        except BackpressureTimeout as exc:
            self._metrics.backpressure_timeouts.inc()
            return self._reject(
                request,
                503,
                m.REJECT_BACKPRESSURE,
                "event consumer too slow",
                str(exc),
                headers=retry,
                runtime=accepted.runtime_id,
            )
        except StreamClosed as exc:
            return self._reject(
                request,
                503,
                m.REJECT_SHUTDOWN,
                "listener shutting down",
                str(exc),
                headers=retry,
                runtime=accepted.runtime_id,
            )
        self._metrics.accepted.inc()
        logger.debug(
            "event accepted",
            extra={
                "fields": {
                    "runtime_id": accepted.runtime_id,
                    "watched": str(accepted.event.watched),
                }
            },
        )
        return web.json_response({"status": "accepted", "runtime_id": accepted.runtime_id})


def build_app(
    config: ListenerConfig, event_handler: EventHandler, metrics: ListenerMetrics
) -> web.Application:
    """The aiohttp application: the event route, optional ``/metrics``, JSON 404s."""

    @web.middleware
    async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        metrics.inflight.inc()
        try:
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # aiohttp's own, e.g. 404 for ``OPTIONS *``
                if exc.status < 400:
                    raise
                response = error_response(exc.status, exc.reason, "refused by the HTTP layer")
            status = response.status
            return response
        finally:
            took = time.perf_counter() - start
            metrics.inflight.dec()
            metrics.requests.labels(m.SERVER_NAME, str(status)).inc()
            metrics.duration.observe(took)
            metrics.last_duration.set(took)
            if status >= 400:
                metrics.request_errors.inc()
            if status == 413:
                metrics.too_large.inc()

    async def serve_metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def not_found(request: web.Request) -> web.Response:
        return error_response(
            404, "not found", f"no route for {request.path}; events go to {config.event_path}"
        )

    async def expect_continue(request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue`` as aiohttp does it; anything else → JSON 417."""
        expect = request.headers.get("Expect", "")
        if expect.lower() != "100-continue":
            metrics.rejected.labels(m.REJECT_EXPECTATION).inc()
            response = error_response(
                417, "expectation failed", f"Expect: {expect!r} is not supported"
            )
            response.force_close()  # the body, if any, was not read
            return response
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer proper has not started yet
        return None

    app = without_server_header(web.Application(middlewares=[observe]))
    app.router.add_route(
        "*",
        "/{version:[^/]+}/" + config.component + "/event",
        event_handler.handle,
        expect_handler=expect_continue,
    )
    if config.serve_metrics:
        app.router.add_get("/metrics", serve_metrics)
    # any characters, newlines too: ``.*`` would leave ``%0A`` to aiohttp's text/plain 404
    app.router.add_route("*", r"/{tail:[\s\S]*}", not_found, expect_handler=expect_continue)
    return app


def describe(config: ListenerConfig) -> dict[str, Any]:
    """Log fields that say what this listener serves."""
    return {
        "component": config.component,
        "contract": config.contract,
        "path": config.event_path,
        "identity": config.identity,
        "xfcc_trust": config.xfcc_trust,
        "buffer_size": config.buffer_size,
    }
