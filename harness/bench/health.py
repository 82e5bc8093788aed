"""Benchmark: what watcher health costs the KCP at 5,000 runtimes (interval 60 s).

``python -m harness.bench.health [--runtimes N] [--interval S] [--window S]`` prints one
table; ``docs/health.md`` records it. Each part is measured where its CPU is spent:

* **the monitor** — a :class:`~watcher.health.monitor.HealthMonitor` with every runtime
  added, at the real interval, for ``window`` seconds. Its writer stands in for SKR,
  webhook and gateway: it echoes each heartbeat 20 ms later without I/O, so what is
  measured is the schedule, the state machine, the metrics. Process CPU / heartbeats;
  plus one Prometheus scrape of every runtime's series (a scraper reads them every 15 s
  or so);
* **the listener** — a ``watcher-listener`` process (XFCC identity, printing each event as
  the operator's hand-off) receiving the echoes at the fleet's rate (runtimes / interval
  per second), each with the XFCC header of its own runtime certificate; the process's
  CPU from ``/proc`` / events.

The SKR writes themselves (one server-side apply per heartbeat) cost the SKRs' API
servers, not the KCP; the KCP side pays their client requests (measured in the e2e
scenarios, not here).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from prometheus_client import generate_latest

from harness.bench.common import BenchContext, cpu_seconds, paced
from harness.bench.model import BenchResult, Table, Target
from harness.clusters.ports import free_port
from harness.clusters.probes import http_probe
from harness.clusters.process import OwnedProcess
from watcher import pki
from watcher.health.monitor import HealthMonitor
from watcher.health.state import Policy, State
from watcher.listener import XFCC_HEADER, format_xfcc

ECHO_DELAY = 0.02
BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"watcher-health-heartbeat"},'
    b'"watchedGvk":{"group":"","version":"v1","kind":"ConfigMap"}}'
)


@dataclass(frozen=True)
class Cost:
    """CPU seconds one part spent on ``count`` heartbeats (monitor) or events (listener)."""

    count: int
    cpu_s: float
    seconds: float = 0.0

    @property
    def us_per_item(self) -> float:
        return self.cpu_s / max(1, self.count) * 1e6


@dataclass(frozen=True)
class MonitorCost(Cost):
    scrape_ms: float = 0.0
    scrape_bytes: int = 0
    healthy: int = 0


async def monitor_cost(runtimes: int, interval: float, window: float) -> MonitorCost:
    loop = asyncio.get_running_loop()
    monitor: HealthMonitor

    async def echo_later(runtime_id: str, seq: int) -> None:
        loop.call_later(ECHO_DELAY, monitor.echo, runtime_id)

    monitor = HealthMonitor(echo_later, policy=Policy(interval=interval, timeout=5.0))
    async with monitor:
        for n in range(runtimes):
            monitor.add(f"runtime-{n:05d}")
        sent_total = "watcher_health_heartbeats_sent_total"
        cpu0, sent0 = time.process_time(), monitor.metrics.value(sent_total)
        await asyncio.sleep(window)  # the measured window: heartbeats go at their phases
        cpu1 = time.process_time()
        sent = monitor.metrics.value(sent_total) - sent0
        started = time.perf_counter()
        scraped = generate_latest(monitor.metrics.registry)
        scrape_ms = (time.perf_counter() - started) * 1000
        healthy = sum(1 for s in monitor.snapshot() if s.health.state is State.HEALTHY)
    return MonitorCost(int(sent), cpu1 - cpu0, window, scrape_ms, len(scraped), healthy)


def _certificates(runtimes: int) -> list[str]:
    """One XFCC header per runtime: a certificate with CN = its runtime id."""
    ca = pki.create_ca("bench-ca", key_type="ec")
    return [
        format_xfcc(pki.issue(ca, f"runtime-{n:05d}", key_type="ec").certificate)
        for n in range(runtimes)
    ]


async def listener_cost(runtimes: int, interval: float, window: float) -> Cost:
    headers = _certificates(runtimes)
    port = free_port()
    argv = [sys.executable, "-m", "watcher.listener.cli", "--component", "watcher-health",
            "--port", str(port), "--insecure-trust-any-xfcc"]  # fmt: skip
    url = f"http://127.0.0.1:{port}/v2/watcher-health/event"
    with tempfile.TemporaryDirectory(prefix="bench-health-") as tmp:
        async with (
            aiohttp.ClientSession() as session,
            OwnedProcess(
                "watcher-listener",
                argv,
                log_path=Path(tmp) / "listener.log",
                probe=http_probe(session, url, lambda s, _: True),  # 405 for GET: it answers
                ready_timeout=15.0,
            ) as process,
        ):
            assert process.pid is not None
            before = cpu_seconds(process.pid) or 0.0

            async def post(i: int) -> None:
                header = {XFCC_HEADER: headers[i % runtimes], "Content-Type": "application/json"}
                async with session.post(url, data=BODY, headers=header) as response:
                    if response.status != 200:
                        raise RuntimeError(f"listener answered {response.status}")

            rate = runtimes / interval
            sent, seconds = await paced(
                rate, count=int(rate * window) + 1, duration=window, action=post
            )
            after = cpu_seconds(process.pid) or 0.0
    return Cost(sent, after - before, seconds)


async def measure(
    runtimes: int, interval: float, window: float
) -> tuple[MonitorCost, Cost, list[tuple[str, str]]]:
    """Both parts measured; the rows of the table ``docs/health.md`` records."""
    monitor = await monitor_cost(runtimes, interval, window)
    listener = await listener_cost(runtimes, interval, window)
    rate = runtimes / interval
    cores = (monitor.us_per_item + listener.us_per_item) * rate / 1e6
    rows = [
        ("runtimes, interval", f"{runtimes:,}, {interval:g} s"),
        ("heartbeats per second (SKR writes and events)", f"{rate:.1f}"),
        (
            "monitor CPU per heartbeat",
            f"{monitor.us_per_item:.0f} µs ({monitor.count:,} heartbeats in "
            f"{window:g} s; {monitor.healthy:,} Healthy at the end)",
        ),
        (
            "one scrape of every runtime's series",
            f"{monitor.scrape_ms:.0f} ms, {monitor.scrape_bytes / 1024:.0f} KiB",
        ),
        (
            "listener CPU per heartbeat event",
            f"{listener.us_per_item:.0f} µs ({listener.count:,} events in "
            f"{listener.seconds:.1f} s, watcher-listener process)",
        ),
        ("KCP CPU for watcher health at this rate", f"{cores * 100:.1f} % of one core"),
    ]
    return monitor, listener, rows


async def run(runtimes: int, interval: float, window: float) -> str:
    _, _, rows = await measure(runtimes, interval, window)
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'watcher health cost'.ljust(width)} | measured |", f"|{'-' * (width + 2)}|---|"]
    lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
    return "\n".join(lines)


async def run_health(ctx: BenchContext) -> BenchResult:
    """The suite's entry: 5,000 runtimes at 60 s (``--quick``: a 10 s window)."""
    runtimes, interval = 5000, 60.0
    window = 10.0 if ctx.quick else 30.0
    monitor, listener, rows = await measure(runtimes, interval, window)
    rate = runtimes / interval
    return BenchResult(
        name="health",
        title="7. Watcher health cost",
        description=(__doc__ or "").split("\n\n")[0],
        tables=(Table("Watcher health at 5,000 runtimes", ("what", "measured"), tuple(rows)),),
        targets=(
            Target(
                "heartbeat load at 5,000 runtimes, 60 s interval",
                "≤ 84 SKR writes/s and as many events",
                f"{rate:.1f}/s; monitor {monitor.us_per_item:.0f} µs, listener "
                f"{listener.us_per_item:.0f} µs CPU per heartbeat",
                rate <= 84,
                "spread by a hashed phase per runtime, jitter only shortens the interval",
            ),
        ),
        figures={
            "runtimes": runtimes,
            "interval_s": interval,
            "heartbeats_per_s": round(rate, 2),
            "monitor_us_per_heartbeat": round(monitor.us_per_item, 1),
            "listener_us_per_event": round(listener.us_per_item, 1),
            "scrape_ms": round(monitor.scrape_ms, 1),
        },
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.health", description=__doc__)
    parser.add_argument("--runtimes", type=int, default=5000)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured per part")
    args = parser.parse_args(argv)
    print(asyncio.run(run(args.runtimes, args.interval, args.window)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
