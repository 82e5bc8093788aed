"""The Listener: backpressure, direct mTLS, lifecycle, metrics and configuration."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from listener_testing import (
    BODY,
    COMPONENT,
    XFCC,
    Kymas,
    TlsFiles,
    call,
    make_cert,
    next_event,
    running,
    until,
)

from watcher.errors import ConfigError
from watcher.listener import (
    XFCC_HEADER,
    Listener,
    ListenerConfig,
    ListenerStartError,
    direct_mtls_context,
    format_xfcc,
    san_pinning,
)

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

# --------------------------------------------------------------------------------------
# Backpressure (503)


async def test_full_buffer_answers_503_after_the_timeout(session: aiohttp.ClientSession) -> None:
    async with running(buffer_size=1, backpressure_timeout=0.2, retry_after_seconds=3) as listener:
        assert (await call(session, listener.event_url))[0] == 200
        started = time.monotonic()
        status, payload, headers = await call(session, listener.event_url)
        assert time.monotonic() - started >= 0.2
        assert status == 503
        assert headers["Retry-After"] == "3"
        assert payload["error"] == "event consumer too slow"
        assert "within 0.2 s" in payload["reason"]
        assert listener.metrics.value("watcher_listener_backpressure_timeouts_total") == 1
        # Only the accepted event reaches the consumer.
        assert (await next_event(listener)).runtime_id == "runtime-a"
        assert listener.metrics.value("watcher_listener_buffered_events") == 0


@pytest.mark.parametrize("buffer_size", [0, 1])
async def test_a_waiting_handler_succeeds_once_the_consumer_reads(
    session: aiohttp.ClientSession, buffer_size: int
) -> None:
    async with running(buffer_size=buffer_size, backpressure_timeout=10) as listener:
        for _ in range(buffer_size):
            assert (await call(session, listener.event_url))[0] == 200
        waiting = asyncio.create_task(call(session, listener.event_url))
        await until(lambda: listener.metrics.value("watcher_listener_waiting_requests") == 1)
        assert not waiting.done()
        await next_event(listener)
        assert (await asyncio.wait_for(waiting, 5))[0] == 200


async def test_stopping_answers_waiting_handlers_503(session: aiohttp.ClientSession) -> None:
    async with running(buffer_size=0, backpressure_timeout=30) as listener:
        waiting = asyncio.create_task(call(session, listener.event_url))
        await until(lambda: listener.events().waiting() == 1)
    status, payload, headers = await asyncio.wait_for(waiting, 5)
    assert (status, payload["error"]) == (503, "listener shutting down")
    assert "Retry-After" in headers
    assert [e async for e in listener.events()] == []


# --------------------------------------------------------------------------------------
# Direct mTLS


def client_context(files: TlsFiles, *, with_cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files.ca_file))
    if with_cert:
        context.load_cert_chain(files.client_chain)
    return context


async def test_direct_mtls_takes_the_runtime_id_from_the_tls_peer_and_ignores_xfcc(
    session: aiohttp.ClientSession, tls_files: TlsFiles
) -> None:
    context = direct_mtls_context(tls_files.server_cert, tls_files.server_key, tls_files.ca_file)
    pinning = san_pinning(Kymas({"runtime-tls": {"skr-domain": "skr-a.example.com"}}))
    spoofed = {XFCC_HEADER: format_xfcc(make_cert("attacker", dns=["skr-a.example.com"]))}
    async with running(
        ssl_context=context, identity="direct-mtls", verify_hooks=(pinning,)
    ) as listener:
        assert listener.event_url.startswith("https://127.0.0.1:")
        status, payload, _ = await _post_tls(
            session, listener.event_url, spoofed, client_context(tls_files)
        )
        assert (status, payload["runtime_id"]) == (200, "runtime-tls")
        assert (await next_event(listener)).runtime_id == "runtime-tls"
        status, payload, _ = await _post_tls(
            session, listener.event_url, {}, client_context(tls_files)
        )
        assert status == 200


async def _post_tls(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], context: ssl.SSLContext
) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    async with session.post(url, data=BODY, headers=headers, ssl=context) as response:
        return response.status, await response.json(), response.headers


async def test_direct_mtls_refuses_clients_without_a_certificate(
    session: aiohttp.ClientSession, tls_files: TlsFiles
) -> None:
    context = direct_mtls_context(tls_files.server_cert, tls_files.server_key, tls_files.ca_file)
    async with running(ssl_context=context, identity="direct-mtls") as listener:
        with pytest.raises(aiohttp.ClientError):
            await _post_tls(
                session, listener.event_url, XFCC, client_context(tls_files, with_cert=False)
            )
        assert listener.metrics.value("watcher_listener_events_accepted_total") == 0


# --------------------------------------------------------------------------------------
# Lifecycle, metrics and configuration


async def test_metrics_endpoint_and_per_listener_registries(
    session: aiohttp.ClientSession,
) -> None:
    async with running() as one, running() as two:
        assert one.port != two.port
        assert (await call(session, one.event_url))[0] == 200
        async with session.get(one.url + "/metrics") as response:
            assert response.status == 200
            text = await response.text()
        assert "watcher_listener_events_accepted_total 1.0" in text
        assert two.metrics.value("watcher_listener_events_accepted_total") == 0


async def test_busy_port_is_a_clear_start_error() -> None:
    async with running() as first:
        with pytest.raises(ListenerStartError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            async with running(port=first.port):
                pass


async def test_a_stopped_listener_cannot_be_restarted() -> None:
    listener = Listener(ListenerConfig(component=COMPONENT))
    async with listener:
        pass
    await listener.stop()
    with pytest.raises(Exception, match="cannot be restarted"):
        await listener.start()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"component": "Bad/Name"}, "component: 'Bad/Name' is not a DNS label"),
        ({"component": ""}, "component: must not be empty"),
        ({"component": "m", "contract": "v3"}, "contract must be one of v1, v2"),
        ({"component": "m", "identity": "direct-mtls"}, "needs an ssl_context"),
        ({"component": "m", "buffer_size": -1}, "buffer_size must be >= 0"),
        ({"component": "m", "backpressure_timeout": 0}, "backpressure_timeout must be > 0"),
        ({"component": "m", "port": 70000}, "port must be in 0..65535"),
    ],
)
def test_config_is_validated(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ListenerConfig(**settings)
