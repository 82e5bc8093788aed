"""The admission endpoint: HTTP decoding around ``decide_request`` and ``Delivery``.

``POST /validate/<manager>`` is the only route. A review that parses is always answered
``allowed: true`` (a watcher must never block a write); one that does not parse gets a
4xx with ``{"error": ...}`` saying what is wrong, where upstream answered 200 with an
empty body, which the API server reports as an opaque webhook failure.

Messages are upstream's, with one intentional difference: in async mode an event that
was queued is answered ``kcp request queued`` (delivery happens after the answer, so
``kcp request succeeded`` would be a claim we cannot make yet).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from watcher.decide import KCP_REQUEST_FAILED, Reason, decide_request
from watcher.errors import InvalidAdmissionReview
from watcher.model import Contract, admission_response, encode_event, parse_admission_review
from watcher.paths import event_path, validate_manager_name
from watcher.serverheader import without_server_header
from watcher.webhook.coalesce import Offer
from watcher.webhook.delivery import Delivery
from watcher.webhook.metrics import FailReason, WebhookMetrics

log = logging.getLogger("watcher.webhook.admission")

KCP_REQUEST_QUEUED = "kcp request queued"
SECURITY_HEADERS = {
    "Strict-Transport-Security": "max-age=31536000; includeSubDomains",
    "Content-Security-Policy": "default-src 'self'",
}
MISSING_KCP_CONFIG = f"{KCP_REQUEST_FAILED}: KCP_ADDR or KCP_CONTRACT is not set"


@dataclass(frozen=True)
class AdmissionConfig:
    """What the handler needs to know besides its collaborators."""

    kcp_addr: str | None
    kcp_contract: Contract | None
    mode: str = "async"
    legacy_owner: bool = False  # WATCHER_LEGACY_OWNER: upstream before 2.1 (owner field)
    max_body_bytes: int = 8 * 1024 * 1024
    body_timeout: float = 10.0


class _BadRequest(Exception):
    """``close``: the body was not read to its end, so the connection cannot be reused."""

    def __init__(self, status: int, error: str, *, close: bool = False) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.close = close


def error_response(status: int, error: str, **headers: str) -> web.Response:
    return web.json_response({"error": error}, status=status, headers=headers or None)


class AdmissionHandler:
    """Turns one HTTP request into one admission answer."""

    def __init__(
        self,
        *,
        config: AdmissionConfig,
        delivery: Delivery,
        metrics: WebhookMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.delivery = delivery
        self.metrics = metrics
        self.clock = clock

    async def handle(self, request: web.Request) -> web.StreamResponse:
        start = self.clock()
        self.metrics.admission_requests.inc()
        try:
            return await self._handle(request)
        except _BadRequest as exc:
            self.metrics.admission_errors.inc()
            log.debug("admission request rejected (%d): %s", exc.status, exc.error)
            extra = {"Allow": "POST"} if exc.status == 405 else {}
            response = error_response(exc.status, exc.error, **extra)
            if exc.close:
                response.force_close()  # the unread rest of the body is no new request
            return response
        finally:
            self.metrics.request_duration.set(self.clock() - start)

    async def _read_review(self, request: web.Request) -> tuple[str, Any]:
        if request.method != "POST":
            raise _BadRequest(405, f"method {request.method} is not allowed; use POST")
        manager = request.match_info.get("manager", "")
        try:
            validate_manager_name(manager)
        except ValueError as exc:
            raise _BadRequest(400, f"manager in path /validate/<manager> {exc}") from None
        limit = self.config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise _BadRequest(
                413, f"body of {request.content_length} bytes exceeds {limit}", close=True
            )
        try:
            if request.content.is_eof():  # the body came with the head: no timer needed
                raw = await request.read()
            else:
                async with asyncio.timeout(self.config.body_timeout):
                    raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _BadRequest(413, f"body exceeds {limit} bytes", close=True) from None
        except TimeoutError:
            timeout = self.config.body_timeout
            raise _BadRequest(408, f"body not received within {timeout:g} s", close=True) from None
        except (web.RequestPayloadError, HttpProcessingError, OSError) as exc:
            # Bad chunking or compression, or the client went away mid-body (aiohttp
            # raises ConnectionResetError). The rest of the stream is garbage: keep aiohttp
            # from draining it after the answer (it would log the error again).
            request.content.feed_eof()
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise _BadRequest(400, f"body unreadable: {detail}", close=True) from None
        if not raw:
            raise _BadRequest(400, "body is empty; expected an AdmissionReview")
        try:
            return manager, json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _BadRequest(400, f"body is not valid JSON: {exc}") from None
        except RecursionError:
            raise _BadRequest(400, "body is nested too deeply") from None

    async def _handle(self, request: web.Request) -> web.Response:
        manager, review = await self._read_review(request)
        contract: Contract = self.config.kcp_contract or "v2"
        try:
            admission = parse_admission_review(review)
            decision = decide_request(
                admission, manager=manager, legacy_owner=self.config.legacy_owner
            )
        except InvalidAdmissionReview as exc:
            raise _BadRequest(400, f"invalid AdmissionReview: {exc}") from None
        except RecursionError:
            raise _BadRequest(400, "AdmissionReview is nested too deeply") from None
        if decision.send and decision.event is not None:
            self.metrics.kcp_requests.inc()
            path = event_path(contract, manager)
            message = await self._send(path, encode_event(decision.event))
        else:
            message = decision.message
            if decision.reason is Reason.INVALID_SUBRESOURCE:
                self.metrics.fail(FailReason.INVALID_SUBRESOURCE)
            elif decision.reason is Reason.UNKNOWN_OWNER:
                self.metrics.fail(FailReason.UNKNOWN_OWNER)
        log.debug(
            "admission %s %s %s/%s reason=%s message=%r",
            admission.uid,
            admission.operation,
            admission.namespace,
            admission.name,
            decision.reason.value,
            message,
        )
        body = admission_response(admission.uid, message, admission.api_version)
        return web.json_response(body)

    async def _send(self, path: str, body: bytes) -> str:
        if not self.config.kcp_addr or not self.config.kcp_contract:
            self.metrics.fail(FailReason.MISSING_ADDRESS_OR_CONTRACT)
            return MISSING_KCP_CONFIG
        if self.config.mode == "sync":
            _, message = await self.delivery.deliver_now(path, body)
            return message
        outcome = self.delivery.submit(path, body)
        if outcome is Offer.REJECTED:
            if self.delivery.closing:
                return f"{KCP_REQUEST_FAILED}: webhook is shutting down"
            return f"{KCP_REQUEST_FAILED}: delivery queue is full"
        await self.delivery.durable()  # no-op unless WATCHER_SPOOL_FSYNC is on
        return KCP_REQUEST_QUEUED


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Unknown paths and other framework errors answer JSON too, never an HTML page."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    del request
    response.headers.update(SECURITY_HEADERS)


# Any characters, newlines too: ``.*`` would let ``%0A`` fall through to aiohttp's
# own text/plain 404 instead of our JSON answers.
_ANY = r"[\s\S]*"


async def _not_found(request: web.Request) -> web.Response:
    return error_response(404, f"no route for {request.path}; reviews go to /validate/<manager>")


async def expect_continue(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue`` as aiohttp does it; any other expectation → JSON 417."""
    expect = request.headers.get("Expect", "")
    if expect.lower() != "100-continue":
        response = error_response(417, f"Expect: {expect!r} is not supported")
        response.force_close()  # the body, if any, was not read
        return response
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the answer proper has not started yet
    return None


def build_runner(
    handler: AdmissionHandler, *, header_timeout: float, access_log: logging.Logger | None = None
) -> web.AppRunner:
    """The app with the server limits that are not per request.

    ``keepalive_timeout`` is also how long a connection may take to deliver a complete
    request head (aiohttp closes a connection whose request has not arrived by then, from
    the connect or from the previous answer), so it bounds slowloris clients; aiohttp's
    default is an hour. Bodies are not decompressed: the API server never compresses a
    review, and inflating one would be a way around ``max_body_bytes`` checks on the wire.
    A refused body is not read to its end afterwards (``lingering_time=0``): the
    connection closes with the answer, so a slow or endless body costs at most
    ``body_timeout`` (aiohttp would otherwise keep reading it for another 10 s).
    """
    return web.AppRunner(
        build_app(handler),
        access_log=access_log,
        shutdown_timeout=5.0,
        keepalive_timeout=header_timeout,
        auto_decompress=False,
        lingering_time=0,
    )


def build_app(handler: AdmissionHandler) -> web.Application:
    """The aiohttp application; ``client_max_size`` enforces the body limit while reading."""
    app = web.Application(middlewares=[json_errors], client_max_size=handler.config.max_body_bytes)
    without_server_header(app)
    app.router.add_route("*", "/validate", handler.handle, expect_handler=expect_continue)
    app.router.add_route(
        "*", "/validate/{manager:" + _ANY + "}", handler.handle, expect_handler=expect_continue
    )
    app.router.add_route("*", "/{tail:" + _ANY + "}", _not_found, expect_handler=expect_continue)
    app.on_response_prepare.append(_security_headers)
    return app
