"""harness.skr.bridge: a bridged connection ends when its far side does, and stopping the
bridges closes the connections they hold."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from harness.skr import bridge


@contextlib.asynccontextmanager
async def _bridged(
    far: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[tuple[bridge.Bridges, int, asyncio.Event]]:
    """A bridge to a far side served by ``far``: (bridges, bridge port, a connection ended)."""
    far_server = await asyncio.start_server(far, "127.0.0.1", 0)
    far_port = far_server.sockets[0].getsockname()[1]
    bridges, ended = bridge.Bridges(), asyncio.Event()
    handle = bridges.handler(lambda: asyncio.open_connection("127.0.0.1", far_port))

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handle(reader, writer)
        finally:
            ended.set()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield bridges, server.sockets[0].getsockname()[1], ended
    finally:
        server.close()
        far_server.close()
        await bridges.close()
        await server.wait_closed()
        await far_server.wait_closed()


async def test_a_far_side_that_closes_at_once_does_not_leave_the_client_waiting() -> None:
    """While the command starts, the namespace side accepts and closes at once; a client
    in a TLS handshake waited there forever on the half-closed bridge."""

    async def closes_at_once(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with _bridged(closes_at_once) as (_bridges, port, ended):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x16\x03\x01 a ClientHello, then waiting for the answer")
        async with asyncio.timeout(bridge.LINGER + 5):
            assert await reader.read() == b""
            await ended.wait()  # the bridge let go of the silent client
        writer.close()


async def test_stopping_the_bridges_closes_the_connections_they_hold() -> None:
    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async with _bridged(never_answers) as (bridges, port, ended):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"a request")
        await writer.drain()
        await asyncio.sleep(0.1)  # the bridge has opened its far side
        assert not ended.is_set()
        await bridges.close()
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        assert ended.is_set()
        writer.close()
