"""The time the API server waits on our webhook, by KCP state: measured at the webhook.

Through a real API server (``harness.bench.admission``) the webhook's share of a write is
a difference of two noisy distributions (the API server and etcd vary by milliseconds on a
busy 2-core machine); their p99s differ by more than the webhook costs. This part takes
the API server out: the product's ``watcher-webhook`` (async delivery, durable spool on)
and a KCP stub (the real listener, answering at once, after 100 ms, after 2 s, or not
there at all) run as their own processes, and this process plays the API server - paced
CREATE AdmissionReviews over keep-alive HTTPS, each one an event for the KCP - and times
every POST → answer. That time is exactly what the webhook adds to a write.

Pure helpers (:func:`quantile_curve`) feed the CDF plot; the rest is I/O, bounded in
count and time.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.common import cpu_seconds, loadavg, paced, per, run_queue_wait_seconds
from harness.bench.loopback import kcp_and_webhook_processes, make_pki, review, webhook_client
from harness.clusters.ports import free_port
from harness.report.stats import percentile

RATE = 200.0
"""Admissions per second: well above a busy SKR's watched writes, below saturation."""
IN_FLIGHT = 16
CURVE = (50.0, 75.0, 90.0, 95.0, 98.0, 99.0, 99.5, 99.9, 100.0)
"""Percentiles the CDF plot draws (latency at each)."""


@dataclass(frozen=True)
class KcpState:
    label: str
    delay: float  # seconds the KCP stub waits before answering
    down: bool = False
    fsync: bool = False


STATES: tuple[KcpState, ...] = (
    KcpState("answers at once", 0.0),
    KcpState("answers after 100 ms", 0.1),
    KcpState("answers after 2 s", 2.0),
    KcpState("down (nothing listening)", 0.0, down=True),
    KcpState("answers at once, spool fsync on", 0.0, fsync=True),
)


def quantile_curve(samples_ms: Sequence[float]) -> list[float]:
    """Latency at each of :data:`CURVE`'s percentiles (the project's one percentile)."""
    return [round(percentile(samples_ms, q), 3) for q in CURVE]


async def _one_state(
    root: Path, logs: Path, state: KcpState, *, count: int, budget_s: float
) -> tuple[dict[str, Any], list[float]]:
    workdir = root / state.label.replace(" ", "-").replace(",", "")
    workdir.mkdir()
    spool = workdir / "spool"
    spool.mkdir()
    files = make_pki(workdir)
    env = {"WATCHER_SPOOL_DIR": str(spool), "WATCHER_SPOOL_FSYNC": str(state.fsync).lower()}
    if state.down:
        env["KCP_ADDR"] = f"127.0.0.1:{free_port()}"  # nothing listens there
    async with kcp_and_webhook_processes(
        files, logs, mode="async", delay=state.delay, extra_env=env
    ) as (url, kcp_metrics, webhook):
        assert webhook.pid is not None
        bodies = [json.dumps(review(i)).encode() for i in range(-200, count)]
        times: list[float] = []
        async with webhook_client(files, url, kcp_metrics, in_flight=IN_FLIGHT) as client:

            async def admit(i: int) -> None:
                took = await client.admit(bodies[i])
                if i >= 200:  # the first 200 warm TLS, pools and code paths
                    times.append(took)

            wait0, cpu0 = run_queue_wait_seconds(webhook.pid), cpu_seconds(webhook.pid)
            sent, seconds = await paced(
                RATE, count=len(bodies), duration=budget_s, action=admit, max_in_flight=IN_FLIGHT
            )
            wait1, cpu1 = run_queue_wait_seconds(webhook.pid), cpu_seconds(webhook.pid)
            load = loadavg()[0]
            delivered = None if state.down else await client.accepted()
    row = {
        "kcp": state.label,
        "admissions": len(times),
        "achieved_per_s": round(sent / seconds, 1),
        "p50_ms": round(percentile(times, 50), 3),
        "p99_ms": round(percentile(times, 99), 3),
        "p999_ms": round(percentile(times, 99.9), 3),
        "max_ms": round(max(times), 3),
        "events_accepted_by_kcp_during_run": delivered,
        "webhook_cpu_ms_per_admission": per(cpu0, cpu1, sent),
        "webhook_run_queue_wait_ms_per_admission": per(wait0, wait1, sent),
        "load_1min": load,
        "curve_ms": quantile_curve(times),
    }
    return row, times


async def measure(logs: Path, *, quick: bool) -> list[dict[str, Any]]:
    """One row per :data:`STATES` entry, in order."""
    count = 600 if quick else 3000
    budget = count / RATE + 10
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-webhook-latency-") as tmp:
        for state in STATES:
            async with asyncio.timeout(budget + 30):
                row, _ = await _one_state(Path(tmp), logs, state, count=count, budget_s=budget)
            print(f"   webhook alone, KCP {state.label}: {row['p50_ms']} / {row['p99_ms']} ms")
            rows.append(row)
    return rows
