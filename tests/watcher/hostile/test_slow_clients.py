"""Slow, oversized and malformed clients against both servers on real loopback sockets.

The webhook runs as ``Webhook`` (HTTPS, as in production); the listener as ``Listener``
(plain HTTP, as behind the gateway). Timeouts are configured short (``HEADER_TIMEOUT``,
``BODY_TIMEOUT``) so the tests measure the real cut-off mechanism in seconds, and each
measured cut-off is asserted to fall within the configured value plus ``SLACK`` and
printed (``-s``) for docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from hostile_http import parse_response

from watcher.listener import Listener, ListenerConfig
from watcher.webhook.server import Webhook
from watcher.webhook.settings import TLSFiles, WebhookSettings, load_settings

HEADER_TIMEOUT = 1.5
BODY_TIMEOUT = 1.0
SLACK = 2.0  # scheduling on a loaded shared two-core machine (load average 5 seen)
WEBHOOK_MAX_BODY = 2**20  # room for 100,000 levels of nesting
LISTENER_MAX_BODY = 4096

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

Open = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


@dataclass
class Server:
    name: str
    open: Open
    path: str
    max_body: int


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[Server]:
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    files = TLSFiles(tmp_path / "ca.crt", tmp_path / "tls.crt", tmp_path / "tls.key")
    ca.cert_pem.write_to_path(files.ca_cert)
    leaf.cert_chain_pems[0].write_to_path(files.tls_cert)
    leaf.private_key_pem.write_to_path(files.tls_key)
    settings = WebhookSettings(
        tls=files,
        host="127.0.0.1",
        port=0,
        metrics_host="127.0.0.1",
        metrics_port=0,
        max_body_bytes=WEBHOOK_MAX_BODY,
        header_timeout=HEADER_TIMEOUT,
        body_timeout=BODY_TIMEOUT,
    )
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    async with Webhook(settings) as hook:

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", hook.port, ssl=client_ctx)

        yield Server("webhook", connect, "/validate/lifecycle-manager", WEBHOOK_MAX_BODY)


@pytest.fixture
async def listener() -> AsyncIterator[Server]:
    config = ListenerConfig(
        component="lifecycle-manager",
        max_body_bytes=LISTENER_MAX_BODY,
        header_timeout=HEADER_TIMEOUT,
        body_timeout=BODY_TIMEOUT,
    )
    async with Listener(config) as running:

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", running.port)

        yield Server("listener", connect, "/v2/lifecycle-manager/event", LISTENER_MAX_BODY)


@pytest.fixture(params=["webhook", "listener"])
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent before it closed. A reset keeps what already arrived: a
    byte the client trickles after the server answered and closed makes the server's
    kernel reset the connection, and ``reader.read()`` dropped the 408 it had received."""
    chunks: list[bytes] = []
    with contextlib.suppress(ConnectionResetError, ssl.SSLError):
        while chunk := await reader.read(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionResetError, ssl.SSLError, BrokenPipeError):
        await writer.wait_closed()


async def trickle(
    server: Server, head: bytes, trickled: bytes, *, every: float
) -> tuple[float, bytes, int]:
    """Send ``head`` at once, then ``trickled`` one byte every ``every`` seconds until
    the server closes; returns (seconds from connect to close, answer, bytes trickled)."""
    reader, writer = await server.open()
    start = time.monotonic()
    sent = 0
    answer = asyncio.ensure_future(_read_all(reader))
    try:
        writer.write(head)
        for byte in trickled:
            if answer.done():
                break
            writer.write(bytes([byte]))
            sent += 1
            try:
                await writer.drain()
            except (ConnectionResetError, BrokenPipeError):
                break
            await asyncio.wait([answer], timeout=every)
        data = await asyncio.wait_for(answer, 30)
    finally:
        answer.cancel()
        await _close(writer)
    return time.monotonic() - start, data, sent


def _head(server: Server, extra: str = "") -> bytes:
    return (
        f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\n{extra}"
    ).encode()


async def test_slowloris_headers_are_cut_at_the_header_timeout(server: Server) -> None:
    # one header byte per second, never finishing the head
    elapsed, data, sent = await trickle(server, _head(server), b"X-Slow: " + b"a" * 60, every=1.0)
    print(f"\n{server.name}: slowloris head cut after {elapsed:.2f} s ({sent} bytes trickled)")
    assert data == b""  # closed without an answer: there is no request to answer
    assert HEADER_TIMEOUT - 0.1 <= elapsed <= HEADER_TIMEOUT + SLACK


async def test_an_idle_connection_is_closed_at_the_header_timeout(server: Server) -> None:
    reader, writer = await server.open()
    start = time.monotonic()
    data = await asyncio.wait_for(_read_all(reader), 30)
    elapsed = time.monotonic() - start
    await _close(writer)
    print(f"\n{server.name}: idle connection closed after {elapsed:.2f} s")
    assert data == b""
    assert HEADER_TIMEOUT - 0.1 <= elapsed <= HEADER_TIMEOUT + SLACK


async def test_a_slow_body_gets_408_at_the_body_timeout(server: Server) -> None:
    head = _head(server, "Content-Length: 100\r\n\r\n")
    elapsed, data, sent = await trickle(server, head, b"{" * 100, every=0.25)
    answer = parse_response(data)
    print(f"\n{server.name}: slow body answered {answer.status} after {elapsed:.2f} s")
    assert answer.status == 408
    assert "error" in answer.json
    assert answer.headers.get("connection") == "close"
    assert BODY_TIMEOUT - 0.1 <= elapsed <= BODY_TIMEOUT + SLACK
    assert sent < 100


async def test_an_oversized_content_length_gets_413_before_the_body(server: Server) -> None:
    # the head promises 1 GB; not one body byte is sent, the answer must not wait for it
    reader, writer = await server.open()
    start = time.monotonic()
    writer.write(_head(server, f"Content-Length: {10**9}\r\n\r\n"))
    await writer.drain()
    data = await asyncio.wait_for(_read_all(reader), 10)
    elapsed = time.monotonic() - start
    await _close(writer)
    answer = parse_response(data)
    print(f"\n{server.name}: Content-Length 1e9 answered {answer.status} in {elapsed:.3f} s")
    assert answer.status == 413
    assert "error" in answer.json
    assert elapsed < 0.5


async def test_an_oversized_chunked_body_gets_413_while_reading(server: Server) -> None:
    # no Content-Length: the limit applies to what arrives, in 64 KiB chunks
    reader, writer = await server.open()
    writer.write(_head(server, "Transfer-Encoding: chunked\r\n\r\n"))
    chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
    try:
        for _ in range(server.max_body // 0x10000 + 2):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionResetError, BrokenPipeError):
        pass
    data = await asyncio.wait_for(_read_all(reader), 10)
    await _close(writer)
    answer = parse_response(data)
    assert answer.status == 413
    assert "error" in answer.json


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "100,000 nested arrays"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "100,000 nested objects"),
        (b'{"apiVersion": "\xff\xfe"}', "invalid UTF-8"),
        (b'{"apiVersion": "admission', "truncated JSON"),
    ],
)
async def test_malformed_bodies_get_400_not_500(server: Server, body: bytes, what: str) -> None:
    if len(body) > server.max_body:  # the listener's 4 KiB limit would say 413 first
        body = body[: server.max_body]
    reader, writer = await server.open()
    writer.write(_head(server, f"Content-Length: {len(body)}\r\n\r\n") + body)
    await writer.drain()
    data = await asyncio.wait_for(_read_all_or_one(reader), 10)
    await _close(writer)
    answer = parse_response(data)
    assert answer.status == 400, (what, answer)
    assert answer.json["error"]


async def _read_all_or_one(reader: asyncio.StreamReader) -> bytes:
    """Read one answer on a keep-alive connection (Content-Length delimited)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


def test_the_webhook_defaults_bound_slow_clients(tmp_path: Path) -> None:
    for name in ("ca", "crt", "key"):
        (tmp_path / name).write_text("x")
    env = {"CA_CERT": str(tmp_path / "ca"), "TLS_CERT": str(tmp_path / "crt")}
    env["TLS_KEY"] = str(tmp_path / "key")
    defaults = load_settings(env)
    assert (defaults.header_timeout, defaults.body_timeout) == (15.0, 10.0)
    tuned = load_settings(
        {**env, "WATCHER_HEADER_TIMEOUT_SECONDS": "3", "WATCHER_BODY_TIMEOUT_SECONDS": "2.5"}
    )
    assert (tuned.header_timeout, tuned.body_timeout) == (3.0, 2.5)
    listener = ListenerConfig(component="lifecycle-manager")
    assert (listener.header_timeout, listener.body_timeout) == (15.0, 10.0)
