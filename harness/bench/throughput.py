"""Benchmark 3: AdmissionReviews per second at saturation, and webhook CPU per admission.

The product's ``watcher-webhook`` runs as its own process (async delivery) with a KCP stub
(the real listener in direct-mTLS mode) as another, as in :mod:`harness.bench.loopback`.
This process plays the API server: pre-encoded AdmissionReviews POSTed over keep-alive TLS
with a fixed number in flight, as fast as the webhook answers. CPU seconds of the webhook
process are read from ``/proc/<pid>/stat`` (utime + stime) before and after - after the
listener accepted every event, so event delivery is included. Two workloads: CREATEs (each
one an event to the KCP) and UPDATEs with an unchanged spec (decided, no event).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from harness.bench.common import BenchContext, cpu_seconds
from harness.bench.loopback import accepted, kcp_and_webhook_processes, make_pki, review
from harness.bench.model import BenchResult, Cell, Table, Target
from harness.bench.profiled import by_package, top_functions

TARGET_PER_S = 2000
IN_FLIGHT = 32


def _unchanged_update(i: int) -> dict[str, Any]:
    body = review(i)
    request = body["request"]
    request["operation"] = "UPDATE"
    request["oldObject"] = request["object"]
    return body


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _saturate(
    session: aiohttp.ClientSession, url: str, bodies: list[bytes], budget_s: float
) -> tuple[int, float]:
    """POST ``bodies`` with :data:`IN_FLIGHT` workers; (answered, seconds)."""
    queue = list(reversed(bodies))
    done = 0
    headers = {"Content-Type": "application/json"}

    async def worker() -> None:
        nonlocal done
        while queue:
            body = queue.pop()
            async with session.post(url, data=body, headers=headers) as r:
                await r.read()
                if r.status != 200:
                    raise RuntimeError(f"admission answered {r.status}")
            done += 1

    started = time.perf_counter()
    async with asyncio.timeout(budget_s):
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return done, time.perf_counter() - started


async def _delivered(
    session: aiohttp.ClientSession, url: str, ctx: ssl.SSLContext, base: float, want: int
) -> int:
    """Events the listener accepted since ``base``: until ``want``, or 1 s without growth
    (the webhook's queue may have dropped the oldest events under a burst)."""
    last, still_since = -1.0, time.monotonic()
    while True:
        now = await accepted(session, url, ctx) - base
        if now >= want:
            return int(now)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 1.0:
            return int(now)
        await asyncio.sleep(0.02)  # the count lives in another process


async def _workload(
    root: Path,
    logs: Path,
    *,
    kind: str,
    count: int,
    budget_s: float,
    profile: Path | None = None,
) -> dict[str, Any]:
    workdir = root / (kind if profile is None else f"{kind}-profiled")
    workdir.mkdir()
    files = make_pki(workdir)
    argv = None
    if profile is not None:
        argv = [
            sys.executable,
            "-m",
            "harness.bench.profiled",
            str(profile),
            "watcher.webhook.server:main",
        ]
    maker = review if kind == "create" else _unchanged_update
    bodies = [json.dumps(maker(i)).encode() for i in range(count)]
    warm = [json.dumps(maker(-i - 1)).encode() for i in range(200)]
    async with kcp_and_webhook_processes(
        files, logs, mode="async", delay=0.0, webhook_argv=argv
    ) as (
        url,
        kcp_metrics,
        webhook,
    ):
        assert webhook.pid is not None
        client = ssl.create_default_context(cafile=str(files.kcp["ca.crt"]))
        client.load_cert_chain(files.skr["tls.crt"], files.skr["tls.key"])
        ctx = ssl.create_default_context(cafile=str(files.skr["ca.crt"]))
        connector = aiohttp.TCPConnector(ssl=ctx, limit=IN_FLIGHT)
        async with aiohttp.ClientSession(connector=connector) as s:
            await _saturate(s, url, warm, budget_s)
            base_events = await accepted(s, kcp_metrics, client)
            cpu0, own0 = cpu_seconds(webhook.pid) or 0.0, _own_cpu()
            answered, seconds = await _saturate(s, url, bodies, budget_s)
            delivered = 0
            if kind == "create":
                async with asyncio.timeout(budget_s):
                    delivered = await _delivered(s, kcp_metrics, client, base_events, answered)
            cpu1, own1 = cpu_seconds(webhook.pid) or 0.0, _own_cpu()
    cpu = cpu1 - cpu0
    return {
        "workload": kind,
        "admissions": answered,
        "in_flight": IN_FLIGHT,
        "seconds": round(seconds, 3),
        "admissions_per_s": round(answered / seconds, 1),
        "events_delivered": delivered,
        "webhook_cpu_s": round(cpu, 2),
        "webhook_cpu_s_per_1000": round(1000 * cpu / answered, 3),
        "one_core_capacity_per_s": round(answered / cpu, 0) if cpu else None,
        "client_cpu_s": round(own1 - own0, 2),
        "webhook_core_utilisation": round(cpu / seconds, 2),
    }


async def run_throughput(ctx: BenchContext) -> BenchResult:
    started = time.monotonic()
    count = 3000 if ctx.quick else 8000  # below the webhook's queue size (10,000)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        for kind in ("create", "update-unchanged"):
            row = await _workload(
                Path(tmp), ctx.logs("throughput"), kind=kind, count=count, budget_s=60
            )
            print(f"   {row}", flush=True)
            rows.append(row)
        profile = Path(tmp) / "webhook.prof"
        await _workload(
            Path(tmp),
            ctx.logs("throughput"),
            kind="create",
            count=3000,
            budget_s=60,
            profile=profile,
        )
        total, top = top_functions(profile, limit=6)
        packages = by_package(profile)
    profile_table = Table(
        f"Where the webhook's CPU goes (cProfile, 3,000 CREATEs; {total:.2f} s profiled)",
        ("own time in", "seconds", "share"),
        tuple((name, round(own, 3), f"{share:.0%}") for name, own, share in packages)
        + tuple((f"top function: {n}", round(o, 3), f"{f:.0%}") for n, o, f in top[:4]),
        note=(
            "cProfile slows the process down; read the shares, not the absolute times. "
            "The webhook runs two HTTP stacks per event: the aiohttp server answering the "
            "admission and the aiohttp client delivering the event over mTLS."
        ),
    )
    labels = {
        "create": "CREATE (event queued + delivered to the KCP)",
        "update-unchanged": "UPDATE, spec unchanged (no event)",
    }
    table_rows: list[tuple[Cell, ...]] = [
        (
            labels[r["workload"]],
            r["admissions"],
            r["events_delivered"] if r["workload"] == "create" else "none sent",
            r["admissions_per_s"],
            r["webhook_cpu_s_per_1000"],
            r["one_core_capacity_per_s"],
            r["webhook_core_utilisation"],
            r["client_cpu_s"],
        )
        for r in rows
    ]
    table = Table(
        f"Admissions at saturation ({IN_FLIGHT} in flight, keep-alive TLS)",
        (
            "workload",
            "admissions",
            "events delivered",
            "admissions/s",
            "webhook CPU s / 1,000",
            "per s on one full core (from CPU)",
            "webhook cores used",
            "client CPU s",
        ),
        tuple(table_rows),
        note=(
            "Admissions/s is what the webhook answered with the client on the same 2 cores; "
            "'per s on one full core' = admissions / webhook CPU seconds, the rate one core "
            "would sustain if the webhook had it to itself."
        ),
    )
    create = rows[0]
    capacity = create["one_core_capacity_per_s"] or 0.0
    met = capacity >= TARGET_PER_S
    update = rows[1]
    shares = ", ".join(f"{name} {share:.0%}" for name, _, share in packages[:4])
    note = (
        f"Measured wall rate {create['admissions_per_s']:,.0f}/s: the webhook used "
        f"{create['webhook_core_utilisation']} of a core while the client (this process) used "
        f"{create['client_cpu_s']} CPU s in {create['seconds']} s - load generator, KCP stub "
        "and webhook share 2 cores (with other users' jobs). Per CPU-second, an admission "
        f"that sends no event costs {update['webhook_cpu_s_per_1000']} ms "
        f"({update['one_core_capacity_per_s']:,.0f}/s per core); delivering the event "
        f"roughly doubles it ({create['webhook_cpu_s_per_1000']} ms). Profile by package: "
        f"{shares}. What would lift it: cheaper event delivery (several events per KCP "
        "request, or HTTP/2 to the gateway), fewer per-request allocations in aiohttp "
        "(uvloop), or a second webhook process."
    )
    return BenchResult(
        name="throughput",
        title="3. Webhook throughput",
        seconds=time.monotonic() - started,
        description=(
            "`watcher-webhook` and a KCP stub as separate processes on 127.0.0.1 with mTLS; "
            "this process posts AdmissionReviews like an API server would."
        ),
        tables=(table, profile_table),
        targets=(
            Target(
                "webhook admissions/s on one core (CREATE, events delivered)",
                f"≥ {TARGET_PER_S:,}/s",
                f"{capacity:,.0f}/s per webhook CPU-second "
                f"({create['webhook_cpu_s_per_1000']} CPU s per 1,000); "
                f"{create['admissions_per_s']:,.0f}/s wall on the shared 2 cores",
                met,
                note,
            ),
        ),
        figures={
            "rows": rows,
            "profile_total_s": round(total, 3),
            "profile_by_package": [
                {"package": n, "own_s": round(o, 4), "share": round(f, 4)} for n, o, f in packages
            ],
            "profile_top": [
                {"function": n, "own_s": round(o, 4), "share": round(f, 4)} for n, o, f in top
            ],
        },
    )
