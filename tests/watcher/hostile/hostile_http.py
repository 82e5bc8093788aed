"""A raw HTTP/1.1 client and an error-log trap for the hostile-input tests.

aiohttp's own client normalises paths (``/a/../b`` → ``/b``), fixes Content-Length and
refuses odd methods, which is exactly what these tests must not do. ``exchange`` writes
the bytes it is given on a fresh loopback connection and parses whatever comes back.

A plain module with a unique name (not conftest.py), imported by the test modules in
this directory.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import tracemalloc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RawResponse:
    """What came back; ``status`` 0 means the server closed without answering."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def is_json(self) -> bool:
        return self.headers.get("content-type", "").startswith("application/json")


def build_request(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    *,
    content_length: int | None = -1,
) -> bytes:
    """Bytes of one request; ``content_length`` -1 = the real length, None = no header."""
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    if content_length == -1:
        lines.append(f"Content-Length: {len(body)}")
    elif content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
    return head + body


def parse_response(data: bytes) -> RawResponse:
    if not data:
        return RawResponse(0, {}, b"")
    head, _, body = data.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 1"):  # interim answers such as 100 Continue
        head, _, body = body.partition(b"\r\n\r\n")
    if not head:  # an interim answer, then the connection closed: no final response
        return RawResponse(0, {}, b"")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return RawResponse(status, headers, body)


async def exchange(
    port: int, data: bytes, *, half_close: bool = True, within: float = 10.0
) -> RawResponse:
    """Send ``data`` on a new connection, read until the server closes, parse the answer.

    ``half_close`` sends EOF after the data, so a body shorter than its Content-Length
    ends instead of leaving the server waiting (which the slow-client tests do on purpose).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(within):
            writer.write(data)
            if half_close:
                writer.write_eof()
            try:
                await writer.drain()
                received = await reader.read()
            except ConnectionResetError:
                received = b""
    finally:
        writer.close()
        with suppress(ConnectionResetError):
            await writer.wait_closed()
    return parse_response(received)


@dataclass(frozen=True)
class Trapped:
    """What an error log said: logger, message and the exception's type and text."""

    logger: str
    message: str
    exc_type: type[BaseException] | None = None
    exc_text: str = ""


class ErrorTrap(logging.Handler):
    """Collects every ERROR (or worse) log line, e.g. aiohttp's "Error handling request".

    Only a summary is kept: a record's exception holds the parser state and its traceback
    the request bytes, and thousands of refusals would show up as heap growth.
    """

    def __init__(self, records: list[Trapped] | None = None) -> None:
        super().__init__(logging.ERROR)
        self.records: list[Trapped] = records or []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.records.append(
            Trapped(
                record.name,
                record.getMessage(),
                type(exc) if exc is not None else None,
                " ".join(str(exc).split())[:200] if exc is not None else "",
            )
        )

    def describe(self) -> str:
        return "\n".join(
            f"{r.logger}: {r.message} {r.exc_type.__name__ if r.exc_type else ''} {r.exc_text}"
            for r in self.records[:5]
        )


# Loggers whose records must not also reach pytest's log capture (which keeps every
# record, traceback and all, for the report).
_QUIET = ("aiohttp.server", "aiohttp.web", "aiohttp.access", "watcher")


@contextmanager
def trap_errors(loop: asyncio.AbstractEventLoop | None = None) -> Iterator[ErrorTrap]:
    """Catch error logs of aiohttp and the watcher, and unhandled loop exceptions."""
    trap = ErrorTrap()
    loggers = [logging.getLogger(name) for name in _QUIET]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(trap)
        lg.propagate = False
        lg.setLevel(logging.WARNING)
    loop = loop or asyncio.get_running_loop()
    previous = loop.get_exception_handler()

    def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        trap.records.append(
            Trapped("asyncio", str(context.get("message")), type(exc) if exc else None, str(exc))
        )

    loop.set_exception_handler(on_loop_error)
    try:
        yield trap
    finally:
        loop.set_exception_handler(previous)
        for lg, (propagate, level) in zip(loggers, saved, strict=True):
            lg.removeHandler(trap)
            lg.propagate = propagate
            lg.setLevel(level)


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc``)."""
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class HeapWatch:
    """Python heap over a window of requests: what the server side kept (allocations
    outside hypothesis and these test modules), and the largest amount any single
    request needed (its peak above the heap it started with).

    Tracing costs about a third of the speed, so it runs over a window, not the whole
    fuzz run; ``requests`` says how many requests the numbers cover.
    """

    def __init__(self) -> None:
        self.retained = 0
        self.request_peak = 0
        self.requests = 0
        self._base = 0
        self._before = 0

    @property
    def tracing(self) -> bool:
        return tracemalloc.is_tracing()

    # Hypothesis keeps recent generated values (for mutating them) and saved random
    # states, and the test modules build the requests: the generator's memory, not the
    # server's (attributed by the allocating frame).
    _NOT_SERVER = ("/hypothesis/", "/tests/watcher/hostile/", "/random.py")

    def _server_heap(self) -> int:
        gc.collect()
        stats = tracemalloc.take_snapshot().statistics("filename")
        return sum(
            stat.size
            for stat in stats
            if not any(part in stat.traceback[0].filename for part in self._NOT_SERVER)
        )

    def start(self) -> None:
        tracemalloc.start(1)
        self._base = self._server_heap()

    def before_request(self) -> None:
        if self.tracing:
            tracemalloc.reset_peak()
            self._before = tracemalloc.get_traced_memory()[0]

    def after_request(self) -> None:
        if self.tracing:
            self.requests += 1
            peak = tracemalloc.get_traced_memory()[1] - self._before
            self.request_peak = max(self.request_peak, peak)

    def stop(self) -> None:
        if not self.tracing:
            return
        self.retained = self._server_heap() - self._base
        tracemalloc.stop()

    def __str__(self) -> str:
        return (
            f"heap over {self.requests} requests: retained {self.retained / 2**20:+.2f} MiB, "
            f"largest per-request peak {self.request_peak / 2**20:.1f} MiB"
        )


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the server left (connections still lingering) and close the loop."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
