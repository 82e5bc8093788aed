"""The fleet benchmark's simulated SKRs: WatchEvents through the real gateway, as planned.

``python -m harness.bench.fleet_load PLAN.json`` sends every planned event at its time
(:func:`harness.bench.fleet_plan.plan_events`) and prints one JSON line per event
(:class:`~harness.bench.fleet_plan.SentEvent`), then one ``{"done": ...}`` line with its
own CPU and peak RSS. It runs as a process of its own so that its TLS handshakes do not
share an event loop with the listener and KLM it measures, and its CPU counts apart.

Each event: the runtime's own client certificate (CN = runtime id, DNS SAN = its SKR
domain), the v2 body exactly as ``watcher.model.encode_event`` produces, a fresh TLS
connection (our webhook keeps connections 30 s; at a few events per runtime-hour its
connection has closed before the next event), at most ``timeout_s`` seconds. At most
``max_in_flight`` events are open; beyond that a start waits (and is recorded when sent).
"""

from __future__ import annotations

import asyncio
import json
import resource
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from pydantic import TypeAdapter

from harness.bench.fleet_plan import PlannedEvent, SentEvent
from harness.bench.gatewaykit import EVENT

HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class LoadPlan:
    """What the parent writes to PLAN.json."""

    url: str
    ca_file: str
    certs_dir: str  # <runtime id>.crt / .key
    events: tuple[PlannedEvent, ...]
    timeout_s: float = 10.0
    max_in_flight: int = 64

    def to_json(self) -> str:
        return _LOAD_PLAN.dump_json(self).decode()

    @classmethod
    def from_json(cls, text: str) -> LoadPlan:
        return _LOAD_PLAN.validate_json(text)

    @property
    def seconds(self) -> float:
        """The planned send time of the last event."""
        return max((e.at for e in self.events), default=0.0)


_LOAD_PLAN = TypeAdapter(LoadPlan)


def _context(plan: LoadPlan, runtime_id: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=plan.ca_file)
    certs = Path(plan.certs_dir)
    context.load_cert_chain(certs / f"{runtime_id}.crt", certs / f"{runtime_id}.key")
    return context


async def send_one(
    session: aiohttp.ClientSession, plan: LoadPlan, event: PlannedEvent
) -> SentEvent:
    """POST one event as its runtime; the answer's status (0 with the error on failure)."""
    context = _context(plan, event.runtime_id)
    sent = time.time()
    status, error = 0, ""
    try:
        async with asyncio.timeout(plan.timeout_s):
            async with session.post(plan.url, data=EVENT, headers=HEADERS, ssl=context) as r:
                await r.read()
                status = r.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        error = repr(exc)[:200]
    return SentEvent(event.runtime_id, event.phase, sent, time.time(), status, error)


async def send_all(plan: LoadPlan) -> list[SentEvent]:
    """Send every planned event at its time (bounded in flight); print each as it ends."""
    results: list[SentEvent] = []
    slots = asyncio.Semaphore(plan.max_in_flight)
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(force_close=True, limit=plan.max_in_flight)

    async def one(session: aiohttp.ClientSession, event: PlannedEvent) -> None:
        try:
            result = await send_one(session, plan, event)
        finally:
            slots.release()
        results.append(result)
        print(result.to_json(), flush=True)

    async with aiohttp.ClientSession(connector=connector) as session, asyncio.TaskGroup() as tg:
        start = loop.time()
        for event in plan.events:
            delay = start + event.at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # the plan's send time
            await slots.acquire()
            tg.create_task(one(session, event))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m harness.bench.fleet_load PLAN.json", file=sys.stderr)
        return 2
    plan = LoadPlan.from_json(Path(args[0]).read_text())
    # Bounded: every event has its own timeout; the whole run its plan plus a margin.
    results = asyncio.run(asyncio.wait_for(send_all(plan), plan.seconds + plan.timeout_s + 60))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    done = {
        "done": len(results),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
