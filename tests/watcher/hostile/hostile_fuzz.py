"""The fuzz loop both servers share: generate, send raw, check, tally, watch the heap.

Each fuzz test owns its server, its request strategy and its ``check`` (what a right
answer is for that server); this module owns what is the same for both, so the two
tests cannot drift apart in how they count requests or measure memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError
from hostile_http import HeapWatch, RawResponse, Trapped, build_request, exchange, trap_errors
from hostile_inputs import FuzzRequest, needs_eof
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Check = Callable[[FuzzRequest, RawResponse, list[Trapped]], None]


def protocol_refusal(record: Trapped) -> bool:
    """aiohttp refusing bytes that are not HTTP, or failing to tell a vanished client so."""
    return (
        record.logger == "aiohttp.server"
        and record.exc_type is not None
        and issubclass(record.exc_type, HttpProcessingError | ConnectionResetError)
    )


@dataclass
class FuzzTally:
    """What a fuzz run did: requests sent, answers by status, heap window, stray errors."""

    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    heap: HeapWatch = field(default_factory=HeapWatch)
    unexpected: list[Trapped] = field(default_factory=list)

    def summary(self) -> str:
        return f"{self.sent} requests, statuses {sorted(self.statuses.items())}, {self.heap}"


def fuzz(
    loop: asyncio.AbstractEventLoop,
    port: int,
    requests: st.SearchStrategy[FuzzRequest],
    check: Check,
    *,
    examples: int,
    warmup: int,
    window: int,
    on_answer: Callable[[RawResponse], Any] | None = None,
) -> FuzzTally:
    """Send ``examples`` generated requests to ``127.0.0.1:port``, one connection each.

    The heap is traced for ``window`` requests after ``warmup`` (caches fill up first).
    Error logs other than aiohttp's protocol refusals end up in ``unexpected``.
    """
    tally = FuzzTally()
    with trap_errors(loop) as trap:

        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(requests)
        def one(request: FuzzRequest) -> None:
            before = len(trap.records)
            data = build_request(
                request.method,
                request.target,
                list(request.headers),
                request.body,
                content_length=request.content_length,
            )
            tally.heap.before_request()
            response = loop.run_until_complete(exchange(port, data, half_close=needs_eof(request)))
            tally.heap.after_request()
            tally.sent += 1
            if tally.sent == warmup:
                tally.heap.start()
            elif tally.sent == warmup + window:
                tally.heap.stop()
            tally.statuses[response.status] = tally.statuses.get(response.status, 0) + 1
            if on_answer is not None:
                on_answer(response)
            check(request, response, trap.records[before:])

        one()
        tally.heap.stop()
        tally.unexpected = [r for r in trap.records if not protocol_refusal(r)]
    return tally
