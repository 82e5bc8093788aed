"""Bytes copied both ways between two connections, for as long as both sides talk.

The netns launcher (:mod:`harness.skr.isolate`) and the kubelet's user-space kube-proxy
(:mod:`harness.platform.kubelet.proxy`) forward TCP and Unix connections unchanged (TLS
passes end to end); :class:`Bridges` holds the connections being forwarded, so stopping
cancels and awaits them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from harness.aio import stop_tasks

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Opener = Callable[[], Awaitable[Streams]]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

LINGER = 0.5
"""Seconds the client may go on sending after the far side finished (socat's ``-t``).
While the command starts, the namespace side accepts a connection and closes it at once
(nothing listens yet): a client in a TLS handshake may not take the half-close as the
end, so after this the bridge closes the client's connection outright."""


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


class Bridges:
    """The connections being bridged, so that stopping cancels and awaits them instead of
    leaving them to the interpreter's exit ("Task was destroyed but it is pending")."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def handler(self, opener: Opener) -> Handler:
        """A connection handler that opens the far side with ``opener`` and copies both
        ways; the client's connection is closed at once when the far side cannot be
        reached, and :data:`LINGER` seconds after the far side finished."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            try:
                far_reader, far_writer = await opener()
            except OSError:
                writer.close()
                return
            try:
                await _copy_both_ways((reader, writer), (far_reader, far_writer))
            finally:
                for w in (writer, far_writer):
                    w.close()
                    with contextlib.suppress(OSError, ConnectionError):
                        await w.wait_closed()

        return handle

    async def close(self) -> None:
        await stop_tasks(list(self._tasks))


async def _copy_both_ways(client: Streams, far: Streams) -> None:
    """Until the far side finished (then :data:`LINGER` more for the client) or both did."""
    outward = asyncio.create_task(_pipe(client[0], far[1]))
    back = asyncio.create_task(_pipe(far[0], client[1]))
    try:
        await back
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LINGER):
                await asyncio.shield(outward)
    finally:
        await stop_tasks((outward, back))


def tcp_opener(address: tuple[str, int]) -> Opener:
    return lambda: asyncio.open_connection(*address)


def unix_opener(path: Path) -> Opener:
    return lambda: asyncio.open_unix_connection(str(path))
